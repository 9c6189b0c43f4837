"""`collbench mfu --search`: the layouts of one job (its accelerators and global batch)
that fit each fabric's memory, each priced by the estimator, shortest step first.

The method, in full: docs/mfu/index.md#analysis-mfu-search-py.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import replace
from functools import cache
from itertools import product

from collbench.analysis.mfu.estimate import Estimate, estimate
from collbench.analysis.mfu.fabrics import Fabric, Inputs
from collbench.analysis.mfu.memory import DEMONSTRATED_ERROR, GIB, memory_estimate
from collbench.analysis.mfu.workload import RECOMPUTE, Workload
from collbench.core.errors import SpecError

MICRO_BATCHES = (1, 2, 4, 8)
MOST_VIRTUAL_STAGES = 8
# Context parallelism is for sequences too long for one rank: only with one per micro-batch,
# and no rank is left fewer tokens of one than this (Llama 3 405B's long-context stage kept
# 8,192: 131,072 over cp 16, arXiv 2407.21783).
MIN_CP_TOKENS = 4096


Ranked = list[tuple[Workload, Estimate]]  # a fabric's layouts that fit, best first


def splits(workload: Workload, most_tp: int) -> Iterator[dict[str, int]]:
    """Every split of the job's accelerators and global batch: TP within `most_tp` (the
    scale-up domain) dividing the heads, CP by powers of two (MIN_CP_TOKENS), PP dividing the layers
    (interleaved by up to MOST_VIRTUAL_STAGES equal chunks), DP the rest, micro-batches
    that divide the batch: Parallelism's fields and the micro-batch."""
    model, run, world = workload.model, workload.training, workload.parallelism.world_size
    tps = _divisors(math.gcd(model.heads, world), most_tp)
    cps = [cp for cp in _divisors(world)[1:] if not cp & (cp - 1) and run.seq >= cp * MIN_CP_TOKENS]
    for tp, cp, mb in product(tps, [1, *cps], MICRO_BATCHES):
        if world % (tp * cp) or cp > 1 and mb > 1:
            continue
        for pp in _divisors(math.gcd(model.layers, world // tp // cp)):
            dp = world // (tp * cp * pp)
            for v in [1] if pp == 1 else _divisors(model.layers // pp, MOST_VIRTUAL_STAGES):
                if run.global_batch % (dp * mb) == 0:
                    yield dict(tp=tp, cp=cp, pp=pp, dp=dp, virtual_stages=v, micro_batch=mb)


def search(workload: Workload, fabrics: Sequence[Fabric], inputs: Inputs) -> list[Ranked]:
    """Per fabric, each split with the least ZeRO stage and recompute that fit its
    accelerators' memory, estimated (more would only add communication or compute), the
    shortest step first: the highest MFU and, at one price per GPU-hour, the lowest cost
    per token (the job's accelerators and tokens are the same in every layout)."""
    bytes_of = cache(lambda w: memory_estimate(w, None).total_bytes)
    out = []
    for fabric in fabrics:
        topology, options = fabric.topology, inputs.options.on(fabric.topology)
        # the memory estimate errs by up to DEMONSTRATED_ERROR: a layout fits with that headroom
        capacity = (topology.accelerator.memory_gib or math.inf) * GIB / (1 + DEMONSTRATED_ERROR)
        pricer = fabric.pricer(inputs.comm_efficiency)
        # per-op checkpointing is torchtitan's (PyTorch's selective checkpoint), not Megatron's
        megatron = workload.training.framework == "megatron"
        recomputes = [name for name in RECOMPUTE if name != "op" or not megatron]
        fitting = []
        for split in splits(workload, topology.scale_up.domain_size):
            lightest = 4  # the least ZeRO stage that fits with less recompute
            for recompute, zero in product(recomputes, range(4)):
                layout = zero < lightest and _layout(workload, recompute, zero=zero, **split)
                if layout and bytes_of(layout) <= capacity:
                    lightest = zero
                    fitting.append((layout, estimate(layout, topology, pricer, options)))
        out.append(sorted(fitting, key=lambda pair: pair[1].step_time_s))
    return out


def _layout(workload: Workload, recompute: str, micro_batch: int, **split: int) -> Workload | None:
    """The workload in this layout, sequence parallel with TP; None where its checks refuse
    it (CP, EP, interleaving)."""
    run = workload.training
    try:
        tp, par = split["tp"], workload.parallelism
        par = replace(par, **split, sequence_parallel=tp > 1, pp_layout=())
        run = replace(run, micro_batch=micro_batch, recompute=recompute, recompute_layers=0)
        return replace(workload, training=run, parallelism=par, dp_origin="")
    except SpecError:
        return None


def _divisors(n: int, most: int | None = None) -> list[int]:
    return [d for d in range(1, min(n, most or n) + 1) if n % d == 0]
