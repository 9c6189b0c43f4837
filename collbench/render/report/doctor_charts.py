"""The report's Doctor charts: the node x node pair matrix as a heat map (in blocks of hosts
for a large fleet, each block's slowest pair its color) and per-node bars (a dot per node
above LABEL_MAX_HOSTS). collbench.render.report.doctor_section builds the section around them."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np

from collbench.core.stats import median
from collbench.render import charts
from collbench.render.doctor_text import gbps

ANNOTATE_MAX_HOSTS = 16  # larger matrices: colors only, no figure in each cell
# Larger matrices are drawn in blocks of hosts (each block's slowest pair): a cell per pixel
# at most, whatever the fleet's size.
HEATMAP_MAX_CELLS = 512
LABEL_MAX_HOSTS = 64  # larger matrices: no host names on the axes (the table names them)
SLOW_COLOR = "#d62728"
# A heat map cell's text is black where the color is light (this share of the scale's top,
# RdYlGn's middle), white on the dark red and green ends.
DARK_CELLS = (0.2, 0.8)
# Host names along an axis: the first of these angles at which neighbouring names clear each
# other (parallel names do where their spacing x sin(angle) exceeds a line's height), else
# upright in a font shrunk to fit, down to MIN_NAME_FONT_PT.
NAME_ANGLES_DEG = (30.0, 45.0, 90.0)
NAME_FONT_PT = 9.0
MIN_NAME_FONT_PT = 5.0
LINE_HEIGHT = 1.3  # a name's height, in font sizes
# The share of the spacing measured before the names are set that is counted on: the final
# layout gives some room back to the names themselves, a colorbar or a legend.
LAYOUT_MARGIN = 0.85


def heatmap_chart(
    title: str,
    hosts: Sequence[str],
    matrix: Sequence[Sequence[float | None]],
    slow_hosts: Collection[str] = frozenset(),
    slow_links: Collection[frozenset[str]] = frozenset(),
) -> bytes | None:
    """The pair matrix as a heat map (red: slow, grey: not measured), flagged links outlined,
    flagged hosts in red; None without a measured pair."""
    values = np.asarray(matrix, dtype=float)  # None: NaN, not measured
    if values.size == 0 or not np.isfinite(values).any():
        return None
    if len(hosts) > HEATMAP_MAX_CELLS:
        return _block_heatmap(title, values, slow_hosts)
    return charts.save_png(heatmap_figure(title, hosts, values, slow_hosts, slow_links))


def heatmap_figure(
    title: str,
    hosts: Sequence[str],
    values: np.ndarray,
    slow_hosts: Collection[str] = frozenset(),
    slow_links: Collection[frozenset[str]] = frozenset(),
) -> Any:
    """heatmap_chart's figure drawn cell by cell, not yet laid out."""
    plt = charts.pyplot()
    side_in = min(12.0, 3.0 + 0.55 * len(hosts))
    figure, axes = plt.subplots(figsize=(side_in + 1.5, side_in))
    colormap = plt.get_cmap("RdYlGn").with_extremes(bad="#e0e0e0")
    image = axes.imshow(
        np.ma.masked_invalid(values), cmap=colormap, vmin=0.0, vmax=float(np.nanmax(values))
    )
    figure.colorbar(image, ax=axes, label="pair busbw (GB/s)", shrink=0.8)
    axes.set_title(title)
    _host_names(figure, axes, hosts, slow_hosts, both_axes=True)
    _annotate(axes, values, hosts, slow_links)
    return figure


def _host_names(
    figure: Any, axes: Any, hosts: Sequence[str], slow_hosts: Collection[str], both_axes: bool
) -> None:
    """Host names under the x axis (and along y: `both_axes`), flagged ones in bold red, at
    the angle and size that keep neighbours apart; none past LABEL_MAX_HOSTS."""
    axis_list = [axes.xaxis, axes.yaxis] if both_axes else [axes.xaxis]
    if len(hosts) > LABEL_MAX_HOSTS:
        for axis in axis_list:
            axis.set_ticks([])
        return
    figure.tight_layout()  # the spacing the names get: measured, not guessed
    left, right = axes.transData.transform([(0.0, 0.0), (1.0, 0.0)])[:, 0]
    spacing_pt = abs(right - left) * 72.0 / figure.dpi * LAYOUT_MARGIN
    angle, font_pt = name_style(spacing_pt)
    labels = [charts.short(host, 24) for host in hosts]
    axes.xaxis.set_ticks(range(len(hosts)), labels, fontsize=font_pt, rotation=angle)
    for tick in axes.xaxis.get_ticklabels():  # each name ends at its tick
        tick.set(ha="right", va="center" if angle >= 90 else "top", rotation_mode="anchor")
    if both_axes:  # upright rows of names: they clear each other where a line fits between
        axes.yaxis.set_ticks(range(len(hosts)), labels, fontsize=name_style(spacing_pt, (90.0,))[1])
    for axis in axis_list:
        for host, tick in zip(hosts, axis.get_ticklabels(), strict=True):
            if host in slow_hosts:
                tick.set(color=SLOW_COLOR, fontweight="bold")


def name_style(spacing_pt: float, angles: Sequence[float] = NAME_ANGLES_DEG) -> tuple[float, float]:
    """(angle, font size in points) for names `spacing_pt` apart: see NAME_ANGLES_DEG."""
    clear_pt = 0.0
    for angle in angles:
        clear_pt = spacing_pt * math.sin(math.radians(angle))
        if clear_pt >= LINE_HEIGHT * NAME_FONT_PT:
            return angle, NAME_FONT_PT
    return angles[-1], max(MIN_NAME_FONT_PT, clear_pt / LINE_HEIGHT)


def _annotate(
    axes: Any, values: np.ndarray, hosts: Sequence[str], slow_links: Collection[frozenset[str]]
) -> None:
    """Each measured cell's GB/s (small matrices), and a box around each flagged link."""
    from matplotlib.patches import Rectangle

    size = len(hosts)
    if size <= ANNOTATE_MAX_HOSTS:
        top = float(np.nanmax(values)) or 1.0
        for row, column in zip(*np.nonzero(np.isfinite(values)), strict=True):
            value = float(values[row, column])
            # RdYlGn is dark at both ends (red near 0, green near the top): white text there
            color = "black" if DARK_CELLS[0] <= value / top <= DARK_CELLS[1] else "white"
            axes.text(column, row, gbps(value), ha="center", va="center", fontsize=8, color=color)
    index = {host: position for position, host in enumerate(hosts)}
    for link in slow_links:
        ends = [index[host] for host in link if host in index]
        if len(ends) != 2:
            continue
        for row, column in (ends, ends[::-1]):
            box = Rectangle(
                (column - 0.5, row - 0.5), 1, 1, fill=False, edgecolor="black", linewidth=2.5
            )
            axes.add_patch(box)


def _block_heatmap(title: str, values: np.ndarray, slow_hosts: Collection[str]) -> bytes:
    """A large matrix in blocks of hosts, each block's slowest pair its color: a slow node
    stays a red line, a slow link a red dot, at any fleet size."""
    block = math.ceil(len(values) / HEATMAP_MAX_CELLS)
    side = math.ceil(len(values) / block)
    padded = np.full((side * block, side * block), np.nan)
    padded[: len(values), : len(values)] = values
    blocks = padded.reshape(side, block, side, block)
    lowest = np.fmin.reduce(np.fmin.reduce(blocks, axis=3), axis=1)  # NaN only if none
    plt = charts.pyplot()
    figure, axes = plt.subplots(figsize=(13.5, 12.0))
    colormap = plt.get_cmap("RdYlGn").with_extremes(bad="#e0e0e0")
    image = axes.imshow(
        np.ma.masked_invalid(lowest), cmap=colormap, vmin=0.0, vmax=float(np.nanmax(values))
    )
    figure.colorbar(image, ax=axes, label="slowest pair busbw in the block (GB/s)", shrink=0.8)
    axes.set_xlabel(f"host index / {block}")
    axes.set_ylabel(f"host index / {block}")
    flagged_note = f"; {len(slow_hosts)} flagged node(s)" if slow_hosts else ""
    axes.set_title(f"{title}\n{len(values)} nodes in blocks of {block}{flagged_note}")
    return charts.save_png(figure)


def node_bars_chart(
    title: str,
    hosts: Sequence[str],
    panels: Sequence[tuple[str, Mapping[str, float | None], float | None]],
    slow_hosts: Collection[str] = frozenset(),
) -> bytes | None:
    """One bar panel per (label, busbw per host, expected GB/s or None) with a figure: a bar
    per host (flagged ones red), the fleet median dashed; None when no panel has a figure."""
    figure = node_bars_figure(title, hosts, panels, slow_hosts)
    return None if figure is None else charts.save_png(figure)


def node_bars_figure(
    title: str,
    hosts: Sequence[str],
    panels: Sequence[tuple[str, Mapping[str, float | None], float | None]],
    slow_hosts: Collection[str] = frozenset(),
) -> Any:
    """node_bars_chart's figure, not yet laid out (None: nothing to draw). Legends stand
    right of the axes: inside, a bar or the median line could lie under them."""
    drawn = [panel for panel in panels if any(v is not None for v in panel[1].values())]
    if not drawn:
        return None
    plt = charts.pyplot()
    height_in = 1.2 + 2.6 * len(drawn)
    figure, axes_list = plt.subplots(len(drawn), 1, figsize=(charts.FIGSIZE_IN[0], height_in))
    axes_list = np.atleast_1d(axes_list)
    positions = np.arange(len(hosts))
    for axes, (label, busbw, expected_gbps) in zip(axes_list, drawn, strict=True):
        heights = [busbw.get(host) or 0.0 for host in hosts]
        colors = [SLOW_COLOR if host in slow_hosts else charts.COLORS[0] for host in hosts]
        if len(hosts) <= LABEL_MAX_HOSTS:
            axes.bar(positions, heights, color=colors)
        else:  # thousands of bars draw for minutes: a dot per node
            axes.scatter(positions, heights, c=colors, s=4)
        measured = [value for value in busbw.values() if value is not None]
        handles = [axes.axhline(median(measured), color=charts.MODEL_COLOR, linestyle="--")]
        names = [f"fleet median {gbps(median(measured))} GB/s"]
        if expected_gbps is not None:
            handles.append(axes.axhline(expected_gbps, color=SLOW_COLOR, linestyle=":"))
            names.append(f"expected {gbps(expected_gbps)} GB/s")
        axes.set_ylabel("busbw (GB/s)")
        axes.set_title(label, fontsize=10)
        axes.legend(
            handles, names, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False
        )
        axes.set_ylim(0, max([*heights, expected_gbps or 0.0, 1e-9]) * charts.HEADROOM)
    figure.suptitle(title)
    for axes in axes_list:
        _host_names(figure, axes, hosts, slow_hosts, both_axes=False)
    return figure
