"""The report's comparison: every run after the first against the first (the baseline), as
`collbench compare` does, from analysis.comparison.compare: methodology warnings first, a
ratio chart, the per-band summary, the sizes one by one (folded), and the environment."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from collbench.render import charts, report_charts
from collbench.render.report_doc import Chart, Section, Table

if TYPE_CHECKING:
    from collbench.analysis.compare.comparison import Comparison
    from collbench.store.load import Run

# Verdicts of a difference the data back (analysis.decision): marked on the ratio chart
DECIDED = ("faster", "slower")


def compare_sections(runs: list[Run], names: dict[str, str]) -> list[Section]:
    """One section per run after the first, compared with the first; none for one run.
    Runs without sweep rows (overlap probes) have nothing to compare and are skipped."""
    from collbench.analysis.compare.comparison import compare

    baseline = runs[0]
    if len(runs) < 2 or not baseline.sweep_rows:
        return []
    return [
        comparison_section(compare(baseline, run), names[baseline.path], names[run.path])
        for run in runs[1:]
        if run.sweep_rows
    ]


def comparison_section(result: Comparison, base: str, cand: str) -> Section:
    """A candidate against the baseline: warnings, chart, bands, sizes, environment."""
    section = Section(f"Compare: {cand} against {base} (the baseline)")
    if not result.sizes:
        section.notes.append(
            f"{cand} and {base} measured no (collective, placement, size) in "
            "common: nothing to compare"
        )
        return section
    method = result.methodology
    if method:
        changes = "; ".join(
            f"{diff.field} {_shown(diff.baseline)} -> {_shown(diff.candidate)}" for diff in method
        )
        section.warnings.append(
            "METHODOLOGY DIFFERS: these runs were not measured the same way, so the ratios "
            f"mix that difference with the system's: {changes}"
        )
    section.lead.append(result.quantity_note)
    section.lead += result.basis_notes
    chart = _ratio_chart(result, base, cand)
    if chart is not None:
        section.charts.append(chart)
    section.tables += [_band_table(result), _size_table(result)]
    environment = [diff for diff in result.differences if diff.kind == "environment"]
    if environment:
        section.tables.append(
            Table(
                ("field", base, cand),
                [
                    (diff.field, _shown(diff.baseline), _shown(diff.candidate))
                    for diff in environment
                ],
                caption="environment differences (what is being compared)",
            )
        )
    section.notes += [f"only in {base}: {entry}" for entry in result.only_baseline]
    section.notes += [f"only in {cand}: {entry}" for entry in result.only_candidate]
    return section


def _ratio_chart(result: Comparison, base: str, cand: str) -> Chart | None:
    keys = list(dict.fromkeys((item.collective, item.placement) for item in result.sizes))
    series = []
    for collective, placement in keys:
        items = [i for i in result.sizes if (i.collective, i.placement) == (collective, placement)]
        series.append(
            report_charts.RatioSeries(
                f"{collective} ({placement})",
                tuple(item.size_bytes for item in items),
                tuple(item.ratio for item in items),
                tuple(item.verdict in DECIDED for item in items),
            )
        )
    png = report_charts.ratio_chart(
        f"{cand} / {base}: {result.quantity} ratio per size (> 1: {cand} is faster)",
        series,
        f"{result.quantity} ratio, {charts.short(cand, 20)} / {charts.short(base, 20)}",
    )
    if png is None:
        return None
    return Chart(f"compare_{_stem(cand)}_vs_{_stem(base)}", f"{cand} against {base}", png)


def _band_table(result: Comparison) -> Table:
    from collbench.analysis.rules.bands import bands_legend

    return Table(
        ("collective", "band", "sizes", "geomean ratio", "verdicts"),
        [
            (
                f"{band.collective} ({band.placement})",
                band.band,
                band.sizes,
                f"{band.geomean_ratio:.3f}x",
                ", ".join(f"{count} {verdict}" for verdict, count in sorted(band.counts.items())),
            )
            for band in result.bands
        ],
        caption=f"per size band ({bands_legend()})",
    )


def _size_table(result: Comparison) -> Table:
    return Table(
        (
            "collective",
            "size (B)",
            "base time (us)",
            "cand time (us)",
            "base busbw (GB/s)",
            "cand busbw (GB/s)",
            "ratio",
            "effect [interval], noise floor: verdict",
        ),
        [
            (
                f"{item.collective} ({item.placement})",
                item.size_bytes,
                charts.number(item.baseline_time_us),
                charts.number(item.candidate_time_us),
                _busbw(item.baseline_busbw_gbps),
                _busbw(item.candidate_busbw_gbps),
                f"{item.ratio:.3f}x" + (" (time)" if item.quantity == "time" else ""),
                item.decision.describe(),
            )
            for item in result.sizes
        ],
        caption=f"size by size ({len(result.sizes)} sizes)",
        folded=True,
    )


def _busbw(value: float | None) -> str:
    """Enough digits that a small busbw is not 0 (3 significant); '-' where there is none."""
    return "-" if value is None else charts.number(value)


def _shown(value: Any) -> str:
    return "(unset)" if value is None else str(value)


def _stem(label: str) -> str:
    return "".join(char if char.isalnum() or char in "-_" else "_" for char in label)
