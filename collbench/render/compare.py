"""`collbench compare` as text and JSON, and `collbench noise`'s A/A floor per size,
which the gate holds a change against."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from collbench.analysis.rules.bands import band_of, bands_legend
from collbench.analysis.rules.decision import NEIGHBOURS
from collbench.core.units import format_number, format_size

if TYPE_CHECKING:
    from collbench.analysis.compare.comparison import Comparison, SizeComparison
    from collbench.analysis.compare.gate import GateCheck, GateResult
    from collbench.run.noise import NoiseReport


def render_comparisons(
    comparisons: Sequence[Comparison], base_path: str, cand_paths: Sequence[str], as_json: bool
) -> str:
    """Each candidate against the baseline: a JSON list, or text blocks one blank line apart."""
    if as_json:
        return json.dumps([item.to_dict() for item in comparisons], indent=2, default=str)
    return "\n\n".join(
        render_comparison(item, base_path, cand_path)
        for item, cand_path in zip(comparisons, cand_paths, strict=True)
    )


def render_comparison(result: Comparison, base_path: str, cand_path: str) -> str:
    """The comparison as text: the methodology warning first, then sizes, bands, the rest."""
    lines = [
        f"# compare: baseline {base_path} ({result.baseline})",
        f"#      vs candidate {cand_path} ({result.candidate})",
        f"# {result.quantity_note}",
    ]
    lines += [f"# {note}" for note in result.basis_notes]
    if result.noise_floor:
        lines.append(f"# recorded A/A noise floor: {result.noise_floor}")
    if method := result.methodology:
        lines += [
            "#",
            "# !!! METHODOLOGY DIFFERS: these runs were not measured the same way;",
            "# !!! the ratios below mix that difference with the system's:",
        ]
        lines += [f"# !!!   {d.field}: {shown(d.baseline)} -> {shown(d.candidate)}" for d in method]
    lines += _size_lines(result) + _band_lines(result)
    if environment := [d for d in result.differences if d.kind == "environment"]:
        lines += ["#", "# environment differences (what is being compared):"]
        lines += [
            f"#   {d.field}: {shown(d.baseline)} -> {shown(d.candidate)}" for d in environment
        ]
    lines += [f"# only in baseline: {entry}" for entry in result.only_baseline]
    lines += [f"# only in candidate: {entry}" for entry in result.only_candidate]
    return "\n".join(lines)


def shown(value: Any) -> str:
    """A setting's value as the comparison shows it: `(unset)` for none."""
    return "(unset)" if value is None else str(value)


def _size_lines(result: Comparison) -> list[str]:
    lines: list[str] = []
    current = None
    several = len({(item.dtype, item.op) for item in result.sizes}) > 1
    for item in result.sizes:
        if (item.collective, item.placement, item.dtype, item.op) != current:
            current = (item.collective, item.placement, item.dtype, item.op)
            variant = f", {item.dtype} {item.op}" if several else ""
            lines += [
                "#",
                f"# {item.collective} ({item.placement}{variant})",
                "#        size   base busbw   cand busbw     ratio    base time    cand time"
                "  effect [interval], noise floor: verdict (the smallest slowdown it could see)",
                "#         (B)       (GB/s)       (GB/s)                   (us)         (us)",
            ]
        detectable = item.decision.detectable_pct  # the smallest slowdown it could see
        seen = "sees no slowdown" if detectable is None else f"sees {detectable:.1f}%"
        lines.append(
            f"{item.size_bytes:13d}  {_figure(item.baseline_busbw_gbps):>11s}  "
            f"{_figure(item.candidate_busbw_gbps):>11s}  {_ratio(item):>8s}  "
            f"{_figure(item.baseline_time_us):>11s}  {_figure(item.candidate_time_us):>11s}  "
            f"{item.decision.describe()} ({seen})"
        )
    return lines


def _figure(value: float | None) -> str:
    return "-" if value is None or value != value else format_number(value, 4)


def _ratio(item: SizeComparison) -> str:
    return f"{item.ratio:.3f}x" if item.ratio == item.ratio else "-"


def _band_lines(result: Comparison) -> list[str]:
    lines = ["#", f"# per size band ({bands_legend()}): geometric mean ratio, verdicts"]
    several = len({(band.dtype, band.op) for band in result.bands}) > 1
    for band in result.bands:
        counts = ", ".join(f"{count} {verdict}" for verdict, count in sorted(band.counts.items()))
        variant = f" {band.dtype} {band.op}" if several else ""
        lines.append(
            f"#   {band.collective} {band.placement}{variant} {band.band:6s} "
            f"{band.geomean_ratio:7.3f}x over {band.sizes} size(s): {counts}"
        )
    return lines


def gate_lines(result: GateResult, cand_path: str) -> list[str]:
    """What --fail-if-slower found for one candidate: a line per size slower than the
    threshold, failed or not, and per blind size."""
    head = f"--fail-if-slower {result.threshold_pct:g}: {cand_path}"
    lines = [f"{head}: {_gate_entry(check)}" for check in result.slower]
    for check in result.blind:
        if check not in result.slower:
            lines.append(f"{head}: BLIND: {_where(check)}: {_power(check)}")
    return lines


def _where(check: GateCheck) -> str:
    item = check.item
    usual = item.dtype in (None, "float32") and item.op in (None, "sum", "none")
    variant = "" if usual else f" {item.dtype} {item.op}"
    return f"{item.collective} {item.placement}{variant} {format_size(item.size_bytes)}"


def _power(check: GateCheck) -> str:
    """What the gate could see at a size: the smallest slowdown it could have caught."""
    decision = check.item.decision
    if decision.detectable_pct is None:
        return f"could catch no slowdown ({decision.reason or decision.call})"
    return (
        f"could catch only a slowdown of {decision.detectable_pct:.1f}% or more "
        f"({decision.describe()})"
    )


def gate_summary(result: GateResult, cand_path: str) -> str:
    """One line: how many sizes failed out of how many were checked."""
    failed, spared, unjudged = len(result.failed), len(result.spared), len(result.unjudged)
    text = (
        f"--fail-if-slower {result.threshold_pct:g}: {cand_path}: {failed} of "
        f"{len(result.checks)} size(s) ({result.selection.describe()}) slower than the baseline "
        f"by more than {result.threshold_pct:g}% busbw"
    )
    if spared:
        text += f"; {spared} more as slow but within the noise (not called slower), not failed"
    if unjudged:
        text += (
            f"; {unjudged} more as slow that could not be judged (too few iterations to "
            "measure the noise: --iters 12 or more, or --repeats 3): not passed"
        )
    if result.blind:
        text += (
            f"; {len(result.blind)} size(s) blind (the smallest slowdown the gate could catch "
            f"there is more than {result.threshold_pct:g}%: more --repeats or --iters, a "
            "quieter machine or a smaller --noise-floor): could not tell"
        )
    return text


def _gate_entry(check: GateCheck) -> str:
    item = check.item
    if item.quantity == "time":
        figures = f"time {_figure(item.baseline_time_us)} -> {_figure(item.candidate_time_us)} us"
    else:
        figures = (
            f"busbw {_figure(item.baseline_busbw_gbps)} -> "
            f"{_figure(item.candidate_busbw_gbps)} GB/s"
        )
    state = (
        "FAILED" if check.failed else ("UNJUDGED" if item.verdict == "unjudged" else "not failed")
    )
    return f"{state}: {_where(check)}: {figures}: {item.decision.describe()}"


# A typical CI gate's threshold (docs/compare.md uses --fail-if-slower 5): a floor above it
# blinds such a gate in that band, which `noise` says when it writes the floor.
TYPICAL_GATE_PCT = 5.0


def noise_warnings(report: NoiseReport) -> list[str]:
    """One warning naming the sizes whose floor is larger than a typical gate's threshold."""
    loud = {size: pct for size, pct in report.floor.pct_by_size.items() if pct > TYPICAL_GATE_PCT}
    if not loud:
        return []
    worst = max(loud.values())
    return [
        f"collbench: warning: {len(loud)} size(s) ({', '.join(map(format_size, loud))}) have a "
        f"floor of up to {worst:.1f}%: a gate at --fail-if-slower {TYPICAL_GATE_PCT:g} held "
        f"against it sees only slowdowns of {100 * worst / (100 + worst):.1f}% or more there "
        "and says so (blind); measure on a quieter machine or with more --repeats"
    ]


def render_noise(report: NoiseReport) -> str:
    """A header, one line per size (band, floor, largest change), how the floor was taken,
    where the file went and how to use it."""
    lines = [
        f"# noise: A/A floor of {len(report.runs)} runs of one configuration, "
        f"{report.sizes} size(s) measured by every run",
        *(f"#   run {path}" for path in report.runs),
    ]
    if report.environment:
        changes = "; ".join(
            f"{diff.field} {diff.baseline} -> {diff.candidate}" for diff in report.environment
        )
        lines.append(f"# environment differs (its noise is in the floor): {changes}")
    lines += [
        f"# per size ({bands_legend()}): busbw change identical runs stayed within",
        "#  size       band       floor  largest change",
    ]
    detail = report.floor.detail
    for size, pct in report.floor.pct_by_size.items():
        lines.append(
            f"   {format_size(size):10s} {band_of(size):8s} {pct:7.2f}%  "
            f"{detail['largest_pct'][str(size)]:13.2f}%"
        )
    lines += [
        f"# floor: per pair of runs ({detail['pairs']}) the largest change at the size and at "
        f"sizes within {NEIGHBOURS}x of it, then the {detail['quantile']:.3g} quantile over "
        "pairs (the largest change for a few runs)",
        f"# wrote {report.out}: use it with collbench compare BASE NEW --noise-floor {report.out}",
    ]
    return "\n".join(lines)
