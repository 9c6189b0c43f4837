"""`collbench import`: bring other benchmarks' results into a collbench run directory.

The method, in full: docs/architecture.md#collbench-cli-imports-py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from collbench.cli.options import (
    Argument,
    Option,
    command,
    group,
    json_option,
    listing,
    request,
    run_dir_option,
    warn,
)
from collbench.core.collectives import REGISTRY
from collbench.run.import_logs import ImportRequest, import_request

import_app = group(
    "Import results of other benchmarks (nccl-tests, rccl-tests) as a collbench run."
)


IMPORT_OPTIONS = (
    Argument(
        "logs",
        "nccl-tests or rccl-tests output: text logs (format detected) or -J JSON files. Several "
        "logs of one system become one run.",
        ImportRequest,
        kind=list[Path],
        metavar="LOG...",
    ),
    run_dir_option(ImportRequest),
    Option(
        ("--collective", "-c"),
        f"Collective the logs measured, when they do not say ({listing(REGISTRY)}).",
        ImportRequest,
        metavar="NAME",
    ),
    Option(
        ("--knob",),
        "Label what the logs were measured with, e.g. NCCL_ALGO=Ring (repeatable; a log "
        "records no environment of its own): recorded in the run's knobs, as a sweep's --knob "
        "is, for `collbench tune from`.",
        ImportRequest,
        "knobs",
        kind=list[str],
        metavar="NAME=VALUE",
        name="knob",
    ),
    json_option("Print meta.json instead of the summary.", name="json_meta"),
    Option(
        ("--quiet", "-q"),
        "Print nothing on stdout (warnings and errors still go to stderr).",
        kind=bool,
        default=False,
    ),
)


def run_import(values: dict[str, Any]) -> None:
    from collbench.render.imports import describe_import

    result = import_request(request(ImportRequest, IMPORT_OPTIONS, values))
    warn(result.warnings)
    if values["quiet"]:
        return
    if values["json_meta"]:
        typer.echo(json.dumps(result.meta.to_dict(), indent=2, default=str))
        return
    for line in describe_import(result):
        typer.echo(line)


nccl_tests = command(
    "nccl-tests",
    "Turn nccl-tests / rccl-tests logs into a collbench run directory.\n\n"
    "Writes rows.jsonl, meta.json and rows.parquet with the figures as the logs printed them;\n"
    "warnings (busbw that does not fit the world size, a missing footer) go to stderr.",
    IMPORT_OPTIONS,
    run_import,
)
import_app.command("nccl-tests")(nccl_tests)


# rccl-tests prints the same table as nccl-tests (plus a banner and a hipevt column, which the
# importer reads), so its users' command is the same command under their tool's name.
import_app.command(
    "rccl-tests",
    help="Turn rccl-tests logs into a collbench run directory: the same command as "
    "`collbench import nccl-tests` (the format is detected from the log, whichever name is used).",
)(nccl_tests)
