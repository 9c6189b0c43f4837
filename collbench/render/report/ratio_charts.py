"""The comparison's charts: the ratio to the baseline per size (compare.py fills it from
analysis.comparison) and the overview of many runs' ratios in one figure. Drawn with
render/charts.py's axes, legend and PNG helpers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from collbench.core.units import counted
from collbench.render import charts

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
    plt = charts.pyplot()
    figure, axes = plt.subplots(figsize=charts.FIGSIZE_IN)
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
    axes: Any, item: RatioSeries, color: str
) -> tuple[Any, list[float], list[float]] | None:
    """One series' line, its markers filled where significant; None with nothing to draw."""
    points = _points(item)
    if not points:
        return None
    sizes, ratios, significant = (list(column) for column in zip(*points, strict=True))
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
    others = {item.label for panel in drawable for item in panel.series} - set(colors)
    if others:
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
        color = colors.get(item.label)
        if color is not None:
            drawn = _draw_ratios(axes, item, color)
            if drawn is not None:
                legend.setdefault(item.label, drawn[0])
                sizes_all += drawn[1]
                ratios_all += drawn[2]
            continue
        points = _points(item)
        if points:
            sizes, ratios = [point[0] for point in points], [point[1] for point in points]
            (line,) = axes.plot(
                sizes, ratios, "-", color=charts.OTHER_COLOR, linewidth=0.8, alpha=0.6
            )
            legend.setdefault(OTHERS_KEY, line)
            sizes_all += sizes
            ratios_all += ratios
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
