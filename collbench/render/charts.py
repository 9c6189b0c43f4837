"""Charts for reports (matplotlib, Agg): each function returns one PNG as bytes."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

from collbench.analysis.fit.quality import regime_busbw_undetermined
from collbench.core.stats import median
from collbench.core.units import counted, format_number, format_size
from collbench.store.rows import ProbeRow, ResultRow

FIGSIZE_IN = (9.0, 4.5)
DPI = 110
SMALL_MAX_BYTES = 64 * 1024  # the latency chart's sizes
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2")
LABEL_MAX_CHARS = 40  # longer run labels are shortened in the middle in legends
HEADROOM = 1.3  # y range above the data, kept free for the regime labels
LEGEND_CHARS_PER_IN = 14  # legend text at 8 pt, with room to spare
# Size labels: every STEP-th power of two down from the largest is labelled (the first step
# whose labels keep LABEL_GAP_PX apart); the others keep an unlabelled tick.
LABEL_STEPS = (1, 2, 5, 10, 20)
LABEL_GAP_PX = 6
MODEL_COLOR = "#333333"
OTHER_COLOR = "#9a9a9a"  # runs of a crowded chart beyond the ones drawn in full
MODEL_CLIP = 3.0  # a model curve above this many times the measured peak runs off the chart
OUTLIER_RING = {"markersize": 10, "markerfacecolor": "none", "markeredgecolor": "#444444"}


@dataclass(frozen=True)
class Series:
    """One run's rows of one collective and placement, with its fit (a CurveFit or None).

    alpha_texts: each regime's latency as the report says it, one per regime with a fit (a
    latency below the clock's resolution is not a number); poor: the fit explains its data
    badly (flagged in the legend).
    """

    label: str
    rows: list[ResultRow]
    fit: Any = None
    alpha_texts: tuple[str, ...] = ()
    latency_us: float | None = None  # the fit's latency line (None: no fit, or no number)
    poor: bool = False


@dataclass(frozen=True)
class ModelCurve:
    """A cost model's busbw over sizes (a topology's bound or prediction), drawn dashed."""

    label: str
    sizes: tuple[float, ...]
    busbw_gbps: tuple[float, ...]
    series_index: int | None = None  # drawn in that series' color; None: one shared by several


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (no display), imported on first use."""
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


def size_axis(axes: Any, sizes: Sequence[float]) -> None:
    """A log2 size axis from the smallest to the largest size (all > 0), a tick on every
    power of two; `save_png` then labels as many as fit (`thin_size_labels`)."""
    axes.set_xscale("log", base=2)
    low, high = min(sizes), max(sizes)
    exponents = range(int(np.floor(np.log2(low))), int(np.ceil(np.log2(high))) + 1)
    axes.set_xticks([2.0**k for k in exponents], [size_label(2.0**k) for k in exponents])
    axes.set_xlabel("message size (bytes, nccl-tests convention)")
    axes.grid(True, which="major", alpha=0.3)


def thin_size_labels(axes: Any) -> bool:
    """Label every LABEL_STEPS-th power of two, the first step whose labels fit; vertical
    labels (True) only when no step leaves two labels that fit."""
    from matplotlib.ticker import NullFormatter

    renderer = axes.figure.canvas.get_renderer()
    font = axes.xaxis.get_major_ticks()[0].label1.get_fontproperties()
    ticks = [tick for tick in axes.get_xticks() if tick > 0]
    exponents = [round(np.log2(tick)) for tick in ticks]
    chosen, rotate = ticks, True
    for step in LABEL_STEPS:  # counted from the largest size, which always has its label
        labelled = [2.0**k for k in exponents if (exponents[-1] - k) % step == 0]
        if len(labelled) < 2:
            break
        chosen = labelled
        if _labels_fit(axes, labelled, renderer, font):
            rotate = False
            break
    axes.set_xticks(chosen, [size_label(tick) for tick in chosen])
    axes.set_xticks([tick for tick in ticks if tick not in chosen], minor=True)
    axes.xaxis.set_minor_formatter(NullFormatter())
    if rotate:
        axes.tick_params(axis="x", which="major", labelrotation=90)
    return rotate


def _labels_fit(axes: Any, ticks: list[float], renderer: Any, font: Any) -> bool:
    """Whether the size labels at these ticks, centred on them, keep LABEL_GAP_PX apart."""
    xs = axes.transData.transform([(tick, 1.0) for tick in ticks])[:, 0]
    widths = [
        renderer.get_text_width_height_descent(size_label(tick), font, ismath=False)[0]
        for tick in ticks
    ]
    return all(
        right_x - left_x >= (left_w + right_w) / 2 + LABEL_GAP_PX
        for left_x, right_x, left_w, right_w in zip(xs, xs[1:], widths, widths[1:], strict=False)
    )


def legend_below(
    owner: Any,
    handles: list[Any],
    labels: list[str],
    top: float = -0.17,
    columns: int | None = None,
) -> None:
    """The legend under the axes (`owner`; a figure: under its panels, `top` 0): it never
    covers data or the regime labels. As many columns as fit in the figure's width (unless
    `columns`), so every chart keeps the same width."""
    from matplotlib.legend_handler import HandlerTuple

    width_chars = FIGSIZE_IN[0] * LEGEND_CHARS_PER_IN  # 1 to 3 columns, as the labels fit
    fitting = max(1, min(3, int(width_chars // (max(map(len, labels), default=1) + 8))))
    owner.legend(
        handles,
        labels,
        loc="upper center",
        bbox_to_anchor=(0.5, top),
        ncol=columns or min(fitting, max(1, len(labels))),
        fontsize=8,
        frameon=False,
        handler_map={tuple: HandlerTuple(ndivide=None)},
    )


def save_png(figure: Any) -> bytes:
    """The figure as PNG bytes, laid out (size labels thinned to fit), then closed."""
    buffer = io.BytesIO()
    figure.tight_layout()
    # a size axis: label what fits at the final width (vertical labels need a new layout)
    rotated = [thin_size_labels(axes) for axes in figure.axes if axes.get_xscale() == "log"]
    if any(rotated):
        figure.tight_layout()
    # bbox "tight": the canvas grows to hold a legend placed outside the axes
    figure.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight", pad_inches=0.15)
    pyplot().close(figure)
    return buffer.getvalue()


def busbw_chart(
    title: str,
    series: Sequence[Series],
    models: Sequence[ModelCurve] = (),
    others: Sequence[Series] = (),
) -> bytes:
    """busbw vs size: points, fitted curves, the first fit's regimes, outliers, dashed model
    curves; `others` (a crowded overlay's remaining runs) as grey points only."""
    figure, axes = pyplot().subplots(figsize=FIGSIZE_IN)
    handles: list[Any] = []
    labels: list[str] = []
    sizes_all, busbw_all = _draw_measured(axes, series, handles, labels)
    sizes, values = draw_others(axes, others, "busbw_gbps", handles, labels)
    sizes_all += sizes
    busbw_all += values
    top = _draw_models(axes, models, max(busbw_all, default=0.0), handles, labels)
    if not sizes_all:  # no measured size above 0: the models' sizes make the axis
        sizes_all = [size for model in models for size in model.sizes]
    if sizes_all:
        size_axis(axes, sizes_all)
        axes.set_ylim(0, max(top, 1e-9) * HEADROOM)
    regimes_of = next((index for index, item in enumerate(series) if item.fit is not None), None)
    if regimes_of is not None:
        item = series[regimes_of]
        color = COLORS[regimes_of % len(COLORS)]
        handles.append(_draw_regimes(axes, item.fit, color, item.alpha_texts))
        labels.append(f"regimes of {short(item.label)}")
    if any(item.fit is not None and item.fit.outliers for item in series):
        (ring,) = axes.plot([], [], "o", **OUTLIER_RING)
        handles.append(ring)
        labels.append("outlier (left out of the fit)")
    axes.set_ylabel("bus bandwidth (GB/s)")
    axes.set_title(title)
    legend_below(axes, handles, labels)
    return save_png(figure)


def draw_others(
    axes: Any,
    others: Sequence[Series],
    column: str,
    handles: list[Any],
    labels: list[str],
    max_bytes: float = float("inf"),
) -> tuple[list[float], list[float]]:
    """The runs a crowded chart does not draw in full, as small grey points (their rows'
    `column`, sizes above 0 up to max_bytes); the sizes and values drawn."""
    drawn = [
        (row.size_bytes, getattr(row, column))
        for item in others
        for row in item.rows
        if 0 < row.size_bytes <= max_bytes
    ]
    if not drawn:
        return [], []
    sizes, values = zip(*drawn, strict=True)
    (marks,) = axes.plot(sizes, values, "o", color=OTHER_COLOR, markersize=2.5, alpha=0.6, zorder=1)
    handles.append(marks)
    labels.append(f"{counted(len(others), 'other run')} (points only)")
    return list(sizes), list(values)


def _draw_measured(
    axes: Any, series: Sequence[Series], handles: list[Any], labels: list[str]
) -> tuple[list[float], list[float]]:
    """Each series' points and fitted curve, a legend entry each; the sizes and busbw drawn."""
    sizes_all: list[float] = []
    busbw_all: list[float] = []
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
        handles.append((marks, _draw_fit(axes, item.fit, color)))
        poor = " (POOR FIT)" if item.poor else ""
        peak = f"{number(item.fit.busbw_peak_gbps)} GB/s"
        if not item.fit.quality.peak_determined:  # analysis/fit/quality.py: never a figure
            peak = "not determined"
        labels.append(f"{short(item.label)}: fit peak {peak}{poor}")
    return sizes_all, busbw_all


def _draw_models(
    axes: Any, models: Sequence[ModelCurve], top: float, handles: list[Any], labels: list[str]
) -> float:
    """The model curves, dashed; the chart's new top (one above MODEL_CLIP x the data is not
    counted: it runs off the chart, and its legend says so)."""
    measured_top = top
    for model in models:
        index = model.series_index
        color = MODEL_COLOR if index is None else COLORS[index % len(COLORS)]
        (line,) = axes.plot(model.sizes, model.busbw_gbps, "--", color=color, linewidth=1.3)
        handles.append(line)
        peak = max(model.busbw_gbps)
        shown = peak <= MODEL_CLIP * measured_top or measured_top == 0
        labels.append(model.label + ("" if shown else " (above the chart)"))
        top = max(top, peak) if shown else top
    return top


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
        axes.plot([outlier.size_bytes], [outlier.busbw_gbps], "o", **OUTLIER_RING)
    return line


def _draw_regimes(axes: Any, fit: Any, color: str, alpha_texts: Sequence[str]) -> Any:
    """Dotted boundaries and, at the top of the axes, each regime's busbw and latency
    (`alpha_texts[k]` for regime k)."""
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
        if not fit.latency_bound(regime) and regime_busbw_undetermined(fit, index) is not None:
            busbw = "busbw not determined"
        axes.text(
            middle,
            0.97 - (0.11 if stagger and index % 2 else 0.0),
            f"{busbw}\n\u03b1 {alpha_texts[index]}",
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


def latency_chart(
    title: str, series: Sequence[Series], others: Sequence[Series] = ()
) -> bytes | None:
    """Time vs size at small sizes with each fit's latency line (none below the clock's
    resolution); size 0's time goes in the legend (a log axis has no 0). None without
    small sizes."""
    figure, axes = pyplot().subplots(figsize=FIGSIZE_IN)
    sizes_all: list[float] = []
    handles: list[Any] = []
    labels: list[str] = []
    for index, item in enumerate(series):
        color = COLORS[index % len(COLORS)]
        small = [row for row in item.rows if row.size_bytes <= SMALL_MAX_BYTES]
        points = sorted((row.size_bytes, row.time_us) for row in small if row.size_bytes > 0)
        if not points:
            continue
        sizes, times = zip(*points, strict=True)
        sizes_all += sizes
        (measured,) = axes.plot(sizes, times, "o-", color=color, markersize=4, linewidth=1)
        zero_us = zero_size_time_us(item.rows)  # size 0 in the legend: a log axis has no 0
        label = short(item.label)
        label += "" if zero_us is None else f" (0 B: {number(zero_us)} us, not on the log axis)"
        if item.latency_us is None:
            handles.append(measured)
        else:  # the fit's latency, where it is a number
            line = axes.axhline(item.latency_us, color=color, linestyle="--", linewidth=1)
            handles.append((measured, line))
        if item.fit is not None:
            label += f": fitted latency {item.alpha_texts[0]}"
        labels.append(label)
    sizes_all += draw_others(axes, others, "time_us", handles, labels, SMALL_MAX_BYTES)[0]
    if not sizes_all:
        pyplot().close(figure)
        return None
    size_axis(axes, sizes_all)
    axes.set_ylabel("time per operation (us)")
    axes.set_ylim(bottom=0)
    axes.set_title(title)
    legend_below(axes, handles, labels)
    return save_png(figure)


def zero_size_time_us(rows: Sequence[ResultRow]) -> float | None:
    """The median time of the rows of size 0 (None without one): a log axis cannot show it."""
    return median([row.time_us for row in rows if row.size_bytes == 0 and row.time_us])


def group_by_ratio(rows: Sequence[ProbeRow]) -> dict[float | None, list[ProbeRow]]:
    """Probe rows by requested compute ratio (None: fixed compute last), sizes ascending."""
    groups: dict[float | None, list[ProbeRow]] = {}
    for row in sorted(rows, key=lambda r: r.size_bytes):
        groups.setdefault(row.compute_ratio, []).append(row)
    return dict(sorted(groups.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)))


def overlap_chart(title: str, rows: Sequence[ProbeRow]) -> bytes:
    """Overlap % (left) and the two slowdowns (right) vs size, one color per ratio."""
    figure, (left, right) = pyplot().subplots(1, 2, figsize=(FIGSIZE_IN[0] * 1.2, FIGSIZE_IN[1]))
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
        size_axis(axes, sizes)
    left.set_ylim(-5, 105)
    left.set_ylabel("communication hidden (%)")
    left.set_title("overlap (100: the collective is hidden)", fontsize=10)
    right.axhline(0, color="#444444", linewidth=0.8)
    right.set_ylabel("slowdown beside the other (%)")
    right.set_title("what each costs the other", fontsize=10)
    figure.suptitle(title)
    figure.tight_layout()
    legend_below(figure, handles, labels, top=0.0, columns=min(len(labels), 3))
    return save_png(figure)


def _pct(value: float | None) -> float:
    return 100 * value if value is not None else np.nan


def overlap_times_chart(title: str, rows: Sequence[ProbeRow]) -> bytes:
    """t_comm, t_comp and t_both per size, bars, for one ratio's rows."""
    figure, axes = pyplot().subplots(figsize=FIGSIZE_IN)
    timed = [row for row in rows if None not in (row.t_comm_us, row.t_comp_us, row.t_both_us)]
    rows = sorted(timed, key=lambda row: row.size_bytes)  # a damaged row's missing times: not drawn
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
    return save_png(figure)
