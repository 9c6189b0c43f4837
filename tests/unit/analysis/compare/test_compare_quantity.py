"""collbench compare: the ratio and the verdict come from one quantity (busbw), a different
world size or node count is a methodology difference, and the table never prints a busbw of
0 next to a ratio of 2x."""

import dataclasses

import numpy as np
import pytest

from collbench.analysis.compare.comparison import QUANTITY, compare
from collbench.analysis.rules.methodology import differences
from collbench.render.compare import render_comparison
from tests.rows import make_row, make_run

RNG = np.random.default_rng(17)


def _row(size, time_us, samples, **extra):
    return make_row(
        collective="all_reduce",
        placement="in_place",
        size_bytes=size,
        time_us=time_us,
        time_us_samples=[float(sample) for sample in samples],
        **extra,
    )


def _run(name, rows, **meta):
    return make_run(name, rows, run_id=name, timing_method="perf_counter", **meta)


def _noisy(mean, n=20, spread=0.02):
    return RNG.normal(mean, mean * spread, n)


def test_verdict_and_ratio_agree_when_world_sizes_differ():
    """2 ranks vs 4: the candidate takes 1.2x longer but moves 1.5x the bus bytes, so its busbw
    is 1.25x higher. The old verdict (on time) said `slower` next to a ratio of 1.25x."""
    size = 1 << 20
    base = _run("a", [_row(size, 100.0, _noisy(100.0), world_size=2)])
    cand = _run("b", [_row(size, 120.0, _noisy(120.0), world_size=4)])
    result = compare(base, cand)
    (item,) = result.sizes
    assert result.quantity == item.quantity == QUANTITY == "busbw"
    assert item.ratio == pytest.approx(100.0 / 120.0 * 1.5)
    assert item.candidate_busbw_gbps / item.baseline_busbw_gbps == pytest.approx(item.ratio)
    assert item.verdict == "faster" and item.p_value is None  # one repeat: no p-value
    assert {diff.field for diff in result.methodology} == {"world_size", "ranks_per_node"}
    assert "busbw" in result.quantity_note and "busbw" in result.to_dict()["quantity_note"]


def test_the_verdict_follows_the_table_figures_never_a_contradiction():
    """The table figure (batch time) says faster while the per-iteration median says slower:
    the effect is the figures', the iterations only measure the noise around them."""
    base = _run("a", [_row(4096, 100.0, _noisy(100.0))])
    cand = _run("b", [_row(4096, 80.0, _noisy(110.0))])
    result = compare(base, cand)
    (item,) = result.sizes
    assert item.ratio > 1 and item.verdict == "faster"
    assert item.decision.effect_pct == pytest.approx(25.0)
    assert "mixed" not in render_comparison(result, "a", "b")


def test_every_verdict_points_the_way_its_ratio_does():
    rows_a, rows_b = [], []
    for index in range(30):
        size = 1024 << (index % 10)
        base_t, cand_t = RNG.uniform(50, 150, 2)
        rows_a.append(_row(size + index, base_t, _noisy(base_t * RNG.uniform(0.9, 1.1), 10, 0.1)))
        rows_b.append(
            _row(
                size + index,
                cand_t,
                _noisy(cand_t * RNG.uniform(0.9, 1.1), 10, 0.1),
                world_size=int(RNG.choice([2, 3, 4, 8])),
            )
        )
    for item in compare(_run("a", rows_a), _run("b", rows_b)).sizes:
        if item.verdict == "faster":
            assert item.ratio > 1
        if item.verdict == "slower":
            assert item.ratio < 1


def test_size_zero_compares_time():
    base = _run("a", [_row(0, 10.0, _noisy(10.0))])
    cand = _run("b", [_row(0, 5.0, _noisy(5.0))])
    (item,) = compare(base, cand).sizes
    assert item.quantity == "time" and item.ratio == pytest.approx(2.0)
    assert item.verdict == "faster"
    assert item.baseline_busbw_gbps is None and item.candidate_busbw_gbps is None


@pytest.mark.parametrize("field", ["world_size", "nodes", "ranks_per_node"])
def test_a_placement_only_meta_json_knows_is_still_a_methodology_difference(field):
    """Rows without the placement (an older import): meta.json's value counts."""
    row = dataclasses.replace(_row(1024, 100.0, []), **{field: None})
    base = _run("a", [row], **{field: 2})
    cand = _run("b", [row], **{field: 4})
    assert [(d.field, d.kind) for d in differences(base, cand)] == [(field, "methodology")]


def test_tiny_busbw_is_printed_with_its_digits_not_as_zero():
    """An imported log prints busbw 0.00 at 8 B: the table recomputes it from the time."""
    base = _run("a", [_row(8, 20.0, [], busbw_gbps=0.0), _row(0, 10.0, [], busbw_gbps=0.0)])
    cand = _run("b", [_row(8, 10.0, [], busbw_gbps=0.0), _row(0, 5.0, [], busbw_gbps=0.0)])
    text = render_comparison(compare(base, cand), "a", "b")
    rows = {line.split()[0]: line.split() for line in text.splitlines() if line[:1] != "#"}
    assert rows["8"][:6] == ["8", "0.0004", "0.0008", "2.000x", "20", "10"]
    assert rows["0"][:6] == ["0", "-", "-", "2.000x", "10", "5"]
    assert "# ratio and verdict on busbw" in text
