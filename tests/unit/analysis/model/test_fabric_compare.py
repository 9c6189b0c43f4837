"""`collbench predict`'s comparison (analysis/model/fabric_compare.py, run/predict.py) and
`mfu --price`'s cost (analysis/mfu/estimate.py): hand-computed figures on two made-up fabrics
(tests/fixtures/topologies/predict-a.yaml and predict-b.yaml).

Both fabrics: 2 nodes x 4 accelerators (one group of p = 8 ranks, d = 4 per domain, k = 2
domains), 4 x 400 Gb/s NICs per node (a domain's 4 ranks send 4 x 50 = 200 GB/s out).
A: scale-up 300 GB/s, 1 us per hop inside, 5 us across. B: 150 GB/s, 2 us inside, 4 us across.
all_reduce (costmodel's docstring): ring 2(p-1) = 14 hops, 2 of them across, each level moving
1.75 S; tree 2(d-1) = 6 hops inside and 2 across, 2 S up and S out.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from collbench.analysis.mfu.estimate import Estimate, parse_prices, training_cost
from collbench.analysis.model.fabric_compare import (
    EXTRAPOLATED,
    FITTED,
    MEASURED,
    PREDICTED,
    Measured,
    Side,
    compare_fabrics,
)
from collbench.core.errors import SpecError
from collbench.run.predict import MeasuredTimes, PredictRequest
from collbench.topologies.loader import load_topology
from tests.rows import make_row, make_run

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "topologies"
A = load_topology(FIXTURES / "predict-a.yaml")
B = load_topology(FIXTURES / "predict-b.yaml")
GIB = 1 << 30
ALL_REDUCE_FACTOR = 2 * 7 / 8


def test_a_large_all_reduce_by_hand():
    (line,) = compare_fabrics([Side(A), Side(B)], ["all_reduce"], [GIB])
    a, b = line.cells
    # A: tree 16 us + 2 S / 300 GB/s (up; out S / 200 GB/s is less) beats ring 22 us + 1.75 S
    # / 200 GB/s: scale-up bound, and the tree's bound is S / (2 S / 300 GB/s) x 1.75.
    assert a.time_s == pytest.approx(16e-6 + 2 * GIB / 300e9, rel=1e-12)
    assert (a.algorithm, a.regime, a.source) == ("tree", "scale-up", PREDICTED)
    assert a.bound_busbw_gbps == pytest.approx(150 * ALL_REDUCE_FACTOR)  # 262.5
    # B: ring 32 us + 1.75 S / 150 GB/s beats tree 20 us + 2 S / 150 GB/s; scale-up bound.
    assert b.time_s == pytest.approx(32e-6 + 1.75 * GIB / 150e9, rel=1e-12)
    assert (b.algorithm, b.regime) == ("ring", "scale-up")
    assert b.bound_busbw_gbps == pytest.approx(150.0)
    assert b.busbw_gbps == pytest.approx(GIB / b.time_s / 1e9 * ALL_REDUCE_FACTOR)
    assert line.ratios[0] == 1.0
    assert line.ratios[1] == pytest.approx(b.time_s / a.time_s)
    assert line.ratios[1] == pytest.approx(1.7506, abs=1e-4)


def test_a_small_all_reduce_is_latency_bound_on_both():
    (line,) = compare_fabrics([Side(A), Side(B)], ["all_reduce"], [8])
    a, b = line.cells
    assert (a.regime, b.regime) == ("latency", "latency")
    assert (a.algorithm, b.algorithm) == ("tree", "tree")
    assert a.time_s == pytest.approx(16e-6 + 16 / 300e9)  # 6 x 1 us + 2 x 5 us
    assert b.time_s == pytest.approx(20e-6 + 16 / 150e9)  # 6 x 2 us + 2 x 4 us
    assert line.ratios[1] == pytest.approx(1.25, rel=1e-4)


def test_lines_run_collective_by_collective_then_size():
    lines = compare_fabrics([Side(A)], ["all_reduce", "all_gather"], [8, 1024])
    assert [(line.collective, line.size_bytes) for line in lines] == [
        ("all_reduce", 8),
        ("all_reduce", 1024),
        ("all_gather", 8),
        ("all_gather", 1024),
    ]
    assert all(line.ratios == (1.0,) for line in lines)


def test_a_measured_time_replaces_the_prediction_but_not_the_regime_or_bound():
    def measured(collective: str, size_bytes: int) -> Measured | None:
        return Measured(0.01, MEASURED, "runs/b") if size_bytes == GIB else None

    small, large = compare_fabrics([Side(A), Side(B, measured)], ["all_reduce"], [8, GIB])
    assert small.cells[1].source == PREDICTED
    cell = large.cells[1]
    assert (cell.source, cell.run, cell.time_s) == (MEASURED, "runs/b", 0.01)
    assert cell.algbw_gbps == pytest.approx(GIB / 0.01 / 1e9)
    assert cell.busbw_gbps == pytest.approx(GIB / 0.01 / 1e9 * ALL_REDUCE_FACTOR)
    assert (cell.regime, cell.bound_busbw_gbps) == ("scale-up", pytest.approx(150.0))
    assert large.ratios[1] == pytest.approx(0.01 / large.cells[0].time_s)


def test_a_single_rank_fabric_moves_nothing_and_has_no_ratio_to_it():
    single = replace(A, nodes=1, accelerators_per_node=1)
    (line,) = compare_fabrics([Side(single), Side(A.with_nodes(1))], ["all_reduce"], [GIB])
    assert line.cells[0].time_s == 0 and line.cells[0].regime == "none"
    assert line.ratios == (None, None)


def test_the_sizes_are_the_sweeps_nccl_tests_series():
    request = PredictRequest(min_bytes=1 << 20, max_bytes=8 * GIB)
    assert request.sizes() == [(1 << 20) * 2**step for step in range(14)]
    assert PredictRequest(min_bytes=0, max_bytes=16, factor=4).sizes() == [0, 1, 4, 16]
    with pytest.raises(SpecError, match="--factor"):
        PredictRequest(factor=1.0).sizes()


def _run(sizes_us: dict[int, list[float]], world: int = 8, nodes: int | None = 2, **columns):
    rows = [
        make_row(
            collective="all_reduce",
            size_bytes=size,
            time_us=time_us,
            world_size=world,
            nodes=nodes,
            **columns,
        )
        for size, times in sizes_us.items()
        for time_us in times
    ]
    return make_run("runs/measured", rows)


def test_measured_times_take_the_median_at_a_measured_size_and_the_fit_elsewhere():
    # t = 20 us + S x 1.75 / 100 GB/s: a clean Hockney line the fit recovers.
    sizes = {1 << power: [20 + (1 << power) * 1.75 / 1e5] for power in range(16, 25)}
    sizes[1 << 20] = [40.0, 50.0, 1000.0]  # three repeats at 1 MiB: the median is 50
    times = MeasuredTimes([_run(sizes)], A)
    exact = times("all_reduce", 1 << 20)
    assert (exact.source, exact.time_s) == (MEASURED, pytest.approx(50e-6))
    between = times("all_reduce", 3 << 20)
    assert between.source == FITTED
    assert between.time_s == pytest.approx((20 + (3 << 20) * 1.75 / 1e5) * 1e-6, rel=0.05)
    assert times("all_reduce", 1 << 30).source == EXTRAPOLATED
    assert times("all_gather", 1 << 20) is None
    assert times.unmatched(["all_reduce"]) == []
    assert "all_gather" in times.unmatched(["all_gather"])[0]


def test_measured_times_need_the_fabrics_rank_and_node_count():
    sizes = {1 << 20: [50.0]}
    assert MeasuredTimes([_run(sizes, world=16)], A)("all_reduce", 1 << 20) is None
    assert MeasuredTimes([_run(sizes, nodes=1)], A)("all_reduce", 1 << 20) is None
    assert MeasuredTimes([_run(sizes, nodes=None)], A)("all_reduce", 1 << 20) is not None
    (warning,) = MeasuredTimes([_run(sizes, world=16)], A).unmatched(["all_reduce"])
    assert "at 8 ranks over 2 nodes" in warning and "all_reduce at 16 ranks over 2" in warning
    assert "--nodes" in warning


def test_out_of_place_rows_win_over_in_place_ones():
    rows = [
        make_row(size_bytes=1024, time_us=10.0, world_size=8, nodes=2, placement="in_place"),
        make_row(size_bytes=1024, time_us=30.0, world_size=8, nodes=2),
    ]
    found = MeasuredTimes([make_run("r", rows)], A)("all_reduce", 1024)
    assert found.time_s == pytest.approx(30e-6)


def _estimate(step_time_s: float, accelerators: int) -> Estimate:
    return Estimate(
        topology="a",
        nodes=accelerators // 8,
        accelerators=accelerators,
        peak_tflops=1000.0,
        step_time_s=step_time_s,
        compute_s=step_time_s,
        bubble_s=0.0,
        comm=(),
        slowdown_s=0.0,
        straggler_s=0.0,
        mfu=0.4,
        hfu=0.4,
        mfu_loss_comm=0.0,
        tokens_per_s=1.0,
        model_tflops_per_accelerator=400.0,
    )


def test_the_cost_of_a_step_and_of_a_million_tokens_by_hand():
    # 512 GPUs x 2.10 USD/h x 9 s = 2.688 USD a step; 4,194,304 tokens a step.
    cost = training_cost(_estimate(9.0, 512), 512 * 8192, 2.10)
    assert cost.step_usd == pytest.approx(2.688)
    assert cost.usd_per_million_tokens == pytest.approx(2.688 / 4.194304)
    assert (cost.usd_per_gpu_hour, cost.accelerators) == (2.10, 512)


def test_prices_name_a_fabric_given_once_with_a_positive_price():
    assert parse_prices(["a=2.10", "b=2.45"], ["a", "b"]) == {"a": 2.10, "b": 2.45}
    for texts, message in (
        (["c=1"], "names no --topology given"),
        (["a"], "is not NAME=USD"),
        (["a=0"], "from 0.0001 to 10000"),
        (["a=-1"], "from 0.0001 to 10000"),
        (["a=inf"], "from 0.0001 to 10000"),
        (["a=cheap"], "from 0.0001 to 10000"),
        (["a=1e308"], "from 0.0001 to 10000"),
        (["a=1", "a=2"], "twice"),
    ):
        with pytest.raises(SpecError, match=message) as caught:
            parse_prices(texts, ["a", "b"])
        assert caught.value.field == "--price"
