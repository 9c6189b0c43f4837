"""Text views of topologies for `collbench topo`: the catalog table, a listing with each
figure's source, and the YAML that `topo validate` accepts."""

from __future__ import annotations

import textwrap
from typing import Any

import yaml

from collbench.render.table import text_columns
from collbench.topologies.schema import Topology, numeric_figures, to_dict

# Units by field-name suffix (the schema keeps units in the names).
_UNITS = (
    ("_gbytes_s", "GB/s"),
    ("_gbits_s", "Gb/s"),
    ("_us", "us"),
    ("_tflops", "TFLOP/s"),
    ("_gib", "GiB"),
)
_HEADER = (
    "NAME",
    "ACCELERATOR",
    "BF16 TF/s",
    "NODES x ACC",
    "SCALE-UP",
    "SCALE-OUT",
    "DESCRIPTION",
)


def plain(topology: Topology) -> dict[str, Any]:
    """The topology as a file would hold it, unset (None) fields left out."""
    out: dict[str, Any] = {}
    for key, value in to_dict(topology).items():
        if isinstance(value, dict) and key != "sources":
            value = {sub: item for sub, item in value.items() if item is not None}
        if value is not None and value != {}:
            out[key] = value
    return out


def to_yaml(topology: Topology) -> str:
    """A YAML file that `collbench topo validate` accepts and that loads back equal."""
    return yaml.safe_dump(plain(topology), sort_keys=False, allow_unicode=True, width=100)


def scale_out_text(topology: Topology, missing: str = "-") -> str:
    """'8 x 400 Gb/s infiniband', or `missing` for a topology without scale-out."""
    out = topology.scale_out
    return missing if out is None else f"{out.nics_per_node} x {out.nic_gbits_s:g} Gb/s {out.kind}"


def table_row(topology: Topology) -> tuple[str, ...]:
    up, scale_out = topology.scale_up, scale_out_text(topology)
    return (
        topology.name,
        topology.accelerator.name,
        f"{topology.accelerator.peak_bf16_tflops:g}",
        f"{topology.nodes} x {topology.accelerators_per_node}",
        f"{up.kind} {up.bandwidth_gbytes_s:g} GB/s, domain {up.domain_size}",
        scale_out,
        short_description(topology.description),
    )


def table(topologies: list[Topology]) -> str:
    """The catalog as an aligned text table, one row per topology."""
    rows = [_HEADER, *(table_row(topology) for topology in topologies)]
    return "\n".join(text_columns(rows, range(len(_HEADER))))


def short_description(text: str, limit: int = 48) -> str:
    """The system's name: what a description says before its first colon, or its start."""
    head = text.split(":", 1)[0].strip()
    if ":" in text and len(head) <= limit:
        return head
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def listing(topology: Topology, width: int = 100) -> str:
    """Every field with its value, unit and source; derived figures at the end."""
    numbers = numeric_figures(topology)
    origin = "catalog" if topology.origin == topology.name else topology.origin or "no file"
    lines = [f"{topology.name}  ({origin})", *textwrap.wrap(topology.description, width), ""]
    for path, value in _flat(plain(topology)).items():
        lines.append(f"{path:<32} {_value(path, value)}")
        if source := topology.sources.get(path, "(none given)" if path in numbers else None):
            lines += textwrap.wrap(
                source,
                width,
                initial_indent="    source: ",
                subsequent_indent="            ",
                break_on_hyphens=False,
                break_long_words=False,
            )
    lines += [
        "",
        f"derived: world size {topology.world_size}, "
        f"{topology.nodes_per_domain} node(s) per scale-up domain, scale-out "
        f"{topology.node_scale_out_gbytes_s:g} GB/s per node per direction",
    ]
    return "\n".join(lines)


def _flat(data: dict[str, Any]) -> dict[str, Any]:
    """Field path -> value in the schema's order, less the name, description and sources."""
    out = {}
    for key, value in data.items():
        if isinstance(value, dict) and key != "sources":
            out.update({f"{key}.{sub}": item for sub, item in value.items()})
        elif key not in ("name", "description", "sources"):
            out[key] = value
    return out


def _value(path: str, value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        value = f"{value:g}"
    unit = next((unit for suffix, unit in _UNITS if path.endswith(suffix)), "")
    return f"{value} {unit}".rstrip()


def validated_line(topology: Topology) -> str:
    """What `topo validate` prints for a file that passed: the fabric in one line."""
    up, scale_out = topology.scale_up, scale_out_text(topology, missing="none")
    return (
        f"ok: {topology.name}: {topology.nodes} x {topology.accelerators_per_node} "
        f"{topology.accelerator.name}, scale-up {up.kind} {up.bandwidth_gbytes_s:g} GB/s "
        f"(domain {up.domain_size}), scale-out {scale_out}"
    )


def detected_yaml(data: dict[str, Any]) -> str:
    """A detected topology (a mapping that validates) as the file `topo detect` writes."""
    return (
        "# Written by `collbench topo detect`. Check every source marked ASSUMED or "
        "PLACEHOLDER.\n" + yaml.safe_dump(data, sort_keys=False, width=100)
    )
