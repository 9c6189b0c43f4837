"""`collbench topo`: the topology catalog, checking a topology file, describing this node.
Imports stay light: `collbench --help` must not load yaml-heavy or torch modules."""

from __future__ import annotations

import json
import sys
from typing import Any

from collbench.cli.options import (
    Argument,
    Option,
    add_command,
    force_option,
    group,
    json_option,
    listing,
    request,
    warn,
)
from collbench.run.topo import SHOW_FORMATS, SHOW_FORMATS_ALL, DetectRequest, ShowRequest

topo_app = group("Fabric descriptions: the shipped catalog, your own files, and this node.")

LIST_OPTIONS = (json_option("Print the catalog's topologies as a JSON list of mappings."),)
SHOW_OPTIONS = (
    Argument(
        "name",
        "A catalog name (see `collbench topo list`) or a YAML/TOML file.",
        ShowRequest,
        metavar="NAME|FILE",
    ),
    Option(
        ("--format",),
        f"{listing(SHOW_FORMATS_ALL, SHOW_FORMATS, ' or ')}.",
        ShowRequest,
        "output_format",
        name="output",
        metavar="NAME",
    ),
    json_option("Same as --format json."),
)
VALIDATE_OPTIONS = (
    Argument("file", "A topology file (YAML or TOML), or a catalog name.", metavar="FILE"),
)
DETECT_OPTIONS = (
    Option(
        ("--out",), "Write the YAML here instead of printing it.", DetectRequest, metavar="FILE"
    ),
    force_option(DetectRequest),
)


def _list(values: dict[str, Any]) -> None:
    from collbench.render import topology as render
    from collbench.run.topo import catalog

    topologies = catalog()
    if values["json_out"]:
        print(json.dumps([render.plain(topology) for topology in topologies], indent=2))
    else:
        print(render.table(topologies))


def _show(values: dict[str, Any]) -> None:
    from collbench.render import topology as render
    from collbench.topologies.loader import load_topology

    wanted: ShowRequest = request(ShowRequest, SHOW_OPTIONS, values)
    topology = load_topology(wanted.name, "topology")
    if values["json_out"] or wanted.output_format == "json":
        print(json.dumps(render.plain(topology), indent=2))
    elif wanted.output_format == "yaml":
        print(render.to_yaml(topology), end="")
    else:
        print(render.listing(topology))


def _validate(values: dict[str, Any]) -> None:
    from collbench.render.topology import validated_line
    from collbench.run.topo import validate_topology

    topology, warnings = validate_topology(values["file"])
    warn(warnings)
    print(validated_line(topology))


def _detect(values: dict[str, Any]) -> None:
    from collbench.render.topology import detected_yaml
    from collbench.run.topo import detect_node, write_detected

    wanted: DetectRequest = request(DetectRequest, DETECT_OPTIONS, values)
    found = detect_node()
    warn(found.notes, "detect")
    text = detected_yaml(found.data)
    if wanted.out is None:
        print(text, end="")
        return
    write_detected(wanted.out, text)
    print(f"wrote {wanted.out}", file=sys.stderr)


add_command(
    topo_app,
    "list",
    "List the shipped topologies: accelerator, size, scale-up and scale-out fabric.",
    LIST_OPTIONS,
    _list,
)
add_command(
    topo_app,
    "show",
    "Print a topology: every field with its unit and source, or as YAML / JSON.",
    SHOW_OPTIONS,
    _show,
)
add_command(
    topo_app,
    "validate",
    "Check a topology file: `ok: ...` and exit 0, or one line naming the bad field, exit 2.\n\n"
    "Figures without a source, and sources marked PLACEHOLDER, are warned about on stderr.",
    VALIDATE_OPTIONS,
    _validate,
)
add_command(
    topo_app,
    "detect",
    "Describe this node as a topology file, best effort (nvidia-smi, rocm-smi, sysfs).\n\n"
    "What was found, assumed or could not be found goes to stderr; figures that could not be\n"
    "detected come from the catalog entry of the same accelerator, or are placeholders whose\n"
    "source says PLACEHOLDER. The result passes `collbench topo validate`.",
    DETECT_OPTIONS,
    _detect,
)
