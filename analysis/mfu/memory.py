"""Per-accelerator memory of a training workload: weights, gradients, optimizer state and
activations, against the accelerator's HBM.

The method, in full: docs/mfu/memory.md#analysis-mfu-memory-py.
"""

from __future__ import annotations

from dataclasses import dataclass

from collbench.analysis.mfu import moe
from collbench.analysis.mfu.workload import Workload

GIB = float(1 << 30)
# Adam in mixed precision: fp32 master weights, first and second moments.
OPTIMIZER_BYTES_PER_PARAM = 12
# The loss over the vocabulary: Megatron's vocab-parallel cross-entropy keeps the fp32
# softmax of the logits for its backward.
LOGIT_BYTES = 4
# How far the estimate was off on published configurations (benchmarks/mfu_memory.py
# prints the table; tests/unit/analysis/mfu/test_mfu_memory_published.py recomputes both figures from
# it): above the capacity by up to this share, a workload may still fit; beyond, it does not.
DEMONSTRATED_ERROR = 0.17
VALIDATED_CONFIGURATIONS = 21


@dataclass(frozen=True)
class MemoryEstimate:
    """One accelerator's memory for a workload (the busiest pipeline stage), in bytes."""

    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    capacity_bytes: float | None  # None: the topology gives no accelerator.memory_gib
    in_flight: float  # micro-batches whose activations this stage holds (whole stages)
    stage: int = 0  # the pipeline stage estimated: the busiest one

    @property
    def terms(self) -> dict[str, float]:
        """Name -> bytes of each part, in the order they are printed."""
        return {
            "weights": self.weights_bytes,
            "gradients": self.gradients_bytes,
            "optimizer state": self.optimizer_bytes,
            "activations": self.activations_bytes,
        }

    @property
    def total_bytes(self) -> float:
        return sum(self.terms.values())

    @property
    def biggest(self) -> str:
        """The name of the largest term."""
        return max(self.terms, key=lambda name: self.terms[name])

    @property
    def fits(self) -> bool | None:
        """Whether the estimate fits the accelerator's memory; None when it is unknown."""
        return None if self.capacity_bytes is None else self.total_bytes <= self.capacity_bytes

    @property
    def overflows(self) -> bool:
        """Over the capacity by more than the estimate's error: it does not fit."""
        return self.fits is False and not self.may_fit

    @property
    def may_fit(self) -> bool:
        """Over the capacity, but by no more than the estimate's demonstrated error."""
        if self.capacity_bytes is None or self.fits:
            return False
        return self.total_bytes <= self.capacity_bytes * (1 + DEMONSTRATED_ERROR)

    def to_dict(self) -> dict[str, float | bool | None]:
        """The figures in GiB, for JSON."""
        capacity = self.capacity_bytes
        return {
            **{f"{name.replace(' ', '_')}_gib": value / GIB for name, value in self.terms.items()},
            "total_gib": self.total_bytes / GIB,
            "capacity_gib": None if capacity is None else capacity / GIB,
            "fits": self.fits,
            "may_fit": self.may_fit,
            "microbatches_in_flight": self.in_flight,
            "pipeline_stage": self.stage,
        }


def memory_estimate(workload: Workload, capacity_gib: float | None) -> MemoryEstimate:
    """The busiest accelerator's memory for `workload`, against `capacity_gib` (or None):
    every pipeline stage is estimated, and the largest one is returned."""
    capacity = None if capacity_gib is None else capacity_gib * GIB
    stages = [_stage_estimate(workload, rank, capacity) for rank in range(workload.parallelism.pp)]
    return max(stages, key=lambda stage: stage.total_bytes)


def _stage_estimate(workload: Workload, rank: int, capacity: float | None) -> MemoryEstimate:
    """Pipeline stage `rank`: its weights, gradients and optimizer state (sharded as the
    ZeRO stage says) and its activations."""
    par, run = workload.parallelism, workload.training
    stage = stage_params(workload, rank)
    params = moe.on_rank(workload, stage, stage_layers(workload, rank)) / par.tp
    # A ZeRO shard is stage / (tp x dp x cp): the experts, 1/ep of them on a rank, shard
    # over their dp x cp / ep data-parallel ranks.
    dp = par.dp_ranks * params * par.tp / stage
    shards = {1: (1, 1, dp), 2: (1, dp, dp), 3: (dp, dp, dp)}
    weight_share, gradient_share, optimizer_share = shards.get(par.zero, (1, 1, 1))
    in_flight = microbatches_in_flight(workload, rank)
    return MemoryEstimate(
        weights_bytes=params * run.param_bytes / weight_share,
        gradients_bytes=params * run.grad_bytes / gradient_share,
        optimizer_bytes=params * OPTIMIZER_BYTES_PER_PARAM / optimizer_share,
        activations_bytes=activation_bytes(workload, in_flight, rank),
        capacity_bytes=capacity,
        in_flight=in_flight,
        stage=rank,
    )


def stage_layers(workload: Workload, rank: int = 0) -> int:
    """Transformer layers on pipeline stage `rank`. An uneven split puts its shorter
    stages at the ends of the pipeline, first and last stage first (they also hold the
    embedding and the output layer): Llama 3 405B's 126 layers on 16 stages are 7 + 14 x 8
    + 7 (arXiv 2407.21783, section 3.3.2), as Megatron's --decoder-first-pipeline-num-layers
    and --account-for-embedding-in-pipeline-split place them."""
    pp, layers = workload.parallelism.pp, workload.model.layers
    if layers % pp == 0:
        return workload.layers_per_stage
    low, extra = divmod(layers, pp)
    short = pp - extra
    ends = [0, pp - 1] + list(range(pp - 2, 0, -1))  # first, last, then back to front
    return low if rank in ends[:short] else low + 1


def stage_params(workload: Workload, rank: int = 0) -> float:
    """Parameters of pipeline stage `rank`: its layers, the input embedding on the first
    stage and the output layer on the last (with pp > 1 Megatron keeps a copy of a tied
    embedding there; with pp = 1 a tied one is held once), scaled as --params scales the
    shape's count."""
    model, pp = workload.model, workload.parallelism.pp
    table = model.vocab * model.hidden
    if pp == 1:
        embedding = float(model.embedding_params)
    else:
        embedding = table * ((rank == 0) + (rank == pp - 1))
    params = stage_layers(workload, rank) * model.layer_params + embedding
    return params * model.n_params / model.shape_params


def microbatches_in_flight(workload: Workload, rank: int = 0) -> float:
    """Micro-batches whose activations pipeline stage `rank` holds at once, in whole-stage
    equivalents. 1F1B: stage r runs pp - r - 1 warm-up forwards, so it holds pp - r
    (fewer if a step has fewer). Interleaved (v model chunks per stage): Megatron-LM's
    schedules.get_pp_rank_microbatches warms up 2·(pp - r - 1) + (v - 1)·pp chunk
    forwards, so 2·(pp - r - 1) + (v - 1)·pp + 1 chunks of 1/v of the stage are held: on
    the first stage pp + (pp - 1)/v, Korthikanti et al.'s pp·(1 + (pp - 1)/(pp·v))."""
    par, microbatches = workload.parallelism, workload.microbatches
    if par.pp == 1:
        return 1.0
    chunks = par.virtual_stages
    if chunks == 1:
        return float(min(par.pp - rank, microbatches))
    held = 2 * (par.pp - rank - 1) + (chunks - 1) * par.pp + 1
    return min(held, microbatches * chunks) / chunks


def activation_bytes(workload: Workload, in_flight: float, rank: int = 0) -> float:
    """Activations on pipeline stage `rank`: `in_flight` micro-batches of its layers, what
    a full recompute is working on, and on the last stage the logits."""
    model, par, run = workload.model, workload.parallelism, workload.training
    tokens = workload.micro_tokens  # seq / cp of each sequence
    layers = stage_layers(workload, rank)
    # Fully recomputed layers (all of them, or --recompute-layers of each chunk) keep only
    # their input, plus one layer's activations while it is recomputed; the rest keep what
    # --recompute says.
    full = layers if run.recompute == "full" else min(layers, workload.recomputed_layers)
    split = par.tp if par.sequence_parallel else 1
    stored = 2 * tokens * model.hidden / split
    total = layer_activation_bytes(workload, run.recompute) * (layers - full) * in_flight
    if full:
        total += stored * full * in_flight + layer_activation_bytes(workload, "none")
    if rank == par.pp - 1:
        total += LOGIT_BYTES * tokens * model.vocab / par.tp
    return total


def layer_activation_bytes(workload: Workload, recompute: str) -> float:
    """One layer's stored activations for one micro-batch (Korthikanti et al. 2022, eq. 1,
    with the attention and MLP widths of the shape; without dropout, no masks)."""
    model, par, run = workload.model, workload.parallelism, workload.training
    tokens = workload.micro_tokens  # seq / cp of each sequence
    # Unfused attention keeps its scores (softmax output, 2 bytes; its dropout mask, 1; the
    # dropout's output, 2) unless the core is recomputed (per-op checkpointing keeps bmm
    # outputs); FlashAttention keeps none (its backward recomputes them).
    scores = 0.0
    if run.attention == "unfused":
        scores = (5 if model.dropout else 2) * model.heads * run.seq * tokens / par.tp
    if recompute == "op":  # its input, the attention core's output and the mm outputs kept
        shares = model.op_recompute_shares(par.tp)
        kept = sum(2 * n * (1 - shares[op]) for op, _k, n in model.matmuls(par.tp))
        # with sequence parallelism the two reduce-scatters' outputs (h / t each) too
        kept += 4 * model.hidden / par.tp if par.sequence_parallel else 0
        split = par.tp if par.sequence_parallel else 1
        core = 2 * model.heads // par.tp * model.v_head_dim
        return tokens * (2 * model.hidden / split + core + kept) + scores
    kv_width = model.kv_heads_or_heads * model.head_dim
    # Layer norm inputs (2 x 2 bytes), attention and MLP inputs (2 x 2), 2 dropout masks.
    replicated = (10 if model.dropout else 8) * model.hidden
    # Q, K, V and the output projection's input; the MLP's up (and gate) outputs and the
    # activation's output.
    attention = 4 * model.heads * model.head_dim + 4 * kv_width
    mlp = (6 if model.gated_mlp else 4) * moe.mlp_width(workload)
    split = tokens * (attention + mlp) / par.tp
    per_layer = tokens * replicated / (par.tp if par.sequence_parallel else 1) + split
    return per_layer + (scores if recompute == "none" else 0.0)


def breakdown_text(memory: MemoryEstimate) -> str:
    """'weights 5.2 + gradients 10.4 + optimizer state 31.3 + activations 9.6 = 56.4 GiB'."""
    parts = " + ".join(f"{name} {value / GIB:,.1f}" for name, value in memory.terms.items())
    return f"{parts} = {memory.total_bytes / GIB:,.1f} GiB"


def oversubscribed(memory: MemoryEstimate) -> str:
    """One line for a workload that does not fit: the estimate, its terms (the biggest
    named) and the capacity."""
    capacity = memory.capacity_bytes or 0.0
    parts = " + ".join(f"{name} {value / GIB:,.1f}" for name, value in memory.terms.items())
    return (
        f"is too small for the workload: it needs ~{memory.total_bytes / GIB:,.1f} GiB per "
        f"accelerator ({parts}; the biggest is {memory.biggest}), more than the "
        f"{capacity / GIB:,.4g} GiB each has"
    )


def within_error(memory: MemoryEstimate) -> str:
    """One line for a workload over the capacity by no more than the estimate's error:
    'estimated 92.0 GiB of 80: within the estimate's error (+/-17% on 21 published
    configurations): may fit'."""
    capacity = memory.capacity_bytes or 0.0
    margin = memory.total_bytes / capacity - 1 if capacity else 0.0
    return (
        f"estimated {memory.total_bytes / GIB:,.1f} GiB per accelerator of "
        f"{capacity / GIB:,.4g} ({margin:+.0%}; {breakdown_text(memory)}): within the "
        f"estimate's error (+/-{DEMONSTRATED_ERROR:.0%} on {VALIDATED_CONFIGURATIONS} "
        "published configurations, benchmarks/mfu_memory.py): may fit; the check refuses "
        f"beyond +{DEMONSTRATED_ERROR:.0%}"
    )
