"""The report's comparison of every run after the first with the first, as `collbench
compare` does. Past RATIO_CHARTS_MAX runs one overview figure and a ranking come first, and
each run's section keeps its tables but no chart (one figure, not one per run: issue 31)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from collbench.core.stats import geomean
from collbench.render import charts
from collbench.render.compare import shown
from collbench.render.report import ratio_charts
from collbench.render.report.document import Chart, Section, Table

if TYPE_CHECKING:
    from collbench.analysis.compare.comparison import Comparison
    from collbench.store.load import Run

# Verdicts of a difference the data back (analysis.decision): marked on the ratio chart
DECIDED = ("faster", "slower")
# More candidates than this: one overview chart draws them all (one figure, not one each)
RATIO_CHARTS_MAX = 3


@dataclass(frozen=True)
class Compared:
    """A run after the first and its comparison with the first."""

    run: Run
    result: Comparison

    @property
    def geomean_ratio(self) -> float:
        """The geometric mean of its ratios over every size compared (nan without one)."""
        return geomean(item.ratio for item in self.result.sizes)


def compare_runs(runs: list[Run]) -> list[Compared]:
    """Every run after the first with sweep rows, compared with the first."""
    from collbench.analysis.compare.comparison import compare

    baseline = runs[0]
    if len(runs) < 2 or not baseline.sweep_rows:
        return []
    return [Compared(run, compare(baseline, run)) for run in runs[1:] if run.sweep_rows]


def ranked(compared: Sequence[Compared]) -> list[Compared]:
    """Best first: by geometric-mean ratio (those with none last), ties in run order."""
    return sorted(compared, key=lambda item: -_finite(item.geomean_ratio))


def _finite(value: float) -> float:
    return value if math.isfinite(value) else -math.inf


def compare_sections(
    baseline: str,
    compared: Sequence[Compared],
    names: dict[str, str],
    colors: Mapping[str, str],
) -> list[Section]:
    """One section per compared run, after an overview past RATIO_CHARTS_MAX runs; colors:
    run path -> its color in the other charts."""
    drawn_each = len(compared) <= RATIO_CHARTS_MAX
    sections = [
        comparison_section(item.result, baseline, names[item.run.path], drawn_each)
        for item in compared
    ]
    if drawn_each:
        return sections
    return [overview_section(baseline, compared, names, colors), *sections]


def overview_section(
    baseline: str,
    compared: Sequence[Compared],
    names: dict[str, str],
    colors: Mapping[str, str],
) -> Section:
    """Every compared run in one chart and a table ranking them."""
    order = ranked(compared)
    labels = {
        item.run.path: f"{names[item.run.path]}: {_times(item.geomean_ratio)}" for item in order
    }
    ratios = [(labels[item.run.path], _by_key(item.result)) for item in order]
    keys = list(dict.fromkeys(key for _, by_key in ratios for key in by_key))
    colored = {
        labels[item.run.path]: colors[item.run.path] for item in order if item.run.path in colors
    }
    quantity = order[0].result.quantity
    section = Section(f"Compare: every run against {baseline} (the baseline)")
    section.lead.append(
        f"{len(order)} runs compared with {baseline} in one chart (its ratio axes zoomed to "
        f"the ratios): {len(colored)} in color, as in the charts above, the others grey; the "
        "legend gives each run's geometric-mean ratio, best first. Each run's bands, sizes "
        "and environment follow in its own section."
    )
    panels = [
        ratio_charts.RatioPanel(
            f"{key[0]} ({key[1]})",
            tuple(replace(by_key[key], label=label) for label, by_key in ratios if key in by_key),
        )
        for key in keys
    ]
    png = ratio_charts.ratio_overview_chart(
        f"every run / {baseline}: {quantity} ratio per size (> 1: faster)",
        panels,
        f"{quantity} ratio to {charts.short(baseline, 20)}",
        colored,
    )
    if png is not None:
        section.charts.append(
            Chart(f"compare_all_vs_{_stem(baseline)}", f"every run against {baseline}", png)
        )
    section.tables.append(_ranking_table(order, names, keys))
    return section


def _ranking_table(
    order: Sequence[Compared], names: dict[str, str], keys: Sequence[tuple[str, str]]
) -> Table:
    rows = []
    for rank, item in enumerate(order, start=1):
        sizes = item.result.sizes
        verdicts = [size.verdict for size in sizes]
        per_key = [
            geomean(size.ratio for size in sizes if (size.collective, size.placement) == key)
            for key in keys
        ]
        faster, slower = verdicts.count("faster"), verdicts.count("slower")
        rows.append(
            (
                rank,
                names[item.run.path],
                _times(item.geomean_ratio),
                *map(_times, per_key),
                faster,
                slower,
                len(verdicts) - faster - slower,
            )
        )
    keyed = (f"{collective} ({placement})" for collective, placement in keys)
    return Table(
        ("rank", "run", "geomean ratio", *keyed, "faster", "slower", "same or unjudged"),
        rows,
        caption=f"the runs ranked by the geometric mean of their {order[0].result.quantity} "
        "ratio over every size compared, and per collective over its sizes; how many sizes "
        "each verdict got (as in each run's section)",
    )


def _times(ratio: float) -> str:
    return f"{ratio:.3f}x" if math.isfinite(ratio) else "-"


def comparison_section(result: Comparison, base: str, cand: str, drawn: bool = True) -> Section:
    """A candidate against the baseline (`drawn` False: the overview draws its chart)."""
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
            f"{diff.field} {shown(diff.baseline)} -> {shown(diff.candidate)}" for diff in method
        )
        section.warnings.append(
            "METHODOLOGY DIFFERS: these runs were not measured the same way, so the ratios "
            f"mix that difference with the system's: {changes}"
        )
    section.lead.append(result.quantity_note)
    section.lead += result.basis_notes
    if not drawn:
        section.lead.append(
            f"Its ratios are drawn in the overview: Compare: every run against {base}."
        )
    elif png := ratio_charts.ratio_chart(
        f"{cand} / {base}: {result.quantity} ratio per size (> 1: {cand} is faster)",
        list(_by_key(result).values()),
        f"{result.quantity} ratio, {charts.short(cand, 20)} / {charts.short(base, 20)}",
    ):
        section.charts.append(
            Chart(f"compare_{_stem(cand)}_vs_{_stem(base)}", f"{cand} against {base}", png)
        )
    section.tables += [_band_table(result), _size_table(result)]
    environment = [diff for diff in result.differences if diff.kind == "environment"]
    if environment:
        section.tables.append(
            Table(
                ("field", base, cand),
                [(diff.field, shown(diff.baseline), shown(diff.candidate)) for diff in environment],
                caption="environment differences (what is being compared)",
            )
        )
    section.notes += [f"only in {base}: {entry}" for entry in result.only_baseline]
    section.notes += [f"only in {cand}: {entry}" for entry in result.only_candidate]
    return section


def _by_key(result: Comparison) -> dict[tuple[str, str], ratio_charts.RatioSeries]:
    """The comparison's ratios per (collective, placement), each labelled by that key."""
    grouped: dict[tuple[str, str], list[Any]] = {}
    for item in result.sizes:
        grouped.setdefault((item.collective, item.placement), []).append(item)
    return {
        (collective, placement): ratio_charts.RatioSeries(
            f"{collective} ({placement})",
            tuple(item.size_bytes for item in items),
            tuple(item.ratio for item in items),
            tuple(item.verdict in DECIDED for item in items),
        )
        for (collective, placement), items in grouped.items()
    }


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
    return "-" if value is None else charts.number(value)


def _stem(label: str) -> str:
    return "".join(char if char.isalnum() or char in "-_" else "_" for char in label)
