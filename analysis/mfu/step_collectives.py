"""Every collective one training step issues, as a list: which communicator (tp, pp, dp),
the collective, its size per rank (nccl-tests' size), how many calls per step, the group
it runs on (ranks, and the stride between them in accelerators) and whether the estimator
lets it overlap compute.

The method, in full: docs/mfu/index.md#analysis-mfu-step-collectives-py.
"""

from __future__ import annotations

from dataclasses import dataclass

from collbench.analysis.mfu import moe
from collbench.analysis.mfu.estimate import MIB, Pricer
from collbench.analysis.mfu.tp_overlap import tp_calls
from collbench.analysis.mfu.workload import Workload

# How the estimator treats a collective beside compute.
EXPOSED = "exposed"  # on the critical path: nothing hides it
TP_SHARE = "tp-overlap"  # critical path or beside GEMMs (async backward, --tp-overlap 1)
BESIDE_COMPUTE = "beside compute"  # DP buckets beside a pass (all but one); interleaved PP
PARTLY_HIDDEN = "partly hidden"  # the CP ring beside the attention; EP per --ep-overlap


@dataclass(frozen=True)
class StepCollective:
    """One collective at one size that a step issues `count` times."""

    kind: str  # the communicator: "tp", "cp", "ep", "pp" or "dp"
    collective: str
    size_bytes: float  # per rank, as nccl-tests counts it
    count: float  # calls per step
    ranks: int  # the communicator's size
    stride: int  # accelerators between neighbouring ranks of it
    overlap: str  # EXPOSED, TP_SHARE, BESIDE_COMPUTE or PARTLY_HIDDEN

    def time_s(self, pricer: Pricer) -> float:
        """Seconds per step spent in this collective at `pricer`'s prices."""
        return self.count * pricer(self.collective, self.size_bytes, self.ranks, self.stride).time_s


def step_collectives(workload: Workload) -> tuple[StepCollective, ...]:
    """The collectives of one step: tp's, cp's, ep's, then pp's, then dp's."""
    return (*_tp(workload), *_cp_ep(workload), *_pp(workload), *_dp(workload))


def _cp_ep(workload: Workload) -> list[StepCollective]:
    """Context parallelism's K/V ring (per layer) and expert parallelism's all-to-alls
    (per MoE layer), per micro-batch: analysis.mfu.moe prices them alike."""
    m = workload.microbatches
    cp_layers = workload.layers_per_stage * m
    ep_layers = moe.moe_layers_on_stage(workload) * m
    return [
        StepCollective(kind, collective, size, count * layers, ranks, stride, PARTLY_HIDDEN)
        for kind, calls, layers in (
            ("cp", moe.cp_calls(workload), cp_layers),
            ("ep", moe.ep_calls(workload), ep_layers),
        )
        for _, collective, size, count, ranks, stride in calls
    ]


def _tp(workload: Workload) -> list[StepCollective]:
    par, run = workload.parallelism, workload.training
    if par.tp == 1:
        return []
    size = workload.micro_tokens * workload.model.hidden * run.activation_bytes
    return [
        StepCollective("tp", name, size, count * workload.microbatches, par.tp, 1, TP_SHARE)
        for name, count in tp_calls(workload).items()
    ]


def _pp(workload: Workload) -> list[StepCollective]:
    par, run = workload.parallelism, workload.training
    if par.pp == 1:
        return []
    size = workload.micro_tokens * workload.model.hidden * run.activation_bytes / par.tp
    sends = 2 * workload.microbatches * par.virtual_stages
    how = BESIDE_COMPUTE if par.p2p_overlapped else EXPOSED
    return [StepCollective("pp", "sendrecv", size, sends, 2, par.tp * par.dp_ranks, how)]


def _dp(workload: Workload) -> list[StepCollective]:
    par, run = workload.parallelism, workload.training
    if par.dp_ranks == 1:
        return []
    params = moe.rank_params(workload)
    m = workload.microbatches
    reduce = "all_reduce" if par.zero == 0 else "reduce_scatter"
    out = _buckets(workload, reduce, params * run.grad_bytes, m if par.zero >= 2 else 1)
    if par.zero:
        gathers = 2 * m if par.zero == 3 else 1
        gathered = params * (run.gather_bytes or run.param_bytes)
        out += _buckets(workload, "all_gather", gathered, gathers)
    return out


def _buckets(
    workload: Workload, collective: str, size_bytes: float, times: int
) -> list[StepCollective]:
    """`times` passes over `size_bytes`, each one collective or DDP's buckets of it."""
    par = workload.parallelism
    bucket = par.dp_bucket_mb * MIB
    overlap = BESIDE_COMPUTE if par.dp_overlap else EXPOSED

    def one(size: float, count: float) -> StepCollective:
        return StepCollective("dp", collective, size, count, par.dp_ranks, par.tp, overlap)

    if not bucket or size_bytes <= bucket:
        return [one(size_bytes, times)]
    full, rest = divmod(size_bytes, bucket)
    return [one(bucket, full * times), *([one(rest, times)] if rest else [])]
