"""Expert and context parallelism in the MFU estimator: the expert GEMMs one rank runs, the
expert-parallel all-to-all each MoE layer issues and the context-parallel K/V exchange of
each attention layer, with what of each compute hides.

The method, in full: docs/mfu/moe-cp.md#analysis-mfu-moe-py.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from collbench.analysis.mfu.workload import Workload
from collbench.analysis.model.gemm_model import Gemm, training_gemms

# Permute and unpermute (Megatron's moe_utils.permute/unpermute): each of dispatch and
# combine reads and writes every routed copy of a token once.
PERMUTE_BYTES = 2


@dataclass(frozen=True)
class Exchange:
    """One kind of communication of a step: what, its time, the part left exposed, and
    each collective's price (objects with time_s, source, measured)."""

    what: str
    total_s: float
    exposed_s: float
    priced: dict[str, Any]
    slowdown_s: float = 0.0  # compute stretched by the SMs the hidden part held


def rank_params(workload: Workload) -> float:
    """Parameters one rank holds unsharded: the dense ones / (tp x pp), the routed
    experts' / (etp x pp x ep); scaled as --params scales the shape's count."""
    model, par = workload.model, workload.parallelism
    routed = model.moe_layers * model.experts * model.expert_params
    routed *= model.n_params / model.shape_params
    dense = model.n_params - routed
    return (dense / par.tp + routed / (par.ep * par.expert_tp)) / par.pp


def on_rank(workload: Workload, params: float, layers: int) -> float:
    """Of `params` on a pipeline stage of `layers` layers, those one EP rank holds before
    the tp split: its routed experts are 1/ep of the stage's, split by etp, not tp."""
    model, par = workload.model, workload.parallelism
    routed = min(layers, model.moe_layers) * model.experts * model.expert_params
    routed *= model.n_params / model.shape_params
    return params - routed * (1 - par.tp / (par.ep * par.expert_tp))


def routed_rows(workload: Workload) -> float:
    """Routed copies of tokens one rank's experts compute per micro-batch: the micro-
    batch's tokens / tp (sequence parallel) gathered over the etp ranks, x top_k."""
    model, run, par = workload.model, workload.training, workload.parallelism
    tokens = workload.micro_tokens * par.expert_tp / par.tp
    return tokens * model.top_k * (run.capacity_factor or 1.0)


def mlp_width(workload: Workload) -> float:
    """Per token, the MLP width a layer's activations span (a MoE layer: top_k routed
    experts at the capacity factor, plus the shared ones)."""
    model, run = workload.model, workload.training
    if not model.experts:
        return model.ffn
    routed = model.top_k * (run.capacity_factor or 1.0)
    return (routed + model.shared_experts) * model.moe_ffn


def expert_gemms(workload: Workload) -> tuple[Gemm, ...]:
    """The router's, the routed experts' (grouped) and the shared experts' GEMMs of one
    MoE layer and micro-batch on one rank, forward and backward."""
    model, par = workload.model, workload.parallelism
    if not model.experts:
        return ()
    h, t = model.hidden, par.tp
    local = model.experts // par.ep
    rows = math.ceil(routed_rows(workload) / local)
    ffn = math.ceil(model.moe_ffn / par.expert_tp)
    up = 2 * ffn if model.gated_mlp else ffn
    gemms = [
        *training_gemms("router", workload.micro_tokens // t, model.experts, h),
        *training_gemms("experts_up", rows, up, h, local),
        *training_gemms("experts_down", rows, h, ffn, local),
    ]
    if model.shared_experts:  # split by tp, as the attention (not etp)
        shared = math.ceil(model.shared_experts * model.moe_ffn / t)
        tokens = workload.micro_tokens
        gemms += training_gemms("shared_up", tokens, 2 * shared if model.gated_mlp else shared, h)
        gemms += training_gemms("shared_down", tokens, h, shared)
    return tuple(gemms)


def permute_bytes(workload: Workload) -> float:
    """Bytes one MoE layer's permute + unpermute move per micro-batch, forward."""
    rows = routed_rows(workload)
    return 2 * PERMUTE_BYTES * rows * workload.model.hidden * workload.training.activation_bytes


def moe_layers_on_stage(workload: Workload) -> int:
    """MoE layers on the busiest stage (the dense layers sit on the first one)."""
    return min(workload.layers_per_stage, workload.model.moe_layers)


def ep_calls(workload: Workload) -> list[tuple[str, str, float, int, int, int]]:
    """(name, collective, size per rank, calls per MoE layer and micro-batch, ranks,
    stride) of the expert-parallel exchange."""
    model, par, run = workload.model, workload.parallelism, workload.training
    if not model.experts or (par.ep == 1 and par.expert_tp == 1):
        return []
    passes = 3 if run.recompute == "full" else 2
    etp = par.expert_tp
    elements = routed_rows(workload) / etp * model.hidden
    if par.ep_route_nodes and par.ep_route_nodes < model.top_k:
        # Each token crosses to at most ep_route_nodes nodes, once each, and is forwarded
        # to its experts there over scale-up: the scale-out carries that share of it.
        elements *= par.ep_route_nodes / model.top_k
    dispatch = elements * (run.dispatch_bytes or run.activation_bytes)
    combine = elements * run.activation_bytes
    calls = []
    if par.ep > 1:
        calls += [
            ("dispatch", "all_to_all", dispatch, passes, par.ep, etp),
            ("combine", "all_to_all", combine, passes, par.ep, etp),
        ]
    if etp > 1:  # the received tokens gathered over (and scattered back to) the etp ranks
        calls += [
            ("tp gather", "all_gather", combine * etp, passes, etp, 1),
            ("tp scatter", "reduce_scatter", combine * etp, passes, etp, 1),
        ]
    return calls


def price_calls(
    calls: list[tuple[str, str, float, int, int, int]], pricer: Callable[..., Any]
) -> tuple[dict[str, Any], float]:
    """Each call (name, collective, size, count per layer, ranks, stride) priced once, and
    the seconds they take per layer and micro-batch (cp_calls and ep_calls alike)."""
    priced = {
        name: pricer(coll, size, ranks, stride) for name, coll, size, _, ranks, stride in calls
    }
    return priced, sum(priced[name].time_s * count for name, _, _, count, _, _ in calls)


def ep_exchange(
    workload: Workload,
    pricer: Callable[..., Any],
    window_s: float | tuple[float, float, float],
    sm_count: int | None = None,
    slowdown: float = 0.0,
) -> Exchange:
    """The step's expert-parallel communication; `window_s`: the compute per MoE layer and
    micro-batch it may hide behind, or 1F1B's three windows (`overlap_window_s`);
    `sm_count`: the accelerator's SMs (the compute beside the hidden part loses `ep_sms`
    of them: `sm_slowdown_s`), `slowdown` its share without --ep-sms."""
    calls = ep_calls(workload)
    if not calls:
        return Exchange("none (no expert parallelism)", 0.0, 0.0, {})
    priced, layer_s = price_calls(calls, pricer)
    repeats = moe_layers_on_stage(workload) * workload.microbatches
    if isinstance(window_s, tuple):
        exposed_s = _one_f_one_b_exposed_s(workload, calls, priced, window_s) * repeats
    else:
        exposed_s = max(0.0, layer_s - window_s) * repeats
    slowdown_s = sm_slowdown_s(workload, layer_s * repeats - exposed_s, sm_count, slowdown)
    size, par = calls[0][2], workload.parallelism
    what = (
        f"all_to_all {size / 1e6:.1f} MB x {2 * calls[0][3]}/MoE layer"
        + (" + tp all_gather/reduce_scatter" if par.expert_tp > 1 else "")
        + f", overlap {par.ep_overlap}"
        + (f", {par.ep_sms} SMs held" if slowdown_s and par.ep_sms else "")
    )
    return Exchange(what, layer_s * repeats, exposed_s, priced, slowdown_s)


def sm_slowdown_s(
    workload: Workload, hidden_s: float, sm_count: int | None, slowdown: float = 0.0
) -> float:
    """What the compute beside `hidden_s` of all-to-all loses to the SMs its kernels hold:
    for those seconds it runs on (S - s) of S SMs, so it finishes hidden_s x s / S later
    (DeepEP's normal kernels hold 20 of an H800's 132 SMs, DeepSeek-V3 section 3.2.2).
    Without --ep-sms (NCCL's all-to-all, whose SMs no recipe states) it is slowed as beside
    any NCCL collective: hidden_s x `slowdown` (EstimateOptions.compute_slowdown)."""
    sms = workload.parallelism.ep_sms
    if hidden_s <= 0:
        return 0.0
    if not sms:
        return hidden_s * slowdown
    return hidden_s * min(sms, sm_count) / sm_count if sm_count else 0.0


def overlap_window_s(workload: Workload, layer_ops: Any) -> float | tuple[float, float, float]:
    """Seconds of compute per MoE layer and micro-batch the all-to-alls run beside:
    `layer_ops` are the layer's OperatorTime (analysis.compute). 1F1B: its three windows,
    (pre-dispatch forward, the MLP forward + backward, pre-dispatch backward)."""
    choice = workload.parallelism.ep_overlap
    if choice == "shared-expert":
        return sum(op.total_s for op in layer_ops if op.op.startswith("shared_"))
    if choice == "dualpipe":
        return sum(op.total_s for op in layer_ops)
    if choice == "1f1b":
        mlp = [op for op in layer_ops if op.op.startswith(MLP_OPS)]
        rest = [op for op in layer_ops if not op.op.startswith(MLP_OPS)]
        return (
            sum(op.forward_s for op in rest),
            sum(op.total_s for op in mlp),
            sum(op.backward_s + op.recompute_s for op in rest),
        )
    return 0.0


# The MoE layer's MLP side (after dispatch, before combine); the rest of a layer is its
# pre-dispatch side (norms, attention, router).
MLP_OPS = ("experts_", "shared_", "swiglu", "gelu", "moe permute")


def _one_f_one_b_exposed_s(
    workload: Workload,
    calls: list[tuple[str, str, float, int, int, int]],
    priced: dict[str, Any],
    windows: tuple[float, float, float],
) -> float:
    """Exposed all-to-all per MoE layer and micro-batch under Megatron-Core's EP overlap
    (overlap_moe_expert_parallel_comm; megatron/core/models/common/
    model_chunk_schedule_plan.py, TransformerLayerSchedulePlan.run), which pairs one
    micro-batch's forward layer with another's backward layer on two streams:
        comm: combine bwd        | dispatch fwd, dispatch bwd | combine fwd
        comp: pre-dispatch fwd   | MLP bwd, MLP fwd           | pre-dispatch bwd
    Each communication hides behind its phase's compute only. A chunk of the interleaved
    schedule's warm-up (rank 0: (pp - 1) x 2 + (v - 1) x pp of the m x v forward chunks;
    Megatron's schedules.py) and as many cool-down backwards run unpaired, exposed; so
    does a full recompute's extra forward."""
    dispatch = sum(priced[c[0]].time_s for c in calls if c[0] in ("dispatch", "tp gather"))
    combine = sum(priced[c[0]].time_s for c in calls if c[0] in ("combine", "tp scatter"))
    pre_forward, mlp, pre_backward = windows
    paired = (
        max(0.0, combine - pre_forward)
        + max(0.0, 2 * dispatch - mlp)
        + max(0.0, combine - pre_backward)
    )
    alone = 2 * (dispatch + combine)
    par = workload.parallelism
    chunks = workload.microbatches * par.virtual_stages
    warmup = (par.pp - 1) * 2 + (par.virtual_stages - 1) * par.pp if par.pp > 1 else 0
    unpaired = (
        min(1.0, warmup / chunks) if par.virtual_stages > 1 else min(1.0, (par.pp - 1) / chunks)
    )
    extra = (calls[0][3] - 2) * (dispatch + combine)
    return (1 - unpaired) * paired + unpaired * alone + extra


def dualpipe_bubble_s(workload: Workload, forward_s: float, backward_s: float) -> float | None:
    """DualPipe's bubble, (pp/2 - 1)(F + B/2), for `ep_overlap` dualpipe (None: 1F1B's)."""
    par = workload.parallelism
    if par.ep_overlap != "dualpipe" or par.pp == 1:
        return None
    return (par.pp / 2 - 1) * (forward_s + backward_s / 2)


def kv_bytes(workload: Workload) -> float:
    """Bytes of one rank's K and V for its micro-batch chunk (its heads' share)."""
    model, par, run = workload.model, workload.parallelism, workload.training
    if model.mla:  # MLA's K/V are materialised per head: qk dims for K, v dims for V
        width = model.heads // par.tp * (model.qk_head_dim + model.v_head_dim)
    else:
        width = max(1, model.kv_heads_or_heads // par.tp) * 2 * model.head_dim
    return workload.micro_tokens * width * run.activation_bytes


def _forward_passes(workload: Workload) -> int:
    return 2 if workload.training.recompute in ("full", "selective") else 1


def cp_calls(workload: Workload) -> list[tuple[str, str, float, float, int, int]]:
    """(name, collective, size per rank, calls per layer and micro-batch, ranks, stride)."""
    par = workload.parallelism
    if par.cp == 1:
        return []
    size, steps, forward = kv_bytes(workload), par.cp - 1, _forward_passes(workload)
    if par.cp_comm == "all_gather":
        gathered = size * par.cp
        return [
            ("kv all_gather", "all_gather", gathered, forward + 1, par.cp, par.tp),
            ("dkv reduce_scatter", "reduce_scatter", gathered, 1, par.cp, par.tp),
        ]
    return [
        ("kv", "sendrecv", size, steps * forward + 1, par.cp, par.tp),
        ("kv+dkv", "sendrecv", 2 * size, steps, par.cp, par.tp),
    ]


def cp_exchange(
    workload: Workload, pricer: Callable[..., Any], forward_s: float, backward_s: float
) -> Exchange:
    """The step's context-parallel communication; `forward_s`/`backward_s`: one layer's
    attention core per micro-batch (what each ring step runs beside, 1 / cp of it)."""
    par = workload.parallelism
    calls = cp_calls(workload)
    if not calls:
        return Exchange("none (cp = 1)", 0.0, 0.0, {})
    priced, layer_s = price_calls(calls, pricer)
    if par.cp_comm == "all_gather":
        exposed_s = layer_s
        what = f"all_gather K/V {calls[0][2] / 1e6:.1f} MB + reduce_scatter dK/dV per layer"
    else:
        steps, forward = par.cp - 1, _forward_passes(workload)
        kv, both = priced["kv"].time_s, priced["kv+dkv"].time_s
        exposed_s = (
            forward * steps * max(0.0, kv - forward_s / par.cp)
            + steps * max(0.0, both - backward_s / par.cp)
            + kv  # the last dK/dV sent home after the backward's last step
        )
        what = f"ring sendrecv K/V {calls[0][2] / 1e6:.1f} MB x {par.cp - 1} steps per layer"
    repeats = workload.layers_per_stage * workload.microbatches
    return Exchange(what, layer_s * repeats, exposed_s * repeats, priced)
