"""`collbench compare`: finished runs size by size against a baseline, and the CI gate
`--fail-if-slower`. Imports stay light: numpy and scipy load only when the command runs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from collbench.analysis.rules.bands import BAND_NAMES, bands_legend
from collbench.analysis.rules.methodology import COMPARE, STRICT_COMPARE, check
from collbench.cli.options import (
    FROM_OWNER,
    Argument,
    Option,
    command,
    force_option,
    json_option,
    request,
    say,
)
from collbench.core.errors import EXIT_SLOWER, EXIT_UNJUDGED
from collbench.run.compare import CompareRequest, compare_runs, gate_results
from collbench.run.noise import NoiseRequest, record_noise_of

if TYPE_CHECKING:
    from collbench.analysis.compare.gate import GateResult

GATE_HELP = (
    "CI gate: exit {code} when a size's busbw is more than PCT percent below the baseline's "
    "and the decision rule calls it slower: with 3+ repeats a side (--repeats), Welch's t on "
    "the repeats (Holm-corrected over the sizes the gate checks) below --alpha and the effect beyond "
    "the repeats' spread; with fewer, the effect beyond the noise floor measured from the "
    "data (iteration batches or repeats) or the recorded --noise-floor, whichever is larger "
    "(a run's iterations are not independent, so they give no p-value). Sizes without "
    "samples (imported logs) are judged on PCT alone; a size that much slower that cannot be "
    "judged (too few iterations) does not pass. Each size over PCT is one line on stderr. "
    "A size where the smallest slowdown the gate could catch is more than PCT is blind: "
    "with no failure, the gate then exits {blind} (could not tell), not 0."
)
NOISE_FLOOR_HELP = (
    "A recorded A/A noise floor (a file `collbench noise` wrote): a size is called faster or "
    "slower only beyond it, where it is larger than what the data show."
)


COMPARE_OPTIONS = (
    Argument(
        "runs",
        "Run directories; the first is the baseline, every other one is compared with it.",
        CompareRequest,
        kind=list[Path],
        metavar="BASELINE RUN...",
    ),
    json_option("Print the comparison as JSON."),
    Option(
        ("--strict",),
        f"Exit 2 when the runs' methodology differs ({', '.join(STRICT_COMPARE.refuse)}).",
        CompareRequest,
        default=FROM_OWNER,
        default_text="",
    ),
    Option(
        ("--alpha",),
        "Significance level of the test on repeats (Holm-corrected over the sizes "
        "compared, or those --fail-if-slower checks).",
        CompareRequest,
    ),
    Option(
        ("--fail-if-slower",),
        GATE_HELP.format(code=EXIT_SLOWER, blind=EXIT_UNJUDGED),
        CompareRequest,
        metavar="PCT",
    ),
    Option(
        ("--band",),
        f"--fail-if-slower checks only these size bands ({', '.join(BAND_NAMES)}; "
        f"comma-separated): {bands_legend()}.",
        CompareRequest,
        metavar="LIST",
    ),
    Option(
        ("--sizes",),
        "--fail-if-slower checks only sizes in this range, inclusive (1M:1G, :64K, 16M:).",
        CompareRequest,
        metavar="MIN:MAX",
    ),
    Option(("--noise-floor",), NOISE_FLOOR_HELP, CompareRequest, metavar="FILE"),
)


def run_compare(values: dict[str, Any]) -> None:
    from collbench.render.compare import render_comparisons

    wanted: CompareRequest = request(CompareRequest, COMPARE_OPTIONS, values)
    compared = compare_runs(wanted)
    check(compared.runs, STRICT_COMPARE if wanted.strict else COMPARE, label=lambda run: run.path)
    gate = gate_results(wanted, compared)
    print(
        render_comparisons(
            compared.comparisons, compared.baseline, compared.paths, as_json=values["json_out"]
        )
    )
    if gate:
        _report_gate(gate, compared.paths)


compare = command(
    "compare",
    "Compare runs size by size: busbw ratio and whether the difference is beyond the noise\n"
    "(both on busbw, which normalises the world size), a summary per size band, and every\n"
    "difference in how they were measured. With --fail-if-slower it is a CI gate.",
    COMPARE_OPTIONS,
    run_compare,
)


def _report_gate(results: list[GateResult], paths: list[str]) -> None:
    """The gate's lines on stderr; exit EXIT_SLOWER, one summary line, when a size failed,
    EXIT_UNJUDGED when none failed but a checked size was blind."""
    from collbench.analysis.compare.comparison import GateBlind, SlowerThanAllowed
    from collbench.render.compare import gate_lines, gate_summary

    summaries, slower = [], False
    for result, path in zip(results, paths, strict=True):
        lines = gate_lines(result, path)
        if not result.passed:
            summaries.append(gate_summary(result, path))
            slower = slower or bool(result.failed or result.unjudged)
        else:
            lines.append(f"{gate_summary(result, path)}: passed")
        say("\n".join(lines))
    if summaries:
        raise (SlowerThanAllowed if slower else GateBlind)("; ".join(summaries))


# `collbench noise RUN RUN [RUN...]`: the A/A noise floor that `compare --noise-floor` reads.
NOISE_OPTIONS = (
    Argument(
        "runs",
        "Identical runs of one configuration (reruns, measured the same way).",
        NoiseRequest,
        kind=list[Path],
        metavar="RUN RUN [RUN...]",
    ),
    Option(
        ("--out",),  # not -o: that is --op, as in nccl-tests (tests/cli/test_short_flags.py)
        "Where to write the floor (an existing file: only with --force).",
        NoiseRequest,
        metavar="FILE",
    ),
    force_option(NoiseRequest),
)


def run_noise(values: dict[str, Any]) -> None:
    from collbench.render.compare import noise_warnings, render_noise

    report = record_noise_of(request(NoiseRequest, NOISE_OPTIONS, values))
    print(render_noise(report), flush=True)
    for warning in noise_warnings(report):
        say(warning)


noise = command(
    "noise",
    "Measure how far identical runs land apart, per size (the A/A noise floor), and\n"
    "write it for `collbench compare --noise-floor FILE`, which then calls a size faster or\n"
    "slower only beyond it.",
    NOISE_OPTIONS,
    run_noise,
)
