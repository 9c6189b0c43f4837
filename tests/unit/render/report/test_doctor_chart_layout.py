"""The doctor's charts as laid out for the report (measured with matplotlib's own renderer):
no legend covers a bar or the median line, and no host name runs into its neighbour, at any
fleet size or bar height."""

import math

import numpy as np
import pytest

from collbench.render import charts
from collbench.render.report.doctor_charts import (
    LABEL_MAX_HOSTS,
    MIN_NAME_FONT_PT,
    heatmap_figure,
    node_bars_figure,
)

pytest.importorskip("matplotlib")


def _fleet(count: int, slow: int, value: float = 3.0) -> tuple[list[str], dict[str, float]]:
    hosts = [f"cbnode{index}" for index in range(count)]
    return hosts, {host: (0.3 if index == slow else value) for index, host in enumerate(hosts)}


@pytest.mark.parametrize(
    ("count", "slow", "expected_gbps"),
    [(4, 2, None), (4, 0, 2.5), (12, 11, 3.2), (80, 79, None)],  # 80: a dot per node
)
def test_no_legend_covers_a_bar_or_the_axes(count, slow, expected_gbps):
    hosts, busbw = _fleet(count, slow)
    panels = [("intra", busbw, expected_gbps), ("pair", dict(busbw), None)]
    figure = node_bars_figure("nodes", hosts, panels, {hosts[slow]})
    renderer = _laid_out(figure)
    canvas = figure.bbox
    for axes in figure.axes:
        legend = axes.get_legend().get_window_extent(renderer)
        bars = [patch.get_window_extent(renderer) for patch in axes.patches]
        dots = [
            point
            for each in axes.collections
            for point in axes.transData.transform(each.get_offsets())
        ]
        assert len(bars) + len(dots) == count
        assert not any(legend.overlaps(bar) for bar in bars)
        assert not any(legend.contains(x, y) for x, y in dots)
        assert not legend.overlaps(axes.get_window_extent(renderer))  # the lines' area too
        assert canvas.x0 <= legend.x0 and legend.x1 <= canvas.x1  # laid out, not cut off
    charts.pyplot().close(figure)


def _laid_out(figure):
    figure.tight_layout()  # as charts.save_png lays it out
    renderer = figure.canvas.get_renderer()
    figure.draw(renderer)
    return renderer


def _names_clear(axes, axis, renderer, count):
    """Neighbouring names along `axis` clear each other: parallel names, spacing x
    sin(angle) apart, each a line high (1.2 font sizes: ink alone reads as touching)."""
    names = axis.get_ticklabels()
    if count > LABEL_MAX_HOSTS:
        assert not names
        return
    assert [name.get_text() for name in names] == [f"cbnode{index}" for index in range(count)]
    along = 0 if axis is axes.xaxis else 1
    ends = axes.transData.transform([(0.0, 0.0), (1.0, 1.0)])
    spacing_px = abs(ends[1][along] - ends[0][along])
    for name in names:
        angle = name.get_rotation() if axis is axes.xaxis else 90.0
        line_px = 1.2 * renderer.points_to_pixels(name.get_fontsize())
        assert spacing_px * math.sin(math.radians(angle)) >= line_px, (count, angle)
        assert name.get_fontsize() >= MIN_NAME_FONT_PT


@pytest.mark.slow
@pytest.mark.parametrize("count", [4, 12, 24, 40, 64, 80])
def test_host_names_never_run_into_each_other(count):
    hosts, busbw = _fleet(count, 1)
    figure = node_bars_figure("nodes", hosts, [("intra", busbw, None)], {hosts[1]})
    renderer = _laid_out(figure)
    _names_clear(figure.axes[0], figure.axes[0].xaxis, renderer, count)
    charts.pyplot().close(figure)
    values = np.full((count, count), 5.0)
    np.fill_diagonal(values, np.nan)
    figure = heatmap_figure("pairs", hosts, values, {hosts[1]})
    renderer = _laid_out(figure)
    axes = figure.axes[0]  # the colorbar's is the second
    _names_clear(axes, axes.xaxis, renderer, count)
    _names_clear(axes, axes.yaxis, renderer, count)
    charts.pyplot().close(figure)
