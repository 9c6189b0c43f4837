"""Context parallelism in the MFU estimator: the K/V exchange of each attention layer and
what of it the attention compute hides.

With `cp` > 1 (Megatron-Core over Transformer Engine's fused attention) every rank holds
seq / cp of each sequence (2 chunks of seq / 2cp, one from each end, so that the causal
mask loads the ranks evenly): its GEMMs, norms and activations see micro_tokens =
micro_batch x seq / cp tokens, its attention core computes its queries against all the
keys (1 / cp of the causal work), and K/V travel:
- "p2p" (cp_comm_type p2p, the default): a ring. The forward runs cp steps; before step
  i computes with the K/V it holds it posts the send/recv of the next K/V
  (TransformerEngine attention/dot_product_attention/context_parallel.py,
  AttnFuncWithCPAndKVP2P), so each of the cp - 1 transfers of K/V (micro_tokens x the K
  and V widths of the rank's heads) runs beside one step's attention, 1 / cp of it:
  exposed = (cp - 1) x max(0, transfer - step). The backward does the same with K/V and
  their gradients in flight (twice the bytes) and then sends the last dK/dV home,
  exposed. Recompute (selective or full) runs the forward's ring again.
- "all_gather": K/V all-gathered before the attention (and again in the backward, whose
  dK/dV are reduce-scattered), ASSUMED exposed.
The ring's step is priced as nccl-tests' sendrecv over the cp ranks (stride tp): a ring
shift, as slow as its slowest hop (across nodes once cp x tp spans them).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from collbench.analysis.mfu.moe import Exchange, price_calls
from collbench.analysis.mfu.workload import Workload


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
