"""The report's charts beyond charts.py's: the comparison's ratio to the baseline per size
(report_compare.py fills it from analysis.comparison) and a tune's busbw per setting
(report_tune.py). Drawn with charts.py's axes, legend and PNG helpers."""

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
    labels += ["faster or slower (beyond the noise)", "within the noise, or unjudged"]
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


SETTINGS_LEGEND_MAX = 10  # more settings than this: the ones that win no range share one entry
RANGE_NAMES_MAX = 6  # more ranges than this (one per size): boundaries only, no names
BASELINE_COLOR = "#000000"
OTHER_COLOR = "#9a9a9a"


@dataclass(frozen=True)
class SettingCurve:
    """One tune setting's busbw per size (report_tune.py fills it from the setting's rows)."""

    label: str
    sizes: tuple[int, ...]
    busbw_gbps: tuple[float, ...]
    baseline: bool = False  # the default environment: drawn black, thick, on top
    winner: bool = False  # best in some size range: drawn solid; the others lighter


@dataclass(frozen=True)
class RangeMark:
    """A size range of the tune's choice, drawn as a boundary at its lower end."""

    name: str
    min_bytes: int


def settings_chart(
    title: str, curves: Sequence[SettingCurve], ranges: Sequence[RangeMark] = ()
) -> bytes | None:
    """busbw vs size, one line per setting: the baseline black and thick so every other line
    reads against it, settings that win a range in full color, the rest lighter (grey, in one
    legend entry, past SETTINGS_LEGEND_MAX settings). None without a size above 0."""
    drawn = [curve for curve in curves if any(size > 0 for size in curve.sizes)]
    if not drawn:
        return None
    plt = charts.pyplot()
    figure, axes = plt.subplots(figsize=charts.FIGSIZE_IN)
    crowded = len(drawn) > SETTINGS_LEGEND_MAX
    handles: list[Any] = []
    labels: list[str] = []
    others: list[Any] = []
    colored = 0
    for curve in drawn:
        grey = crowded and not (curve.baseline or curve.winner)
        color = BASELINE_COLOR if curve.baseline else OTHER_COLOR if grey else None
        if color is None:
            color = charts.COLORS[colored % len(charts.COLORS)]
            colored += 1
        line = _draw_setting(axes, curve, color)
        if grey:
            others.append(line)
            continue
        handles.append(line)
        mark = " (default)" if curve.baseline else " (best in a range)" if curve.winner else ""
        labels.append(charts.short(curve.label) + mark)
    if others:
        handles.append(others[0])
        labels.append(f"{len(others)} other settings")
    sizes = [size for curve in drawn for size in curve.sizes if size > 0]
    busbw = [value for curve in drawn for value in curve.busbw_gbps]
    charts.size_axis(axes, sizes)
    axes.set_ylim(0, max(max(busbw, default=0.0), 1e-9) * charts.HEADROOM)
    _draw_ranges(axes, ranges, min(sizes), max(sizes))
    axes.set_ylabel("bus bandwidth (GB/s)")
    axes.set_title(title)
    charts.legend_below(axes, handles, labels)
    return charts.save_png(figure)


def _draw_setting(axes: Any, curve: SettingCurve, color: str) -> Any:
    points = sorted(
        (size, value)
        for size, value in zip(curve.sizes, curve.busbw_gbps, strict=True)
        if size > 0 and np.isfinite(value)
    )
    sizes, busbw = zip(*points, strict=True) if points else ((), ())
    if curve.baseline:
        style = {"linewidth": 2.6, "marker": "s", "markersize": 5, "zorder": 5}
    elif curve.winner:
        style = {"linewidth": 1.6, "marker": "o", "markersize": 4, "zorder": 4}
    else:
        style = {"linewidth": 1.0, "marker": "o", "markersize": 3, "alpha": 0.55, "zorder": 3}
    (line,) = axes.plot(sizes, busbw, "-", color=color, **style)
    return line


def _draw_ranges(axes: Any, ranges: Sequence[RangeMark], low: float, high: float) -> None:
    """A dotted boundary at each range's lower end inside the sizes drawn, the range's
    name just right of it at the top (the first range's name at the left edge; one that
    starts at the largest size drawn has its boundary alone)."""
    from matplotlib.transforms import blended_transform_factory

    place = blended_transform_factory(axes.transData, axes.transAxes)
    named = len(ranges) <= RANGE_NAMES_MAX
    for index, item in enumerate(sorted(ranges, key=lambda mark: mark.min_bytes)):
        start = max(float(item.min_bytes), low)
        if start > high:
            continue
        if index and item.min_bytes > low:
            axes.axvline(start, color=charts.MODEL_COLOR, linewidth=0.8, linestyle=":")
        if named and start < high:  # no room right of the largest size
            axes.text(
                start,
                0.97,
                f" {item.name}",
                transform=place,
                fontsize=8,
                va="top",
                color=charts.MODEL_COLOR,
            )
