"""The step's collectives as a list (analysis/mfu/step_collectives.py) are the estimator's,
call for call: priced with the same pricer, count x time per communicator sums to the
estimator's own total for it."""

from __future__ import annotations

import pytest

from collbench.analysis.mfu.estimate import Priced, estimate
from collbench.analysis.mfu.fabrics import sized_for
from collbench.analysis.mfu.presets import preset
from collbench.analysis.mfu.step_collectives import BESIDE_COMPUTE, EXPOSED, step_collectives
from collbench.analysis.mfu.workload import Parallelism, Training, Workload
from collbench.topologies.loader import load_topology

RATES = {"all_reduce": 50e9, "all_gather": 80e9, "reduce_scatter": 70e9, "sendrecv": 30e9}


def _pricer(collective: str, size_bytes: float, ranks: int, stride: int) -> Priced:
    # distinct per collective, group and size, so a wrong size, count or group shows
    return Priced(20e-6 * stride + size_bytes * ranks / RATES[collective], "test")


PARALLELISMS = [
    Parallelism(tp=8, dp=4),
    Parallelism(tp=4, pp=2, dp=4, sequence_parallel=True),
    Parallelism(tp=2, pp=4, dp=4, virtual_stages=2, zero=1),
    Parallelism(tp=8, dp=4, zero=2, dp_bucket_mb=100),
    Parallelism(tp=1, dp=32, zero=3, dp_bucket_mb=0),
    Parallelism(tp=8, dp=4, dp_overlap=False, dp_bucket_mb=7.5),
]


@pytest.mark.parametrize("parallelism", PARALLELISMS, ids=str)
@pytest.mark.parametrize("recompute", ["none", "full"])
def test_the_list_prices_to_the_estimators_totals(parallelism, recompute):
    training = Training(seq=4096, global_batch=64, micro_batch=2, recompute=recompute)
    workload = Workload(preset("llama3-8b"), training, parallelism)
    topology = sized_for(workload, load_topology("dgx-h100"))
    result = estimate(workload, topology, _pricer)
    items = step_collectives(workload)
    for kind in result.comm:
        listed = sum(item.time_s(_pricer) for item in items if item.kind == kind.kind)
        assert listed == pytest.approx(kind.total_s, rel=1e-9), kind.kind
    assert {item.kind for item in items} == {kind.kind for kind in result.comm if kind.total_s}


def test_entries_say_their_group_and_overlap():
    training = Training(seq=2048, global_batch=32)
    par = Parallelism(tp=8, pp=2, dp=2, dp_bucket_mb=25)
    items = step_collectives(Workload(preset("llama3-8b"), training, par))
    tp = next(item for item in items if item.kind == "tp")
    assert (tp.collective, tp.ranks, tp.stride) == ("all_reduce", 8, 1)
    assert tp.size_bytes == 2048 * 4096 * 2  # b·s·h bf16 activations
    assert tp.count == 4 * 16 * 16  # 4 per layer x 16 layers on a stage x 16 micro-batches
    pp = next(item for item in items if item.kind == "pp")
    assert (pp.collective, pp.ranks, pp.stride, pp.overlap) == ("sendrecv", 2, 16, EXPOSED)
    dp = [item for item in items if item.kind == "dp"]
    assert dp[0].size_bytes == 25 * 2**20 and dp[0].overlap == BESIDE_COMPUTE
    grads = preset("llama3-8b").n_params / 16 * 4
    assert sum(item.size_bytes * item.count for item in dp) == pytest.approx(grads)
