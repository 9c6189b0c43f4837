"""The comparison's chart: each candidate's ratio to the baseline per size (report_compare.py
fills it from analysis.comparison). Drawn with charts.py's axes, legend and PNG helpers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from collbench.render import charts

RATIO_LINEAR_SPAN = 4.0  # ratios spanning more than this (or this far from 1) get a log axis


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
    handles.append(axes.axhline(1.0, color=charts.MODEL_COLOR, linewidth=1, linestyle=":"))
    labels.append("baseline (1.0)")
    (filled,) = axes.plot([], [], "o", color="#555555", markersize=5)
    (hollow,) = axes.plot([], [], "o", color="#555555", markersize=5, markerfacecolor="none")
    handles += [filled, hollow]
    labels += ["significant difference", "not significant, or no test (too few samples)"]
    charts.size_axis(axes, sizes_all)
    _ratio_axis(axes, ratios_all)
    axes.set_ylabel(ylabel)
    axes.set_title(title)
    charts.legend_below(axes, handles, labels)
    return charts.save_png(figure)


def _draw_ratios(
    axes: Any, item: RatioSeries, color: str
) -> tuple[Any, list[float], list[float]] | None:
    """One series' line, its markers filled where significant; None with nothing to draw
    (size 0 has no place on the log axis, a ratio that is not a positive number neither)."""
    points = [
        (size, ratio, significant)
        for size, ratio, significant in zip(item.sizes, item.ratios, item.significant, strict=True)
        if size > 0 and np.isfinite(ratio) and ratio > 0
    ]
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


def _ratio_axis(axes: Any, ratios: Sequence[float]) -> None:
    """Linear from 0 while the ratios stay within RATIO_LINEAR_SPAN of each other and of 1;
    beyond, logarithmic (base 2, or 10 past 64x), so ratios near 1 stay readable."""
    from matplotlib.ticker import FuncFormatter

    low, high = min(1.0, *ratios), max(1.0, *ratios)
    if high / low <= RATIO_LINEAR_SPAN:
        axes.set_ylim(0, high * 1.15)
        return
    axes.set_yscale("log", base=2 if high / low <= 64 else 10)
    axes.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axes.set_ylim(low / 1.3, high * 1.3)
