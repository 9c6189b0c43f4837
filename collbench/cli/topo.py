"""`collbench topo`: the topology catalog, checking a topology file, describing this node.

Registered in collbench.cli.app with `app.add_typer(topo_app, name="topo")`. Imports stay light
(`collbench --help` must not load yaml-heavy or torch modules): the work happens in
collbench.topologies.*, imported inside each command. Errors in a file are TopologyError
(a SpecError): cli.main prints them as one line and exits 2.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from collbench.cli.options import listing

topo_app = typer.Typer(
    help="Fabric descriptions: the shipped catalog, your own files, and this node.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# topo show --format: what each prints; the first is the default.
_FORMAT_NOTES = {"text": "every field with its source", "yaml": "a file `topo validate` accepts"}
_FORMATS = ("text", "yaml", "json")


@topo_app.callback()
def _topo_root() -> None:
    """Fabric descriptions: the shipped catalog, your own files, and this node."""


@topo_app.command("list")
def list_catalog(
    json_out: Annotated[
        bool,
        typer.Option("--json", help="Print the catalog's topologies as a JSON list of mappings."),
    ] = False,
) -> None:
    """List the shipped topologies: accelerator, size, scale-up and scale-out fabric."""
    from collbench.render import topology as render
    from collbench.topologies.loader import catalog_names, load_topology

    topologies = [load_topology(name) for name in catalog_names()]
    if json_out:
        print(json.dumps([render.plain(topology) for topology in topologies], indent=2))
    else:
        print(render.table(topologies))


@topo_app.command("show")
def show(
    name: Annotated[
        str,
        typer.Argument(
            help="A catalog name (see `collbench topo list`) or a YAML/TOML file.",
            metavar="NAME|FILE",
            show_default=False,
        ),
    ],
    output: Annotated[
        str,
        typer.Option(
            "--format",
            help=f"{listing(_FORMATS, _FORMAT_NOTES, ' or ')}.",
        ),
    ] = _FORMATS[0],
    json_out: Annotated[bool, typer.Option("--json", help="Same as --format json.")] = False,
) -> None:
    """Print a topology: every field with its unit and source, or as YAML / JSON."""
    from collbench.core.errors import SpecError
    from collbench.render import topology as render
    from collbench.topologies.loader import load_topology

    if output not in _FORMATS:
        raise SpecError("--format", output, f"is not one of {', '.join(_FORMATS)}")
    topology = load_topology(name, "topology")
    if json_out or output == "json":
        print(json.dumps(render.plain(topology), indent=2))
    elif output == "yaml":
        print(render.to_yaml(topology), end="")
    else:
        print(render.listing(topology))


@topo_app.command("validate")
def validate(
    file: Annotated[
        str,
        typer.Argument(
            help="A topology file (YAML or TOML), or a catalog name.",
            metavar="FILE",
            show_default=False,
        ),
    ],
) -> None:
    """Check a topology file: `ok: ...` and exit 0, or one line naming the bad field, exit 2.

    Figures without a source, and sources marked PLACEHOLDER, are warned about on stderr.
    """
    from collbench.render.topology import validated_line
    from collbench.topologies.loader import load_topology
    from collbench.topologies.schema import unsourced_figures

    topology = load_topology(file, "FILE")
    for path in unsourced_figures(topology):
        print(f"collbench: warning: {path} has no entry in sources", file=sys.stderr)
    for path, text in topology.sources.items():
        if text.startswith("PLACEHOLDER"):
            print(f"collbench: warning: {path} is a placeholder: {text}", file=sys.stderr)
    print(validated_line(topology))


@topo_app.command("detect")
def detect(
    out: Annotated[
        Optional[Path],
        typer.Option(
            "--out", help="Write the YAML here instead of printing it.", show_default=False
        ),
    ] = None,  # noqa: E501, UP045
) -> None:
    """Describe this node as a topology file, best effort (nvidia-smi, rocm-smi, sysfs).

    What was found, assumed or could not be found goes to stderr; figures that could not be
    detected come from the catalog entry of the same accelerator, or are placeholders whose
    source says PLACEHOLDER. The result passes `collbench topo validate`.
    """
    from collbench.render.topology import detected_yaml
    from collbench.topologies.detect import describe, gather
    from collbench.topologies.loader import load_topology
    from collbench.topologies.schema import topology_from_dict

    if out is not None and not out.parent.is_dir():
        from collbench.core.errors import SpecError

        raise SpecError("--out", str(out), "cannot be written: its folder does not exist")
    found = describe(gather(), load_topology)
    topology_from_dict(found.data, "detect")  # what it writes must validate
    for note in found.notes:
        print(f"collbench: detect: {note}", file=sys.stderr)
    text = detected_yaml(found.data)
    if out is None:
        print(text, end="")
        return
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as error:
        from collbench.core.errors import SpecError

        raise SpecError("--out", str(out), f"cannot be written: {error.strerror}") from None
    print(f"wrote {out}", file=sys.stderr)
