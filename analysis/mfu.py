"""The training-MFU estimator: one optimizer step of a workload on a fabric, and how much
MFU its exposed collectives cost.

Step model (Megatron's 1F1B pipeline schedule; TP innermost, then DP, then PP):
- compute: each micro-batch on each pipeline stage does its share of the hardware FLOPs
  (model FLOPs plus recompute) at peak x `matmul_efficiency`;
- TP: per layer and micro-batch, 2 all-reduces of the activations (b·s·h) in the forward,
  2 in the backward and 2 more when full recompute repeats the forward; with sequence
  parallelism each becomes a reduce-scatter + all-gather pair. They sit on the critical
  path (Megatron issues them between the matmuls that need them) unless `tp_overlap` says
  what share is hidden;
- PP: per micro-batch, one activation send forward and one gradient send back between
  neighbouring stages (b·s·h / tp each: Megatron's scatter/gather optimisation), exposed;
- bubble: (p - 1) / v slots of the pipeline's (compute + exposed TP + PP) per micro-batch,
  i.e. a (p - 1) / (v·m) share of the micro-batch work;
- DP: after the last micro-batch the gradients are all-reduced (ZeRO 0) or reduce-
  scattered and the parameters all-gathered (ZeRO 1/2); ZeRO 3 / FSDP gathers parameters
  for every forward and backward and reduce-scatters the gradients. With `dp_overlap` the
  gradient reduction runs beside the last micro-batch's backward and the parameter gathers
  beside the compute that follows them: hidden up to `overlap_efficiency` x the window,
  and the compute beside them slows by `compute_slowdown` (both from an overlap probe
  when one is given, else ideal: 1.0 and 0.0, said in the output).
MFU = model FLOPs per step / (step time x accelerators x peak); HFU counts recompute too.
`mfu_loss_comm` = the MFU with every collective hidden at no cost, minus the MFU.

Collective prices come from a `Pricer` (measured curves or the topology cost model); the
estimator itself is pure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from collbench.analysis.workload import Parallelism, Workload
from collbench.errors import SpecError
from collbench.topologies.schema import Topology

# Dense bf16 matmuls in a whole transformer step reach well below the datasheet peak:
# large cuBLAS GEMMs alone reach ~75-85% on A100/H100, and the layer norms, softmax,
# dropout, GeLU/SwiGLU and optimizer are memory bound. Overridable with --matmul-efficiency.
DEFAULT_MATMUL_EFFICIENCY = 0.65


@dataclass(frozen=True)
class Priced:
    """One collective's time and where the figure came from (measured or predicted)."""

    time_s: float
    source: str


# (collective, size_bytes per rank as nccl-tests counts it, ranks, stride) -> Priced
Pricer = Callable[[str, float, int, int], Priced]


@dataclass(frozen=True)
class EstimateOptions:
    """What the estimator assumes beyond the workload and the fabric."""

    matmul_efficiency: float = DEFAULT_MATMUL_EFFICIENCY
    overlap_efficiency: float = 1.0  # share of an overlap window that really hides comm
    compute_slowdown: float = 0.0  # compute beside a collective takes (1 + this) x longer
    tp_overlap: float = 0.0  # share of TP collectives hidden (0: Megatron's default)
    overlap_source: str = "assumed ideal (no overlap probe given)"

    def __post_init__(self) -> None:
        if not 0 < self.matmul_efficiency <= 1:
            raise SpecError("--matmul-efficiency", self.matmul_efficiency, "must be in (0, 1]")
        if not 0 <= self.overlap_efficiency <= 1:
            raise SpecError("overlap efficiency", self.overlap_efficiency, "must be in [0, 1]")
        if not 0 <= self.tp_overlap <= 1:
            raise SpecError("--tp-overlap", self.tp_overlap, "must be in [0, 1]")


@dataclass(frozen=True)
class CommKind:
    """One kind of communication in a step: its total time and the part left exposed."""

    kind: str  # "tp", "pp", "dp"
    collectives: str  # e.g. "all_reduce 100.7 MB x 4/layer"
    total_s: float
    exposed_s: float
    source: str


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
    mfu: float
    hfu: float
    mfu_loss_comm: float
    tokens_per_s: float
    model_tflops_per_accelerator: float
    what_if: dict[str, float] = field(default_factory=dict)  # name -> MFU
    assumptions: tuple[str, ...] = ()

    @property
    def exposed_comm_s(self) -> float:
        return sum(kind.exposed_s for kind in self.comm)


def estimate(workload: Workload, topology: Topology, pricer: Pricer,
             options: EstimateOptions = EstimateOptions()) -> Estimate:
    """Price one step of `workload` on `topology` (whose node count must fit it)."""
    accelerators = workload.parallelism.world_size
    if accelerators > topology.world_size:
        raise SpecError("--nodes", topology.nodes, f"x {topology.accelerators_per_node} "
                        f"accelerators on {topology.name} is fewer than tp x pp x dp = "
                        f"{accelerators}")
    peak = _peak_flops(workload, topology)
    step = _step(workload, pricer, options, peak)
    ideal = _step(workload, pricer, replace(options, overlap_efficiency=1.0,
                                             compute_slowdown=0.0, tp_overlap=1.0), peak,
                  hide_all=True)
    model_flops = workload.model_flops_per_token * workload.tokens_per_step
    hardware_flops = workload.hardware_flops_per_token * workload.tokens_per_step
    mfu = model_flops / (step.total_s * accelerators * peak)
    mfu_ideal = model_flops / (ideal.total_s * accelerators * peak)
    return Estimate(
        topology=topology.name, nodes=topology.nodes, accelerators=accelerators,
        peak_tflops=peak / 1e12, step_time_s=step.total_s, compute_s=step.compute_s,
        bubble_s=step.bubble_s, comm=step.comm, slowdown_s=step.slowdown_s, mfu=mfu,
        hfu=hardware_flops / (step.total_s * accelerators * peak),
        mfu_loss_comm=mfu_ideal - mfu,
        tokens_per_s=workload.tokens_per_step / step.total_s,
        model_tflops_per_accelerator=model_flops / step.total_s / accelerators / 1e12,
        what_if={"perfect_overlap": mfu_ideal},
        assumptions=_assumptions(workload, options),
    )


def _peak_flops(workload: Workload, topology: Topology) -> float:
    accelerator = topology.accelerator
    if workload.training.dtype == "fp8":
        if accelerator.peak_fp8_tflops is None:
            raise SpecError("--dtype", "fp8", f"{topology.name}'s accelerator "
                            f"({accelerator.name}) has no fp8 peak in its topology file")
        return accelerator.peak_fp8_tflops * 1e12
    return accelerator.peak_bf16_tflops * 1e12


@dataclass(frozen=True)
class _Step:
    total_s: float
    compute_s: float
    bubble_s: float
    slowdown_s: float
    comm: tuple[CommKind, ...]


def _step(workload: Workload, pricer: Pricer, options: EstimateOptions, peak: float,
          hide_all: bool = False) -> _Step:
    par = workload.parallelism
    m = workload.microbatches
    micro_compute_s = _microbatch_compute_s(workload, peak * options.matmul_efficiency)
    tp = _tp_comm(workload, pricer, options, hide_all)
    pp = _pp_comm(workload, pricer, hide_all)
    slot_s = micro_compute_s + tp.exposed_s / m + pp.exposed_s / m
    bubble_s = (par.pp - 1) / par.virtual_stages * slot_s
    dp, slowdown_s = _dp_comm(workload, pricer, options, micro_compute_s, hide_all)
    compute_s = m * micro_compute_s
    total_s = (compute_s + tp.exposed_s + pp.exposed_s + bubble_s + dp.exposed_s
               + slowdown_s)
    return _Step(total_s, compute_s, bubble_s, slowdown_s, (tp, pp, dp))


def _microbatch_compute_s(workload: Workload, flops_per_s: float) -> float:
    """One micro-batch's forward + backward (+ recompute) on one pipeline stage."""
    tokens = workload.training.micro_batch * workload.training.seq
    par = workload.parallelism
    # The busiest stage's share of the model (layers beyond an even split included).
    share = workload.layers_per_stage / workload.model.layers
    return workload.hardware_flops_per_token * tokens * share / par.tp / flops_per_s


def _tp_comm(workload: Workload, pricer: Pricer, options: EstimateOptions,
             hide_all: bool) -> CommKind:
    par, run = workload.parallelism, workload.training
    if par.tp == 1:
        return CommKind("tp", "none (tp = 1)", 0.0, 0.0, "-")
    per_layer = 6 if run.recompute == "full" else 4
    size = run.micro_batch * run.seq * workload.model.hidden * run.activation_bytes
    if par.sequence_parallel:
        gather = pricer("all_gather", size, par.tp, 1)
        scatter = pricer("reduce_scatter", size, par.tp, 1)
        one_s, source = gather.time_s + scatter.time_s, gather.source
        what = f"all_gather + reduce_scatter {_mb(size)} x {per_layer}/layer"
    else:
        priced = pricer("all_reduce", size, par.tp, 1)
        one_s, source = priced.time_s, priced.source
        what = f"all_reduce {_mb(size)} x {per_layer}/layer"
    layers = workload.layers_per_stage
    total_s = one_s * per_layer * layers * workload.microbatches
    hidden = 1.0 if hide_all else options.tp_overlap
    return CommKind("tp", what, total_s, total_s * (1 - hidden), source)


def _pp_comm(workload: Workload, pricer: Pricer, hide_all: bool) -> CommKind:
    par, run = workload.parallelism, workload.training
    if par.pp == 1:
        return CommKind("pp", "none (pp = 1)", 0.0, 0.0, "-")
    size = run.micro_batch * run.seq * workload.model.hidden * run.activation_bytes / par.tp
    priced = pricer("sendrecv", size, 2, par.tp * par.dp)
    # Each micro-batch sends its activations forward and its gradients back once per
    # stage boundary; interleaving multiplies the boundaries by v.
    sends = 2 * workload.microbatches * par.virtual_stages
    total_s = priced.time_s * sends
    return CommKind("pp", f"sendrecv {_mb(size)} x {sends}/step", total_s,
                    0.0 if hide_all else total_s, priced.source)


def _dp_comm(workload: Workload, pricer: Pricer, options: EstimateOptions,
             micro_compute_s: float, hide_all: bool) -> tuple[CommKind, float]:
    """The data-parallel collectives, their exposed part and the compute they slow."""
    par, run = workload.parallelism, workload.training
    if par.dp == 1:
        return CommKind("dp", "none (dp = 1)", 0.0, 0.0, "-"), 0.0
    params = workload.model.n_params / (par.tp * par.pp)
    grads, weights = params * run.grad_bytes, params * run.param_bytes
    bucket = par.dp_bucket_mb * 1e6
    if par.zero == 0:
        priced = _bucketed(pricer, "all_reduce", grads, par, bucket)
        reduce_s, gather_s, gathers = priced.time_s, 0.0, 0
        what = f"all_reduce {_mb(grads)}"
    else:
        priced = _bucketed(pricer, "reduce_scatter", grads, par, bucket)
        gather = _bucketed(pricer, "all_gather", weights, par, bucket)
        reduce_s, gather_s = priced.time_s, gather.time_s
        # ZeRO-3 gathers every layer's weights for each forward and each backward.
        gathers = 2 * workload.microbatches if par.zero == 3 else 1
        what = f"reduce_scatter {_mb(grads)} + all_gather {_mb(weights)} x {gathers}"
    if bucket:
        what += f" in {_mb(bucket)} buckets"
    total_s = reduce_s + gather_s * gathers
    if hide_all:
        return CommKind("dp", what, total_s, 0.0, priced.source), 0.0
    if not par.dp_overlap:
        return CommKind("dp", what, total_s, total_s, priced.source), 0.0
    backward_s = micro_compute_s * _backward_share(run.recompute)
    # The gradient reduction hides behind the last micro-batch's backward; each gather
    # behind the compute of the pass that needs the weights next (half a micro-batch).
    windows = [(reduce_s, backward_s)] + [(gather_s, micro_compute_s / 2)] * gathers
    exposed_s = slowdown_s = 0.0
    for comm_s, window_s in windows:
        hidden_s = min(comm_s, options.overlap_efficiency * window_s)
        exposed_s += comm_s - hidden_s
        slowdown_s += options.compute_slowdown * min(comm_s, window_s)
    return CommKind("dp", what, total_s, exposed_s, priced.source), slowdown_s


def _bucketed(pricer: Pricer, collective: str, size_bytes: float, par: Parallelism,
              bucket_bytes: float) -> Priced:
    """One collective over all of `size_bytes`, or one per bucket as DDP/Megatron issue
    them (each bucket pays the latency and runs at its own size's bandwidth)."""
    if not bucket_bytes or size_bytes <= bucket_bytes:
        return pricer(collective, size_bytes, par.dp, par.tp)
    full, rest = divmod(size_bytes, bucket_bytes)
    one = pricer(collective, bucket_bytes, par.dp, par.tp)
    last_s = pricer(collective, rest, par.dp, par.tp).time_s if rest else 0.0
    return Priced(full * one.time_s + last_s, one.source)


def _backward_share(recompute: str) -> float:
    """The backward's share of a micro-batch's compute (it costs twice the forward)."""
    return {"none": 2 / 3, "selective": 2 / 3, "full": 2 / 4}[recompute]


def _assumptions(workload: Workload, options: EstimateOptions) -> tuple[str, ...]:
    par = workload.parallelism
    return (
        f"matmul efficiency {options.matmul_efficiency:.0%} of peak",
        f"overlap: {options.overlap_source}",
        f"TP collectives {options.tp_overlap:.0%} hidden",
        "DP reduction overlaps the backward" if par.dp_overlap else
        "DP reduction after the backward, not overlapped",
        f"gradients reduced in {8 * workload.training.grad_bytes}-bit",
    )


def _mb(size_bytes: float) -> str:
    return f"{size_bytes / 1e6:.1f} MB"
