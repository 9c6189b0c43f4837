"""The compute of a training step, operator by operator, on one accelerator.

The method, in full: docs/mfu/index.md#analysis-mfu-compute-py.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial

from collbench.analysis.mfu import moe
from collbench.analysis.mfu.accuracy import family
from collbench.analysis.mfu.workload import Workload
from collbench.analysis.model.gemm_model import (
    Gemm,
    GemmTime,
    gemm_time,
    matmul_fraction,
    memory_time_s,
    training_gemms,
)
from collbench.topologies.schema import Accelerator

# FlashAttention's share of a large matmul's rate on the same accelerator: FlashAttention-2
# (Dao 2023, arXiv 2307.08691) reaches 50-73% of an A100's peak, the forward near the top
# of that range and the backward lower; against the A100's measured 87% for a large matmul
# that is ~0.8 and ~0.65. ASSUMED for other accelerators (FlashAttention-3 and cuDNN's
# fused attention on H100 land in the same band).
FLASH_FORWARD = 0.80
FLASH_BACKWARD = 0.65
FLASH_BACKWARD_FLOPS = 2.5  # 5 matmuls backward (one recomputes the scores) to 2 forward
# --attention flash2: FlashAttention-2, which uses none of Hopper's warpgroup MMA or TMA,
# on an accelerator whose `flash` is FlashAttention-3 or cuDNN's (NVIDIA Hopper, Blackwell).
# On an H100 SXM5 at head dim 128 (Shah et al. 2024, arXiv 2407.08608, Figures 5 and 6),
# FA2's causal forward ran 298 and 333 TFLOP/s at 2k and 8k tokens against FA3's 521 and
# 602, its backward 291 and 318 against 501 and 559: 0.55-0.58 of them. Elsewhere `flash`
# is FA2 already (A100: FLASH_FORWARD's source; ROCm's port on AMD).
FLASH2_SHARE = 0.57
# The rates above are FA2's at head dim 128 and 8k tokens or more (186 TFLOP/s forward +
# backward on an A100). The FA2 README's figures (Dao-AILab/flash-attention, assets/flash2_
# {a100,h100}_fwd_bwd_benchmark.png, causal): FA2 at 512 / 1k / 2k / 4k tokens ran 0.54 /
# 0.72 / 0.86 / 0.95 of its 8k rate (A100 and H100 within 0.02; ASSUMED for FA3, cuDNN), at
# head dim 64 0.90 / 0.88 of its rate at 128; FlashAttention (v1; the A100's Triton port
# alike) 0.54 / 0.58 of FA2 at 64, 0.44 at 128. Linear between (log2 tokens, head dim).
FLASH_BY_SEQ = ((9, 0.54), (10, 0.72), (11, 0.86), (12, 0.95), (13, 1.0))
FLASH_BY_HEAD_DIM, FLASH1_BY_HEAD_DIM = ((64, 0.89), (128, 1.0)), ((64, 0.56), (128, 0.44))
FLASH3_FAMILIES = frozenset(
    {"H20", "H100", "H200", "H800", "GH200", "B200", "B300", "GB200", "GB300"}
)
# The share of an isolated matmul's rate (the shape model's, or `collbench gemm`'s
# measurement) that the same GEMM sustains inside a training step: there its operands come
# cold from HBM (the kernel before evicted them from L2), the backward's layouts (NN, NT)
# are not the benchmark's, the weight gradient accumulates into fp32 main gradients, and
# cuBLAS runs its heuristic's kernel rather than the best one. Chosen once, on the A100
# runs of shared/data/published_runs.md (their median error), never per run; the H100
# runs were not used to choose it. Its sensitivity is in README's validation table.
IN_STEP_SHARE = 0.92
# Bytes per element each memory-bound operator moves in the forward (bf16 tensors, 1-byte
# dropout masks), written from what the kernels read and write; the backward moves
# BACKWARD_BYTES times as much (it reads the saved input and the incoming gradient and
# writes the outgoing one).
NORM_BYTES = 4  # read x, write y
BIAS_DROPOUT_ADD_BYTES = 7  # read the GEMM's output and the residual, write, 1-byte mask
GELU_BYTES = 4  # read, write (bias fused)
SWIGLU_BYTES = 6  # read the gate and the up halves, write
SOFTMAX_DROPOUT_BYTES = 9  # fused scale-mask-softmax (read, write), dropout (read, write, mask)
LOSS_BYTES = 10  # logits read in bf16, fp32 softmax written and read again
# fp8 (Transformer Engine): each GEMM's bf16 input is read and written again in fp8 before
# it, its scale from an amax pass over it (read again: current scaling's compute_amax) or,
# with delayed scaling, from earlier steps' amax (this one's taken in the cast itself).
FP8_CAST_BYTES = {"current": 2 + 1 + 2, "delayed": 2 + 1}
BACKWARD_BYTES = 2.0
# --framework eager: PyTorch eager runs each operator as its own kernel, each reading its
# inputs from HBM and writing its output back (Ivanov et al., arXiv 2007.00072: fusing them
# cut BERT's data movement by up to 22.91%, its training 1.30x faster than PyTorch). Bytes
# per element forward, from the kernels of torchtitan's Llama block as benchmarked eager
# against torch.compile (pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md;
# torchtitan/models/norms.py RMSNorm, models/llama/model.py apply_rotary_emb, FeedForward):
# RMSNorm: x.float() 2+4, pow 4+4, mean 4, x * rsqrt 4+4, type_as 4+2, * weight 2+2.
EAGER_NORM_BYTES = 36
EAGER_ROPE_BYTES = 20  # queries and keys: float() 2+4, complex multiply 4+4, type_as 4+2
EAGER_SWIGLU_BYTES = 10  # silu 2+2, times the up projection 2+2+2
# The loss over fp32 logits (torchtitan's cross_entropy(pred.flatten(0, 1).float(), ...);
# autocast runs cross_entropy in fp32 alike), in any block: forward logits.float() 2+4,
# log_softmax 4+4; backward nll_loss 4, log_softmax 4+4+4, the cast back 4+2.
EAGER_LOSS_BYTES, EAGER_LOSS_BACKWARD_BYTES = 14, 22
# Adam in mixed precision per parameter: read the fp32 master weight, both moments and the
# fp32 gradient, write the three back and the bf16 weight.
OPTIMIZER_BYTES = 4 * 4 + 3 * 4 + 2
GEMM, ATTENTION, MEMORY = "gemm", "attention", "memory-bound"

GemmPricer = Callable[[Gemm], GemmTime]


@dataclass(frozen=True)
class OperatorTime:
    """One operator of a layer (or of the stage) for one micro-batch: its seconds forward,
    backward and recomputed, and what they rest on."""

    op: str
    category: str  # GEMM, ATTENTION or MEMORY
    forward_s: float
    backward_s: float
    recompute_s: float = 0.0
    flops: float = 0.0  # forward + backward (+ recompute) FLOPs
    detail: str = ""  # shapes and efficiency, or bytes moved

    @property
    def total_s(self) -> float:
        return self.forward_s + self.backward_s + self.recompute_s


@dataclass(frozen=True)
class MicroBatchCompute:
    """A micro-batch's compute on the busiest pipeline stage, and the step's optimizer."""

    layer: tuple[OperatorTime, ...]  # one transformer layer
    layers: int  # layers on the stage
    stage: tuple[OperatorTime, ...]  # the stage's own: logits and loss (last stage)
    optimizer_s: float  # once per step, not per micro-batch
    gemms: tuple[tuple[Gemm, GemmTime], ...]  # every distinct GEMM priced, and its price
    # Partial recompute: what `recomputed_layers` of the stage's layers run again on top of
    # `layer` (their forward, less what `layer` already recomputes).
    recomputed: tuple[OperatorTime, ...] = ()
    recomputed_layers: int = 0

    def _summed(self, seconds: Callable[[OperatorTime], float]) -> float:
        """`seconds` of each operator over the stage's layers, recomputed ones and own."""
        return (
            self.layers * sum(map(seconds, self.layer))
            + self.recomputed_layers * sum(map(seconds, self.recomputed))
            + sum(map(seconds, self.stage))
        )

    @property
    def forward_s(self) -> float:
        return self._summed(lambda op: op.forward_s)

    @property
    def total_s(self) -> float:
        return self._summed(lambda op: op.total_s)

    @property
    def backward_s(self) -> float:
        """Backward and recompute: what runs after the forward."""
        return self.total_s - self.forward_s


def model_pricer(accelerator: Accelerator, peak_flops: float, dtype: str = "bf16") -> GemmPricer:
    """GEMM prices from the shape model (analysis.gemm_model)."""
    return partial(gemm_time, accelerator=accelerator, peak_flops=peak_flops, dtype=dtype)


def layer_gemms(workload: Workload) -> tuple[Gemm, ...]:
    """The weight GEMMs of one layer for one micro-batch, forward and backward, on one
    tensor-parallel rank (the attention core's are in `attention_gemms`)."""
    tokens, forward = workload.micro_tokens, workload.model.matmuls(workload.parallelism.tp)
    gemms = tuple(gemm for op, k, n in forward for gemm in training_gemms(op, tokens, n, k))
    return gemms + moe.expert_gemms(workload)


def logits_gemms(workload: Workload) -> tuple[Gemm, ...]:
    """The output layer's GEMMs (last stage), forward and backward."""
    tokens = workload.micro_tokens
    vocab = math.ceil(workload.model.vocab / workload.parallelism.tp)
    return training_gemms("logits", tokens, vocab, workload.model.hidden)


def attention_gemms(workload: Workload) -> tuple[Gemm, ...]:
    """The unfused attention core's batched GEMMs, forward then backward."""
    model, run = workload.model, workload.training
    batch = run.micro_batch * model.heads // workload.parallelism.tp
    s, d = run.seq, model.head_dim
    return (
        Gemm("attn_scores", "fwd", s, s, d, batch),
        Gemm("attn_values", "fwd", s, d, s, batch),
        Gemm("attn_scores", "dgrad", s, d, s, batch),  # dQ = dS·K
        Gemm("attn_scores", "wgrad", s, d, s, batch),  # dK = dSᵀ·Q
        Gemm("attn_values", "dgrad", s, s, d, batch),  # dP = dO·Vᵀ
        Gemm("attn_values", "wgrad", s, d, s, batch),  # dV = Pᵀ·dO
    )


def workload_gemms(workload: Workload) -> tuple[Gemm, ...]:
    """Every distinct GEMM shape a micro-batch runs (what `collbench gemm` measures for a
    workload): the layer's, the logits', and the attention core's when it is unfused."""
    gemms = [*layer_gemms(workload), *logits_gemms(workload)]
    if workload.training.attention == "unfused":
        gemms += attention_gemms(workload)
    distinct: dict[str, Gemm] = {}
    for gemm in gemms:
        distinct.setdefault(gemm.shape, gemm)
    return tuple(distinct.values())


def micro_batch_compute(
    workload: Workload, accelerator: Accelerator, peak_flops: float, pricer: GemmPricer
) -> MicroBatchCompute:
    """Price one micro-batch on the busiest stage, operator by operator."""
    priced: dict[str, tuple[Gemm, GemmTime]] = {}

    def time_of(gemm: Gemm) -> float:
        if gemm.shape not in priced:
            priced[gemm.shape] = (gemm, pricer(gemm))
        return priced[gemm.shape][1].time_s / IN_STEP_SHARE

    layer = _layer_operators(workload, accelerator, peak_flops, time_of)
    # The last stage adds the logits and the loss to its layers, the first only the
    # embedding lookup (cheap): the last is the busiest (with pp = 1, the only one).
    logits = workload.micro_tokens * math.ceil(workload.model.vocab / workload.parallelism.tp)
    loss = ("loss", LOSS_BYTES, 1.0)
    if workload.training.framework == "eager":
        loss = ("loss (eager)", EAGER_LOSS_BYTES, EAGER_LOSS_BACKWARD_BYTES / EAGER_LOSS_BYTES)
    stage = [
        *_weight_operators(logits_gemms(workload), time_of, {}),
        _memory_operator(loss[0], loss[1] * logits, accelerator, loss[2]),
    ] * workload.busiest_stage[1]  # --pp LAYOUT: none, or an MTP module's pass too
    partial = 0 if workload.training.recompute == "full" else workload.recomputed_layers
    recomputed: tuple[OperatorTime, ...] = ()
    if partial:
        full = replace(
            workload, training=replace(workload.training, recompute="full", recompute_layers=0)
        )
        recomputed = _recomputed(layer, _layer_operators(full, accelerator, peak_flops, time_of))
    return MicroBatchCompute(
        tuple(layer),
        workload.layers_per_stage,
        tuple(stage),
        _optimizer_s(workload, accelerator),
        tuple(priced.values()),
        recomputed,
        partial,
    )


def _layer_operators(
    workload: Workload,
    accelerator: Accelerator,
    peak_flops: float,
    time_of: Callable[[Gemm], float],
) -> list[OperatorTime]:
    """One layer's operators for one micro-batch: forward, backward and recompute."""
    recompute, gemms = workload.training.recompute, layer_gemms(workload)
    shares = {gemm.op: 1.0 for gemm in gemms} if recompute == "full" else {}
    if recompute == "op":
        shares = workload.model.op_recompute_shares(workload.parallelism.tp)
    return [
        *_weight_operators(gemms, time_of, shares),
        _attention(workload, accelerator, peak_flops, time_of),
        # per-op checkpointing keeps no elementwise output: what the backward needs runs again
        *_memory_operators(workload, accelerator, recompute in ("full", "op")),
    ]


def _recomputed(layer: list[OperatorTime], full: list[OperatorTime]) -> tuple[OperatorTime, ...]:
    """What a fully recomputed layer runs on top of `layer`: its operators as --recompute
    full recomputes them, less what `layer` already recomputes (selective: the attention
    core)."""
    return tuple(
        OperatorTime(
            f"{own.op} (recomputed)",
            own.category,
            0.0,
            0.0,
            again.recompute_s - own.recompute_s,
            again.flops - own.flops,
            "its forward again (--recompute-layers)",
        )
        for own, again in zip(layer, full, strict=True)
        if again.recompute_s > own.recompute_s
    )


def _weight_operators(
    gemms: tuple[Gemm, ...], time_of: Callable[[Gemm], float], shares: dict[str, float]
) -> list[OperatorTime]:
    """Each GEMM's forward and backward, and the share of its forward `shares` runs again."""
    out = []
    for op in dict.fromkeys(gemm.op for gemm in gemms):
        own = [gemm for gemm in gemms if gemm.op == op]
        again = shares.get(op, 0.0)
        forward_s = sum(time_of(gemm) for gemm in own if gemm.pass_name == "fwd")
        backward_s = sum(time_of(gemm) for gemm in own if gemm.pass_name != "fwd")
        forward_flops = sum(gemm.flops for gemm in own if gemm.pass_name == "fwd")
        flops = sum(gemm.flops for gemm in own) + again * forward_flops
        shape = next(gemm.shape for gemm in own if gemm.pass_name == "fwd")
        recompute_s = again * forward_s
        out.append(OperatorTime(op, GEMM, forward_s, backward_s, recompute_s, flops, shape))
    return out


def _attention(
    workload: Workload,
    accelerator: Accelerator,
    peak_flops: float,
    time_of: Callable[[Gemm], float],
) -> OperatorTime:
    """The attention core: flash (one fused kernel, causal half) or unfused (batched
    GEMMs and a memory-bound softmax + dropout over the scores)."""
    model, run = workload.model, workload.training
    heads = run.micro_batch * model.heads // workload.parallelism.tp
    recompute = run.recompute in ("full", "selective")
    # Scores (qk dims) and their weighted sum (v dims); with context parallelism the
    # rank's seq / cp queries meet all seq keys.
    dims = model.qk_head_dim + model.v_head_dim
    full_flops = 2.0 * heads * run.seq * run.seq * dims / workload.parallelism.cp
    if run.attention != "unfused":
        # FP8 recipes (Transformer Engine) keep the attention core in bf16.
        peak = accelerator.peak_bf16_tflops * 1e12 if run.dtype == "fp8" else peak_flops
        rate = peak * matmul_fraction(accelerator) * IN_STEP_SHARE
        if run.attention in ("flash1", "flash2") and family(accelerator.name) in FLASH3_FAMILIES:
            rate *= FLASH2_SHARE
        rate *= _between(math.log2(run.seq), FLASH_BY_SEQ)
        rate *= _between(model.qk_head_dim, FLASH_BY_HEAD_DIM)
        if run.attention == "flash1":
            rate *= _between(model.qk_head_dim, FLASH1_BY_HEAD_DIM)
        forward_flops = full_flops / 2  # the causal mask's upper half is skipped
        forward_s = forward_flops / (rate * FLASH_FORWARD)
        backward_s = FLASH_BACKWARD_FLOPS * forward_flops / (rate * FLASH_BACKWARD)
        flops = forward_flops * (1 + FLASH_BACKWARD_FLOPS + recompute)
        cp = workload.parallelism.cp
        detail = f"{run.attention}, {heads} heads x {run.seq}² causal"
        detail += f" / cp {cp}" if cp > 1 else ""
    else:
        gemms = attention_gemms(workload)
        scores = heads * run.seq * run.seq
        softmax_s = memory_time_s(SOFTMAX_DROPOUT_BYTES * scores, accelerator)
        forward_s = sum(time_of(gemm) for gemm in gemms if gemm.pass_name == "fwd") + softmax_s
        backward_s = sum(time_of(gemm) for gemm in gemms if gemm.pass_name != "fwd")
        backward_s += BACKWARD_BYTES * softmax_s
        flops = full_flops * (3 + recompute)
        detail = f"unfused, {gemms[0].shape} + {gemms[1].shape}, softmax over {scores:,} scores"
    return OperatorTime(
        "attention", ATTENTION, forward_s, backward_s, forward_s * recompute, flops, detail
    )


def _between(x: float, points: tuple[tuple[float, float], ...]) -> float:
    """The piecewise-linear curve through `points` (ascending x) at x, flat outside them
    (numpy.interp's, without numpy's ~130 ms import on every `mfu`, which loads none)."""
    x = min(max(x, points[0][0]), points[-1][0])
    (x0, y0), (x1, y1) = next(p for p in itertools.pairwise(points) if x <= p[1][0])
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


def _memory_operators(
    workload: Workload, accelerator: Accelerator, recompute: bool
) -> list[OperatorTime]:
    """Norms, bias + dropout + residual adds and the activation of one layer; with fp8,
    the casts of the GEMMs' inputs."""
    model, par = workload.model, workload.parallelism
    tokens = workload.micro_tokens
    hidden = tokens * model.hidden / (par.tp if par.sequence_parallel else 1)
    ffn = tokens * math.ceil(moe.mlp_width(workload) / par.tp)
    activation = ("swiglu", SWIGLU_BYTES) if model.gated_mlp else ("gelu", GELU_BYTES)
    # Eager leaves a Llama block's RMSNorm, RoPE and SwiGLU unfused (a GPT block's LayerNorm
    # and GELU are one kernel each, as fused; it has no RoPE).
    eager = workload.training.framework == "eager" and model.gated_mlp
    norm = ("rmsnorm (eager)", EAGER_NORM_BYTES) if eager else ("layer norms", NORM_BYTES)
    activation = ("swiglu (eager)", EAGER_SWIGLU_BYTES) if eager else activation
    parts = [
        (norm[0], 2 * norm[1] * hidden),
        ("bias-dropout-add", 2 * BIAS_DROPOUT_ADD_BYTES * hidden),
        (activation[0], activation[1] * ffn),
    ]
    if eager:
        qk_heads = (model.heads + model.kv_heads_or_heads) / par.tp
        parts.append(("rope (eager)", EAGER_ROPE_BYTES * tokens * qk_heads * model.head_dim))
    if workload.training.dtype == "fp8":
        inputs = sum(gemm.m * gemm.k for gemm in layer_gemms(workload) if gemm.pass_name == "fwd")
        recipe = workload.training.fp8_recipe
        parts.append((f"fp8 casts ({recipe} scaling)", FP8_CAST_BYTES[recipe] * inputs))
    if model.experts:
        parts.append(("moe permute", moe.permute_bytes(workload)))
    return [
        _memory_operator(op, size, accelerator, BACKWARD_BYTES, recompute) for op, size in parts
    ]


def _memory_operator(
    op: str, size: float, accelerator: Accelerator, backward: float = 1.0, recompute: bool = False
) -> OperatorTime:
    """A memory-bound operator streaming `size` bytes forward, `backward` times as much
    backward, and its forward again when the layer is recomputed."""
    forward_s = memory_time_s(size, accelerator)
    recompute_s = forward_s if recompute else 0.0
    detail = f"{size / 1e6:,.3g} MB forward"
    return OperatorTime(op, MEMORY, forward_s, backward * forward_s, recompute_s, 0.0, detail)


def _optimizer_s(workload: Workload, accelerator: Accelerator) -> float:
    par = workload.parallelism
    # A ZeRO shard is every parameter / (tp pp dp cp): the experts' are sharded over their
    # dp x cp / ep data-parallel ranks, which hold 1/ep of them.
    if par.zero:
        params = workload.model.n_params / (par.tp * par.pp * par.dp_ranks)
    else:
        params = moe.rank_params(workload)
    return memory_time_s(OPTIMIZER_BYTES * params, accelerator)
