"""The report's Doctor charts: the node x node pair matrix as a heat map (in blocks of hosts
for a large fleet, each block's slowest pair its color) and per-node bars (a dot per node
above LABEL_MAX_HOSTS). collbench.render.report_doctor builds the section around them."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np

from collbench.core.stats import median
from collbench.render import charts
from collbench.render.doctor import gbps

ANNOTATE_MAX_HOSTS = 16  # larger matrices: colors only, no figure in each cell
# Larger matrices are drawn in blocks of hosts (each block's slowest pair): a cell per pixel
# at most, whatever the fleet's size.
HEATMAP_MAX_CELLS = 512
LABEL_MAX_HOSTS = 64  # larger matrices: no host names on the axes (the table names them)
SLOW_COLOR = "#d62728"


def heatmap_chart(
    title: str,
    hosts: Sequence[str],
    matrix: Sequence[Sequence[float | None]],
    slow_hosts: Collection[str] = frozenset(),
    slow_links: Collection[frozenset[str]] = frozenset(),
) -> bytes | None:
    """The pair matrix as a heat map (red: slow, green: fast, from 0 GB/s up; grey: not
    measured), each cell's GB/s written in it, flagged links outlined, flagged hosts' names
    in red. None without a measured pair."""
    values = as_array(matrix)
    if values.size == 0 or not np.isfinite(values).any():
        return None
    if len(hosts) > HEATMAP_MAX_CELLS:
        return _block_heatmap(title, values, slow_hosts)
    plt = charts.pyplot()
    side_in = min(12.0, 3.0 + 0.55 * len(hosts))
    figure, axes = plt.subplots(figsize=(side_in + 1.5, side_in))
    colormap = plt.get_cmap("RdYlGn").with_extremes(bad="#e0e0e0")
    image = axes.imshow(
        np.ma.masked_invalid(values), cmap=colormap, vmin=0.0, vmax=float(np.nanmax(values))
    )
    figure.colorbar(image, ax=axes, label="pair busbw (GB/s)", shrink=0.8)
    _host_ticks(axes, hosts, slow_hosts)
    _annotate(axes, values, hosts, slow_links)
    axes.set_title(title)
    return charts.save_png(figure)


def _host_ticks(axes: Any, hosts: Sequence[str], slow_hosts: Collection[str]) -> None:
    """Host names on both axes, flagged hosts' in red (none past LABEL_MAX_HOSTS)."""
    if len(hosts) > LABEL_MAX_HOSTS:
        axes.set_xticks([])
        axes.set_yticks([])
        return
    labels = [charts.short(host, 24) for host in hosts]
    axes.set_xticks(range(len(hosts)), labels, rotation=45, ha="right")
    axes.set_yticks(range(len(hosts)), labels)
    for ticks in (axes.get_xticklabels(), axes.get_yticklabels()):
        for host, tick in zip(hosts, ticks, strict=True):
            if host in slow_hosts:
                tick.set_color(SLOW_COLOR)
                tick.set_fontweight("bold")


def _annotate(
    axes: Any, values: np.ndarray, hosts: Sequence[str], slow_links: Collection[frozenset[str]]
) -> None:
    """Each measured cell's GB/s (small matrices), and a box around each flagged link."""
    from matplotlib.patches import Rectangle

    size = len(hosts)
    if size <= ANNOTATE_MAX_HOSTS:
        for row, column in zip(*np.nonzero(np.isfinite(values)), strict=True):
            text = gbps(float(values[row, column]))
            axes.text(column, row, text, ha="center", va="center", fontsize=8)
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


def as_array(matrix: Sequence[Sequence[float | None]] | np.ndarray) -> np.ndarray:
    if isinstance(matrix, np.ndarray):
        return matrix.astype(float, copy=False)
    return np.array(
        [[np.nan if value is None else value for value in row] for row in matrix], dtype=float
    )


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
    """One bar panel per (label, busbw per host, expected GB/s or None) that has a figure:
    a bar per host (flagged hosts red), the fleet median dashed, the expectation dotted.
    None when no panel has a figure."""
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
        handles, names = [], []
        handles.append(axes.axhline(median(measured), color=charts.MODEL_COLOR, linestyle="--"))
        names.append(f"fleet median {gbps(median(measured))} GB/s")
        if expected_gbps is not None:
            handles.append(axes.axhline(expected_gbps, color=SLOW_COLOR, linestyle=":"))
            names.append(f"expected {gbps(expected_gbps)} GB/s")
        names_shown = len(hosts) <= LABEL_MAX_HOSTS
        labels = [charts.short(host, 24) for host in hosts] if names_shown else []
        axes.set_xticks(positions if names_shown else [], labels, rotation=30)
        axes.set_ylabel("busbw (GB/s)")
        axes.set_title(label, fontsize=10)
        axes.legend(handles, names, fontsize=8, loc="lower right")
        axes.set_ylim(0, max([*heights, expected_gbps or 0.0, 1e-9]) * charts.HEADROOM)
    figure.suptitle(title)
    return charts.save_png(figure)
