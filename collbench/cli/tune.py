"""`collbench tune --from RUN...`: the best setting per collective and size range, from runs
already measured under different settings, written as tune.json, best.env and
nccl_tuner.conf. Launching the settings itself is not built yet.

app.py registers it. Imports stay light (typer, pathlib): the analysis loads only when the
command runs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from collbench.analysis.tune_select import SelectRule

# --ranges: the option's words for SelectRule.granularity (whose default is written there)
RANGES = {"bands": "band", "sizes": "size"}
DEFAULT_RANGES = next(name for name, value in RANGES.items() if value == SelectRule().granularity)
NOT_YET = (
    "tune: launching settings is not built yet; measure each setting with "
    "`collbench sweep --knob ...` and combine them with `collbench tune --from RUN...`"
)


def tune(
    runs: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Run directories (sweeps, imported logs), each measured under one setting.",
            metavar="RUN...",
            show_default=False,
        ),
    ] = None,
    from_runs: Annotated[
        bool,
        typer.Option(
            "--from",
            help="Tune from the runs given as RUN..., launching nothing. (Required for now.)",
        ),
    ] = False,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="A new directory for tune.json, best.env and nccl_tuner.conf.",
            show_default=False,
        ),
    ] = None,
    channels: Annotated[
        int | None,
        typer.Option(
            "--channels",
            metavar="N",
            help="nccl_tuner.conf's channel count where the setting pins none (0: NCCL's "
            "own); needed for imported logs, which record no environment.",
            show_default=False,
        ),
    ] = None,
    ranges: Annotated[
        str,
        typer.Option(
            "--ranges",
            metavar="bands|sizes",
            help="bands: one result per size band; sizes: one per measured size. "
            f"(default: {DEFAULT_RANGES})",
            show_default=False,
        ),
    ] = DEFAULT_RANGES,
    json_out: Annotated[bool, typer.Option("--json", help="Print tune.json as JSON.")] = False,
) -> None:
    """Choose the best setting per collective and size band from runs measured under
    different settings (--from): its busbw gain over the default and whether it is
    significant, or "default is best". Writes tune.json, best.env and nccl_tuner.conf."""
    from collbench.core.errors import SpecError
    from collbench.render.tune import render_tune
    from collbench.run.tune_from import tune_from

    if not from_runs:
        raise SpecError.from_message(NOT_YET)
    if out is None:
        raise SpecError("--out", "", "is required: the new directory to write the result in")
    if ranges not in RANGES:
        raise SpecError("--ranges", ranges, f"must be one of {', '.join(RANGES)}")
    if channels is not None and channels < 0:
        raise SpecError("--channels", channels, "must be a count, or 0 for NCCL's own")
    rule = SelectRule(granularity=RANGES[ranges])
    result = tune_from(runs or [], out, channels, rule)
    for warning in result.warnings:
        print(f"collbench: warning: {warning}", file=sys.stderr, flush=True)
    print(render_tune(result, as_json=json_out), flush=True)
