"""Partial recompute (--recompute-layers R: Megatron's recompute_num_layers, method block):
R layers of each model chunk run their forward again, the rest as --recompute says.
Hand-computed on a tiny GPT: 4 layers, hidden 64, 4 heads, vocab 128 (tied), seq 32."""

from __future__ import annotations

from dataclasses import replace

import pytest

from collbench.analysis.mfu.compute import micro_batch_compute, model_pricer
from collbench.analysis.mfu.estimate import estimate
from collbench.analysis.mfu.fabrics import sized_for
from collbench.analysis.mfu.inputs import cost_model_pricer
from collbench.analysis.mfu.memory import activation_bytes, layer_activation_bytes
from collbench.analysis.mfu.workload import Model, Parallelism, Training, Workload
from collbench.core.errors import SpecError
from collbench.topologies.loader import load_topology

TINY = Model("tiny", layers=4, hidden=64, heads=4, vocab=128)
# One layer: q, k, v, o (4·h²) + 2 norms (4·h) + the MLP (2·h·4h) = 12·64² + 4·64 = 49,408.
LAYER_PARAMS = 49_408
EMBEDDING = 128 * 64  # tied
# 6·N + 12·L·H·Q·T = 6 x (4 x 49,408 + 8,192) + 12 x 4 x 4 x 16 x 32 = 1,333,248
MODEL_FLOPS = 1_333_248
ATTENTION = 98_304  # 12·L·H·Q·T; its forward is a third: 32,768


def tiny(recompute: str = "none", layers: int = 0, **parallel: int) -> Workload:
    training = Training(seq=32, global_batch=8, recompute=recompute, recompute_layers=layers)
    return Workload(TINY, training, Parallelism(**parallel))


def test_the_tiny_model_is_what_the_hand_counts_say():
    assert TINY.layer_params == LAYER_PARAMS
    assert tiny().model_flops_per_token == MODEL_FLOPS
    assert tiny().attention_flops_per_token == ATTENTION


@pytest.mark.parametrize(
    ("recompute", "layers", "extra"),
    [
        # 1 of 4 layers again: (2 x 4 x 49,408 + 32,768) / 4 = 107,008
        ("none", 1, 107_008),
        # ... and selective recompute's attention forward on the other 3: + 3/4 x 32,768
        ("selective", 1, 107_008 + 24_576),
        ("none", 4, 428_032),  # every layer: 2 x 197,632 + 32,768
        ("none", 0, 0),
    ],
)
def test_hardware_flops_add_the_recomputed_layers_forward(recompute, layers, extra):
    workload = tiny(recompute, layers)
    assert workload.hardware_flops_per_token == MODEL_FLOPS + extra
    assert workload.model_flops_per_token == MODEL_FLOPS  # MFU counts no recompute


def test_all_layers_differ_from_full_recompute_by_the_embeddings_only():
    """--recompute full counts 8·N (PaLM's convention, the embeddings too); recomputing
    every layer counts the layers' parameters."""
    full = tiny("full").hardware_flops_per_token
    assert full - tiny("none", 4).hardware_flops_per_token == 2 * EMBEDDING


@pytest.mark.parametrize(("pp", "virtual", "layers", "share"), [(2, 1, 1, 0.5), (2, 2, 1, 1.0)])
def test_r_layers_of_each_model_chunk(pp, virtual, layers, share):
    """pp x v chunks of R layers: pp 2 x 1 chunk x 1 layer = 2 of 4; pp 2 x v 2 = all 4."""
    workload = tiny("none", layers, pp=pp, virtual_stages=virtual)
    assert workload.recomputed_share == share
    assert workload.recomputed_layers == layers * virtual


def micro(workload: Workload, topology_name: str = "dgx-a100"):
    """The workload's micro-batch compute on one accelerator of the topology."""
    topology = load_topology(topology_name)
    peak = topology.accelerator.peak_bf16_tflops * 1e12
    return micro_batch_compute(
        workload, topology.accelerator, peak, model_pricer(topology.accelerator, peak)
    )


def test_time_grows_by_the_recomputed_share_of_full_recompute():
    none, full = micro(tiny()).total_s, micro(tiny("full")).total_s
    for layers in (1, 2, 4):
        partial = micro(tiny("none", layers))
        assert partial.total_s == pytest.approx(none + layers / 4 * (full - none))
        assert partial.forward_s == pytest.approx(micro(tiny()).forward_s)


def test_selective_rest_does_not_recompute_the_attention_twice():
    """A fully recomputed layer under selective recompute adds its forward less the
    attention core it already recomputes."""
    selective = micro(tiny("selective"))
    partial = micro(tiny("selective", 1))
    full = micro(tiny("full"))
    assert "attention (recomputed)" not in {op.op for op in partial.recomputed}
    assert partial.total_s == pytest.approx(
        selective.total_s + (full.total_s - selective.total_s) / 4
    )


def test_tp_collectives_two_more_per_recomputed_layer():
    """4 per layer, 2 more on each recomputed one: 1 of 4 layers -> 18 / 16 of them."""
    topology = sized_for(tiny(tp=2), load_topology("dgx-a100"))
    pricer = cost_model_pricer(topology)
    none = estimate(tiny(tp=2), topology, pricer).comm[0]
    partial = estimate(tiny("none", 1, tp=2), topology, pricer).comm[0]
    assert partial.total_s == pytest.approx(none.total_s * 18 / 16)
    assert "x 4.5/layer" in partial.collectives


def test_memory_keeps_only_the_input_of_recomputed_layers():
    """pp 1 holds one micro-batch: 3 layers as stored without recompute, 1 layer's input
    (2 bytes x 32 tokens x 64), and one layer's activations while it is recomputed."""
    workload = tiny("none", 1)
    one = layer_activation_bytes(workload, "none")
    logits = 4 * 32 * 128  # the last stage's fp32 logits
    expected = 3 * one + 2 * 32 * 64 + one + logits
    assert activation_bytes(workload, 1.0) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"recompute": "full", "recompute_layers": 2}, "every layer already is"),
        ({"recompute_layers": -1}, "must be >= 0"),
    ],
)
def test_bad_recompute_layers_are_refused(change, message):
    with pytest.raises(SpecError, match=message):
        replace(Training(seq=32, global_batch=8), **change)


def test_more_layers_than_a_chunk_are_refused():
    with pytest.raises(SpecError, match="more than the 2 layers of a model chunk"):
        tiny("none", 3, pp=2)
