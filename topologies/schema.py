"""The topology schema: frozen dataclasses for a fabric, validated field by field.

The method, in full: docs/topologies.md#topologies-schema-py.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from collbench.core.errors import SpecError

SCALE_UP_KINDS = ("nvlink", "xgmi", "pcie", "shm")
SCALE_OUT_KINDS = ("infiniband", "roce", "ethernet", "tcp")


class TopologyError(SpecError):
    """A topology file or field is wrong; the message names the field path and value."""


@dataclass(frozen=True)
class Accelerator:
    """One accelerator (GPU, or the CPU socket share of a rank on `cpu-local`)."""

    name: str
    peak_bf16_tflops: float  # dense (no sparsity), the MFU denominator
    peak_fp8_tflops: float | None = None  # dense
    memory_gib: float | None = None
    # What the compute model (analysis/mfu/compute.py) prices operators with: HBM bandwidth for
    # the memory-bound ones, the SM (CU) count for wave quantization, and the share of the
    # dense peak that large matmuls reach when measured (cited in `sources`). None: the
    # operators that need it are priced without (the output says so).
    hbm_gbytes_s: float | None = None
    sm_count: int | None = None
    matmul_fraction: float | None = None
    matmul_fraction_fp8: float | None = None  # the same for fp8 matmuls (of the fp8 peak)
    # The fractions above are the best a short burst reaches, at the boost clock (MAMF). A
    # GEMM that runs on, as a training step's do, saturates the board at its power limit
    # and settles at a lower clock: the sustained rate (MSMF) over the burst one, measured
    # on the part. The shape model prices GEMMs at fraction x this (analysis/model/
    # gemm_model.matmul_fraction). None: not measured; the burst figure is priced.
    matmul_sustained: float | None = None
    # Dense fp32 peaks, what `collbench gemm --dtype fp32 -T` reads its rows against: fp32
    # (CUDA cores / vector units; torch's default fp32 matmul) and tf32 (tensor cores, when
    # torch allows TF32). None: the entry does not give one (gemm says so).
    peak_fp32_tflops: float | None = None
    peak_tf32_tflops: float | None = None


@dataclass(frozen=True)
class ScaleUp:
    """The scale-up domain: NVLink/NVSwitch, xGMI, PCIe, or shared memory on one host."""

    kind: str
    bandwidth_gbytes_s: float  # per accelerator, per direction
    latency_us: float  # one hop (one step of a ring)
    domain_size: int  # accelerators in one domain: 8 in a DGX, 72 in a GB200 NVL72 rack
    # "switch": any-to-any at full per-accelerator bandwidth (NVSwitch);
    # "mesh": point-to-point links, the bandwidth split over domain_size - 1 peers (xGMI);
    # "bus": a shared PCIe tree.
    fabric: str = "switch"


@dataclass(frozen=True)
class ScaleOut:
    """The scale-out network between scale-up domains (InfiniBand, RoCE, Ethernet)."""

    kind: str
    nics_per_node: int
    nic_gbits_s: float  # per NIC, per direction
    latency_us: float  # one hop between nodes, NIC to NIC through the switches
    rail_optimized: bool = True
    oversubscription: float = 1.0  # 2.0 means a 2:1 tapered fat tree above the leaves


@dataclass(frozen=True)
class Topology:
    """A fabric: what the cost model and the MFU estimator price collectives on."""

    name: str
    description: str
    nodes: int
    accelerators_per_node: int
    accelerator: Accelerator
    scale_up: ScaleUp
    scale_out: ScaleOut | None = None  # None: a single node or domain, nothing between
    curves: str | None = None  # a run directory whose measured rows override predictions
    sources: Mapping[str, str] = field(default_factory=dict)  # field path -> citation
    origin: str = ""  # where it was loaded from (catalog name or file path)

    @property
    def world_size(self) -> int:
        return self.nodes * self.accelerators_per_node

    @property
    def nodes_per_domain(self) -> int:
        """Nodes that one scale-up domain spans (18 trays of 4 GPUs in an NVL72)."""
        return max(1, self.scale_up.domain_size // self.accelerators_per_node)

    @property
    def node_scale_out_gbytes_s(self) -> float:
        """One node's scale-out bandwidth per direction, all NICs together, in GB/s."""
        if self.scale_out is None:
            return 0.0
        return self.scale_out.nics_per_node * self.scale_out.nic_gbits_s / 8

    def with_nodes(self, nodes: int) -> Topology:
        """The same fabric with another node count (validated)."""
        data = to_dict(self)
        data["nodes"] = nodes
        return topology_from_dict(data, self.origin)


def to_dict(topology: Topology) -> dict[str, Any]:
    """The plain mapping a topology file would hold (round-trips through from_dict)."""
    out: dict[str, Any] = {}
    for item in fields(Topology):
        if item.name == "origin":
            continue
        value = getattr(topology, item.name)
        if isinstance(value, (Accelerator, ScaleUp, ScaleOut)):
            value = {sub.name: getattr(value, sub.name) for sub in fields(value)}
        elif isinstance(value, Mapping):
            value = dict(value)
        out[item.name] = value
    return out


def field_paths() -> tuple[str, ...]:
    """Every field path a topology file can hold, e.g. `scale_up.bandwidth_gbytes_s`."""
    sections = {"accelerator": Accelerator, "scale_up": ScaleUp, "scale_out": ScaleOut}
    paths: list[str] = []
    for item in fields(Topology):
        if item.name in ("origin", "sources"):
            continue
        if item.name in sections:
            paths.extend(f"{item.name}.{sub.name}" for sub in fields(sections[item.name]))
        else:
            paths.append(item.name)
    return tuple(paths)


def numeric_figures(topology: Topology) -> dict[str, float]:
    """Field path -> value of every number in the topology (defaults included)."""
    out: dict[str, float] = {}
    for key, value in to_dict(topology).items():
        inner = value.items() if isinstance(value, dict) and key != "sources" else [("", value)]
        for sub, item in inner:
            if isinstance(item, (int, float)) and not isinstance(item, bool):
                out[f"{key}.{sub}" if sub else key] = item
    return out


def unsourced_figures(topology: Topology) -> list[str]:
    """Numbers the file sets (not left at their default) that `sources` does not cite."""
    sections = {"accelerator": Accelerator, "scale_up": ScaleUp, "scale_out": ScaleOut}
    defaults = {
        f"{name}.{item.name}": item.default
        for name, cls in sections.items()
        for item in fields(cls)
    }
    return [
        path
        for path, value in numeric_figures(topology).items()
        if path not in topology.sources and defaults.get(path, ...) != value
    ]


def topology_from_dict(data: Any, origin: str = "") -> Topology:
    """Build and validate a Topology; TopologyError names the first bad field.

    Unknown keys are refused first, naming the key, its field path and the closest known
    field, so a typo'd key is not reported as the required field it was meant to be.
    """
    top = _Fields(data, "", _SECTIONS[""])
    topology = Topology(
        name=top.text("name"),
        description=top.text("description", default=""),
        nodes=top.integer("nodes", minimum=1),
        accelerators_per_node=top.integer("accelerators_per_node", minimum=1),
        accelerator=_accelerator(top.section("accelerator")),
        scale_up=_scale_up(top.section("scale_up")),
        scale_out=_scale_out(top.section("scale_out", optional=True)),
        curves=top.text("curves", default=None),
        sources=top.sources("sources"),
        origin=origin,
    )
    _check_consistent(topology)
    return topology


def _accelerator(section: _Fields) -> Accelerator:
    accelerator = Accelerator(
        name=section.text("name"),
        peak_bf16_tflops=section.number("peak_bf16_tflops"),
        peak_fp8_tflops=section.number("peak_fp8_tflops", default=None),
        memory_gib=section.number("memory_gib", default=None),
        hbm_gbytes_s=section.number("hbm_gbytes_s", default=None),
        sm_count=section.integer("sm_count", minimum=1, default=None),
        matmul_fraction=section.number("matmul_fraction", default=None),
        matmul_fraction_fp8=section.number("matmul_fraction_fp8", default=None),
        matmul_sustained=section.number("matmul_sustained", default=None),
        peak_fp32_tflops=section.number("peak_fp32_tflops", default=None),
        peak_tf32_tflops=section.number("peak_tf32_tflops", default=None),
    )
    for name in ("matmul_fraction", "matmul_fraction_fp8", "matmul_sustained"):
        value = getattr(accelerator, name)
        if value is not None and value > 1:
            raise TopologyError(
                f"accelerator.{name}", value, "must be a share of the peak, in (0, 1]"
            )
    return accelerator


def _scale_up(section: _Fields) -> ScaleUp:
    return ScaleUp(
        kind=section.choice("kind", SCALE_UP_KINDS),
        bandwidth_gbytes_s=section.number("bandwidth_gbytes_s"),
        latency_us=section.number("latency_us", minimum=0.0),
        domain_size=section.integer("domain_size", minimum=1),
        fabric=section.choice("fabric", ("switch", "mesh", "bus"), default="switch"),
    )


def _scale_out(section: _Fields | None) -> ScaleOut | None:
    if section is None:
        return None
    return ScaleOut(
        kind=section.choice("kind", SCALE_OUT_KINDS),
        nics_per_node=section.integer("nics_per_node", minimum=1),
        nic_gbits_s=section.number("nic_gbits_s"),
        latency_us=section.number("latency_us", minimum=0.0),
        rail_optimized=section.boolean("rail_optimized", default=True),
        oversubscription=section.number("oversubscription", default=1.0, minimum=1.0),
    )


def _check_consistent(topology: Topology) -> None:
    domain = topology.scale_up.domain_size
    per_node = topology.accelerators_per_node
    if domain % per_node and per_node % domain:
        raise TopologyError(
            "scale_up.domain_size",
            domain,
            f"must divide or be a multiple of accelerators_per_node ({per_node})",
        )
    if topology.scale_out is None and topology.nodes > topology.nodes_per_domain:
        raise _missing(
            "scale_out",
            f": {topology.nodes} nodes do not fit in one scale-up domain of {domain} accelerators",
        )
    known = field_paths()
    for key in topology.sources:
        if key not in known:
            match = difflib.get_close_matches(key, known, n=1)
            hint = f"did you mean {match[0]}?" if match else "e.g. scale_up.bandwidth_gbytes_s"
            raise TopologyError("sources", key, f"is not a field path of a topology ({hint})")


def _section_fields(cls: type) -> tuple[str, ...]:
    return tuple(item.name for item in fields(cls) if item.name != "origin")


# The keys each mapping of a topology file may hold, by its path ("" is the top level).
_SECTIONS: dict[str, tuple[str, ...]] = {
    "": _section_fields(Topology),
    "accelerator": _section_fields(Accelerator),
    "scale_up": _section_fields(ScaleUp),
    "scale_out": _section_fields(ScaleOut),
}


def _unknown_key_hint(path: str, key: str) -> str:
    """'is not a known field ...' with the closest field of the section, or where it belongs."""
    known = _SECTIONS[path]
    where = f"of {path}" if path else "at the top level"
    elsewhere = [_join(other, key) for other, names in _SECTIONS.items() if key in names]
    if elsewhere:
        return f"is not a field {where}: it belongs at {' or '.join(elsewhere)}"
    match = difflib.get_close_matches(key, known, n=1)
    if match:
        return f"is not a known field {where} (did you mean {_join(path, match[0])}?)"
    return f"is not a known field {where} (known: {', '.join(known)})"


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


class _Fields:
    """Typed reads from one mapping of a topology file, with the field path in errors."""

    def __init__(self, data: Any, path: str, known: tuple[str, ...]) -> None:
        if not isinstance(data, Mapping):
            raise TopologyError(path or "topology", _short(data), "must be a mapping of fields")
        self.data, self.path = data, path
        unknown = sorted(str(key) for key in data if key not in known)
        if unknown:
            value = next(data[key] for key in data if str(key) == unknown[0])
            raise TopologyError(
                self._name(unknown[0]), _short(value), _unknown_key_hint(path, unknown[0])
            )

    def _get(self, key: str, default: Any, required: bool) -> Any:
        if key not in self.data or self.data[key] is None:
            if required:
                raise _missing(self._name(key))
            return default
        return self.data[key]

    def _name(self, key: str) -> str:
        return _join(self.path, key)

    def text(self, key: str, default: Any = ...) -> Any:
        value = self._get(key, default, default is ...)
        if value is not default and not (isinstance(value, str) and value.strip()):
            raise TopologyError(self._name(key), _short(value), "must be a non-empty string")
        return value

    def number(self, key: str, default: Any = ..., minimum: float | None = None) -> Any:
        value = self._get(key, default, default is ...)
        if value is default:
            return value
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and _finite(value)
        if not ok or (value <= 0 if minimum is None else value < minimum):
            bound = "> 0" if minimum is None else f">= {minimum:g}"
            raise TopologyError(self._name(key), _short(value), f"must be a number {bound}")
        return float(value)

    def integer(self, key: str, minimum: int, maximum: int = 10**6, default: Any = ...) -> Any:
        value = self._get(key, default, default is ...)
        if value is not ... and value is default:
            return value
        if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
            raise TopologyError(
                self._name(key), _short(value), f"must be an integer from {minimum} to {maximum:,}"
            )
        return value

    def boolean(self, key: str, default: bool) -> bool:
        value = self._get(key, default, False)
        if not isinstance(value, bool):
            raise TopologyError(self._name(key), _short(value), "must be true or false")
        return value

    def choice(self, key: str, choices: tuple[str, ...], default: Any = ...) -> str:
        value = self._get(key, default, default is ...)
        if not isinstance(value, str) or value.lower() not in choices:
            raise TopologyError(
                self._name(key), _short(value), f"must be one of {', '.join(choices)}"
            )
        return value.lower()

    def section(self, key: str, optional: bool = False) -> _Fields | None:
        value = self._get(key, None, not optional)
        return None if value is None else _Fields(value, self._name(key), _SECTIONS[key])

    def sources(self, key: str) -> dict[str, str]:
        value = self._get(key, {}, False)
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) and v.strip() for k, v in value.items()
        ):
            raise TopologyError(
                self._name(key), _short(value), "must map field paths to citations (strings)"
            )
        return dict(value)


def _finite(value: float) -> bool:
    """math.isfinite, False for an integer too large for a float (10**400 in YAML)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _short(value: Any) -> Any:
    text = repr(value)
    return value if len(text) <= 60 else text[:57] + "..."


def _missing(name: str, why: str = "") -> TopologyError:
    """`name: is required and missing from the file[why]` (a missing field has no value)."""
    error = TopologyError(name, None, "is required")
    error.args = (f"{name}: is required and missing from the file{why}",)
    return error
