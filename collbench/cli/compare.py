"""`collbench compare`: finished runs size by size against a baseline, and the CI gate
`--fail-if-slower`.

app.py registers it. Imports stay light (typer, pathlib): numpy and scipy load only when
the command runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from collbench.analysis.compare.comparison import ALPHA
from collbench.analysis.rules.bands import BAND_NAMES, bands_legend
from collbench.analysis.rules.methodology import METHODOLOGY
from collbench.core.errors import EXIT_SLOWER

if TYPE_CHECKING:
    from collbench.analysis.compare.comparison import Comparison
    from collbench.analysis.compare.gate import GateResult, SizeSelection
    from collbench.store.load import Run

GATE_HELP = (
    "CI gate: exit {code} when a size's busbw is more than PCT percent below the baseline's "
    "and the decision rule calls it slower: with 3+ repeats a side (--repeats), Welch's t on "
    "the repeats (Holm-corrected over the sizes the gate checks) below --alpha and the effect beyond "
    "the repeats' spread; with fewer, the effect beyond the noise floor measured from the "
    "data (iteration batches or repeats) or the recorded --noise-floor, whichever is larger "
    "(a run's iterations are not independent, so they give no p-value). Sizes without "
    "samples (imported logs) are judged on PCT alone; a size that much slower that cannot be "
    "judged (too few iterations) does not pass. Each size over PCT is one line on stderr."
)
NOISE_FLOOR_HELP = (
    "A recorded A/A noise floor (a file `collbench noise` wrote): a size is called faster or "
    "slower only beyond it, where it is larger than what the data show."
)


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
            help="Significance level of the test on repeats (Holm-corrected over the sizes "
            f"compared, or those --fail-if-slower checks). (default: {ALPHA:g})",
            show_default=False,
        ),
    ] = ALPHA,
    fail_if_slower: Annotated[
        float | None,
        typer.Option("--fail-if-slower", metavar="PCT", help=GATE_HELP.format(code=EXIT_SLOWER)),
    ] = None,
    band: Annotated[
        str | None,
        typer.Option(
            "--band",
            help=f"--fail-if-slower checks only these size bands ({', '.join(BAND_NAMES)}; "
            f"comma-separated): {bands_legend()}.",
        ),
    ] = None,
    sizes: Annotated[
        str | None,
        typer.Option(
            "--sizes",
            metavar="MIN:MAX",
            help="--fail-if-slower checks only sizes in this range, inclusive (1M:1G, :64K, 16M:).",
        ),
    ] = None,
    noise_floor: Annotated[
        Path | None,
        typer.Option("--noise-floor", metavar="FILE", help=NOISE_FLOOR_HELP, show_default=False),
    ] = None,
) -> None:
    """Compare runs size by size: busbw ratio and whether the difference is beyond the noise
    (both on busbw, which normalises the world size), a summary per size band, and every
    difference in how they were measured. With --fail-if-slower it is a CI gate."""
    from collbench.analysis.compare.comparison import compare as compare_runs
    from collbench.analysis.rules.decision import Rule
    from collbench.render.compare import render_comparisons
    from collbench.store.noise_floor import load_noise_floor

    selection = _gate_selection(fail_if_slower, band, sizes)
    floor = load_noise_floor(noise_floor) if noise_floor is not None else None
    rule = Rule(alpha=alpha, threshold_pct=fail_if_slower, floor=floor)
    loaded = _load(runs)
    gated = selection.covers if selection is not None else None
    comparisons = [compare_runs(loaded[0], cand, rule, gated) for cand in loaded[1:]]
    paths = [run.path for run in loaded[1:]]
    if strict:
        _refuse_differing(comparisons, paths)
    gate: list[GateResult] = []
    if fail_if_slower is not None and selection is not None:
        gate = _gate_results(comparisons, paths, fail_if_slower, selection)
    print(render_comparisons(comparisons, loaded[0].path, paths, as_json=json_out))
    if gate:
        _report_gate(gate, paths)


def _spec_error(flag: str, value: object, hint: str) -> Exception:
    from collbench.core.errors import SpecError

    return SpecError(flag, value, hint)


def _usage_error(message: str) -> Exception:
    from collbench.core.errors import SpecError

    return SpecError.from_message(message)


def _gate_selection(
    threshold_pct: float | None, band: str | None, sizes: str | None
) -> SizeSelection | None:
    """The sizes --fail-if-slower checks; --band and --sizes only make sense with it."""
    from collbench.analysis.compare.gate import SizeSelection, parse_bands, parse_size_range

    if threshold_pct is None:
        for flag, value in (("--band", band), ("--sizes", sizes)):
            if value is not None:
                raise _spec_error(flag, value, "only applies with --fail-if-slower PCT")
        return None
    if not 0 <= threshold_pct < 100:
        raise _spec_error("--fail-if-slower", threshold_pct, "must be a percentage in [0, 100)")
    if band is not None and sizes is not None:
        raise _spec_error("--sizes", sizes, "and --band both pick sizes: give one of them")
    if band is not None:
        return parse_bands(band)
    return parse_size_range(sizes) if sizes is not None else SizeSelection()


def _load(runs: list[Path]) -> list[Run]:
    from collbench.analysis.compare.comparison import common_keys
    from collbench.cli.runs import expand_runs

    # A tune directory stands for its settings' runs, the baseline first: `compare TUNE_DIR`
    # compares every setting with the default.
    loaded = expand_runs(runs).runs if runs else []
    if len(loaded) < 2:
        raise _spec_error(
            "RUN",
            " ".join(map(str, runs)),
            "needs a baseline and at least one run to compare with it",
        )
    for candidate in loaded[1:]:
        if not common_keys(loaded[0], candidate):
            raise _spec_error(
                "RUN",
                candidate.path,
                f"has no (collective, placement, size) in "
                f"common with {loaded[0].path}: nothing to compare",
            )
    return loaded


def _refuse_differing(comparisons: list[Comparison], paths: list[str]) -> None:
    """--strict: one line naming every methodology difference, before anything is printed."""
    from collbench.render.compare import methodology_refusal

    message = methodology_refusal(comparisons, paths)
    if message:
        raise _usage_error(message)


def _gate_results(
    comparisons: list[Comparison],
    paths: list[str],
    threshold_pct: float,
    selection: SizeSelection,
) -> list[GateResult]:
    """--fail-if-slower on every candidate; a selection that checks nothing is refused."""
    from collbench.analysis.compare.gate import check_slower

    results = [check_slower(comparison, threshold_pct, selection) for comparison in comparisons]
    for result, path in zip(results, paths, strict=True):
        if not result.checks:
            raise _usage_error(
                f"--fail-if-slower: {selection.describe()} holds no size that both the baseline "
                f"and {path} measured: the gate would check nothing"
            )
    return results


def _report_gate(results: list[GateResult], paths: list[str]) -> None:
    """The gate's lines on stderr; exit EXIT_SLOWER, one summary line, when a size failed."""
    import sys

    from collbench.analysis.compare.comparison import SlowerThanAllowed
    from collbench.render.compare import gate_lines, gate_summary

    summaries = []
    for result, path in zip(results, paths, strict=True):
        lines = gate_lines(result, path)
        if not result.passed:
            summaries.append(gate_summary(result, path))
        else:
            lines.append(f"{gate_summary(result, path)}: passed")
        print("\n".join(lines), file=sys.stderr, flush=True)
    if summaries:
        raise SlowerThanAllowed("; ".join(summaries))
