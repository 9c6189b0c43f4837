"""Tensor-parallel communication overlapped with the GEMMs, as Transformer Engine's
userbuffers do it (Megatron-Core `--tp-comm-overlap`, NeMo / Megatron-Bridge
`tp_comm_overlap`): `--tp-overlap 1`.

Megatron-Core allows it only with sequence parallelism (megatron/training/arguments.py:
"Tensor parallel communication/GEMM overlap can happen only when sequence parallelism is
enabled"), so each TP collective is an all-gather (AG) before a column-parallel GEMM or a
reduce-scatter (RS) after a row-parallel one. Transformer Engine pairs them with GEMMs
(transformer_engine/pytorch/module/base.py, initialize_ub: `methods`, TE 1.7 to 2.x) and
this module prices each pair, per layer and micro-batch (s = one collective's size):
- **ring exchange** (AG before qkv and mlp_up forward, before attn_proj and mlp_down
  input gradient): the GEMM runs in tp chunks of M/tp rows. The first chunk is the
  rank's own shard; each other chunk waits for its shard, sent by the neighbour (one
  send of s/tp over the scale-up per step) beside the chunk before it
  (comm_gemm_overlap.h, split_overlap_ag_p2p). Time g + (tp - 1)·max(g, c): hidden
  while a chunk's GEMM g outlasts a step's send c, else the sends are the critical path.
  The sends run on the copy engine; the kernel that syncs them takes RING_EXCHANGE_SMS.
  (A GEMM this module does not know, a MoE layer's experts or an MLA projection, leaves
  its collective exposed.)
- **pipeline** (RS after attn_proj and mlp_down forward): the GEMM in `chunks` chunks of
  M/chunks rows (TE's num_splits, default 4), each chunk's reduce-scatter (s/chunks)
  beside the next chunk's GEMM; the last chunk's reduce-scatter is exposed
  (split_overlap_rs: "Last communication chunk with max SM"). The communication kernels
  take `sms` SMs (TE's num_sm, default 16), and the GEMM runs on the rest (set_sm_margin,
  as every NeMo / Megatron-Bridge userbuffer configuration sets for pipeline overlap):
  each chunk takes sm_count / (sm_count - sms) times as long.
  Time g' + (chunks - 1)·max(g', r) + r.
- **bulk** (the input gradient's RS in the backward, after qkv and mlp_up): one
  reduce-scatter beside the weight-gradient GEMM of the same layer, its kernels on `sms`
  SMs; the GEMM runs on the rest while both run, and what the GEMM does not cover is
  exposed.
Recomputing a layer's forward (full recompute, --recompute-layers) repeats its pairs.
The collectives' total stays what they would cost unoverlapped (analysis/mfu/step_collectives.py lists the same ones); the exposed part
is what the chunks leave on the critical path, and the GEMM slowdown is what chunking
(smaller GEMMs, priced at their own shape) and the SM share add to the GEMMs' time.

Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from collbench.analysis.mfu.compute import layer_gemms
from collbench.analysis.mfu.workload import Workload
from collbench.analysis.model.gemm_model import Gemm
from collbench.core.errors import SpecError

# TE's defaults (transformer_engine/pytorch/module/base.py, initialize_ub,
# get_default_config): "num_sm": 1 if method == "ring_exchange" else 16, "num_splits": 4
# for pipeline (the ring exchange always has tp chunks).
DEFAULT_CHUNKS = 4
DEFAULT_SMS = 16
RING_EXCHANGE_SMS = 1

# (collective, size_bytes, ranks, stride) -> seconds; GEMM -> seconds in the step
CommSeconds = Callable[[str, float, int, int], float]
GemmSeconds = Callable[[Gemm], float]


@dataclass(frozen=True)
class TpOverlapSettings:
    """How the userbuffer overlap is configured (TE's ub_cfg, one value for every layer)."""

    chunks: int = DEFAULT_CHUNKS  # GEMM chunks of the pipelined reduce-scatter (num_splits)
    sms: int = DEFAULT_SMS  # SMs the pipelined and bulk communication kernels take (num_sm)

    def __post_init__(self) -> None:
        if self.chunks < 1:
            raise SpecError("--tp-overlap-chunks", self.chunks, "must be at least 1")
        if self.sms < 0:
            raise SpecError("--tp-overlap-sms", self.sms, "must be 0 or more")


@dataclass(frozen=True)
class Overlapped:
    """One GEMM and the collective beside it, or a sum of them (seconds)."""

    comm_s: float = 0.0  # the collective unoverlapped
    exposed_s: float = 0.0  # communication left on the critical path
    slowdown_s: float = 0.0  # GEMM time added by chunking and the SMs the comm takes

    def __add__(self, other: Overlapped) -> Overlapped:
        return Overlapped(
            self.comm_s + other.comm_s,
            self.exposed_s + other.exposed_s,
            self.slowdown_s + other.slowdown_s,
        )

    def times(self, count: float) -> Overlapped:
        return Overlapped(self.comm_s * count, self.exposed_s * count, self.slowdown_s * count)

    @property
    def hidden_s(self) -> float:
        """The collective's time taken off the critical path (negative: chunking made
        the communication itself cost more than unoverlapped)."""
        return self.comm_s - self.exposed_s


def sm_share(sms: int, sm_count: int | None) -> float:
    """The share of the SMs communication kernels take (0 when the count is unknown)."""
    if sm_count is None or sms == 0:
        return 0.0
    if sms >= sm_count:
        raise SpecError("--tp-overlap-sms", sms, f"must be fewer than the {sm_count} SMs")
    return sms / sm_count


def ring_exchange(
    full_s: float, chunk_s: float, step_s: float, tp: int, share: float
) -> Overlapped:
    """An all-gather as tp - 1 neighbour sends (`step_s` each) beside tp GEMM chunks
    (`chunk_s` each alone; `full_s` the GEMM unchunked)."""
    g = chunk_s / (1 - share)
    total_s = g + (tp - 1) * max(g, step_s)
    return Overlapped(0.0, total_s - tp * g, tp * g - full_s)


def pipelined(
    full_s: float, chunk_s: float, chunk_comm_s: float, chunks: int, share: float
) -> Overlapped:
    """A reduce-scatter in `chunks` pieces (`chunk_comm_s` each), each beside the next GEMM
    chunk (`chunk_s` alone, on 1 - share of the SMs); the last one exposed."""
    g = chunk_s / (1 - share)
    total_s = g + (chunks - 1) * max(g, chunk_comm_s) + chunk_comm_s
    return Overlapped(0.0, total_s - chunks * g, chunks * g - full_s)


def bulk(gemm_s: float, comm_s: float, share: float) -> Overlapped:
    """One collective beside a whole GEMM: the GEMM runs on 1 - share of the SMs while
    both run; the communication the (stretched) GEMM does not cover is exposed."""
    beside_s = min(comm_s, gemm_s)  # GEMM work done while the collective runs
    slowdown_s = beside_s * share / (1 - share)
    return Overlapped(0.0, max(0.0, comm_s - gemm_s - slowdown_s), slowdown_s)


def overlapped_tp(
    workload: Workload,
    gemm_s: GemmSeconds,
    comm_s: CommSeconds,
    settings: TpOverlapSettings,
    sm_count: int | None,
) -> Overlapped:
    """The step's TP collectives under userbuffer overlap: unoverlapped total, exposed
    part and GEMM slowdown, over the stage's layers and the step's micro-batches."""
    par, run = workload.parallelism, workload.training
    if not par.sequence_parallel:
        raise SpecError(
            "--tp-overlap",
            1,
            "needs --sequence-parallel (Megatron-Core allows TP communication overlap "
            "only with sequence parallelism)",
        )
    tp = par.tp
    size = run.micro_batch * run.seq * workload.model.hidden * run.activation_bytes
    gathered_s, scattered_s = (
        comm_s("all_gather", size, tp, 1),
        comm_s("reduce_scatter", size, tp, 1),
    )
    step_s = comm_s("sendrecv", size / tp, 2, 1)
    piece_s = comm_s("reduce_scatter", size / settings.chunks, tp, 1)
    ring_share = sm_share(RING_EXCHANGE_SMS, sm_count)
    share = sm_share(settings.sms, sm_count)
    gemms = {(gemm.op, gemm.pass_name): gemm for gemm in layer_gemms(workload)}

    def ring(op: str, pass_name: str) -> Overlapped:
        gemm = gemms.get((op, pass_name))
        if gemm is None:  # a MoE or MLA layer's own GEMMs: not paired, exposed
            return Overlapped(gathered_s, gathered_s)
        chunk = gemm_s(_rows(gemm, tp))
        return ring_exchange(gemm_s(gemm), chunk, step_s, tp, ring_share) + Overlapped(gathered_s)

    def pipe(op: str) -> Overlapped:
        gemm = gemms.get((op, "fwd"))
        if gemm is None:
            return Overlapped(scattered_s, scattered_s)
        chunk = gemm_s(_rows(gemm, settings.chunks))
        overlapped = pipelined(gemm_s(gemm), chunk, piece_s, settings.chunks, share)
        return overlapped + Overlapped(scattered_s)

    def beside_wgrad(op: str) -> Overlapped:
        gemm = gemms.get((op, "wgrad"))
        if gemm is None:
            return Overlapped(scattered_s, scattered_s)
        return bulk(gemm_s(gemm), scattered_s, share) + Overlapped(scattered_s)

    forward = ring("qkv", "fwd") + pipe("attn_proj") + ring("mlp_up", "fwd") + pipe("mlp_down")
    backward = (
        ring("mlp_down", "dgrad")
        + beside_wgrad("mlp_up")
        + ring("attn_proj", "dgrad")
        + beside_wgrad("qkv")
    )
    # Each recomputed layer (all of them with full recompute) runs its forward pairs again.
    per_stage = (forward + backward).times(workload.layers_per_stage) + forward.times(
        workload.recomputed_layers
    )
    return per_stage.times(workload.microbatches)


def describe(settings: TpOverlapSettings, tp: int, sm_count: int | None) -> str:
    """One line: how the overlap is priced."""
    sms = (
        f"on {settings.sms} of {sm_count} SMs"
        if sm_count
        else f"on {settings.sms} SMs (SM share not priced: the topology gives no sm_count)"
    )
    return (
        f"TP userbuffer overlap: all-gathers by ring exchange in {tp} GEMM chunks, "
        f"forward reduce-scatters pipelined in {settings.chunks} chunks {sms}, backward "
        "reduce-scatters beside the weight gradient"
    )


def _rows(gemm: Gemm, chunks: int) -> Gemm:
    """One of `chunks` pieces of `gemm` split along M (the tokens)."""
    return replace(gemm, m=math.ceil(gemm.m / chunks))
