"""The report's comparison of every run after the first with the first, as `collbench
compare` does. Past RATIO_CHARTS_MAX runs one overview figure and a ranking come first, and
each run's section keeps its tables but no chart (one figure, not one per run: issue 31).
The ratio charts are drawn with render/charts.py's axes, legend and PNG helpers."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from collbench.analysis.compare.comparison import Comparison, compare
from collbench.analysis.rules.bands import bands_legend
from collbench.core.stats import geomean
from collbench.core.units import counted
from collbench.render import charts
from collbench.render.compare import shown
from collbench.render.report.document import Chart, Section, Table

if TYPE_CHECKING:
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
    baseline = runs[0]
    if len(runs) < 2 or not baseline.sweep_rows:
        return []
    return [Compared(run, compare(baseline, run)) for run in runs[1:] if run.sweep_rows]


def ranked(compared: Sequence[Compared]) -> list[Compared]:
    """Best first: by geometric-mean ratio (those with none last), ties in run order."""
    return sorted(
        compared,
        key=lambda item: -item.geomean_ratio if math.isfinite(item.geomean_ratio) else math.inf,
    )


def compare_sections(
    baseline: str, compared: Sequence[Compared], names: dict[str, str], colors: Mapping[str, str]
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
    baseline: str, compared: Sequence[Compared], names: dict[str, str], colors: Mapping[str, str]
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
        RatioPanel(
            f"{key[0]} ({key[1]})",
            tuple(replace(by_key[key], label=label) for label, by_key in ratios if key in by_key),
        )
        for key in keys
    ]
    if png := ratio_overview_chart(
        f"every run / {baseline}: {quantity} ratio per size (> 1: faster)",
        panels,
        f"{quantity} ratio to {charts.short(baseline, 20)}",
        colored,
    ):
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
    if method := result.methodology:
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
    elif png := ratio_chart(
        f"{cand} / {base}: {result.quantity} ratio per size (> 1: {cand} is faster)",
        list(_by_key(result).values()),
        f"{result.quantity} ratio, {charts.short(cand, 20)} / {charts.short(base, 20)}",
    ):
        section.charts.append(
            Chart(f"compare_{_stem(cand)}_vs_{_stem(base)}", f"{cand} against {base}", png)
        )
    section.tables += [_band_table(result), _size_table(result)]
    if environment := [diff for diff in result.differences if diff.kind == "environment"]:
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


def _by_key(result: Comparison) -> dict[tuple[str, str], RatioSeries]:
    """The comparison's ratios per (collective, placement), each labelled by that key."""
    grouped: dict[tuple[str, str], list[Any]] = {}
    for item in result.sizes:
        grouped.setdefault((item.collective, item.placement), []).append(item)
    return {
        (collective, placement): RatioSeries(
            f"{collective} ({placement})",
            tuple(item.size_bytes for item in items),
            tuple(item.ratio for item in items),
            tuple(item.verdict in DECIDED for item in items),
        )
        for (collective, placement), items in grouped.items()
    }


def _band_table(result: Comparison) -> Table:
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


RATIO_LINEAR_SPAN = 4.0  # ratios spanning more than this (or this far from 1) get a log axis
ZOOM_SPAN_MIN = 0.02  # a zoomed ratio axis spans at least this (ratios all within 1%)


@dataclass(frozen=True)
class RatioSeries:
    """A candidate against the baseline: ratio per size (> 1 faster), and which sizes'
    difference is significant."""

    label: str
    sizes: tuple[int, ...]
    ratios: tuple[float, ...]
    significant: tuple[bool, ...]


def ratio_chart(title: str, series: Sequence[RatioSeries], ylabel: str) -> bytes | None:
    """Ratio vs size, one line per series, around a line at 1 (the baseline); filled
    markers where the difference is significant. None without a size above 0."""
    figure, axes = charts.pyplot().subplots(figsize=charts.FIGSIZE_IN)
    sizes_all: list[float] = []
    ratios_all: list[float] = []
    handles: list[Any] = []
    labels: list[str] = []
    for index, item in enumerate(series):
        drawn = _draw_ratios(axes, item, charts.COLORS[index % len(charts.COLORS)])
        if drawn is None:
            continue
        line, sizes, ratios = drawn
        sizes_all += sizes
        ratios_all += ratios
        handles.append(line)
        labels.append(charts.short(item.label))
    if not sizes_all:
        charts.pyplot().close(figure)
        return None
    baseline = axes.axhline(1.0, color=charts.MODEL_COLOR, linewidth=1, linestyle=":")
    _ratio_keys(baseline, handles, labels)
    charts.size_axis(axes, sizes_all)
    _ratio_axis(axes, ratios_all)
    axes.set_ylabel(ylabel)
    axes.set_title(title)
    charts.legend_below(axes, handles, labels)
    return charts.save_png(figure)


def _draw_ratios(
    axes: Any, item: RatioSeries, color: str | None
) -> tuple[Any, list[float], list[float]] | None:
    """One series' line, its markers filled where significant (color None: a thin grey line
    without markers); None with nothing to draw."""
    points = _points(item)
    if not points:
        return None
    sizes, ratios, significant = (list(column) for column in zip(*points, strict=True))
    if color is None:
        (line,) = axes.plot(sizes, ratios, "-", color=charts.OTHER_COLOR, linewidth=0.8, alpha=0.6)
        return line, sizes, ratios
    (line,) = axes.plot(sizes, ratios, "-", color=color, linewidth=1)
    hollow = [not flag for flag in significant]
    axes.plot(
        sizes, ratios, "o", color=color, markersize=5, markerfacecolor="none", markevery=hollow
    )
    axes.plot(sizes, ratios, "o", color=color, markersize=5, markevery=significant)
    return line, sizes, ratios


def _ratio_axis(axes: Any, ratios: Sequence[float], zoomed: bool = False) -> None:
    """Linear (from 0, or `zoomed` to the ratios) while they stay within RATIO_LINEAR_SPAN
    of each other and of 1; beyond, logarithmic (base 2, or 10 past 64x)."""
    from matplotlib.ticker import FuncFormatter

    low, high = min(1.0, *ratios), max(1.0, *ratios)
    if high / low <= RATIO_LINEAR_SPAN:
        margin = max(high - low, ZOOM_SPAN_MIN) * 0.15
        axes.set_ylim(low - margin if zoomed else 0, high + margin if zoomed else high * 1.15)
        return
    axes.set_yscale("log", base=2 if high / low <= 64 else 10)
    axes.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axes.set_ylim(low / 1.3, high * 1.3)


PANEL_HEIGHT_IN = 3.2  # one row of the overview's panels


@dataclass(frozen=True)
class RatioPanel:
    """One (collective, placement) of the overview: every candidate's ratios against the
    baseline (compare.py fills it from the comparisons)."""

    title: str
    series: tuple[RatioSeries, ...]


def ratio_overview_chart(
    title: str, panels: Sequence[RatioPanel], ylabel: str, colors: Mapping[str, str]
) -> bytes | None:
    """Many candidates against one baseline: a panel per (collective, placement), two to a
    row; the series in `colors` in that color, the others thin grey lines. The legend fills
    a spare cell, else goes below. None without a ratio to draw."""
    drawable = [panel for panel in panels if any(_points(item) for item in panel.series)]
    if not drawable:
        return None
    columns = 1 if len(drawable) == 1 else 2
    rows = -(-len(drawable) // columns)
    figure, grid = charts.pyplot().subplots(
        rows, columns, figsize=(charts.FIGSIZE_IN[0], PANEL_HEIGHT_IN * rows), squeeze=False
    )
    cells = list(grid.flat)
    legend: dict[str, Any] = {}
    for index, (axes, panel) in enumerate(zip(cells, drawable, strict=False)):
        _draw_panel(axes, panel, colors, legend)
        if index % columns == 0:
            axes.set_ylabel(ylabel, fontsize=9)
    handles = [legend[label] for label in colors if label in legend]
    labels = [charts.short(label) for label in colors if label in legend]
    if others := {item.label for panel in drawable for item in panel.series} - set(colors):
        handles.append(legend[OTHERS_KEY])
        labels.append(counted(len(others), "other run"))
    _ratio_keys(legend[BASELINE_KEY], handles, labels)
    figure.suptitle(title)
    spare = cells[len(drawable)] if len(cells) > len(drawable) else None
    if spare is not None:
        spare.axis("off")
        spare.legend(handles, labels, loc="center", fontsize=8, frameon=False)
    figure.tight_layout()
    if spare is None:  # at least three labels (the baseline's keys): as many columns as fit
        charts.legend_below(figure, handles, labels, top=0.0)
    return charts.save_png(figure)


OTHERS_KEY = "\0others"  # legend handles of the overview beyond the candidates' own
BASELINE_KEY = "\0baseline"


def _points(item: RatioSeries) -> list[tuple[int, float, bool]]:
    """A series' drawable points: size above 0 (a log axis), ratio a positive number."""
    return [
        (size, ratio, significant)
        for size, ratio, significant in zip(item.sizes, item.ratios, item.significant, strict=True)
        if size > 0 and np.isfinite(ratio) and ratio > 0
    ]


def _draw_panel(
    axes: Any, panel: RatioPanel, colors: dict[str, str], legend: dict[str, Any]
) -> None:
    """One panel of the overview: grey lines first (under), the colored ones on top."""
    sizes_all: list[float] = []
    ratios_all: list[float] = []
    for item in sorted(panel.series, key=lambda series: series.label in colors):
        if (drawn := _draw_ratios(axes, item, colors.get(item.label))) is not None:
            legend.setdefault(item.label if item.label in colors else OTHERS_KEY, drawn[0])
            sizes_all += drawn[1]
            ratios_all += drawn[2]
    legend[BASELINE_KEY] = axes.axhline(1.0, color=charts.MODEL_COLOR, linewidth=1, linestyle=":")
    charts.size_axis(axes, sizes_all)
    axes.set_xlabel("message size (bytes)", fontsize=9)
    _ratio_axis(axes, ratios_all, zoomed=True)
    axes.set_title(panel.title, fontsize=10)


def _ratio_keys(baseline: Any, handles: list[Any], labels: list[str]) -> None:
    """Legend entries for the baseline line and the two marker kinds (drawn nowhere)."""
    from matplotlib.lines import Line2D

    filled = Line2D([], [], marker="o", linestyle="none", color="#555555", markersize=5)
    hollow = Line2D(
        [], [], marker="o", linestyle="none", color="#555555", markersize=5, markerfacecolor="none"
    )
    handles += [baseline, filled, hollow]
    labels += [
        "baseline (1.0)",
        "faster or slower (beyond the noise)",
        "within the noise, or unjudged",
    ]
