"""collbench compare, the pure part: verdicts by the one rule, repeats, bands, differences
(synthetic runs).

More in test_compare_quantity.py (one quantity for ratio and verdict) and
test_compare_gate.py (--fail-if-slower)."""

import math

import numpy as np
import pytest

from collbench.analysis.compare.comparison import (
    NOTE_ONE_REPEAT,
    NOTE_REPEATS,
    band_summaries,
    compare,
)
from collbench.analysis.rules.bands import band_of, bands_legend
from collbench.analysis.rules.decision import FLOOR, REPEATS, Rule
from collbench.analysis.rules.methodology import check_poolable, differences
from collbench.core.errors import SpecError
from tests.rows import make_row, make_run

RNG = np.random.default_rng(7)


def _row(size, time_us, samples, collective="all_reduce", placement="in_place", **extra):
    busbw = size / time_us / 1e3 if size else 0.0
    columns = {
        "collective": collective,
        "placement": placement,
        "size_bytes": size,
        "time_us": time_us,
        "busbw_gbps": busbw,
        "time_us_samples": list(samples),
        "dtype": "float32",
        "op": "sum",
        "iters": 20,
        "warmup": 5,
        "world_size": 2,
        "nodes": 1,
        "ranks_per_node": 2,
        "backend": "gloo",
    }
    return make_row(**{**columns, **extra})


def _run(name, rows, **meta):
    return make_run(
        name,
        rows,
        **{
            "run_id": name,
            "timing_method": "perf_counter",
            "spec": {"rank_stat": "avg"},
            "versions": {"torch": "2.13.0"},
            "knobs": {},
            **meta,
        },
    )


def _samples(mean, spread=0.02, n=20):
    return RNG.normal(mean, mean * spread, n)


def _repeats(size, times_us, spread=0.02):
    """One row per repeat of a size (--repeats), each with its own iterations."""
    return [
        _row(size, time_us, _samples(time_us, spread), repeat=index)
        for index, time_us in enumerate(times_us)
    ]


def test_every_repeat_of_a_size_counts_and_the_ratio_is_their_geometric_mean():
    base = _run("a", _repeats(1 << 20, [100.0, 110.0, 90.0]))
    cand = _run("b", _repeats(1 << 20, [200.0, 190.0, 210.0]))
    (item,) = compare(base, cand).sizes
    verdict = item.decision
    assert verdict.basis == REPEATS and (verdict.base_repeats, verdict.cand_repeats) == (3, 3)
    geomean = (100.0 * 110.0 * 90.0) ** (1 / 3) / (200.0 * 190.0 * 210.0) ** (1 / 3)
    assert item.ratio == pytest.approx(geomean) == pytest.approx(verdict.ratio)
    assert item.baseline_time_us == pytest.approx((100.0 * 110.0 * 90.0) ** (1 / 3))
    assert item.verdict == verdict.call == "slower"
    assert item.p_value == verdict.p_value and verdict.p_holm is not None


def test_one_comparison_is_one_family_holm_over_its_sizes():
    sizes = (1024, 4096, 1 << 20, 1 << 24)
    base = _run("a", [row for size in sizes for row in _repeats(size, [100.0, 101.0, 99.0])])
    cand = _run("b", [row for size in sizes for row in _repeats(size, [90.0, 91.5, 89.0])])
    result = compare(base, cand)
    for item in result.sizes:
        assert item.decision.p_holm >= item.decision.p_value
    smallest = min(item.decision.p_value for item in result.sizes)
    assert min(item.decision.p_holm for item in result.sizes) == pytest.approx(4 * smallest)
    assert result.basis_notes == [NOTE_REPEATS]


def test_one_repeat_offers_no_p_value_and_says_so():
    base = _run("a", [_row(1024, 100.0, _samples(100.0))])
    cand = _run("b", [_row(1024, 80.0, _samples(80.0))])
    result = compare(base, cand, Rule(alpha=0.01))
    (item,) = result.sizes
    assert item.decision.basis == FLOOR and item.p_value is None
    assert item.verdict == "faster" and result.alpha == 0.01
    assert result.basis_notes == [NOTE_ONE_REPEAT]
    assert "no p-value" in result.to_dict()["basis_notes"][0]
    assert result.to_dict()["sizes"][0]["decision"]["floor_source"] == "iteration-batch spread"


def test_sizes_match_and_ratios_follow_busbw():
    base = _run(
        "a",
        [
            _row(0, 10, _samples(10)),
            _row(1024, 100, _samples(100)),
            _row(2**20, 1000, _samples(1000)),
            _row(2**30, 10**6, []),
        ],
    )
    cand = _run(
        "b",
        [
            _row(0, 5, _samples(5)),
            _row(1024, 50, _samples(50)),
            _row(2**20, 1000, _samples(1000)),
            _row(64, 1, _samples(1)),
        ],
    )
    result = compare(base, cand)
    by_size = {item.size_bytes: item for item in result.sizes}
    assert set(by_size) == {0, 1024, 2**20}
    assert by_size[1024].ratio == pytest.approx(2.0) and by_size[1024].verdict == "faster"
    assert by_size[0].ratio == pytest.approx(2.0)  # size 0: time ratio, busbw is 0
    assert by_size[2**20].ratio == pytest.approx(1.0)
    assert result.only_baseline == [f"all_reduce in_place: {2**30} B"]
    assert result.only_candidate == ["all_reduce in_place: 64 B"]
    assert not result.methodology_differs


def test_bands_take_the_geometric_mean():
    rows_a = [_row(size, 100, []) for size in (1024, 4096, 2**20, 2**24, 2**26)]
    rows_b = [
        _row(1024, 50, []),
        _row(4096, 200, []),
        _row(2**20, 25, []),
        _row(2**24, 100, []),
        _row(2**26, 400, []),
    ]
    bands = band_summaries(compare(_run("a", rows_a), _run("b", rows_b)).sizes)
    assert [(b.band, b.sizes) for b in bands] == [("small", 2), ("medium", 1), ("large", 2)]
    assert bands[0].geomean_ratio == pytest.approx(math.sqrt(2.0 * 0.5))
    assert bands[1].geomean_ratio == pytest.approx(4.0)
    assert bands[2].geomean_ratio == pytest.approx(math.sqrt(1.0 * 0.25))
    assert bands[0].counts == {"unjudged": 2}  # no samples and no threshold
    assert (band_of(0), band_of(65535), band_of(65536), band_of(2**24)) == (
        "small",
        "small",
        "medium",
        "large",
    )


@pytest.mark.parametrize(
    "change, field, kind",
    [
        ({"row": {"dtype": "bfloat16"}}, "dtype", "methodology"),
        ({"row": {"iters": 50}}, "iters", "methodology"),
        ({"row": {"warmup": 1}}, "warmup", "methodology"),
        ({"row": {"world_size": 4}}, "world_size", "methodology"),
        ({"row": {"nodes": 2}}, "nodes", "methodology"),
        ({"meta": {"timing_method": "cuda_events"}}, "timing_method", "methodology"),
        ({"meta": {"spec": {"rank_stat": "max"}}}, "rank_stat", "methodology"),
        ({"meta": {"source": "nccl-tests"}}, "source", "methodology"),
        ({"meta": {"versions": {"torch": "2.4.0"}}}, "versions.torch", "environment"),
        ({"meta": {"knobs": {"NCCL_ALGO": "Tree"}}}, "env.NCCL_ALGO", "environment"),
        ({"meta": {"hosts": ["gpu07"]}}, "hosts", "environment"),
        ({"row": {"backend": "nccl"}}, "backend", "environment"),
    ],
)
def test_every_difference_is_named_and_classified(change, field, kind):
    base = _run("a", [_row(1024, 100, [])])
    cand = _run("b", [_row(1024, 100, [], **change.get("row", {}))], **change.get("meta", {}))
    found = differences(base, cand)
    assert [(d.field, d.kind) for d in found] == [(field, kind)]
    result = compare(base, cand)
    assert result.methodology_differs == (kind == "methodology")
    assert result.to_dict()["methodology_differs"] == (kind == "methodology")


def test_identical_methods_have_no_differences():
    rows = [_row(1024, 100, [])]
    assert differences(_run("a", rows), _run("b", rows)) == []


def test_ratio_comes_from_the_times_not_rounded_busbw():
    # an imported log prints busbw with two decimals: 0.01 and 0.01 would read as "same"
    base = _run("a", [_row(4096, 300.0, [], busbw_gbps=0.01)])
    cand = _run("b", [_row(4096, 200.0, [], busbw_gbps=0.01)])
    (item,) = compare(base, cand).sizes
    assert item.ratio == pytest.approx(1.5)
    # a different world size changes the bus factor: 2 ranks (1.0) vs 4 ranks (1.5)
    wide = _run("c", [_row(4096, 300.0, [], world_size=4)])
    (item,) = compare(base, wide).sizes
    assert item.ratio == pytest.approx(1.5)


def test_bands_legend_spells_the_band_edges():
    assert bands_legend() == "small < 64 KiB <= medium < 16 MiB <= large"


def test_fit_pooling_refuses_what_compare_flags():
    """One methodology rule: a field compare calls methodology also blocks pooling in fit."""
    from collbench.analysis.rules.methodology import METHODOLOGY

    rows = [_row(1024, 10.0, [10.0] * 5)]
    base = make_run("a", rows)
    for field, value in (("iters", 50), ("warmup", 1), ("dtype", "float16")):
        assert field in METHODOLOGY
        other = make_run("b", [_row(1024, 10.0, [10.0] * 5, **{field: value})])
        assert [d.field for d in differences(base, other) if d.kind == "methodology"] == [field]
        with pytest.raises(SpecError, match=rf"measured differently \({field} "):
            check_poolable(("all_reduce", "gloo", 2), [base, other])
    check_poolable(("all_reduce", "gloo", 2), [base, make_run("c", rows)])


def test_a_runs_dtypes_and_ops_are_different_points_never_repeats():
    """Two `-d all`-like runs of one repeat: each dtype is its own point, judged on its own
    (never "repeats 2 vs 2" pooling float32 with int8)."""

    def run(path, slow_int8):
        rows = [
            make_row(size_bytes=1 << 20, dtype=dtype, time_us=100.0 * (2 if slow else 1), repeat=0)
            for dtype, slow in (("float32", False), ("int8", slow_int8))
        ]
        return make_run(path, rows, run_id=path)

    result = compare(run("a", False), run("b", True))
    assert [(item.dtype, item.decision.base_repeats) for item in result.sizes] == [
        ("float32", 1),
        ("int8", 1),
    ]
    assert [round(item.ratio, 3) for item in result.sizes] == [1.0, 0.5]
