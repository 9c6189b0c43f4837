"""Tensor-parallel communication overlapped with the GEMMs, as Transformer Engine's
userbuffers do it (Megatron-Core `--tp-comm-overlap`, NeMo / Megatron-Bridge
`tp_comm_overlap`): `--tp-overlap 1`.

The method, in full: docs/mfu/tp-overlap.md#analysis-mfu-tp-overlap-py.
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


# Transformer Engine's userbuffer pairs (its ub_cfg keys), what each overlaps, and the
# methods the estimate prices for it: the all-gathers before a GEMM (forward: qkv, fc1; the
# input gradient: proj, fc2), the forward's reduce-scatters after one (proj, fc2), the
# backward's re-gathers beside the input gradient (qkv_dgrad, fc1_dgrad) and input-gradient
# reduce-scatters beside the weight gradient (qkv_wgrad, fc1_wgrad).
ALL_GATHER_PAIRS = ("qkv_fprop", "fc1_fprop", "proj_dgrad", "fc2_dgrad")
REDUCE_SCATTER_PAIRS = ("proj_fprop", "fc2_fprop")
BULK_PAIRS = ("qkv_dgrad", "fc1_dgrad", "qkv_wgrad", "fc1_wgrad")
PAIR_METHODS = {
    **{name: ("ring_exchange",) for name in ALL_GATHER_PAIRS},
    **{name: ("pipeline", "ring_exchange") for name in REDUCE_SCATTER_PAIRS},
    **{name: ("bulk",) for name in BULK_PAIRS},
}


@dataclass(frozen=True)
class PairMethod:
    """How TE overlaps one pair (one entry of its ub_cfg)."""

    method: str  # ring_exchange, pipeline or bulk
    sms: int  # num_sm: SMs the communication kernels take
    splits: int = DEFAULT_CHUNKS  # num_splits: the pipeline's GEMM chunks
    aggregate: bool = False  # ring exchange: GEMM chunks of two shards


@dataclass(frozen=True)
class TpOverlapSettings:
    """How the userbuffer overlap is configured (TE's ub_cfg): `chunks` and `sms` for every
    pair TE's defaults give them to, `pairs` overriding single pairs (a recipe's own
    configuration, `--tp-overlap FILE`)."""

    chunks: int = DEFAULT_CHUNKS  # GEMM chunks of the pipelined reduce-scatter (num_splits)
    sms: int = DEFAULT_SMS  # SMs the pipelined and bulk communication kernels take (num_sm)
    pairs: tuple[tuple[str, PairMethod], ...] = ()

    def __post_init__(self) -> None:
        for name, pair in self.pairs:
            if name not in PAIR_METHODS:
                raise SpecError("--tp-overlap", name, f"is not one of {', '.join(PAIR_METHODS)}")
            if pair.method not in PAIR_METHODS[name]:
                raise SpecError(
                    "--tp-overlap",
                    f"{name}: {pair.method}",
                    f"is not priced; {name} takes {' or '.join(PAIR_METHODS[name])}",
                )
            if pair.sms < 0 or pair.splits < 1:
                raise SpecError("--tp-overlap", name, "needs num_sm >= 0 and num_splits >= 1")

    def pair(self, name: str) -> PairMethod:
        """The pair's method: its own entry, else Transformer Engine's default."""
        own = dict(self.pairs).get(name)
        if own is not None:
            return own
        if name in ALL_GATHER_PAIRS:
            return PairMethod("ring_exchange", RING_EXCHANGE_SMS)
        if name in REDUCE_SCATTER_PAIRS:
            return PairMethod("pipeline", self.sms, self.chunks)
        return PairMethod("bulk", self.sms)


def pairs_from_config(config: object, source: str = "") -> tuple[tuple[str, PairMethod], ...]:
    """TE's ub_cfg as NeMo and Megatron-Bridge write it ({pair: {method, num_sm,
    num_splits, aggregate, ...}}; a `ub_tp_comm_overlap_cfg` key around it is accepted),
    as settings pairs (`source`: the file, for the error). cga_size, set_sm_margin, fp8_buf
    and atomic_gemm are not priced."""
    if isinstance(config, dict) and "ub_tp_comm_overlap_cfg" in config:
        config = config["ub_tp_comm_overlap_cfg"]
    if not isinstance(config, dict) or not config:
        raise SpecError("--tp-overlap", source or config, "must map TE's pair names to methods")
    out = []
    for name, entry in config.items():
        if not isinstance(entry, dict) or "method" not in entry:
            raise SpecError("--tp-overlap", name, "needs a method")
        method = str(entry["method"])
        default_sms = RING_EXCHANGE_SMS if method == "ring_exchange" else DEFAULT_SMS
        try:
            pair = PairMethod(
                method,
                int(entry.get("num_sm", default_sms)),
                int(entry.get("num_splits", DEFAULT_CHUNKS)),
                bool(int(entry.get("aggregate", 0))),
            )
        except (TypeError, ValueError):
            raise SpecError("--tp-overlap", name, "num_sm, num_splits must be numbers") from None
        out.append((str(name), pair))
    return TpOverlapSettings(pairs=tuple(out)).pairs  # the names and methods validated


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


def sm_share(sms: int, sm_count: int | None) -> float:
    """The share of the SMs communication kernels take (0 when the count is unknown)."""
    if sm_count is None or sms == 0:
        return 0.0
    if sms >= sm_count:
        raise SpecError("--tp-overlap", sms, f"num_sm must be fewer than the {sm_count} SMs")
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


def tp_calls(workload: Workload) -> dict[str, int]:
    """Per stage and micro-batch, each TP collective's count (one collective = the b·s·h
    activations): with sequence parallelism per layer 2 AG + 2 RS forward, 2 AG (the
    row-parallel layers' output gradients) + 2 AG (the column-parallel inputs re-gathered)
    + 2 RS backward; without it 2 all-reduces each way. A recomputed forward adds its own;
    per-op checkpointing (--recompute op) keeps the reduce-scatters' outputs, not the
    gathers' (nor the all-reduces'), and runs those 2 again in its other layers."""
    layers, again = workload.layers_per_stage, workload.recomputed_layers
    op = layers - again if workload.training.recompute == "op" else 0
    if workload.parallelism.sequence_parallel:
        return {
            "all_gather": 6 * layers + 2 * again + 2 * op,
            "reduce_scatter": 4 * layers + 2 * again,
        }
    return {"all_reduce": 4 * layers + 2 * (again + op)}


def async_backward(workload: Workload, gemm_s: GemmSeconds, comm_s: CommSeconds) -> Overlapped:
    """TP without userbuffers, per stage and micro-batch: what Megatron's async backward
    hides (each column-parallel layer's input-gradient reduction beside its weight
    gradient, its input re-gather beside its input gradient) and what stays exposed."""
    par, run = workload.parallelism, workload.training
    size = workload.micro_tokens * workload.model.hidden * run.activation_bytes
    calls = tp_calls(workload)
    one = {name: comm_s(name, size, par.tp, 1) for name in calls}
    total_s = sum(one[name] * count for name, count in calls.items())
    gemms = {(gemm.op, gemm.pass_name): gemm for gemm in layer_gemms(workload)}

    def beside(name: str, op: str, pass_name: str) -> float:
        """The part of one collective the GEMM does not cover (all of it: no such GEMM)."""
        gemm = gemms.get((op, pass_name))
        return one[name] if gemm is None else max(0.0, one[name] - gemm_s(gemm))

    hidden_here = 0.0  # per layer: the collectives issued beside a GEMM, at their full time
    exposed_here = 0.0  # per layer: what those leave exposed
    if par.tp_async_backward:
        reduction = "reduce_scatter" if par.sequence_parallel else "all_reduce"
        for op in ("qkv", "mlp_up"):
            hidden_here += one[reduction]
            exposed_here += beside(reduction, op, "wgrad")
            if par.sequence_parallel:
                hidden_here += one["all_gather"]
                exposed_here += beside("all_gather", op, "dgrad")
    exposed_s = total_s - (hidden_here - exposed_here) * workload.layers_per_stage
    return Overlapped(total_s, exposed_s)


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
    size = workload.micro_tokens * workload.model.hidden * run.activation_bytes
    gathered_s = comm_s("all_gather", size, tp, 1)
    scattered_s = comm_s("reduce_scatter", size, tp, 1)
    step_s = comm_s("sendrecv", size / tp, 2, 1)
    gemms = {(gemm.op, gemm.pass_name): gemm for gemm in layer_gemms(workload)}

    def paired(name: str, op: str, pass_name: str, comm: float) -> Overlapped:
        """TE's pair `name`: the collective beside the layer's GEMM, by the pair's method."""
        gemm = gemms.get((op, pass_name))
        if gemm is None:  # a MoE or MLA layer's own GEMMs: not paired, exposed
            return Overlapped(comm, comm)
        pair = settings.pair(name)
        share = sm_share(pair.sms, sm_count)
        if pair.method == "ring_exchange":  # tp GEMM chunks (two shards each when aggregated)
            steps = tp // 2 if pair.aggregate and tp % 2 == 0 else tp
            chunk = gemm_s(_rows(gemm, steps))
            overlapped = ring_exchange(gemm_s(gemm), chunk, step_s * tp / steps, steps, share)
        elif pair.method == "pipeline":  # a forward reduce-scatter in pieces after its GEMM
            piece_s = comm_s("reduce_scatter", size / pair.splits, tp, 1)
            chunk = gemm_s(_rows(gemm, pair.splits))
            overlapped = pipelined(gemm_s(gemm), chunk, piece_s, pair.splits, share)
        else:  # bulk: one collective beside a whole GEMM of the same layer
            overlapped = bulk(gemm_s(gemm), comm, share)
        return overlapped + Overlapped(comm)

    forward = (
        paired("qkv_fprop", "qkv", "fwd", gathered_s)
        + paired("proj_fprop", "attn_proj", "fwd", scattered_s)
        + paired("fc1_fprop", "mlp_up", "fwd", gathered_s)
        + paired("fc2_fprop", "mlp_down", "fwd", scattered_s)
    )
    backward = (
        paired("fc2_dgrad", "mlp_down", "dgrad", gathered_s)
        + paired("fc1_wgrad", "mlp_up", "wgrad", scattered_s)
        + paired("fc1_dgrad", "mlp_up", "dgrad", gathered_s)
        + paired("proj_dgrad", "attn_proj", "dgrad", gathered_s)
        + paired("qkv_wgrad", "qkv", "wgrad", scattered_s)
        + paired("qkv_dgrad", "qkv", "dgrad", gathered_s)
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
    if settings.pairs:
        own = ", ".join(
            f"{name} {pair.method} on {pair.sms} SM{'' if pair.sms == 1 else 's'}"
            + (f" in {pair.splits} chunks" if pair.method == "pipeline" else "")
            + (" aggregated" if pair.aggregate else "")
            for name, pair in settings.pairs
        )
        return f"TP userbuffer overlap as configured (--tp-overlap FILE): {own}"
    return (
        f"TP userbuffer overlap: all-gathers by ring exchange in {tp} GEMM chunks, "
        f"forward reduce-scatters pipelined in {settings.chunks} chunks {sms}, backward "
        "reduce-scatters beside the weight gradient and re-gathers beside the input gradient"
    )


def _rows(gemm: Gemm, chunks: int) -> Gemm:
    """One of `chunks` pieces of `gemm` split along M (the tokens)."""
    return replace(gemm, m=math.ceil(gemm.m / chunks))
