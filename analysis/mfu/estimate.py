"""The training-MFU estimator: one optimizer step of a workload on a fabric, and how much
MFU its exposed collectives cost.

The method, in full: docs/mfu/index.md#analysis-mfu-estimate-py.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from collbench.analysis.mfu import moe
from collbench.analysis.mfu.accuracy import family
from collbench.analysis.mfu.compute import (
    IN_STEP_SHARE,
    GemmPricer,
    MicroBatchCompute,
    micro_batch_compute,
    model_pricer,
)
from collbench.analysis.mfu.memory import MemoryEstimate, memory_estimate
from collbench.analysis.mfu.tp_overlap import (
    GemmSeconds,
    PairMethod,
    TpOverlapSettings,
    async_backward,
    describe,
    overlapped_tp,
    tp_calls,
)
from collbench.analysis.mfu.workload import Parallelism, Workload
from collbench.analysis.model.gemm_model import Gemm, GemmTime
from collbench.core.errors import SpecError
from collbench.core.units import check_number
from collbench.topologies.schema import Topology, unmeasured_figures

MIB = 1 << 20
# Where a collective's time came from: a measured curve, the cost model, or both.
MEASURED, PREDICTED, MIXED, NOTHING_PRICED = "measured", "predicted", "measured+predicted", "-"


@dataclass(frozen=True)
class Priced:
    """One collective's time and where the figure came from (measured or predicted)."""

    time_s: float
    source: str
    measured: bool = False  # from a measured curve (else predicted by a model)


# (collective, size_bytes per rank as nccl-tests counts it, ranks, stride) -> Priced
Pricer = Callable[[str, float, int, int], Priced]


@dataclass(frozen=True)
class Skew:
    """`mfu --skew-from`: matmul rates measured accelerator by accelerator (doctor's gemm
    burn-ins). A synchronous step goes at its slowest accelerator's pace."""

    tflops: tuple[float, ...]
    device: str  # what they were measured on (a fabric of another accelerator ignores them)
    runs: str

    def slowest(self, accelerators: int) -> tuple[float, float, float]:
        """(the expected slowest rate of `accelerators`: of as many burn-ins drawn at random
        where there are that many, else of a normal of their mean and sd by Blom's top order
        statistic; that mean; that sd); SpecError at <= 0."""
        rates, n, z = self.tflops, len(self.tflops), statistics.NormalDist().inv_cdf
        mean, sd = statistics.fmean(rates), statistics.stdev(rates)
        slowest = mean - sd * z((accelerators - 0.375) / (accelerators + 0.25))
        if accelerators <= n:  # P(none of the i slowest drawn) = C(n - i, N) / C(n, N)
            slowest, none = 0.0, 1.0  # the i-th slowest is the least with none(i) - none(i + 1)
            for i, rate in enumerate(sorted(rates)):
                after = none * max(0, n - i - accelerators) / (n - i)
                slowest, none = slowest + rate * (none - after), after
        if slowest <= 0:
            why = f"spread too wide (sd {sd:.3g} of a mean {mean:.3g} TFLOP/s) to extrapolate"
            raise SpecError("--skew-from", self.runs, f"{why} to {accelerators:,} accelerators")
        return slowest, mean, sd


# Lee et al. 2025 (arXiv 2507.03114): GEMMs and layers beside NCCL/RCCL collectives on 4
# A100, H100, MI250 and MI210, GPT and Llama shapes: 18.9% slower on average (at most 40%)
LEE_SLOWDOWN = 0.189  # the default without a probe (--overlap RUN): below, its two options


@dataclass(frozen=True)
class EstimateOptions:
    """What the estimator assumes beyond the workload and the fabric."""

    # None: each GEMM's efficiency from its shape and the accelerator (analysis.gemm_model);
    # a number: every GEMM at that share of the peak (--matmul-efficiency); (NAME, share)
    # pairs: per fabric, NAME a topology or accelerator ("mi300x", "h100"; "": every other)
    matmul_efficiency: float | tuple[tuple[str, float], ...] | None = None
    overlap_efficiency: float = 1 - LEE_SLOWDOWN  # share of a collective hidden beside compute
    compute_slowdown: float = LEE_SLOWDOWN  # compute beside a collective takes (1 + this) x
    # 0: TP collectives on the critical path (Megatron's default); 1: Transformer Engine's
    # userbuffer overlap, priced chunk by chunk (analysis.mfu.tp_overlap)
    tp_overlap: float = 0.0
    # a recipe's own userbuffer configuration, pair by pair (--tp-overlap FILE: tp_overlap 1)
    tp_overlap_pairs: tuple[tuple[str, PairMethod], ...] = ()
    overlap_source: str = (
        f"compute {LEE_SLOWDOWN:.1%} slower beside it, Lee et al. 2025's mean (no probe given)"
    )
    skew: Skew | None = None  # --skew-from: the step waits for its slowest accelerator

    @property
    def tp_overlap_settings(self) -> TpOverlapSettings:
        return TpOverlapSettings(pairs=self.tp_overlap_pairs)

    def on(self, topology: Topology) -> EstimateOptions:
        """These options on one fabric: the --matmul-efficiency its topology's name gives,
        else its accelerator's model number, else a plain X (else None); the --skew-from
        burn-ins where they were measured on its accelerator's model."""
        model = family(topology.accelerator.name)
        ours = self.skew is None or model is not None and family(self.skew.device) == model
        options = self if ours else replace(self, skew=None)
        if not isinstance(given := options.matmul_efficiency, tuple):
            return options
        shares, names = dict(given), (topology.name.lower(), (model or "").lower(), "")
        return replace(
            options, matmul_efficiency=next((shares[n] for n in names if n in shares), None)
        )

    def __post_init__(self) -> None:
        given = self.matmul_efficiency
        for _, share in given if isinstance(given, tuple) else [("", given)] * (given is not None):
            check_number("share", share, "--matmul-efficiency")
        if not 0 <= self.overlap_efficiency <= 1:
            raise SpecError("overlap efficiency", self.overlap_efficiency, "must be in [0, 1]")
        if self.tp_overlap not in (0, 1):
            raise SpecError(
                "--tp-overlap",
                self.tp_overlap,
                "is 0 (TP collectives exposed) or 1 (userbuffer overlap, priced chunk by "
                "chunk); a share hidden is not taken, it follows from the GEMMs and collectives",
            )
        _ = self.tp_overlap_settings  # validates them


@dataclass(frozen=True)
class CommKind:
    """One kind of communication in a step: its total time and the part left exposed."""

    kind: str  # "tp", "pp", "dp"
    collectives: str  # e.g. "all_reduce 100.7 MB x 4/layer"
    total_s: float
    exposed_s: float
    source: str
    origin: str = NOTHING_PRICED  # MEASURED, PREDICTED, MIXED or NOTHING_PRICED
    slowdown_s: float = 0.0  # compute it stretched (TP overlap: GEMM chunks, SM share)


@dataclass(frozen=True)
class Estimate:
    """One workload on one fabric: the step's breakdown and its MFU."""

    topology: str
    nodes: int
    accelerators: int
    peak_tflops: float
    step_time_s: float
    compute_s: float  # critical-path compute, recompute included, no bubble
    bubble_s: float
    comm: tuple[CommKind, ...]
    slowdown_s: float  # compute stretched by the collectives beside it
    # compute and bare bubble stretched by the slowest accelerator (None: --skew-from not here)
    straggler_s: float | None
    mfu: float
    hfu: float
    mfu_loss_comm: float
    tokens_per_s: float
    model_tflops_per_accelerator: float
    what_if: dict[str, float] = field(default_factory=dict)  # name -> MFU
    # name -> where a what-if's collective times came from (absent: none are paid)
    what_if_origin: dict[str, str] = field(default_factory=dict)
    assumptions: tuple[str, ...] = ()
    memory: MemoryEstimate | None = None
    warnings: tuple[str, ...] = ()  # inputs that did not apply to this fabric, and why
    micro: MicroBatchCompute | None = None  # one micro-batch's compute, operator by operator
    microbatches: int = 0
    # `mfu --curves LABEL=RUN`: the label of the measured curves this column was priced
    # with ("": the fabric's own), and whether they are the default's (the baseline's)
    curves_label: str = ""
    curves_default: bool = False
    # The workload does not fit this fabric's memory (and --allow-oversubscribed-memory was
    # not given): its column says so instead of figures (analysis/mfu/fabrics.check_memory).
    does_not_fit: bool = False
    accelerator: str = ""  # the fabric's accelerator, by name (analysis/mfu/accuracy.py)

    @property
    def exposed_comm_s(self) -> float:
        return sum(kind.exposed_s for kind in self.comm)

    @property
    def origin(self) -> str:
        """Where the step's collective times came from, all kinds together."""
        return combined_origin(kind.origin for kind in self.comm)


def estimate(
    workload: Workload,
    topology: Topology,
    pricer: Pricer,
    options: EstimateOptions = EstimateOptions(),
    gemms: GemmPricer | None = None,
) -> Estimate:
    """Price one step of `workload` on `topology` (whose node count must fit it); GEMMs
    from `gemms` (measured) where given, else from their shapes."""
    accelerators = workload.parallelism.world_size
    if accelerators > topology.world_size:
        raise SpecError(
            "--nodes",
            topology.nodes,
            f"x {topology.accelerators_per_node} accelerators on {topology.name} is fewer than "
            f"tp x pp x dp = {accelerators}",
        )
    options, peak = options.on(topology), peak_flops(workload, topology)
    priced_gemms = gemm_pricer(topology, peak, options, gemms, workload.training.dtype)
    micro = micro_batch_compute(workload, topology.accelerator, peak, priced_gemms)

    def gemm_s(gemm: Gemm) -> float:
        """A GEMM's time inside the step, as analysis.compute prices it (TP overlap's chunks)."""
        return priced_gemms(gemm).time_s / IN_STEP_SHARE

    m, sm_count = workload.microbatches, topology.accelerator.sm_count
    tp = _tp_comm(workload, pricer, options, gemm_s, sm_count)
    pp = _pp_comm(workload, pricer, options, micro)
    cp_ep = _cp_ep_comm(workload, pricer, micro, sm_count, options.compute_slowdown)
    # TP, CP/EP and PP collectives stretch every micro-batch's pipeline slot; DP's come per step.
    in_micro_s = sum(k.exposed_s + k.slowdown_s for k in (tp, pp, *cp_ep))
    bubble_s = _bubble_s(workload, micro, micro.total_s + in_micro_s / m)
    dp, slowdown_s = _dp_comm(workload, pricer, options, micro)
    compute_s = m * micro.total_s + micro.optimizer_s
    # Every collective hidden, no compute slowed: the compute and the bare pipeline bubble,
    # which the slowest accelerator stretches (every stage's slots wait for it).
    ideal_s = compute_s + _bubble_s(workload, micro, micro.total_s)
    straggler_s = None  # (None: no --skew-from burn-ins of this fabric's accelerator)
    if options.skew is not None:
        slowest, mean, _ = options.skew.slowest(accelerators)
        straggler_s = ideal_s * (mean / slowest - 1)
    step_s = compute_s + in_micro_s + bubble_s + dp.exposed_s + slowdown_s + (straggler_s or 0)
    ideal_s += straggler_s or 0
    slowdown_s += sum(k.slowdown_s for k in (tp, pp, *cp_ep))  # (in in_micro_s already)
    model_flops = workload.model_flops_per_token * workload.tokens_per_step
    hardware_flops = workload.hardware_flops_per_token * workload.tokens_per_step
    mfu = model_flops / (step_s * accelerators * peak)
    mfu_ideal = model_flops / (ideal_s * accelerators * peak)
    return Estimate(
        topology=topology.name,
        nodes=topology.nodes,
        accelerators=accelerators,
        peak_tflops=peak / 1e12,
        step_time_s=step_s,
        compute_s=compute_s,
        bubble_s=bubble_s,
        comm=(tp, *cp_ep, pp, dp),
        slowdown_s=slowdown_s,
        straggler_s=straggler_s,
        mfu=mfu,
        hfu=hardware_flops / (step_s * accelerators * peak),
        mfu_loss_comm=mfu_ideal - mfu,
        tokens_per_s=workload.tokens_per_step / step_s,
        model_tflops_per_accelerator=model_flops / step_s / accelerators / 1e12,
        what_if={"perfect_overlap": mfu_ideal},
        assumptions=_assumptions(workload, options, micro, sm_count) + unmeasured_figures(topology),
        memory=memory_estimate(workload, topology.accelerator.memory_gib),
        micro=micro,
        microbatches=m,
        accelerator=topology.accelerator.name,
    )


def combined_origin(origins: Iterable[str]) -> str:
    """MEASURED or PREDICTED when every priced part agrees, MIXED when they do not."""
    seen = {origin for origin in origins if origin != NOTHING_PRICED}
    if not seen:
        return NOTHING_PRICED
    return seen.pop() if len(seen) == 1 else MIXED


def _comm_kind(
    kind: str,
    what: str,
    total_s: float,
    exposed_s: float,
    named: Mapping[str, Priced | _Bucketed],
    slowdown_s: float = 0.0,
) -> CommKind:
    """A CommKind of the collectives `named` (name -> price): one source when every
    collective's agrees, else each collective's own; the origin of their times."""
    sources = {item.source for item in named.values()}
    each = "; ".join(f"{name} {item.source}" for name, item in named.items())
    source = sources.pop() if len(sources) == 1 else each
    origin = combined_origin(MEASURED if item.measured else PREDICTED for item in named.values())
    return CommKind(kind, what, total_s, exposed_s, source, origin, slowdown_s)


def peak_flops(workload: Workload, topology: Topology) -> float:
    """The accelerator's dense peak in the workload's compute dtype (FLOP/s)."""
    accelerator = topology.accelerator
    if workload.training.dtype == "fp8":
        if accelerator.peak_fp8_tflops is None:
            raise SpecError(
                "--dtype",
                "fp8",
                f"{topology.name}'s accelerator ({accelerator.name}) has no fp8 peak in its "
                "topology file",
            )
        return accelerator.peak_fp8_tflops * 1e12
    return accelerator.peak_bf16_tflops * 1e12


def _bubble_s(workload: Workload, micro: MicroBatchCompute, slot_s: float) -> float:
    """The pipeline bubble in slots of `slot_s`: a micro-batch's compute and its collectives
    on the critical path (1F1B, interleaved; DualPipe's own)."""
    par = workload.parallelism
    dualpipe = moe.dualpipe_bubble_s(workload, micro.forward_s, micro.backward_s)
    if dualpipe is not None:
        return dualpipe * slot_s / micro.total_s
    return (par.pp - 1) / par.virtual_stages * slot_s


def _cp_ep_comm(
    workload: Workload,
    pricer: Pricer,
    micro: MicroBatchCompute,
    sm_count: int | None,
    slowdown: float,
) -> tuple[CommKind, ...]:
    """The context-parallel K/V ring and the expert-parallel all-to-alls (analysis.mfu.moe),
    where the workload has them; `sm_count` prices the SMs the EP kernels hold (None: not
    priced), `slowdown` the compute beside NCCL's all-to-alls (no --ep-sms)."""
    attention = next(op for op in micro.layer if op.op == "attention")
    window_s = moe.overlap_window_s(workload, micro.layer)
    exchanges = (
        ("cp", moe.cp_exchange(workload, pricer, attention.forward_s, attention.backward_s)),
        ("ep", moe.ep_exchange(workload, pricer, window_s, sm_count, slowdown)),
    )
    return tuple(
        _comm_kind(kind, one.what, one.total_s, one.exposed_s, one.priced, one.slowdown_s)
        for kind, one in exchanges
        if one.priced
    )


def gemm_pricer(
    topology: Topology,
    peak_flops: float,
    options: EstimateOptions,
    measured: GemmPricer | None,
    dtype: str = "bf16",
) -> GemmPricer:
    """Measured GEMM prices where given (they fall back on their own), else the shape
    model; --matmul-efficiency prices every GEMM at one share of the peak instead."""
    if measured is not None:
        return measured

    def priced(peak: float, dtype: str) -> GemmPricer:
        if (efficiency := options.matmul_efficiency) is None:
            return model_pricer(topology.accelerator, peak, dtype)
        return lambda gemm: GemmTime(gemm.flops / (peak * efficiency), efficiency, "given", "-", 1)

    layers = priced(peak_flops, dtype)
    if dtype != "fp8":
        return layers
    # The output layer (LM head) stays in bf16 under fp8 recipes: Megatron-Core builds it as
    # a plain ColumnParallelLinear, outside Transformer Engine's fp8 autocast
    # (megatron/core/models/gpt/gpt_model.py, output_layer), and torchtitan's float8/MX
    # converters skip it (torchtitan/components/quantization/mx.py: filter_fqns ["output"]).
    head = priced(topology.accelerator.peak_bf16_tflops * 1e12, "bf16")
    return lambda gemm: (head if gemm.op == "logits" else layers)(gemm)


def _tp_comm(
    workload: Workload,
    pricer: Pricer,
    options: EstimateOptions,
    gemm_s: GemmSeconds,
    sm_count: int | None,
) -> CommKind:
    par, run = workload.parallelism, workload.training
    if par.tp == 1:
        return CommKind("tp", "none (tp = 1)", 0.0, 0.0, "-")
    size = workload.micro_tokens * workload.model.hidden * run.activation_bytes
    calls = tp_calls(workload)  # per stage and micro-batch
    named = {name: pricer(name, size, par.tp, 1) for name in calls}
    layers = workload.layers_per_stage
    what = " + ".join(f"{name} x {count / layers:g}" for name, count in calls.items())
    what = f"{what}/layer of {_mb(size)}"
    total_s = sum(named[name].time_s * count for name, count in calls.items())
    total_s *= workload.microbatches

    def comm_s(collective: str, size_bytes: float, ranks: int, stride: int) -> float:
        return pricer(collective, size_bytes, ranks, stride).time_s

    if not options.tp_overlap:
        overlap = async_backward(workload, gemm_s, comm_s).times(workload.microbatches)
        return _comm_kind("tp", what, total_s, overlap.exposed_s, named)
    overlap = overlapped_tp(workload, gemm_s, comm_s, options.tp_overlap_settings, sm_count)
    what += ", userbuffer overlap"
    return _comm_kind("tp", what, total_s, overlap.exposed_s, named, overlap.slowdown_s)


def _pp_comm(
    workload: Workload, pricer: Pricer, options: EstimateOptions, micro: MicroBatchCompute
) -> CommKind:
    par, run = workload.parallelism, workload.training
    if par.pp == 1:
        return CommKind("pp", "none (pp = 1)", 0.0, 0.0, "-")
    size = workload.micro_tokens * workload.model.hidden * run.activation_bytes / par.tp
    priced, v = pricer("sendrecv", size, 2, par.tp * par.dp_ranks), par.virtual_stages
    # Each micro-batch sends its activations forward and its gradients back once per
    # stage boundary; interleaving multiplies the boundaries by v. Overlapped (p2p_overlapped)
    # each runs beside a model chunk's forward or backward, slowing it as DP's buckets do;
    # else no window: each is waited for.
    sends, named = 2 * workload.microbatches * v, {"sendrecv": priced}
    total_s, what = priced.time_s * sends, f"sendrecv {_mb(size)} x {sends}/step"
    one = _Bucketed("sendrecv", priced.time_s, 0.0, priced.source, priced.measured)
    windows = (micro.forward_s / v, micro.backward_s / v) if par.p2p_overlapped else (0.0, 0.0)
    beside = [_beside(one, window, options) for window in windows]
    exposed_s, slowdown_s = (sends / 2 * sum(pair) for pair in zip(*beside, strict=True))
    return _comm_kind("pp", what, total_s, exposed_s, named, slowdown_s)


def _dp_comm(
    workload: Workload, pricer: Pricer, options: EstimateOptions, micro: MicroBatchCompute
) -> tuple[CommKind, float]:
    """The data-parallel collectives, their exposed part and the compute they slow."""
    par, run = workload.parallelism, workload.training
    if par.dp_ranks == 1:
        return CommKind("dp", "none (dp = 1)", 0.0, 0.0, "-"), 0.0
    # Each rank's parameters (a MoE model's experts: 1/ep of them), all priced over the
    # dp x cp group (the experts' own group is dp x cp / ep ranks: ASSUMED alike).
    params = moe.rank_params(workload)
    grads, weights = params * run.grad_bytes, params * (run.gather_bytes or run.param_bytes)
    bucket = par.dp_bucket_mb * MIB
    # fp8 weights: Megatron's DDP puts the other parameters (embeddings, output layer) in the
    # last fp8 bucket's group, reduced after the backward and gathered before the forward
    # (param_and_grad_buffer.partition_buckets): with the bucket, they are the edge.
    model, split = workload.model, 2 if par.pp > 1 and not workload.model.tied_embeddings else 1
    other = model.embedding_params / par.tp / split if run.gather_bytes == 1 else 0.0
    m = workload.microbatches
    forward_s, backward_s = micro.forward_s, micro.backward_s
    reduction = "all_reduce" if par.zero == 0 else "reduce_scatter"
    reduce = _bucketed(pricer, reduction, grads, par, bucket, other * run.grad_bytes)
    # ZeRO 0/1 reduce the accumulated gradients after the last micro-batch's backward;
    # ZeRO 2/3 keep only their shard, so they reduce-scatter after every backward.
    reductions = m if par.zero >= 2 else 1
    windows = [(reduce, backward_s)] * reductions
    what = f"{reduce.collective} {_mb(grads)} x {reductions}"
    named = {reduce.collective: reduce}
    if par.zero:
        gather = _bucketed(pricer, "all_gather", weights, par, bucket, other * run.param_bytes)
        # ZeRO 1/2 gather the updated weights once, beside the next step's first forward;
        # ZeRO 3 gathers them for every forward and again for every backward, where the
        # gathers and the reductions share the links and the one backward beside them.
        if par.zero == 3:
            both = replace(
                reduce, time_s=reduce.time_s + gather.time_s, edge_s=reduce.edge_s + gather.edge_s
            )
            windows = [(gather, forward_s)] * m + [(both, backward_s)] * m
        else:
            windows.append((gather, forward_s))
        what += f" + all_gather {_mb(weights)} x {2 * m if par.zero == 3 else 1}"
        named["all_gather"] = gather
    what += f" in {par.dp_bucket_mb:g} MiB buckets" if bucket else " (one collective each)"
    total_s = sum(comm.time_s for comm, _ in windows)
    if not par.dp_overlap:
        return _comm_kind("dp", what, total_s, total_s, named), 0.0
    exposed_s = slowdown_s = 0.0
    for comm, window_s in windows:
        exposed, slowdown = _beside(comm, window_s, options)
        exposed_s, slowdown_s = exposed_s + exposed, slowdown_s + slowdown
    return _comm_kind("dp", what, total_s, exposed_s, named), slowdown_s


@dataclass(frozen=True)
class _Bucketed:
    """A collective issued in buckets: its total time and that of the one bucket that
    cannot overlap (the last gradient bucket is ready only when the backward ends; the
    first weight bucket is needed before the forward can start)."""

    collective: str
    time_s: float
    edge_s: float
    source: str
    measured: bool


def _bucketed(
    pricer: Pricer,
    collective: str,
    size_bytes: float,
    par: Parallelism,
    bucket_bytes: float,
    joined: float = 0.0,
) -> _Bucketed:
    """One collective over all of `size_bytes` (none of it can overlap), or one per bucket
    as DDP/Megatron issue them, each paying its latency at its own size's bandwidth; the
    edge bucket holds `joined` bytes more (its group's other parameters)."""
    if not bucket_bytes or size_bytes <= bucket_bytes + joined:
        whole = pricer(collective, size_bytes, par.dp_ranks, par.tp)
        return _Bucketed(collective, whole.time_s, whole.time_s, whole.source, whole.measured)
    full, rest = divmod(size_bytes - joined, bucket_bytes)
    one = pricer(collective, bucket_bytes, par.dp_ranks, par.tp)
    edge_s = pricer(collective, (rest or bucket_bytes) + joined, par.dp_ranks, par.tp).time_s
    total_s = (full - (not rest)) * one.time_s + edge_s
    return _Bucketed(collective, total_s, edge_s, one.source, one.measured)


def _beside(comm: _Bucketed, window_s: float, options: EstimateOptions) -> tuple[float, float]:
    """(exposed, compute slowdown) seconds of a bucketed collective beside a window. The
    overlap efficiency is OSU's share of the collective hidden beside compute, on wall time:
    what is not hidden already includes the compute it stretched, so the extra time is split,
    not added twice: the stretched compute (slowdown x the time side by side, at most all of
    the extra; a negative measured slowdown counts as none) and the rest, exposed."""
    overlappable_s = comm.time_s - comm.edge_s
    side_by_side_s = min(overlappable_s, window_s)
    extra_s = (1 - options.overlap_efficiency) * side_by_side_s
    slowdown_s = min(extra_s, max(0.0, options.compute_slowdown) * side_by_side_s)
    exposed_s = comm.edge_s + (overlappable_s - side_by_side_s) + extra_s - slowdown_s
    return exposed_s, slowdown_s


def _assumptions(
    workload: Workload,
    options: EstimateOptions,
    micro: MicroBatchCompute,
    sm_count: int | None = None,
) -> tuple[str, ...]:
    par, run = workload.parallelism, workload.training
    measured = sum(1 for _, price in micro.gemms if price.bound == "measured")
    gemms = (
        "GEMMs priced by shape on the accelerator (tile and wave quantization, roofline), "
        "at the sustained clock where its entry states one (accelerator.matmul_sustained)"
        if options.matmul_efficiency is None
        else f"every GEMM at {options.matmul_efficiency:.0%} of peak (--matmul-efficiency)"
    )
    if measured:
        gemms = (
            f"{measured} of {len(micro.gemms)} GEMM shapes at their measured rate (--gemm), "
            f"the rest: {gemms}"
        )
    return (
        gemms,
        f"GEMMs and attention sustain {IN_STEP_SHARE:.0%} of their isolated rate in a step",
        f"attention core: {workload.training.attention}",
        *([f"fp8: {run.fp8_recipe} scaling of each GEMM input"] if run.dtype == "fp8" else []),
        *_framework_assumption(workload),
        f"overlap: {options.overlap_source}",
        _tp_assumption(workload, options, sm_count),
        *(("PP: sends beside a model chunk's compute (overlap_p2p_comm)",) * par.p2p_overlapped),
        "DP reduction overlaps the backward"
        if par.dp_overlap
        else "DP reduction after the backward, not overlapped",
        f"gradients reduced in {8 * run.grad_bytes}-bit"
        + (
            f", weights gathered in {8 * (run.gather_bytes or run.param_bytes)}-bit"
            * bool(par.zero)
        )
        + "; fp8 weights: the embeddings join the last bucket's group" * (run.gather_bytes == 1),
        *((workload.uneven_stages,) if workload.uneven_stages else ()),
        *_cp_ep_assumptions(workload),
        *_skew_assumption(par.world_size, options.skew),
    )


def _skew_assumption(accelerators: int, skew: Skew | None) -> tuple[str, ...]:
    if skew is None:
        return ("stragglers: none priced (no --skew-from burn-ins of this accelerator)",)
    (slowest, mean, sd), n = skew.slowest(accelerators), len(skew.tflops)
    tail = "as many drawn from them"
    if accelerators > n:  # one standard error of an sd from n normal rates: sd / sqrt(2 (n - 1))
        error, gap = 1 / math.sqrt(2 * (n - 1)), mean - slowest
        low, high = (mean - gap * k for k in (1 + error, 1 - error))
        tail = f"a normal tail; sd +-{error:.0%} by {n} rates: {low:.1f} to {high:.1f} TFLOP/s"
    return (
        f"stragglers: the expected slowest of {accelerators:,} accelerators at {slowest:.1f} "
        f"TFLOP/s against a mean of {mean:.1f} (sd {sd:.2f} over {n} gemm burn-ins, {skew.runs}; "
        f"{tail}): compute and bubble x{mean / slowest:.3f}; not seen: jitter within a step, "
        "slow hosts or links; the validated band was measured without this term",
    )


def _framework_assumption(workload: Workload) -> tuple[str, ...]:
    """What --framework changed (nothing said for megatron, the default)."""
    framework = workload.training.framework
    if framework == "eager":
        block = "RMSNorm, RoPE, SwiGLU" if workload.model.gated_mlp else "(a GPT block: fused)"
        return (f"framework: eager: {block} and the fp32 loss op by op, each kernel through HBM",)
    return () if framework == "megatron" else (f"framework: {framework}: priced as fused",)


def _cp_ep_assumptions(workload: Workload) -> tuple[str, ...]:
    par, run = workload.parallelism, workload.training
    out = []
    if workload.model.experts:
        routing = f"capacity factor {run.capacity_factor:g}" if run.capacity_factor else "dropless"
        out.append(
            f"MoE: tokens spread evenly over the experts ({routing}); EP all-to-alls "
            f"overlap: {par.ep_overlap}"
        )
    if par.cp > 1:
        out.append(
            f"context parallel: K/V by {par.cp_comm}, each ring step beside 1/cp of the attention"
            if par.cp_comm == "p2p"
            else "context parallel: K/V all-gathered, exposed"
        )
    return tuple(out)


def _tp_assumption(workload: Workload, options: EstimateOptions, sm_count: int | None) -> str:
    if not options.tp_overlap:
        if not workload.parallelism.tp_async_backward:
            return "TP collectives on the critical path (no --tp-overlap, no async backward)"
        return (
            "TP: the forward's collectives and the row-parallel layers' backward ones on the "
            "critical path; each column-parallel layer's input-gradient reduction beside its "
            "weight gradient"
            + (
                ", its input re-gather beside its input gradient"
                if workload.parallelism.sequence_parallel
                else ""
            )
            + " (Megatron's async backward; no --tp-overlap)"
        )
    return describe(options.tp_overlap_settings, workload.parallelism.tp, sm_count)


def _mb(size_bytes: float) -> str:
    return f"{size_bytes / 1e6:.1f} MB"


@dataclass(frozen=True)
class TrainingCost:
    """One fabric's cost of a step and of a million tokens at its price (`mfu --price`):
    every accelerator of the job is paid for the whole step (idle in a bubble or waiting on a
    collective included), at the quoted USD per accelerator-hour; no other cost (power,
    storage, staff) is counted."""

    usd_per_gpu_hour: float
    accelerators: int
    step_usd: float
    usd_per_million_tokens: float


def training_cost(
    estimate: Estimate, tokens_per_step: int, usd_per_gpu_hour: float
) -> TrainingCost:
    """The cost of one step of `estimate` and of a million of its tokens."""
    step_usd = usd_per_gpu_hour * estimate.accelerators * estimate.step_time_s / 3600.0
    return TrainingCost(
        usd_per_gpu_hour=usd_per_gpu_hour,
        accelerators=estimate.accelerators,
        step_usd=step_usd,
        usd_per_million_tokens=step_usd / tokens_per_step * 1e6,
    )


def parse_efficiencies(
    given: str, flag: str = "--matmul-efficiency"
) -> float | tuple[tuple[str, float], ...]:
    """`[NAME=]X[,...]` -> EstimateOptions.matmul_efficiency (one plain X: a number)."""
    pairs = []
    for text in str(given).split(","):
        name, _, value = text.rpartition("=")
        try:
            share = float(value)
        except ValueError:
            raise SpecError(flag, text, "is not [NAME=]X: mi300x=0.51, or 0.6") from None
        pairs.append(
            (name.strip().lower(), check_number("share", share, flag, text if name else None))
        )
    return pairs[0][1] if len(pairs) == 1 and not pairs[0][0] else tuple(pairs)


def parse_prices(texts: Sequence[str], fabrics: Sequence[str]) -> dict[str, float]:
    """`NAME=USD` per fabric (NAME one of `fabrics`, each at most once; USD a positive
    number within NUMBER_BOUNDS) -> {name: USD per GPU-hour}; SpecError naming --price
    otherwise."""
    prices: dict[str, float] = {}
    for text in texts:
        name, sep, value = text.partition("=")
        name = name.strip()
        if not sep or not name:
            raise SpecError(
                "--price", text, "is not NAME=USD (a --topology name and its price per GPU-hour)"
            )
        if name not in fabrics:
            raise SpecError("--price", text, f"names no --topology given ({', '.join(fabrics)})")
        if name in prices:
            raise SpecError("--price", text, f"prices {name} twice: give one price per fabric")
        try:
            usd = float(value)
        except ValueError:
            usd = math.nan
        prices[name] = check_number("usd", usd, "--price", text)
    return prices
