"""Mixture of experts in the MFU estimator: the expert GEMMs one rank runs, and the
expert-parallel all-to-all each MoE layer issues, with what of it compute hides.

Layout (Megatron-Core's MoE with its alltoall token dispatcher; expert tensor parallelism
= tp, EP folded into the dp x cp ranks of the expert layers):
- a rank's micro-batch holds T = micro_tokens / tp tokens (MoE with tp > 1 needs sequence
  parallelism); the router (a hidden x experts GEMM) sends each to top_k experts;
- **dispatch**: an all-to-all over the ep ranks (stride tp: the dp x cp neighbours) of
  T x top_k x hidden elements per rank (nccl-tests' size; `dispatch_bytes` each: DeepSeek-
  V3 dispatches in fp8), then, with tp > 1, an all-gather over tp of the received tokens;
- the experts: each rank holds experts / ep of them, split by tp, and (balanced, as NVIDIA's
  benchmarks force it) runs micro_tokens x top_k rows through them, a grouped GEMM priced
  as experts / ep batched GEMMs of micro_tokens x top_k x ep / experts rows each; a
  capacity factor X pads every expert to X times that (and the all-to-all carries it);
- **combine**: the reverse (a reduce-scatter over tp, then an all-to-all) in bf16;
- node-limited routing (`ep_route_nodes` N < top_k, DeepSeek-V3 section 2.1.2 with
  DeepEP's dispatch): a token crosses the scale-out once per node, to at most N nodes,
  then scale-up forwards it to its experts; priced as an all-to-all of N / top_k the
  size (the scale-out's share; the faster scale-up forwarding is not priced);
- the backward runs both again (the gradients travel back), a full recompute a third time;
- shared experts: a dense MLP of shared x moe_ffn on every token, split by tp.
So per MoE layer and micro-batch there are 4 all-to-alls (6 with full recompute), intra-
node when ep x tp fits a scale-up domain, else across the scale-out (the pricer decides
from the group's ranks and stride: the cost model, or a measured all_to_all via --curves).

Overlap (`ep_overlap`), per MoE layer and micro-batch, hidden = min(communication, the
compute it runs beside), exposed = the rest:
- "none": all exposed (Megatron's default);
- "shared-expert": beside the shared experts' forward and backward (Megatron's
  --moe-shared-expert-overlap runs them on another stream during dispatch and combine);
- "dualpipe": beside the whole layer of another micro-batch (DeepSeek-V3 section 3.2.1:
  DualPipe pairs one micro-batch's forward chunk with another's backward chunk so that
  "both all-to-all and PP communication can be fully hidden"; Megatron-Core's
  overlap_moe_expert_parallel_comm does the same within 1F1B). ASSUMED: the SMs the
  communication kernels take (20 of 132 on H800) do not slow the compute beside them. Its
  bubble is DualPipe's (PP/2 - 1)(F&B + B - 3W) (Table 2), with F&B = F + B and
  W = B / 2: (pp/2 - 1)(F + B/2) per micro-batch slot.

Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from collbench.analysis.mfu.workload import Workload
from collbench.analysis.model.gemm_model import Gemm

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

    @property
    def hidden_s(self) -> float:
        return self.total_s - self.exposed_s


def rank_params(workload: Workload) -> float:
    """Parameters one rank holds unsharded: the dense ones / (tp x pp), the routed
    experts' / (tp x pp x ep); scaled as --params scales the shape's count."""
    model, par = workload.model, workload.parallelism
    routed = model.moe_layers * model.experts * model.expert_params
    routed *= model.n_params / model.shape_params
    dense = model.n_params - routed
    return (dense + routed / par.ep) / (par.tp * par.pp)


def on_rank(workload: Workload, params: float, layers: int) -> float:
    """Of `params` on a pipeline stage of `layers` layers, those one EP rank holds: its
    routed experts are 1/ep of the stage's."""
    model, ep = workload.model, workload.parallelism.ep
    routed = min(layers, model.moe_layers) * model.experts * model.expert_params
    routed *= model.n_params / model.shape_params
    return params - routed * (1 - 1 / ep)


def routed_rows(workload: Workload) -> float:
    """Routed copies of tokens one rank's experts compute per micro-batch."""
    model, run = workload.model, workload.training
    return workload.micro_tokens * model.top_k * (run.capacity_factor or 1.0)


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
    ffn = math.ceil(model.moe_ffn / t)
    up = 2 * ffn if model.gated_mlp else ffn
    gemms = [
        *_three("router", workload.micro_tokens // t, model.experts, h),
        *_three("experts_up", rows, up, h, local),
        *_three("experts_down", rows, h, ffn, local),
    ]
    if model.shared_experts:
        shared = math.ceil(model.shared_experts * model.moe_ffn / t)
        tokens = workload.micro_tokens
        gemms += _three("shared_up", tokens, 2 * shared if model.gated_mlp else shared, h)
        gemms += _three("shared_down", tokens, h, shared)
    return tuple(gemms)


def permute_bytes(workload: Workload) -> float:
    """Bytes one MoE layer's permute + unpermute move per micro-batch, forward."""
    rows = routed_rows(workload)
    return 2 * PERMUTE_BYTES * rows * workload.model.hidden * workload.training.activation_bytes


def _three(op: str, m: int, n: int, k: int, batch: int = 1) -> tuple[Gemm, ...]:
    return (
        Gemm(op, "fwd", m, n, k, batch),
        Gemm(op, "dgrad", m, k, n, batch),
        Gemm(op, "wgrad", k, n, m, batch),
    )


def moe_layers_on_stage(workload: Workload) -> int:
    """MoE layers on the busiest stage (the dense layers sit on the first one)."""
    return min(workload.layers_per_stage, workload.model.moe_layers)


def ep_calls(workload: Workload) -> list[tuple[str, str, float, int, int, int]]:
    """(name, collective, size per rank, calls per MoE layer and micro-batch, ranks,
    stride) of the expert-parallel exchange."""
    model, par, run = workload.model, workload.parallelism, workload.training
    if not model.experts or (par.ep == 1 and par.tp == 1):
        return []
    passes = 3 if run.recompute == "full" else 2
    elements = routed_rows(workload) / par.tp * model.hidden
    if par.ep_route_nodes and par.ep_route_nodes < model.top_k:
        # Each token crosses to at most ep_route_nodes nodes, once each, and is forwarded
        # to its experts there over scale-up: the scale-out carries that share of it.
        elements *= par.ep_route_nodes / model.top_k
    dispatch = elements * (run.dispatch_bytes or run.activation_bytes)
    combine = elements * run.activation_bytes
    calls = []
    if par.ep > 1:
        calls += [
            ("dispatch", "all_to_all", dispatch, passes, par.ep, par.tp),
            ("combine", "all_to_all", combine, passes, par.ep, par.tp),
        ]
    if par.tp > 1:  # the received tokens gathered over (and scattered back to) the TP ranks
        calls += [
            ("tp gather", "all_gather", combine * par.tp, passes, par.tp, 1),
            ("tp scatter", "reduce_scatter", combine * par.tp, passes, par.tp, 1),
        ]
    return calls


def ep_exchange(workload: Workload, pricer: Callable[..., Any], window_s: float) -> Exchange:
    """The step's expert-parallel communication; `window_s`: the compute per MoE layer and
    micro-batch it may hide behind (`overlap_window_s`)."""
    calls = ep_calls(workload)
    if not calls:
        return Exchange("none (no expert parallelism)", 0.0, 0.0, {})
    priced = {
        name: pricer(coll, size, ranks, stride) for name, coll, size, _, ranks, stride in calls
    }
    layer_s = sum(priced[name].time_s * count for name, _, _, count, _, _ in calls)
    repeats = moe_layers_on_stage(workload) * workload.microbatches
    exposed_s = max(0.0, layer_s - window_s) * repeats
    size = calls[0][2]
    what = (
        f"all_to_all {size / 1e6:.1f} MB x {2 * calls[0][3]}/MoE layer"
        + (" + tp all_gather/reduce_scatter" if workload.parallelism.tp > 1 else "")
        + f", overlap {workload.parallelism.ep_overlap}"
    )
    return Exchange(what, layer_s * repeats, exposed_s, priced)


def overlap_window_s(workload: Workload, layer_ops: Any) -> float:
    """Seconds of compute per MoE layer and micro-batch the all-to-alls run beside:
    `layer_ops` are the layer's OperatorTime (analysis.compute)."""
    choice = workload.parallelism.ep_overlap
    if choice == "shared-expert":
        return sum(op.total_s for op in layer_ops if op.op.startswith("shared_"))
    if choice == "dualpipe":
        return sum(op.total_s for op in layer_ops)
    return 0.0


def dualpipe_bubble_s(workload: Workload, forward_s: float, backward_s: float) -> float | None:
    """DualPipe's bubble, (pp/2 - 1)(F + B/2), for `ep_overlap` dualpipe (None: 1F1B's)."""
    par = workload.parallelism
    if par.ep_overlap != "dualpipe" or par.pp == 1:
        return None
    return (par.pp / 2 - 1) * (forward_s + backward_s / 2)
