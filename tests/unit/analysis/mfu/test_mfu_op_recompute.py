"""--recompute op: torchtitan's per-op selective checkpointing (_apply_op_sac keeps the
attention core's output and every other aten.mm's; the rest runs again in the backward).
Hand-computed on a tiny GPT (4 layers, hidden 64, 4 heads, MLP 256, seq 32) and a Llama
block with grouped-query attention and SwiGLU."""

from __future__ import annotations

from dataclasses import replace

import pytest

from collbench.analysis.mfu.compute import MEMORY
from collbench.analysis.mfu.fabrics import Fabric, Inputs
from collbench.analysis.mfu.memory import (
    DEMONSTRATED_ERROR,
    GIB,
    layer_activation_bytes,
    memory_estimate,
)
from collbench.analysis.mfu.search import search
from collbench.analysis.mfu.tp_overlap import tp_calls
from collbench.analysis.mfu.workload import Model, Parallelism, Training, Workload
from collbench.core.errors import SpecError
from collbench.topologies.loader import load_topology
from tests.unit.analysis.mfu.test_mfu_recompute_layers import micro

TINY = Model("tiny", layers=4, hidden=64, heads=4, vocab=128)
# Llama 3 8B's block: 32 heads, 8 KV heads of 128, SwiGLU 14,336.
LLAMA = Model("llama", 32, 4096, 32, 128256, 14336, kv_heads=8, gated_mlp=True, dropout=False)


def tiny(recompute: str = "op", framework: str = "megatron", **parallel: int) -> Workload:
    training = Training(seq=32, global_batch=8, recompute=recompute, framework=framework)
    return Workload(TINY, training, Parallelism(**parallel))


def test_every_second_matmul_a_layer_calls_runs_again():
    # GPT: q k v | o | up | down -> calls 2 (k), 4 (o), 6 (down) run again.
    assert TINY.op_recompute_shares() == {
        "qkv": pytest.approx(1 / 3),
        "attn_proj": 1.0,
        "mlp_up": 0.0,
        "mlp_down": 1.0,
    }
    # Llama: wq wk wv | wo | w1 w3 | w2 -> wk (8 of 48 heads' widths), wo, w3 (half of up).
    assert LLAMA.op_recompute_shares(tp=8) == {
        "qkv": pytest.approx(8 / 48),
        "attn_proj": 1.0,
        "mlp_up": 0.5,
        "mlp_down": 0.0,
    }


def test_hardware_flops_add_the_recomputed_matmuls_forward():
    # 2 FLOPs per recomputed weight: L x (64·192/3 + 64·64 + 256·64) = 4 x 24,576 x 2.
    workload = tiny()
    assert workload.hardware_flops_per_token - workload.model_flops_per_token == 196_608
    # Llama 3 8B: 2 x 32 x 4,096 x (1,024 + 4,096 + 14,336) = 5,100,273,664.
    llama = Workload(LLAMA, Training(seq=8192, global_batch=8, recompute="op"))
    assert llama.hardware_flops_per_token - llama.model_flops_per_token == 5_100_273_664


def test_memory_keeps_the_input_the_core_and_the_kept_outputs():
    # Per token, 2 bytes each: input 64, core 64, q + v 128, up 256 = 1,024 B x 32 tokens.
    assert layer_activation_bytes(tiny(), "op") == 32_768
    # Llama, per token: input 4,096, core 4,096, q + v 5,120, w1 14,336, w2 4,096 -> x 2 =
    # 63,488 B, against 139,264 without recompute (Korthikanti's 34·h with GQA and SwiGLU).
    llama = Workload(LLAMA, Training(seq=1, global_batch=8, recompute="op"))
    assert layer_activation_bytes(llama, "op") == 63_488
    assert layer_activation_bytes(llama, "none") == 139_264


def test_each_gemm_runs_its_share_of_its_forward_again():
    layer = {op.op: op for op in micro(tiny()).layer}
    for name, share in TINY.op_recompute_shares().items():
        assert layer[name].recompute_s == pytest.approx(share * layer[name].forward_s)
    assert layer["attention"].recompute_s == 0.0  # the core's output is kept
    memory_bound = [op for op in layer.values() if op.category == MEMORY]
    assert memory_bound and all(op.recompute_s == op.forward_s for op in memory_bound)


def test_the_search_offers_per_op_recompute_outside_megatron_only():
    """Memory between what tp 1, ZeRO 3 needs with per-op and with selective recompute
    (a 4,096-token sequence): per-op recompute is the least that fits there."""
    for framework, offered in (("megatron", False), ("eager", True)):
        job = Workload(
            Model("wide", layers=8, hidden=1024, heads=8, vocab=128),
            Training(seq=4096, global_batch=8, framework=framework),
            Parallelism(dp=8, zero=3),
        )
        need = {
            name: memory_estimate(
                replace(job, training=replace(job.training, recompute=name)), None
            )
            for name in ("op", "selective")
        }
        room = (need["op"].total_bytes + need["selective"].total_bytes) / 2
        topology = load_topology("dgx-h100")
        accelerator = replace(
            topology.accelerator, memory_gib=room * (1 + DEMONSTRATED_ERROR) / GIB
        )
        layouts = search(job, [Fabric(replace(topology, accelerator=accelerator))], Inputs())[0]
        assert layouts
        assert ("op" in {w.training.recompute for w, _ in layouts}) is offered


def test_with_recompute_layers_the_full_ones_add_their_forward_the_others_their_shares():
    # 2 of 4 layers in full: 1/2 x (2 x 197,632 layer weights + 32,768 attention forward)
    # + 1/2 x 196,608 (the others' per-op matmuls) = 214,016 + 98,304.
    training = Training(seq=32, global_batch=8, recompute="op", recompute_layers=2)
    workload = Workload(TINY, training)
    assert workload.hardware_flops_per_token - workload.model_flops_per_token == 312_320


def test_moe_models_are_refused_not_yet_priced():
    moe = Model("moe", 4, 64, 4, 128, experts=8, top_k=2)
    with pytest.raises(SpecError, match="--recompute: 'op' is not yet priced for MoE"):
        Workload(moe, Training(seq=32, global_batch=8, recompute="op"))


def test_sequence_parallel_keeps_the_reduce_scatters_and_gathers_again():
    """torchtitan's save list holds reduce_scatter_tensor, not the all-gathers: each layer
    runs its 2 forward all-gathers again (2 all-reduces without SP), and keeps 2 x h / t."""
    sp = tiny(tp=2, sequence_parallel=True)
    assert tp_calls(sp) == {"all_gather": 8 * 4, "reduce_scatter": 4 * 4}
    assert tp_calls(tiny(tp=2)) == {"all_reduce": 6 * 4}
    plain = tiny(tp=2, sequence_parallel=False)
    # per token, SP: the input / 2 and the 2 reduce-scatter outputs 2 x 2 x 64 / 2 more
    gained = layer_activation_bytes(sp, "op") - layer_activation_bytes(plain, "op")
    assert gained == 32 * (2 * 64 / 2 - 2 * 64 + 4 * 64 / 2)


def test_unfused_attention_keeps_its_scores():
    unfused = Workload(TINY, Training(seq=32, global_batch=8, recompute="op", attention="unfused"))
    # softmax output, dropout mask and output: 5 bytes x 4 heads x 32 x 32 tokens
    assert layer_activation_bytes(unfused, "op") - layer_activation_bytes(tiny(), "op") == 20_480
