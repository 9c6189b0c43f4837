"""The process-group timeout covers the longest batch a GPU rank queues (core/watchdog.py)."""

import pytest

from collbench.core.spec import SweepSpec
from collbench.core.watchdog import (
    PLANNING_BUSBW_GBPS,
    PLANNING_LATENCY_S,
    planned_batch_s,
    planned_op_s,
    process_group_timeout_s,
)

GIB = 1024**3


def _spec(backend="nccl", **fields):
    return SweepSpec(**{"collectives": ("all_reduce",), **fields}).with_backend(backend)


def test_one_all_reduce_by_hand():
    # 8 ranks: bus factor 2*7/8 = 1.75; 1 GiB at 1 GB/s busbw.
    expected = PLANNING_LATENCY_S + GIB * 1.75 / (PLANNING_BUSBW_GBPS * 1e9)
    assert planned_op_s("all_reduce", GIB, 8) == pytest.approx(expected)


def test_batch_is_the_deeper_loop_of_the_largest_operation():
    spec = _spec(min_bytes=8, max_bytes=GIB, warmup=5, iters=50)
    assert planned_batch_s(spec, 8) == pytest.approx(50 * planned_op_s("all_reduce", GIB, 8))
    deep_warmup = _spec(min_bytes=8, max_bytes=GIB, warmup=80, iters=50)
    assert planned_batch_s(deep_warmup, 8) == pytest.approx(80 * planned_op_s("all_reduce", GIB, 8))


def test_a_long_batch_gets_a_timeout_past_its_last_operation():
    """1000 iterations of 1 GiB: the last all-reduce is enqueued ~30 min before it runs at
    the planning fabric; --timeout 300 (+30 s grace) alone would fire at 330 s."""
    spec = _spec(max_bytes=GIB, iters=1000, timeout_s=300.0)
    timeout_s = process_group_timeout_s(spec, 8, grace_s=30.0)
    assert timeout_s == pytest.approx(330.0 + 1000 * planned_op_s("all_reduce", GIB, 8))
    assert timeout_s > 1000 * planned_op_s("all_reduce", GIB, 8)


def test_many_tiny_operations_count_their_latency():
    spec = _spec(min_bytes=8, max_bytes=8, iters=1_000_000)
    assert planned_batch_s(spec, 2) >= 1_000_000 * PLANNING_LATENCY_S


def test_the_widest_collective_decides():
    spec = _spec(collectives=("broadcast", "all_reduce"), max_bytes=GIB)
    assert planned_batch_s(spec, 16) == pytest.approx(20 * planned_op_s("all_reduce", GIB, 16))


def test_gloo_queues_nothing_and_keeps_its_timeout():
    spec = _spec(backend="gloo", iters=1000, timeout_s=60.0)
    assert planned_batch_s(spec, 4) == 0.0
    assert process_group_timeout_s(spec, 4) == 60.0
