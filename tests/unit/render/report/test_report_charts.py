"""The report's charts as drawn (the real matplotlib figures, kept as `save_png` saves them):
size labels never collide, the latency chart starts at the smallest size above 0."""

import pytest

from collbench.render import charts
from tests.rows import make_row

# Neighbouring labels at least this far apart (at 100 dpi): a word space at 10 pt is ~3 px,
# and labels about that close read as one string ("128K256K512K1M2M", as the issue saw).
GAP_PX = 5


@pytest.fixture
def drawn(monkeypatch):
    """Every figure a chart function saves, after its final layout."""
    figures = []
    original = charts.save_png

    def keep(figure):
        png = original(figure)
        figures.append(figure)
        return png

    monkeypatch.setattr(charts, "save_png", keep)
    return figures


def _rows(sizes, alpha_us=20.0, busbw_gbps=5.0):
    return [
        make_row(size_bytes=size, time_us=alpha_us + size / (busbw_gbps * 1e3)) for size in sizes
    ]


def _labels(axes):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(axes.figure)  # pyplot closed the figure: a canvas to measure on
    canvas.draw()
    renderer = canvas.get_renderer()
    shown = [label for label in axes.get_xticklabels() if label.get_text()]
    return sorted(
        ((label.get_text(), label.get_window_extent(renderer)) for label in shown),
        key=lambda item: item[1].x0,
    )


def _assert_no_collision(axes):
    labels = _labels(axes)
    assert len(labels) >= 3, [text for text, _ in labels]
    for (left, left_box), (right, right_box) in zip(labels, labels[1:], strict=False):
        assert right_box.x0 - left_box.x1 >= GAP_PX, f"{left!r} and {right!r} collide"


@pytest.mark.parametrize(
    "low, high",
    [(8, 4 << 20), (1, 16 << 30), (1 << 10, 2 << 20)],
)
@pytest.mark.slow
def test_busbw_and_latency_size_labels_never_collide(drawn, low, high):
    sizes = [2**k for k in range(low.bit_length() - 1, high.bit_length())]
    series = [charts.Series("run", _rows(sizes))]
    charts.busbw_chart("busbw", series)
    charts.latency_chart("latency", series)
    for figure in drawn:
        _assert_no_collision(figure.axes[0])
    largest = charts.size_label(sizes[-1])
    assert _labels(drawn[0].axes[0])[-1][0] == largest  # the largest size keeps its label


@pytest.mark.slow  # several charts, ~4-7 s on 2 cores
def test_the_overlap_charts_half_width_axes_do_not_collide_either(drawn):
    from tests.unit.render.report.test_report_doc import _probe_rows

    rows = [row for row in _probe_rows("p")]
    rows += [
        make_row(
            kind="overlap",
            size_bytes=2**k,
            time_us=100.0,
            compute_ratio=1.0,
            t_comm_us=100.0,
            t_comp_us=100.0,
            t_both_us=120.0,
            overlap_pct=80.0,
            compute_slowdown=0.1,
            comm_slowdown=0.1,
        )
        for k in range(10, 24)
    ]
    charts.overlap_chart("overlap", rows)
    (figure,) = drawn
    for axes in figure.axes:
        _assert_no_collision(axes)


def test_labels_thin_out_as_the_axes_narrow(drawn):
    sizes = [2**k for k in range(3, 34)]
    charts.busbw_chart("busbw", [charts.Series("run", _rows(sizes))])
    wide = len(_labels(drawn[0].axes[0]))
    assert 6 <= wide < len(sizes)  # thinned, but still a useful axis
    thin = drawn[0].axes[0]
    thin.figure.set_size_inches(4, 3)
    charts.thin_size_labels(thin)
    _assert_no_collision(thin)
    assert len(_labels(thin)) < wide


def test_latency_axis_starts_at_the_smallest_size_above_zero(drawn):
    rows = [make_row(size_bytes=0, time_us=12.0), *_rows([4, 8, 16, 32, 1024])]
    charts.latency_chart("latency", [charts.Series("run", rows)])
    (figure,) = drawn
    axes = figure.axes[0]
    low, _ = axes.get_xlim()
    assert 2 < low <= 4  # not 1 B: the data start at 4 B
    assert "1" not in [label.get_text() for label in axes.get_xticklabels()]
    (legend,) = [text.get_text() for text in axes.get_legend().get_texts()]
    assert "0 B: 12 us, not on the log axis" in legend
    drawn_sizes = {x for line in axes.get_lines() for x in line.get_xdata() if x != 0}
    assert min(drawn_sizes) >= 4


def test_a_latency_with_no_number_gets_no_line(drawn):
    rows = _rows([2**k for k in range(3, 17)], alpha_us=20.0)
    from collbench.analysis.fit.hockney import fit_rows

    (group,) = fit_rows(rows)
    series = charts.Series(
        "run",
        rows,
        group.curve,
        alpha_texts=("< 0.01 us (below the clock's resolution)",),
        latency_us=None,
    )
    charts.latency_chart("latency", [series])
    (figure,) = drawn
    axes = figure.axes[0]
    horizontal = [line for line in axes.get_lines() if len(set(line.get_ydata())) == 1]
    assert horizontal == []
    (legend,) = [text.get_text() for text in axes.get_legend().get_texts()]
    assert legend.endswith("fitted latency < 0.01 us (below the clock's resolution)")


def test_an_overlap_row_missing_its_times_is_not_drawn(drawn):
    # a damaged rows.jsonl's overlap row without t_comm/t_comp/t_both: once a TypeError
    whole = dict(kind="overlap", time_us=100.0, t_comm_us=100.0, t_comp_us=90.0, t_both_us=120.0)
    rows = [make_row(size_bytes=1024, **whole), make_row(size_bytes=2048, kind="overlap")]
    charts.overlap_times_chart("times", rows)
    (figure,) = drawn
    assert [label.get_text() for label in figure.axes[0].get_xticklabels()] == ["1K"]
