"""The topology schema: frozen dataclasses for a fabric, validated field by field.

The method, in full: docs/topologies.md#topologies-schema-py.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any

from collbench.core.convert import plain
from collbench.core.errors import SpecError
from collbench.core.units import NUMBER_BOUNDS, out_of_bounds

SCALE_UP_KINDS = ("nvlink", "xgmi", "pcie", "shm")
SCALE_OUT_KINDS = ("infiniband", "roce", "ethernet", "tcp")
FABRICS = ("switch", "mesh", "bus")
MAX_COUNT = 10**6  # the most nodes, accelerators or SMs a field may count


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
    matmul_fraction: float | None = field(default=None, metadata={"unit": "share"})
    # the same for fp8 matmuls (of the fp8 peak)
    matmul_fraction_fp8: float | None = field(default=None, metadata={"unit": "share"})
    # The fractions above are the best a short burst reaches, at the boost clock (MAMF). A
    # GEMM that runs on, as a training step's do, saturates the board at its power limit
    # and settles at a lower clock: the sustained rate (MSMF) over the burst one, measured
    # on the part. The shape model prices GEMMs at fraction x this (analysis/model/
    # gemm_model.matmul_fraction). None: not measured; the burst figure is priced.
    matmul_sustained: float | None = field(default=None, metadata={"unit": "share"})
    # Dense fp32 peaks, what `collbench gemm --dtype fp32 -T` reads its rows against: fp32
    # (CUDA cores / vector units; torch's default fp32 matmul) and tf32 (tensor cores, when
    # torch allows TF32). None: the entry does not give one (gemm says so).
    peak_fp32_tflops: float | None = None
    peak_tf32_tflops: float | None = None


@dataclass(frozen=True)
class ScaleUp:
    """The scale-up domain: NVLink/NVSwitch, xGMI, PCIe, or shared memory on one host."""

    kind: str = field(metadata={"choices": SCALE_UP_KINDS})
    bandwidth_gbytes_s: float  # per accelerator, per direction
    latency_us: float  # one hop (one step of a ring)
    domain_size: int  # accelerators in one domain: 8 in a DGX, 72 in a GB200 NVL72 rack
    # "switch": any-to-any at full per-accelerator bandwidth (NVSwitch);
    # "mesh": point-to-point links, the bandwidth split over domain_size - 1 peers (xGMI);
    # "bus": a shared PCIe tree.
    fabric: str = field(default="switch", metadata={"choices": FABRICS})


@dataclass(frozen=True)
class ScaleOut:
    """The scale-out network between scale-up domains (InfiniBand, RoCE, Ethernet)."""

    kind: str = field(metadata={"choices": SCALE_OUT_KINDS})
    nics_per_node: int
    nic_gbits_s: float  # per NIC, per direction
    # one hop between nodes, NIC to NIC through the switches
    latency_us: float
    rail_optimized: bool = True
    # 2.0 means a 2:1 tapered fat tree above the leaves
    oversubscription: float = field(default=1.0, metadata={"unit": "oversubscription"})


@dataclass(frozen=True)
class Topology:
    """A fabric: what the cost model and the MFU estimator price collectives on."""

    name: str
    description: str = field(metadata={"default": ""})  # a file may leave it out
    nodes: int
    accelerators_per_node: int
    accelerator: Accelerator
    scale_up: ScaleUp
    scale_out: ScaleOut | None = None  # None: a single node or domain, nothing between
    curves: str | None = None  # a run directory whose measured rows override predictions
    sources: Mapping[str, str] = field(default_factory=dict)  # field path -> citation
    origin: str = ""  # where it was loaded from (catalog name or file path)

    def __post_init__(self) -> None:
        """The fields agree: the domain tiles the nodes, nodes beyond one domain have a
        scale-out network, and `sources` cites field paths."""
        domain, per_node = self.scale_up.domain_size, self.accelerators_per_node
        if domain % per_node and per_node % domain:
            raise TopologyError(
                "scale_up.domain_size",
                domain,
                f"must divide or be a multiple of accelerators_per_node ({per_node})",
            )
        if self.scale_out is None and self.nodes > self.nodes_per_domain:
            raise _missing(
                "scale_out",
                f": {self.nodes} nodes do not fit in one scale-up domain of {domain} accelerators",
            )
        known = field_paths()
        for key in self.sources:
            if key not in known:
                match = difflib.get_close_matches(key, known, n=1)
                hint = f"did you mean {match[0]}?" if match else "e.g. scale_up.bandwidth_gbytes_s"
                raise TopologyError("sources", key, f"is not a field path of a topology ({hint})")

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
        return topology_from_dict({**to_dict(self), "nodes": nodes}, self.origin)


def to_dict(topology: Topology) -> dict[str, Any]:
    """The plain mapping a topology file would hold (round-trips through from_dict)."""
    data = plain(topology)
    del data["origin"]
    return data


def field_paths() -> tuple[str, ...]:
    """Every field path a topology file can hold, e.g. `scale_up.bandwidth_gbytes_s`."""
    paths: list[str] = []
    for name in _SECTIONS[""]:
        if name in _SECTION_TYPES:
            paths.extend(f"{name}.{sub}" for sub in _SECTIONS[name])
        elif name != "sources":
            paths.append(name)
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
    defaults = {
        f"{name}.{item.name}": item.default
        for name, cls in _SECTION_TYPES.items()
        for item in fields(cls)
    }
    return [
        path
        for path, value in numeric_figures(topology).items()
        if path not in topology.sources and defaults.get(path, ...) != value
    ]


def unmeasured_figures(topology: Topology) -> tuple[str, ...]:
    """The figures the entry says were not measured on it (a source that starts NOT
    MEASURED: borrowed from another part), each with its source's first sentence."""
    cited = topology.sources.items()
    return tuple(
        f"{at}: {text.split('. ')[0]}" for at, text in cited if text[:12] == "NOT MEASURED"
    )


def topology_from_dict(data: Any, origin: str = "") -> Topology:
    """Build and validate a Topology; TopologyError names the first bad field.

    Unknown keys are refused first, naming the key, its field path and the closest known
    field, so a typo'd key is not reported as the required field it was meant to be.
    """
    return Topology(**_values(Topology, data, ""), origin=origin)


_SECTION_TYPES = {"accelerator": Accelerator, "scale_up": ScaleUp, "scale_out": ScaleOut}
# The keys each mapping of a topology file may hold, by its path ("" is the top level).
_SECTIONS: dict[str, tuple[str, ...]] = {
    path: tuple(item.name for item in fields(cls) if item.name != "origin")
    for path, cls in {"": Topology, **_SECTION_TYPES}.items()
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


def _values(cls: type, data: Any, path: str) -> dict[str, Any]:
    """The fields of `cls` (origin aside) from one mapping of a topology file, read in order,
    with the field path in errors; its unknown keys are refused first."""
    if not isinstance(data, Mapping):
        raise TopologyError(path or "topology", _short(data), "must be a mapping of fields")
    unknown = sorted(str(key) for key in data if key not in _SECTIONS[path])
    if unknown:
        value = next(data[key] for key in data if str(key) == unknown[0])
        raise TopologyError(
            _join(path, unknown[0]), _short(value), _unknown_key_hint(path, unknown[0])
        )
    return {item.name: _read(data, path, item) for item in fields(cls) if item.name != "origin"}


def _read(data: Mapping[Any, Any], path: str, item: Field[Any]) -> Any:
    """One field, checked as its type says (`X | None`: optional) with its metadata's choices
    or a number's bounds; missing or null, its default (metadata's "default" first; none:
    required)."""
    key, rule = item.name, item.metadata
    default = item.default_factory() if item.default_factory is not MISSING else item.default
    default = rule.get("default", ... if default is MISSING else default)
    value = data.get(key)
    if value is None and default is ...:
        raise _missing(_join(path, key))
    if value is None or value is default:
        return default
    if key in _SECTION_TYPES:
        return _SECTION_TYPES[key](**_values(_SECTION_TYPES[key], value, key))
    kind = str(item.type).removesuffix(" | None")
    if kind == "float":  # NUMBER_BOUNDS of the unit its name ends in (or its metadata names)
        unit = rule.get("unit") or next(unit for unit in NUMBER_BOUNDS if key.endswith(f"_{unit}"))
        problem = out_of_bounds(unit, value)
    else:
        problem = _problem(kind, value, rule)
    if problem is not None:
        raise TopologyError(_join(path, key), _short(value), problem)
    if "choices" in rule:
        return value.lower()
    if kind == "float":
        return float(value)
    return dict(value) if kind.startswith("Mapping") else value


def _problem(kind: str, value: Any, rule: Mapping[str, Any]) -> str | None:
    """What is wrong with a value for a field of type `kind` and `rule` (None: nothing)."""
    if "choices" in rule:
        ok = isinstance(value, str) and value.lower() in rule["choices"]
        return None if ok else f"must be one of {', '.join(rule['choices'])}"
    if kind == "str":
        return None if isinstance(value, str) and value.strip() else "must be a non-empty string"
    if kind == "int":
        ok = isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_COUNT
        return None if ok else f"must be an integer from 1 to {MAX_COUNT:,}"
    if kind == "bool":
        return None if isinstance(value, bool) else "must be true or false"
    ok = isinstance(value, Mapping) and all(
        isinstance(k, str) and isinstance(v, str) and v.strip() for k, v in value.items()
    )
    return None if ok else "must map field paths to citations (strings)"


def _short(value: Any) -> Any:
    text = repr(value)
    return value if len(text) <= 60 else text[:57] + "..."


def _missing(name: str, why: str = "") -> TopologyError:
    """`name: is required and missing from the file[why]` (a missing field has no value)."""
    error = TopologyError(name, None, "is required")
    error.args = (f"{name}: is required and missing from the file{why}",)
    return error
