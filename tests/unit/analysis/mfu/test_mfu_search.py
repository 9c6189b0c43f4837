"""`mfu --search` (analysis/mfu/search.py): the layouts that fit a fabric, best first."""

from __future__ import annotations

from dataclasses import replace

from collbench.analysis.mfu.fabrics import Fabric, Inputs, sized_for
from collbench.analysis.mfu.presets import preset
from collbench.analysis.mfu.search import search
from collbench.analysis.mfu.workload import Model, Parallelism, Training, Workload
from collbench.topologies.loader import load_topology

# One layer and a vocabulary of 2^18: the fp32 logits of a micro-batch of 4,096 tokens are
# 4 x 4,096 x 262,144 B = 4 GiB / tp (memory.LOGIT_BYTES); everything else is below 1 GiB
# per accelerator with ZeRO 3 over 8 (67M embedding parameters x 18 B / 8 = 0.15 GiB).
TINY = Model("tiny", layers=1, hidden=256, heads=8, vocab=1 << 18)
JOB = Workload(TINY, Training(seq=4096, global_batch=8), Parallelism(dp=8))


def fabric(name: str, memory_gib: float, job: Workload = JOB) -> Fabric:
    topology = sized_for(job, load_topology(name))
    accelerator = replace(topology.accelerator, memory_gib=memory_gib)
    return Fabric(replace(topology, accelerator=accelerator))


def test_only_tp_that_splits_the_logits_fits():
    # 3 GiB: tp 1 holds 4 GiB of logits (never fits); tp >= 2 with one sequence per
    # micro-batch per 2 TP ranks fits. 80 GiB: tp 1 fits too.
    tight, roomy = search(JOB, [fabric("dgx-h100", 3), fabric("dgx-h100", 80)], Inputs())
    assert tight and all(layout.parallelism.tp >= 2 for layout, _ in tight)
    assert all(2 * layout.training.micro_batch <= layout.parallelism.tp for layout, _ in tight)
    assert any(layout.parallelism.tp == 1 for layout, _ in roomy)
    for found in (tight, roomy):
        steps = [result.step_time_s for _, result in found]
        assert steps == sorted(steps)
        for layout, _ in found:  # the job: 8 accelerators, 8 sequences, 1 layer
            par = layout.parallelism
            assert (par.world_size, par.pp, par.cp) == (8, 1, 1)
            assert 8 % (par.dp * layout.training.micro_batch) == 0


def test_nothing_fits():
    # tp 8 still holds 0.5 GiB of logits: more than 0.4.
    assert search(JOB, [fabric("dgx-h100", 0.4)], Inputs()) == [[]]


def test_each_fabric_gets_its_own_best():
    job = Workload(
        preset("llama3-70b"),
        Training(seq=8192, global_batch=16, recompute="selective"),
        Parallelism(tp=8, pp=4, dp=2, sequence_parallel=True),
    )
    h100, mi300x = search(
        job,
        [Fabric(sized_for(job, load_topology(name))) for name in ("dgx-h100", "mi300x")],
        Inputs(),
    )
    gib = [found[0][1].memory.total_bytes / (1 << 30) for found in (h100, mi300x)]
    assert gib[0] <= 80 < gib[1] <= 192  # the 192 GiB accelerator's best does not fit 80


def test_a_layout_fits_with_the_memory_estimates_error_as_headroom():
    # the memory estimate errs by up to 17% (memory.DEMONSTRATED_ERROR): a layout whose
    # estimate is the capacity itself may not fit, and is not offered
    every = search(JOB, [fabric("dgx-h100", 80)], Inputs())[0]
    largest = max(result.memory.total_bytes for _, result in every) / (1 << 30)
    found = search(JOB, [fabric("dgx-h100", largest)], Inputs())[0]
    assert found
    assert max(result.memory.total_bytes for _, result in found) <= largest / 1.17 * (1 << 30)
