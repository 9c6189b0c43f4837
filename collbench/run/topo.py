"""`collbench topo`'s use-cases: show or check a topology, describe this node. Imports stay
light (the CLI imports the requests for their defaults)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from collbench.core.errors import SpecError
from collbench.store.outputs import check_output_file, write_output

if TYPE_CHECKING:
    from collbench.topologies.detect import Detected
    from collbench.topologies.schema import Topology

# topo show --format: what each prints; the first is the default.
SHOW_FORMATS = {"text": "every field with its source", "yaml": "a file `topo validate` accepts"}
SHOW_FORMATS_ALL = ("text", "yaml", "json")


@dataclass(frozen=True)
class ShowRequest:
    """What `collbench topo show` was asked for."""

    name: str = ""  # a catalog name or a YAML/TOML file
    output_format: str = SHOW_FORMATS_ALL[0]

    def __post_init__(self) -> None:
        if self.output_format not in SHOW_FORMATS_ALL:
            raise SpecError(
                "--format", self.output_format, f"is not one of {', '.join(SHOW_FORMATS_ALL)}"
            )


@dataclass(frozen=True)
class DetectRequest:
    """What `collbench topo detect` was asked for."""

    out: Path | None = None  # where to write the YAML (None: print it)
    force: bool = False  # write over an existing file (never into a run directory)

    def __post_init__(self) -> None:
        # Before the node is probed: a path that cannot be written is refused at once.
        if self.out is not None:
            check_output_file("--out", self.out, force=self.force)


def catalog() -> list[Topology]:
    """Every topology the catalog ships, in its order."""
    from collbench.topologies.loader import catalog_names, load_topology

    return [load_topology(name) for name in catalog_names()]


def validate_topology(file: str) -> tuple[Topology, list[str]]:
    """The topology a file (or catalog name) describes, and its warnings: figures without a
    source, sources marked PLACEHOLDER (TopologyError naming the field when it is wrong)."""
    from collbench.topologies.loader import load_topology
    from collbench.topologies.schema import unsourced_figures

    topology = load_topology(file, "FILE")
    warnings = [f"{path} has no entry in sources" for path in unsourced_figures(topology)]
    warnings += [
        f"{path} is a placeholder: {text}"
        for path, text in topology.sources.items()
        if text.startswith("PLACEHOLDER")
    ]
    return topology, warnings


def detect_node() -> Detected:
    """This node as a topology file's data, checked to validate, and notes on what was
    found, assumed or could not be found."""
    from collbench.topologies.detect import describe, gather
    from collbench.topologies.loader import load_topology
    from collbench.topologies.schema import topology_from_dict

    found = describe(gather(), load_topology)
    topology_from_dict(found.data, "detect")  # what it writes must validate
    return found


def write_detected(out: Path, text: str) -> None:
    """Write the detected topology's YAML, whole or not at all (one line naming --out when
    it cannot be)."""
    write_output("--out", out, text)
