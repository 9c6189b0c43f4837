"""Charts for reports (matplotlib, Agg): each function returns one PNG as bytes."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

from collbench.core.units import format_number, format_size
from collbench.store.rows import ProbeRow, ResultRow

FIGSIZE_IN = (9.0, 4.5)
DPI = 110
SMALL_MAX_BYTES = 64 * 1024  # the latency chart's sizes
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2")
LABEL_MAX_CHARS = 40  # longer run labels are shortened in the middle in legends
HEADROOM = 1.3  # y range above the data, kept free for the regime labels
LEGEND_CHARS_PER_IN = 14  # legend text at 8 pt, with room to spare


@dataclass(frozen=True)
class Series:
    """One run's rows of one collective and placement, with its fit (a CurveFit or None)."""

    label: str
    rows: list[ResultRow]
    fit: Any = None


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def size_label(num_bytes: float) -> str:
    """Tick label: 8, 4K, 1.5M (powers of 1024, as nccl-tests sizes)."""
    return format_size(num_bytes, compact=True)


def number(value: float) -> str:
    """3 significant digits without an exponent for ordinary values: 2049, 123, 0.00295."""
    return format_number(value, 3)


def short(label: str, limit: int = LABEL_MAX_CHARS) -> str:
    """A legend label cut in the middle: long run directory names stay recognisable."""
    if len(label) <= limit:
        return label
    keep = (limit - 1) // 2
    return label[:keep] + "\u2026" + label[-(limit - 1 - keep) :]


def _size_axis(axes: Any, sizes: Sequence[float]) -> None:
    axes.set_xscale("log", base=2)
    low, high = min(sizes), max(sizes)
    ticks = [2.0**k for k in range(int(np.floor(np.log2(low))), int(np.ceil(np.log2(high))) + 1)]
    step = max(1, len(ticks) // 12)  # at most ~12 labels
    axes.set_xticks(ticks[::step])
    axes.set_xticklabels([size_label(t) for t in ticks[::step]])
    axes.set_xlabel("message size (bytes, nccl-tests convention)")
    axes.grid(True, which="major", alpha=0.3)


def _legend_below(axes: Any, handles: list[Any], labels: list[str]) -> None:
    """The legend under the axes: it never covers data or the regime labels. As many
    columns as fit in the figure's width, so every chart keeps the same width."""
    from matplotlib.legend_handler import HandlerTuple

    width_chars = FIGSIZE_IN[0] * LEGEND_CHARS_PER_IN
    columns = int(width_chars // (max(map(len, labels), default=1) + 8))
    axes.legend(
        handles,
        labels,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.17),
        ncol=max(1, min(columns, 3, len(labels))),
        fontsize=8,
        frameon=False,
        handler_map={tuple: HandlerTuple(ndivide=None)},
    )


def _png(figure: Any) -> bytes:
    buffer = io.BytesIO()
    figure.tight_layout()
    # bbox "tight": the canvas grows to hold a legend placed outside the axes
    figure.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight", pad_inches=0.15)
    _pyplot().close(figure)
    return buffer.getvalue()


def busbw_chart(title: str, series: Sequence[Series]) -> bytes:
    """busbw vs size: measured points, fitted curve, regime boundaries and outliers.

    Regimes are drawn for the first series with a fit (in its color); one legend entry per
    run (points and fitted line together).
    """
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=FIGSIZE_IN)
    sizes_all: list[float] = []
    busbw_all: list[float] = []
    handles: list[Any] = []
    labels: list[str] = []
    regimes_of = next((index for index, item in enumerate(series) if item.fit is not None), None)
    for index, item in enumerate(series):
        color = COLORS[index % len(COLORS)]
        points = sorted((row.size_bytes, row.busbw_gbps) for row in item.rows if row.size_bytes > 0)
        if not points:
            continue
        sizes, busbw = zip(*points, strict=True)
        sizes_all += sizes
        busbw_all += busbw
        (marks,) = axes.plot(sizes, busbw, "o", color=color, markersize=4)
        if item.fit is None:
            handles.append(marks)
            labels.append(f"{short(item.label)} (no fit)")
            continue
        line = _draw_fit(axes, item.fit, color)
        handles.append((marks, line))
        labels.append(f"{short(item.label)}: fit peak {number(item.fit.busbw_peak_gbps)} GB/s")
    if sizes_all:
        _size_axis(axes, sizes_all)
        axes.set_ylim(0, max(max(busbw_all), 1e-9) * HEADROOM)
    if regimes_of is not None:
        item = series[regimes_of]
        handles.append(_draw_regimes(axes, item.fit, COLORS[regimes_of % len(COLORS)]))
        labels.append(f"regimes of {short(item.label)}")
    if any(item.fit is not None and item.fit.outliers for item in series):
        (ring,) = axes.plot(
            [], [], "o", markersize=10, markerfacecolor="none", markeredgecolor="#444444"
        )
        handles.append(ring)
        labels.append("outlier (left out of the fit)")
    axes.set_ylabel("bus bandwidth (GB/s)")
    axes.set_title(title)
    _legend_below(axes, handles, labels)
    return _png(figure)


def _draw_fit(axes: Any, fit: Any, color: str) -> Any:
    """Each regime's fitted curve over the sizes it predicts (a jump shows as a gap)."""
    edges = (fit.regimes[0].min_bytes, *fit.breakpoints, fit.regimes[-1].max_bytes)
    line = None
    for low, high in pairwise(edges):
        grid = np.geomspace(low, max(high - 1, low), 60)
        (line,) = axes.plot(
            grid,
            [fit.predict_busbw_gbps(size) for size in grid],
            "-",
            color=color,
            linewidth=1.4,
            alpha=0.85,
        )
    for outlier in fit.outliers:
        axes.plot(
            [outlier.size_bytes],
            [outlier.busbw_gbps],
            "o",
            markersize=10,
            markerfacecolor="none",
            markeredgecolor="#444444",
        )
    return line


def _draw_regimes(axes: Any, fit: Any, color: str) -> Any:
    """Dotted boundaries and, at the top of the axes, each regime's busbw and latency."""
    from matplotlib.transforms import blended_transform_factory

    on_top = blended_transform_factory(axes.transData, axes.transAxes)
    boundary = None
    for size in fit.breakpoints:
        boundary = axes.axvline(size, color=color, linestyle=":", linewidth=1.2, alpha=0.8)
    low, high = (np.log2(limit) for limit in axes.get_xlim())
    widths = [np.log2(regime.max_bytes / max(regime.min_bytes, 1)) + 1 for regime in fit.regimes]
    stagger = min(widths) < (high - low) / 7  # narrow regimes: labels on two rows
    for index, regime in enumerate(fit.regimes):
        middle = float(np.sqrt(max(regime.min_bytes, 1) * regime.max_bytes))
        busbw = (
            "latency-bound" if fit.latency_bound(regime) else f"{number(regime.busbw_gbps)} GB/s"
        )
        axes.text(
            middle,
            0.97 - (0.11 if stagger and index % 2 else 0.0),
            f"{busbw}\n\u03b1 {number(regime.alpha_us)} us",
            transform=on_top,
            ha="center",
            va="top",
            fontsize=7,
            color=color,
            bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1},
        )
    if boundary is None:  # one regime: a legend handle all the same
        (boundary,) = axes.plot([], [], ":", color=color, linewidth=1.2)
    return boundary


def latency_chart(title: str, series: Sequence[Series]) -> bytes | None:
    """Time vs size at small sizes, with each fit's latency alpha; None without small sizes."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=FIGSIZE_IN)
    sizes_all: list[float] = []
    handles: list[Any] = []
    labels: list[str] = []
    for index, item in enumerate(series):
        color = COLORS[index % len(COLORS)]
        points = sorted(
            (max(row.size_bytes, 1), row.time_us)
            for row in item.rows
            if row.size_bytes <= SMALL_MAX_BYTES
        )
        if not points:
            continue
        sizes, times = zip(*points, strict=True)
        sizes_all += sizes
        (measured,) = axes.plot(sizes, times, "o-", color=color, markersize=4, linewidth=1)
        if item.fit is None:
            handles.append(measured)
            labels.append(short(item.label))
            continue
        alpha = axes.axhline(item.fit.alpha_us, color=color, linestyle="--", linewidth=1)
        handles.append((measured, alpha))
        labels.append(f"{short(item.label)}: fitted latency {number(item.fit.alpha_us)} us")
    if not sizes_all:
        _pyplot().close(figure)
        return None
    _size_axis(axes, sizes_all)
    axes.set_ylabel("time per operation (us)")
    axes.set_ylim(bottom=0)
    axes.set_title(title)
    _legend_below(axes, handles, labels)
    return _png(figure)


def group_by_ratio(rows: Sequence[ProbeRow]) -> dict[float | None, list[ProbeRow]]:
    """Probe rows by requested compute ratio (None: fixed compute last), sizes ascending."""
    groups: dict[float | None, list[ProbeRow]] = {}
    for row in sorted(rows, key=lambda r: r.size_bytes):
        groups.setdefault(row.compute_ratio, []).append(row)
    return dict(sorted(groups.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)))


def overlap_chart(title: str, rows: Sequence[ProbeRow]) -> bytes:
    """Overlap % (left) and the two slowdowns (right) vs size, one color per ratio."""
    plt = _pyplot()
    figure, (left, right) = plt.subplots(1, 2, figsize=(FIGSIZE_IN[0] * 1.2, FIGSIZE_IN[1]))
    sizes = [max(row.size_bytes, 1) for row in rows]
    handles: list[Any] = []
    labels: list[str] = []
    for index, (ratio, group) in enumerate(group_by_ratio(rows).items()):
        color = COLORS[index % len(COLORS)]
        x = [max(row.size_bytes, 1) for row in group]
        (line,) = left.plot(x, [row.overlap_pct for row in group], "o-", color=color)
        right.plot(x, [_pct(row.compute_slowdown) for row in group], "o-", color=color)
        right.plot(x, [_pct(row.comm_slowdown) for row in group], "s--", color=color)
        handles.append(line)
        labels.append(
            f"compute {ratio:g}x the collective" if ratio is not None else "fixed compute"
        )
    for style, label in (("o-", "slowdown of the compute"), ("s--", "slowdown of the collective")):
        (line,) = right.plot([], [], style, color="#555555")
        handles.append(line)
        labels.append(label)
    for axes in (left, right):
        _size_axis(axes, sizes)
    left.set_ylim(-5, 105)
    left.set_ylabel("communication hidden (%)")
    left.set_title("overlap (100: the collective is hidden)", fontsize=10)
    right.axhline(0, color="#444444", linewidth=0.8)
    right.set_ylabel("slowdown beside the other (%)")
    right.set_title("what each costs the other", fontsize=10)
    figure.suptitle(title)
    figure.tight_layout()
    figure.legend(
        handles,
        labels,
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        ncol=min(len(labels), 3),
        fontsize=8,
        frameon=False,
    )
    return _png(figure)


def _pct(value: float | None) -> float:
    return 100 * value if value is not None else np.nan


def overlap_times_chart(title: str, rows: Sequence[ProbeRow]) -> bytes:
    """t_comm, t_comp and t_both per size, bars, for one ratio's rows."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=FIGSIZE_IN)
    rows = sorted(rows, key=lambda row: row.size_bytes)
    x = np.arange(len(rows))
    width = 0.27
    for offset, (column, label, color) in enumerate(
        (
            ("t_comm_us", "collective alone", COLORS[0]),
            ("t_comp_us", "compute alone", COLORS[2]),
            ("t_both_us", "together", COLORS[1]),
        )
    ):
        axes.bar(
            x + (offset - 1) * width,
            [getattr(row, column) / 1e3 for row in rows],
            width,
            label=label,
            color=color,
        )
    axes.set_xticks(x)
    axes.set_xticklabels([size_label(row.size_bytes) for row in rows])
    axes.set_xlabel("message size (bytes)")
    axes.set_ylabel("time (ms)")
    axes.set_title(title)
    axes.legend(fontsize=8)
    axes.grid(True, axis="y", alpha=0.3)
    return _png(figure)
