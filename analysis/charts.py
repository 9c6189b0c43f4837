"""Charts for reports (matplotlib, Agg): each function returns one PNG as bytes."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from collbench.spec import format_size

FIGSIZE_IN = (9.0, 4.5)
DPI = 110
SMALL_MAX_BYTES = 64 * 1024  # the latency chart's sizes
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2")


@dataclass(frozen=True)
class Series:
    """One run's rows of one collective and placement, with its fit (a CurveFit or None)."""

    label: str
    rows: list[dict[str, Any]]
    fit: Any = None


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def size_label(num_bytes: float) -> str:
    """Tick label: 8, 4K, 1.5M (powers of 1024, as nccl-tests sizes)."""
    return format_size(num_bytes, compact=True)


def _size_axis(axes: Any, sizes: Sequence[float]) -> None:
    axes.set_xscale("log", base=2)
    low, high = min(sizes), max(sizes)
    ticks = [2.0**k for k in range(int(np.floor(np.log2(low))), int(np.ceil(np.log2(high))) + 1)]
    step = max(1, len(ticks) // 12)  # at most ~12 labels
    axes.set_xticks(ticks[::step])
    axes.set_xticklabels([size_label(t) for t in ticks[::step]])
    axes.set_xlabel("message size (bytes, nccl-tests convention)")
    axes.grid(True, which="major", alpha=0.3)


def _png(figure: Any) -> bytes:
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png", dpi=DPI)
    _pyplot().close(figure)
    return buffer.getvalue()


def busbw_chart(title: str, series: Sequence[Series]) -> bytes:
    """busbw vs size: measured points, fitted curve, regime boundaries and outliers."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=FIGSIZE_IN)
    sizes_all = []
    for index, item in enumerate(series):
        color = COLORS[index % len(COLORS)]
        points = sorted((row["size_bytes"], row["busbw_gbps"]) for row in item.rows
                        if row["size_bytes"] > 0)
        if not points:
            continue
        sizes, busbw = zip(*points, strict=True)
        sizes_all += sizes
        axes.plot(sizes, busbw, "o", color=color, markersize=4, label=f"{item.label} measured")
        if item.fit is not None:
            _draw_fit(axes, item.fit, color, item.label, regimes=index == 0)
    if sizes_all:
        _size_axis(axes, sizes_all)
    axes.set_ylabel("bus bandwidth (GB/s)")
    axes.set_title(title)
    axes.legend(loc="upper left", fontsize=8)
    return _png(figure)


def _draw_fit(axes: Any, fit: Any, color: str, label: str, regimes: bool) -> None:
    low, high = fit.regimes[0].min_bytes, fit.regimes[-1].max_bytes
    grid = np.geomspace(low, high, 200)
    axes.plot(grid, [fit.predict_busbw_gbps(size) for size in grid], "-", color=color,
              linewidth=1.4, alpha=0.8, label=f"{label} fit (peak {fit.busbw_peak_gbps:.3g})")
    for outlier in fit.outliers:
        axes.plot([outlier.size_bytes], [outlier.busbw_gbps], "o", markersize=11,
                  markerfacecolor="none", markeredgecolor="#444444")
    if not regimes:
        return
    top = axes.get_ylim()[1]
    for boundary in fit.breakpoints:
        axes.axvline(boundary, color="#888888", linestyle=":", linewidth=1)
    for regime in fit.regimes:
        middle = float(np.sqrt(max(regime.min_bytes, 1) * regime.max_bytes))
        busbw = "latency" if fit.latency_bound(regime) else f"{regime.busbw_gbps:.3g} GB/s"
        axes.text(middle, top * 0.97, f"{busbw}\nα {regime.alpha_us:.3g} us",
                  ha="center", va="top", fontsize=7, color="#555555")


def latency_chart(title: str, series: Sequence[Series]) -> bytes | None:
    """Time vs size at small sizes, with each fit's latency alpha; None without small sizes."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=FIGSIZE_IN)
    sizes_all = []
    for index, item in enumerate(series):
        color = COLORS[index % len(COLORS)]
        points = sorted((max(row["size_bytes"], 1), row["time_us"]) for row in item.rows
                        if row["size_bytes"] <= SMALL_MAX_BYTES)
        if not points:
            continue
        sizes, times = zip(*points, strict=True)
        sizes_all += sizes
        axes.plot(sizes, times, "o-", color=color, markersize=4, linewidth=1,
                  label=f"{item.label}")
        if item.fit is not None:
            axes.axhline(item.fit.alpha_us, color=color, linestyle="--", linewidth=1,
                         label=f"{item.label} fitted latency {item.fit.alpha_us:.3g} us")
    if not sizes_all:
        _pyplot().close(figure)
        return None
    _size_axis(axes, sizes_all)
    axes.set_ylabel("time per operation (us)")
    axes.set_ylim(bottom=0)
    axes.set_title(title)
    axes.legend(loc="upper left", fontsize=8)
    return _png(figure)


def _by_ratio(rows: Sequence[dict[str, Any]]) -> dict[Any, list[dict[str, Any]]]:
    groups: dict[Any, list[dict[str, Any]]] = {}
    for row in sorted(rows, key=lambda r: r["size_bytes"]):
        groups.setdefault(row["compute_ratio"], []).append(row)
    return dict(sorted(groups.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)))


def overlap_chart(title: str, rows: Sequence[dict[str, Any]]) -> bytes:
    """Overlap % (left) and the two slowdowns (right) vs size, one line per ratio."""
    plt = _pyplot()
    figure, (left, right) = plt.subplots(1, 2, figsize=(FIGSIZE_IN[0] * 1.2, FIGSIZE_IN[1]))
    sizes = [max(row["size_bytes"], 1) for row in rows]
    for index, (ratio, group) in enumerate(_by_ratio(rows).items()):
        color = COLORS[index % len(COLORS)]
        label = f"ratio {ratio:g}" if ratio is not None else "fixed compute"
        x = [max(row["size_bytes"], 1) for row in group]
        left.plot(x, [row["overlap_pct"] for row in group], "o-", color=color, label=label)
        right.plot(x, [100 * row["compute_slowdown"] for row in group], "o-", color=color,
                   label=f"{label}: compute")
        comm = [100 * row["comm_slowdown"] if row["comm_slowdown"] is not None else np.nan
                for row in group]
        right.plot(x, comm, "s--", color=color, label=f"{label}: collective")
    for axes in (left, right):
        _size_axis(axes, sizes)
        axes.legend(fontsize=7)
    left.set_ylim(-5, 105)
    left.set_ylabel("communication hidden behind compute (%)")
    right.axhline(0, color="#444444", linewidth=0.8)
    right.set_ylabel("slowdown beside the other (%)")
    figure.suptitle(title)
    return _png(figure)


def overlap_times_chart(title: str, rows: Sequence[dict[str, Any]]) -> bytes:
    """t_comm, t_comp and t_both per size, bars, for one ratio's rows."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=FIGSIZE_IN)
    rows = sorted(rows, key=lambda row: row["size_bytes"])
    x = np.arange(len(rows))
    width = 0.27
    for offset, (name, label, color) in enumerate((
            ("t_comm_us", "collective alone", COLORS[0]),
            ("t_comp_us", "compute alone", COLORS[2]),
            ("t_both_us", "together", COLORS[1]))):
        axes.bar(x + (offset - 1) * width, [row[name] / 1e3 for row in rows], width,
                 label=label, color=color)
    axes.set_xticks(x)
    axes.set_xticklabels([size_label(row["size_bytes"]) for row in rows])
    axes.set_xlabel("message size (bytes)")
    axes.set_ylabel("time (ms)")
    axes.set_title(title)
    axes.legend(fontsize=8)
    axes.grid(True, axis="y", alpha=0.3)
    return _png(figure)
