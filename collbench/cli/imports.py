"""`collbench import`: bring other benchmarks' results into a collbench run directory.

Registered in collbench.cli.app with `app.add_typer(import_app, name="import")`. Imports stay
light here (`collbench --help` must not load pandas or torch): the work happens in
collbench.run.import_logs, imported inside the command.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from collbench.cli.options import DEFAULT_RUN_DIR_TEXT, listing
from collbench.core.collectives import REGISTRY

import_app = typer.Typer(
    help="Import results of other benchmarks (nccl-tests, rccl-tests) as a collbench run.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@import_app.callback()
def _import_root() -> None:
    """Import results of other benchmarks (nccl-tests, rccl-tests) as a collbench run."""


@import_app.command("nccl-tests")
def nccl_tests(
    logs: Annotated[
        list[Path],
        typer.Argument(
            help="nccl-tests or rccl-tests output: text logs (format detected) or -J JSON files. Several logs of one system become one run.",
            show_default=False,
        ),
    ],
    out: Annotated[
        Optional[Path],
        typer.Option(
            "--out",
            help=f"Run directory (new or empty). (default: {DEFAULT_RUN_DIR_TEXT})",
            show_default=False,
        ),
    ] = None,  # noqa: E501, UP045
    collective: Annotated[
        Optional[str],
        typer.Option(
            "--collective",
            "-c",
            help=f"Collective the logs measured, when they do not say ({listing(REGISTRY)}).",
            show_default=False,
        ),
    ] = None,  # noqa: E501, UP045
    knob: Annotated[
        Optional[list[str]],
        typer.Option(
            "--knob",
            metavar="NAME=VALUE",
            help="Label what the logs were measured with, e.g. NCCL_ALGO=Ring (repeatable; "
            "a log records no environment of its own): recorded in the run's knobs, as a "
            "sweep's --knob is, for `collbench tune --from`.",
            show_default=False,
        ),
    ] = None,  # noqa: UP045
    json_meta: Annotated[
        bool, typer.Option("--json", help="Print meta.json instead of the summary.")
    ] = False,
) -> None:
    """Turn nccl-tests / rccl-tests logs into a collbench run directory.

    Writes rows.jsonl, meta.json and rows.parquet with the figures as the logs printed them;
    warnings (busbw that does not fit the world size, a missing footer) go to stderr.
    """
    import json
    import sys

    from collbench.render.imports import describe_import
    from collbench.run.import_logs import import_logs, parse_knob_labels

    labels = parse_knob_labels(knob or [])
    result = import_logs(logs, out=out, collective=collective, knobs=labels)
    for warning in result.warnings:
        print(f"collbench: warning: {warning}", file=sys.stderr)
    if json_meta:
        typer.echo(json.dumps(result.meta.to_dict(), indent=2, default=str))
        return
    for line in describe_import(result):
        typer.echo(line)


# rccl-tests prints the same table as nccl-tests (plus a banner and a hipevt column, which the
# importer reads), so its users' command is the same command under their tool's name.
import_app.command(
    "rccl-tests",
    help="Turn rccl-tests logs into a collbench run directory: the same command as "
    "`collbench import nccl-tests` (the format is detected from the log, whichever name is used).",
)(nccl_tests)
