"""Per-accelerator memory of a training workload: weights, gradients, optimizer state and
activations, against the accelerator's HBM.

States (mixed-precision Adam, Megatron's accounting): the weights at `param_bytes` (2,
bf16), the gradients at `grad_bytes` (4 by default: a trainer that reduces its gradients
in fp32, as the step model assumes, keeps fp32 main gradients; 2 with bf16 gradients, the
usual 2 + 2 + 12 split), and 12 bytes of optimizer state (fp32 master weights, Adam's two
moments). ZeRO 1 shards the optimizer state over dp, ZeRO 2 the gradients too, ZeRO 3 the
weights too. The busiest pipeline stage is the first one: its layers plus the input
embedding (with pp = 1 the output layer as well), split over tp.

Activations follow Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
Transformer Models", section 4), in bytes for 16-bit activations and 1-byte dropout masks,
per layer and micro-batch of s·b tokens:
- no recompute: s·b·h·(10 + 24/t) + 5·a·s²·b/t; with sequence parallelism all of it / t,
  i.e. s·b·h·(34 + 5·a·s/h)/t. The 24 (Q, K, V, the projection's input and the MLP's two
  4h-wide tensors) is written from the shape, so grouped-query attention and SwiGLU MLPs
  count their own widths;
- selective recompute drops the attention core (the 5·a·s²·b term), and so does
  FlashAttention (`attention = "flash"`), which never stores the scores;
- full recompute keeps only each layer's input, 2·s·b·h (/ t with sequence parallelism),
  plus one layer's full activations while it is recomputed.
With 1F1B the first stage holds the activations of min(pp, micro-batches) micro-batches
(interleaving: x (1 + (pp − 1)/(pp·v))). With pp = 1 the same accelerator also holds the
output layer's fp32 logits, 4·s·b·vocab/t.

This is a lower bound: the CUDA context, the allocator's fragmentation, communication
buffers and temporary workspaces come on top. A workload it says does not fit does not.

Pure: no I/O, no torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from collbench.analysis.mfu.workload import Workload

GIB = float(1 << 30)
# Adam in mixed precision: fp32 master weights, first and second moments.
OPTIMIZER_BYTES_PER_PARAM = 12


@dataclass(frozen=True)
class MemoryEstimate:
    """One accelerator's memory for a workload (the busiest pipeline stage), in bytes."""

    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    capacity_bytes: float | None  # None: the topology gives no accelerator.memory_gib
    in_flight: float  # micro-batches whose activations the first stage holds

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
        if self.capacity_bytes is None:
            return None
        return self.total_bytes <= self.capacity_bytes

    @property
    def headroom(self) -> float | None:
        """The share of the capacity left free (negative: oversubscribed)."""
        if self.capacity_bytes is None:
            return None
        return 1 - self.total_bytes / self.capacity_bytes

    def to_dict(self) -> dict[str, float | bool | None]:
        """The figures in GiB, for JSON."""
        capacity = self.capacity_bytes
        return {
            **{f"{name.replace(' ', '_')}_gib": value / GIB for name, value in self.terms.items()},
            "total_gib": self.total_bytes / GIB,
            "capacity_gib": None if capacity is None else capacity / GIB,
            "fits": self.fits,
            "microbatches_in_flight": self.in_flight,
        }


def memory_estimate(workload: Workload, capacity_gib: float | None) -> MemoryEstimate:
    """The busiest accelerator's memory for `workload`, against `capacity_gib` (or None)."""
    par, run = workload.parallelism, workload.training
    params = stage_params(workload) / par.tp
    weights = params * run.param_bytes
    gradients = params * run.grad_bytes
    optimizer = params * OPTIMIZER_BYTES_PER_PARAM
    shards = {1: (1, 1, par.dp), 2: (1, par.dp, par.dp), 3: (par.dp, par.dp, par.dp)}
    weight_share, gradient_share, optimizer_share = shards.get(par.zero, (1, 1, 1))
    in_flight = microbatches_in_flight(workload)
    return MemoryEstimate(
        weights_bytes=weights / weight_share,
        gradients_bytes=gradients / gradient_share,
        optimizer_bytes=optimizer / optimizer_share,
        activations_bytes=activation_bytes(workload, in_flight),
        capacity_bytes=None if capacity_gib is None else capacity_gib * GIB,
        in_flight=in_flight,
    )


def stage_params(workload: Workload) -> float:
    """Parameters of the first pipeline stage: its layers and the input embedding (with
    pp = 1 the output layer too), scaled as --params scales the shape's count."""
    model, par = workload.model, workload.parallelism
    embedding = model.vocab * model.hidden
    if par.pp == 1:
        embedding = model.embedding_params
    params = workload.layers_per_stage * model.layer_params + embedding
    return params * model.n_params / model.shape_params


def microbatches_in_flight(workload: Workload) -> float:
    """Micro-batches whose activations the first stage holds at once under 1F1B."""
    par = workload.parallelism
    if par.pp == 1:
        return 1.0
    in_flight = float(min(par.pp, workload.microbatches))
    if par.virtual_stages > 1:
        in_flight *= 1 + (par.pp - 1) / (par.pp * par.virtual_stages)
    return in_flight


def activation_bytes(workload: Workload, in_flight: float) -> float:
    """Activations on the first stage: `in_flight` micro-batches of its layers, what a
    full recompute is working on, and with pp = 1 the logits."""
    model, par, run = workload.model, workload.parallelism, workload.training
    tokens = run.seq * run.micro_batch
    full = layer_activation_bytes(workload, recompute="none")
    if run.recompute == "full":
        split = par.tp if par.sequence_parallel else 1
        stored = 2 * tokens * model.hidden / split
        total = stored * workload.layers_per_stage * in_flight + full
    else:
        total = layer_activation_bytes(workload, run.recompute) * workload.layers_per_stage
        total *= in_flight
    if par.pp == 1:
        total += 4 * tokens * model.vocab / par.tp
    return total


def layer_activation_bytes(workload: Workload, recompute: str) -> float:
    """One layer's stored activations for one micro-batch (Korthikanti et al. 2022, eq. 1,
    with the attention and MLP widths of the shape)."""
    model, par, run = workload.model, workload.parallelism, workload.training
    tokens = run.seq * run.micro_batch
    kv_width = model.kv_heads_or_heads * model.head_dim
    # Layer norm inputs (2 x 2 bytes), attention and MLP inputs (2 x 2), 2 dropout masks.
    replicated = 10 * model.hidden
    # Q, K, V and the output projection's input; the MLP's up (and gate) outputs and the
    # activation's output.
    attention = 4 * model.hidden + 4 * kv_width
    mlp = (6 if model.gated_mlp else 4) * model.ffn
    split = tokens * (attention + mlp) / par.tp
    core = 5 * model.heads * run.seq * tokens / par.tp  # softmax, its mask and dropout
    if par.sequence_parallel:
        per_layer = tokens * replicated / par.tp + split
    else:
        per_layer = tokens * replicated + split
    # FlashAttention keeps no scores (it recomputes them in its backward): like selective
    # recompute, without the core term.
    stores_scores = recompute == "none" and run.attention == "unfused"
    return per_layer + (core if stores_scores else 0.0)


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
