"""`collbench compare`: finished runs size by size against a baseline.

app.py registers it. Imports stay light (typer, pathlib): numpy and scipy load only when
the command runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from collbench.analysis.comparison import ALPHA
from collbench.analysis.methodology import METHODOLOGY
from collbench.cli.runs import load_run_dir


def compare(
    runs: Annotated[
        list[Path],
        typer.Argument(
            help="Run directories; the first is the baseline, every other one is compared with it.",
            metavar="BASELINE RUN...",
            show_default=False,
        ),
    ],
    json_out: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")] = False,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict",
            help=f"Exit 2 when the runs' methodology differs ({', '.join(METHODOLOGY)}).",
        ),
    ] = False,
    alpha: Annotated[
        float,
        typer.Option(
            "--alpha",
            help=f"Significance level of the per-size Mann-Whitney U test. (default: {ALPHA:g})",
            show_default=False,
        ),
    ] = ALPHA,
) -> None:
    """Compare runs size by size: busbw ratio, whether the difference is significant, a
    summary per size band, and every difference in how they were measured."""
    from collbench.analysis.comparison import common_keys
    from collbench.analysis.comparison import compare as compare_runs
    from collbench.core.errors import SpecError
    from collbench.render.compare import render_comparisons

    if len(runs) < 2:
        raise SpecError(
            "RUN",
            " ".join(map(str, runs)),
            "needs a baseline and at least one run to compare with it",
        )
    if not 0 < alpha < 1:
        raise SpecError("--alpha", alpha, "must be between 0 and 1")
    loaded = [load_run_dir(run) for run in runs]
    for candidate in loaded[1:]:
        if not common_keys(loaded[0], candidate):
            raise SpecError(
                "RUN",
                candidate.path,
                f"has no (collective, placement, size) in "
                f"common with {loaded[0].path}: nothing to compare",
            )
    comparisons = [compare_runs(loaded[0], candidate, alpha) for candidate in loaded[1:]]
    paths = [run.path for run in loaded[1:]]
    print(render_comparisons(comparisons, loaded[0].path, paths, as_json=json_out))
    differing = [item for item in comparisons if item.methodology_differs]
    if strict and differing:
        first = next(d for d in differing[0].differences if d.kind == "methodology")
        raise SpecError(
            "--strict",
            True,
            f"refuses runs measured differently: {first.field} "
            f"{first.baseline!r} vs {first.candidate!r}",
        )
