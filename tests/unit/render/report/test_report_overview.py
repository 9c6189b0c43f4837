"""The report of many runs (a tune directory of many settings): past RATIO_CHARTS_MAX compared
runs, one overview chart draws every run's ratio to the baseline and a table ranks them,
instead of one chart per run; past OVERLAID_MAX runs, the busbw and latency charts draw the
baseline and the best few in full and the rest as grey points. Every number stays in the
tables, and a run keeps its color from chart to chart. Real matplotlib figures throughout."""

import numpy as np
import pytest

from collbench.render import charts
from collbench.render.report.build import OVERLAID_MAX, build_report, render_html
from collbench.render.report.compare import (
    RATIO_CHARTS_MAX,
    RatioPanel,
    RatioSeries,
    ratio_overview_chart,
)
from tests.unit.render.report.test_report_charts import drawn  # noqa: F401 (a fixture)
from tests.unit.render.report.test_report_doc import SIZES, _run, _sweep_rows

BASE_ALPHA_US, BASE_BUSBW_GBPS = 20.0, 5.0


def _faster_by(name, factor):
    """A run whose every size takes 1/factor of the baseline's time: busbw ratio `factor`."""
    return _run(name, _sweep_rows(name, BASE_ALPHA_US / factor, BASE_BUSBW_GBPS * factor))


def _runs(factors):
    """The baseline 'base', then one run per factor, named by it ('x1.07')."""
    base = _run("base", _sweep_rows("base", BASE_ALPHA_US, BASE_BUSBW_GBPS))
    return [base, *(_faster_by(f"x{factor:.2f}", factor) for factor in factors)]


def _section(document, heading):
    return next(section for section in document.sections if section.heading == heading)


def _legend_texts(figure):
    legends = [*figure.legends, *(axes.get_legend() for axes in figure.axes)]
    return [text.get_text() for legend in legends if legend for text in legend.get_texts()]


def _titled(figures, words):
    return next(
        figure
        for figure in figures
        if any(words in text.get_text() for text in figure.texts)
        or any(words in axes.get_title() for axes in figure.axes)
    )


def _colored_line(axes, color, linestyle):
    lines = [
        line
        for line in axes.get_lines()
        if line.get_color() == color and line.get_linestyle() == linestyle and len(line.get_xdata())
    ]
    assert lines, f"no {linestyle} line in {color}"
    return lines[0]


# 11 candidates (12 runs: crowded), in an order that is not their rank
FACTORS = (1.03, 1.11, 0.97, 1.07, 1.01, 1.09, 1.05, 0.99, 1.10, 1.02, 1.08)


@pytest.mark.slow  # 12 runs fitted and three charts drawn: ~4 s on 2 cores
def test_many_runs_one_overview_chart_a_ranking_and_every_table_kept(drawn):  # noqa: F811
    runs = _runs(FACTORS)
    assert len(runs) > OVERLAID_MAX and len(FACTORS) > RATIO_CHARTS_MAX
    document = build_report(runs)
    overview = _section(document, "Compare: every run against base (the baseline)")
    compares = [item for item in document.sections if item.heading.startswith("Compare: ")]
    assert compares[0] is overview and len(compares) == 1 + len(FACTORS)
    assert len(overview.charts) == 1
    # every run's own section keeps its tables (bands, sizes) but draws no chart of its own
    for section in compares[1:]:
        assert not section.charts
        assert [table.caption.split(" (")[0] for table in section.tables[:2]] == [
            "per size band",
            "size by size",
        ]
    assert len(document.charts) == 3  # busbw, latency, overview: not one per run
    ranking = overview.tables[0]
    best_first = sorted(FACTORS, reverse=True)
    assert [row[1] for row in ranking.rows] == [f"x{factor:.2f}" for factor in best_first]
    assert [row[0] for row in ranking.rows] == list(range(1, len(FACTORS) + 1))
    # the ratio is the factor at every size: its geometric mean too, overall and per collective
    assert [row[2] for row in ranking.rows] == [f"{factor:.3f}x" for factor in best_first]
    assert [row[3] for row in ranking.rows] == [f"{factor:.3f}x" for factor in best_first]
    assert {row[4:] for row in ranking.rows} == {(0, 0, len(SIZES))}  # no samples: unjudged
    # the summary still has every run
    assert len(document.summary.rows) == len(runs)
    assert "Compare: every run against base" in render_html(document)


@pytest.mark.slow  # as above
def test_a_crowded_overlay_draws_the_best_in_full_and_keeps_their_colors(drawn):  # noqa: F811
    build_report(_runs(FACTORS))
    busbw = _titled(drawn, "bus bandwidth vs size")
    overview = _titled(drawn, "ratio per size")
    best = sorted(FACTORS, reverse=True)[: len(charts.COLORS) - 1]
    left_out = len(FACTORS) - len(best)
    texts = _legend_texts(busbw)
    in_run_order = [factor for factor in FACTORS if factor in best]
    assert [text.split(":")[0] for text in texts if "fit peak" in text] == [
        "base",
        *(f"x{factor:.2f}" for factor in in_run_order),
    ]
    assert f"{left_out} other runs (points only)" in texts
    overview_texts = _legend_texts(overview)
    assert overview_texts[: len(best)] == [f"x{factor:.2f}: {factor:.3f}x" for factor in best]
    assert f"{len(FACTORS) - len(best)} other runs" in overview_texts
    # the best run: the same color in the busbw chart (its points) and in the overview (its
    # ratio line), and what is drawn there is its own data
    top = max(FACTORS)
    color = charts.COLORS[1 + in_run_order.index(top)]  # the baseline has the first
    points = _colored_line(busbw.axes[0], color, "None")
    expected_busbw = [
        size / ((BASE_ALPHA_US + size / (BASE_BUSBW_GBPS * 1e3)) / top) / 1e3 for size in SIZES
    ]
    np.testing.assert_allclose(points.get_ydata(), expected_busbw, rtol=1e-9)
    ratios = _colored_line(overview.axes[0], color, "-")
    np.testing.assert_allclose(ratios.get_ydata(), [top] * len(SIZES), rtol=1e-9)


@pytest.mark.slow  # 5 runs fitted, 3 charts
def test_a_few_runs_are_all_drawn_in_full_and_in_color(drawn):  # noqa: F811
    factors = (1.02, 0.98, 1.04, 1.01)
    assert RATIO_CHARTS_MAX < len(factors) < OVERLAID_MAX  # with the baseline, all in full
    document = build_report(_runs(factors))
    assert len(_section(document, "Compare: every run against base (the baseline)").charts) == 1
    assert not any("other runs" in text for figure in drawn for text in _legend_texts(figure))
    overview = _titled(drawn, "ratio per size")
    assert _legend_texts(overview)[:4] == [
        "x1.04: 1.040x",
        "x1.02: 1.020x",
        "x1.01: 1.010x",
        "x0.98: 0.980x",
    ]


@pytest.mark.slow
def test_up_to_the_limit_each_run_keeps_its_own_ratio_chart():
    document = build_report(_runs((1.02, 0.98)[:RATIO_CHARTS_MAX]))
    compares = [item for item in document.sections if item.heading.startswith("Compare: ")]
    assert [len(item.charts) for item in compares] == [1, 1]
    assert not any("every run" in item.heading for item in compares)


@pytest.mark.slow
def test_the_overview_chart_zooms_on_ratios_near_one_and_fills_a_spare_cell(drawn):  # noqa: F811
    def panel(title, ratios):
        series = RatioSeries("a", (8, 64, 512), ratios, (True, False, True))
        return RatioPanel(title, (series,))

    panels = [panel(f"c{index}", (0.99, 1.0, 1.01)) for index in range(3)]
    png = ratio_overview_chart("t", panels, "ratio", {"a": charts.COLORS[0]})
    assert png is not None and png.startswith(b"\x89PNG")
    (figure,) = drawn
    shown = [axes for axes in figure.axes if axes.axison]
    assert len(shown) == 3 and len(figure.axes) == 4  # the fourth cell holds the legend
    low, high = shown[0].get_ylim()
    assert 0.95 < low < 0.99 and 1.01 < high < 1.05  # zoomed, not from 0
    assert figure.axes[3].get_legend() is not None
    nothing = RatioSeries("a", (0,), (float("nan"),), (False,))
    empty = RatioPanel("c", (nothing,))
    assert ratio_overview_chart("t", [empty], "ratio", {}) is None
