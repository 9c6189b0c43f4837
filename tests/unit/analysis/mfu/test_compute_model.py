"""The compute model: GEMM efficiency from shape and accelerator (analysis.gemm_model) and
a micro-batch's operators (analysis.compute), checked against hand-computed values."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from collbench.analysis.mfu.compute import (
    ATTENTION,
    GEMM,
    MEMORY,
    OperatorTime,
    layer_gemms,
    micro_batch_compute,
    model_pricer,
    workload_gemms,
)
from collbench.analysis.mfu.presets import preset
from collbench.analysis.mfu.workload import Parallelism, Training, Workload
from collbench.analysis.model.gemm_model import (
    K_RAMP,
    MEMORY_FRACTION,
    Gemm,
    gemm_time,
    shape_efficiency,
)
from collbench.topologies.schema import Accelerator
from tests.helpers import collbench

A100 = Accelerator(
    "A100", 312.0, memory_gib=80, hbm_gbytes_s=2039, sm_count=108, matmul_fraction=0.869
)
PEAK = 312e12


def test_a_full_last_wave_and_whole_tiles_lose_nothing_but_the_ramp():
    # 256x128 tiles: 27 x 128 = 3456 tiles = 32 full waves on 108 SMs
    efficiency, tile, waves = shape_efficiency(Gemm("x", "fwd", 6912, 16384, 2048), 108)
    assert (tile, waves) == ("256x128", 32)
    assert efficiency == pytest.approx(2048 / (2048 + K_RAMP))


def test_wave_quantization_by_hand():
    # 2048 x 2304: 256x128 tiles -> 8 x 18 = 144 tiles = 2 waves on 108 SMs, 144/216 full;
    # 128x128 tiles -> 16 x 18 = 288 = 3 waves, 288/324 full, at 0.94 of the big tile.
    gemm = Gemm("qkv", "fwd", 2048, 2304, 6144)
    ramp = 6144 / (6144 + K_RAMP)
    efficiency, tile, waves = shape_efficiency(gemm, 108)
    assert (tile, waves) == ("128x128", 3)
    assert efficiency == pytest.approx(0.94 * 288 / 324 * ramp)
    assert efficiency > 1.0 * 144 / 216 * ramp  # the 256x128 tile's


def test_tile_quantization_pays_for_the_partial_tile():
    whole, _, _ = shape_efficiency(Gemm("x", "fwd", 4096, 4096, 4096), None)
    assert whole == pytest.approx(4096 / (4096 + K_RAMP))  # no SM count: the ramp only
    aligned, _, _ = shape_efficiency(Gemm("x", "fwd", 8192, 8192, 4096), 128)
    ragged, _, _ = shape_efficiency(Gemm("x", "fwd", 8193, 8192, 4096), 128)
    assert ragged < aligned


def test_a_thin_gemm_is_memory_bound():
    thin = gemm_time(Gemm("x", "fwd", 16, 8192, 8192), A100, PEAK)
    assert thin.bound == "memory"
    bytes_moved = 2 * (16 * 8192 + 8192 * 8192 + 16 * 8192)
    assert thin.time_s == pytest.approx(bytes_moved / (2039e9 * 0.85))
    big = gemm_time(Gemm("x", "fwd", 8192, 8192, 8192), A100, PEAK)
    assert big.bound == "compute" and big.efficiency <= 0.869


def workload(**training) -> Workload:
    return Workload(
        preset("gpt3-175b"),
        Training(seq=2048, global_batch=8, **training),
        Parallelism(tp=8, pp=8, dp=1),
    )


def test_layer_gemms_carry_palms_weight_flops():
    # 24 b s h^2 per layer forward (QKV 6, projection 2, MLP 16), over tp; x3 with backward
    load = workload()
    flops = sum(gemm.flops for gemm in layer_gemms(load))
    assert flops == pytest.approx(3 * 24 * 2048 * 12288**2 / 8)


def test_shapes_after_the_tp_split():
    shapes = {(g.op, g.pass_name): (g.m, g.n, g.k) for g in layer_gemms(workload())}
    assert shapes[("qkv", "fwd")] == (2048, 3 * 12288 // 8, 12288)
    assert shapes[("attn_proj", "fwd")] == (2048, 12288, 1536)
    assert shapes[("mlp_up", "dgrad")] == (2048, 12288, 6144)
    assert shapes[("mlp_down", "wgrad")] == (6144, 12288, 2048)


def test_gated_mlp_and_grouped_query_attention_shapes():
    load = Workload(preset("llama3-70b"), Training(seq=8192, global_batch=8), Parallelism(tp=8))
    shapes = {(g.op, g.pass_name): (g.m, g.n, g.k) for g in layer_gemms(load)}
    # 64 heads / 8 = 8 query heads and 8 kv heads / 8 = 1 each of K and V, head dim 128
    assert shapes[("qkv", "fwd")] == (8192, (8 + 2) * 128, 8192)
    assert shapes[("mlp_up", "fwd")] == (8192, 2 * 28672 // 8, 8192)


def test_unfused_attention_adds_its_batched_shapes():
    flash = {gemm.shape for gemm in workload_gemms(workload())}
    unfused = {gemm.shape for gemm in workload_gemms(workload(attention="unfused"))}
    assert "12x2048x2048x128" in unfused - flash


def categories(load: Workload):
    micro = micro_batch_compute(load, A100, PEAK, model_pricer(A100, PEAK))
    return micro, {op.op: op for op in micro.layer}


def test_flash_attention_skips_the_causal_half_and_the_softmax_traffic():
    flash, flash_ops = categories(workload())
    unfused, unfused_ops = categories(workload(attention="unfused"))
    assert flash_ops["attention"].category == unfused_ops["attention"].category == ATTENTION
    assert flash_ops["attention"].total_s < unfused_ops["attention"].total_s
    # the FLOPs it does: half the scores forward, 2.5x that backward
    assert flash_ops["attention"].flops == pytest.approx(3.5 * 2 * 12 * 2048**2 * 128)


def test_recompute_repeats_what_it_says():
    none, none_ops = categories(workload())
    selective, selective_ops = categories(workload(recompute="selective"))
    full, full_ops = categories(workload(recompute="full"))
    assert all(op.recompute_s == 0 for op in none.layer)
    assert [op.op for op in selective.layer if op.recompute_s] == ["attention"]
    for op in full.layer:
        assert op.recompute_s == pytest.approx(op.forward_s)
    assert none.total_s < selective.total_s < full.total_s


def test_sequence_parallelism_shrinks_the_norms_and_dropouts_by_tp():
    plain, plain_ops = categories(workload())
    sp = replace(workload(), parallelism=Parallelism(tp=8, pp=8, sequence_parallel=True))
    _, sp_ops = categories(sp)
    for op in ("layer norms", "bias-dropout-add"):
        assert plain_ops[op].category == MEMORY
        assert sp_ops[op].total_s == pytest.approx(plain_ops[op].total_s / 8)
    assert sp_ops["gelu"].total_s == pytest.approx(plain_ops["gelu"].total_s)


def category_s(micro, category: str) -> float:
    """Seconds of one category over the stage's layers, recomputed ones and its own."""
    return micro._summed(lambda op: op.total_s if op.category == category else 0.0)


def test_the_stage_adds_logits_and_loss_and_the_totals_add_up():
    micro, ops = categories(workload())
    assert [op.op for op in micro.stage] == ["logits", "loss"]
    assert micro.stage[0].category == GEMM
    layer_s = sum(op.total_s for op in micro.layer)
    assert micro.total_s == pytest.approx(12 * layer_s + sum(op.total_s for op in micro.stage))
    assert micro.forward_s + micro.backward_s == pytest.approx(micro.total_s)
    by_category = sum(category_s(micro, c) for c in (GEMM, ATTENTION, MEMORY))
    assert by_category == pytest.approx(micro.total_s)
    assert micro.optimizer_s > 0


def test_without_hbm_bandwidth_nothing_memory_bound_is_priced():
    bare = replace(A100, hbm_gbytes_s=None)
    micro = micro_batch_compute(workload(), bare, PEAK, model_pricer(bare, PEAK))
    assert category_s(micro, MEMORY) == 0 and micro.optimizer_s == 0


H100 = Accelerator(
    "H100",
    989.0,
    peak_fp8_tflops=1979.0,
    hbm_gbytes_s=3350,
    sm_count=132,
    matmul_fraction=0.803,
    matmul_fraction_fp8=0.709,
)


def fp8_ops(**training) -> dict[str, OperatorTime]:
    """A GPT-3 175B layer's operators in fp8 on H100, by name."""
    fp8 = workload(dtype="fp8", **training)
    micro = micro_batch_compute(fp8, H100, 1979e12, model_pricer(H100, 1979e12, "fp8"))
    return {op.op: op for op in micro.layer}


def test_fp8_prices_gemms_at_the_fp8_rate_casts_their_inputs_and_keeps_attention_bf16():
    slow = micro_batch_compute(workload(), H100, 989e12, model_pricer(H100, 989e12))
    fast_ops, slow_ops = fp8_ops(), {op.op: op for op in slow.layer}
    assert fast_ops["qkv"].total_s == pytest.approx(
        slow_ops["qkv"].total_s * (989 * 0.803) / (1979 * 0.709), rel=0.02
    )
    assert fast_ops["attention"].total_s == pytest.approx(slow_ops["attention"].total_s)
    assert "fp8 casts (current scaling)" in fast_ops
    assert not [name for name in slow_ops if "fp8" in name]


def test_delayed_scaling_casts_without_the_amax_pass_by_hand():
    # GPT-3 175B at tp 8, 2048 tokens: the forward GEMMs' inputs are 2048 x (12288 (qkv) +
    # 1536 (projection) + 12288 (MLP up) + 6144 (MLP down)) elements; current scaling reads
    # each in bf16 twice (its amax, the cast) and writes it in fp8: 5 bytes; delayed, 3.
    inputs = 2048 * (12288 + 1536 + 12288 + 6144)
    for recipe, per_element in (("current", 5), ("delayed", 3)):
        casts = fp8_ops(fp8_recipe=recipe)[f"fp8 casts ({recipe} scaling)"]
        assert casts.forward_s == pytest.approx(per_element * inputs / (3350e9 * MEMORY_FRACTION))
        assert casts.backward_s == pytest.approx(2 * casts.forward_s)


def test_dtype_fp8_delayed_is_fp8_with_delayed_scaling():
    assert Training(seq=8, global_batch=1, dtype="fp8-delayed") == Training(
        seq=8, global_batch=1, dtype="fp8", fp8_recipe="delayed"
    )
    args = ("mfu", "-T", "dgx-h100", "-m", "llama3-8b", "--global-batch", "8", "--fsdp")
    done = collbench(*args, "--dtype", "fp8-delayed", "--explain")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].endswith(", recompute none, fp8-delayed")
    as_json = collbench(*args, "--dtype", "fp8-delayed", "--json")
    assert json.loads(as_json.stdout)["workload"]["dtype"] == "fp8-delayed"
    assert "fp8: delayed scaling of each GEMM input" in done.stdout
    assert "fp8 casts (delayed scaling)" in done.stdout
    bad = collbench(*args, "--dtype", "mxfp8")
    assert bad.returncode == 2 and bad.stderr.strip() == (
        "collbench: error: --dtype: 'mxfp8' must be one of bf16, fp8, fp8-delayed"
    )
