"""The MFU estimator's arithmetic: FLOP counts, presets, and invariants of the step model.

Collectives are priced by a plain alpha-beta stand-in here (`flat_pricer`), so these tests
check the estimator, not the cost model (tests/unit/analysis/model/test_costmodel.py does that).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from collbench.analysis.mfu.compute import IN_STEP_SHARE
from collbench.analysis.mfu.estimate import (
    LEE_SLOWDOWN,
    EstimateOptions,
    Priced,
    _bucketed,
    estimate,
)
from collbench.analysis.mfu.presets import PRESETS, preset
from collbench.analysis.mfu.workload import Model, Parallelism, Training, Workload
from collbench.analysis.model.gemm_model import DEFAULT_MATMUL_FRACTION
from collbench.core.errors import SpecError
from collbench.topologies.schema import topology_from_dict


def make_topology(nodes: int = 64, fp8: float | None = None):
    return topology_from_dict(
        {
            "name": "test-fabric",
            "nodes": nodes,
            "accelerators_per_node": 8,
            "accelerator": {"name": "X", "peak_bf16_tflops": 312.0, "peak_fp8_tflops": fp8},
            "scale_up": {
                "kind": "nvlink",
                "bandwidth_gbytes_s": 300,
                "latency_us": 2,
                "domain_size": 8,
            },
            "scale_out": {
                "kind": "infiniband",
                "nics_per_node": 8,
                "nic_gbits_s": 200,
                "latency_us": 5,
            },
        }
    )


def flat_pricer(bandwidth_gbytes_s: float = 100.0, latency_us: float = 10.0):
    def price(collective: str, size_bytes: float, ranks: int, stride: int) -> Priced:
        return Priced(latency_us * 1e-6 + size_bytes / (bandwidth_gbytes_s * 1e9), "flat")

    return price


def free_pricer(collective: str, size_bytes: float, ranks: int, stride: int) -> Priced:
    return Priced(0.0, "free")


def workload(
    model: str = "gpt3-175b",
    *,
    tp: int = 8,
    pp: int = 8,
    dp: int = 4,
    global_batch: int = 256,
    recompute: str = "none",
    **parallel,
) -> Workload:
    return Workload(
        preset(model),
        Training(seq=2048, global_batch=global_batch, recompute=recompute),
        Parallelism(tp=tp, pp=pp, dp=dp, **parallel),
    )


@pytest.mark.parametrize(
    ("name", "published"),
    [
        ("gpt3-175b", 175e9),
        ("gpt-1t", 1.0e12),
        ("gpt-530b", 530e9),
        ("gpt-145b", 145.6e9),
        ("llama3-8b", 8.03e9),
        ("llama3-70b", 70.6e9),
        ("llama3-405b", 405e9),
        ("qwen3-30b-a3b", 30.5e9),  # the model cards' totals, every expert counted
        ("qwen3-235b-a22b", 235e9),
    ],
)
def test_preset_shapes_give_the_published_parameter_counts(name, published):
    assert PRESETS[name].n_params == pytest.approx(published, rel=0.015)


def test_heads_of_their_own_width_kv_channels():
    """Qwen3's heads are 128 wide where hidden / heads is 64 (Megatron's kv_channels): the
    q, k, v and output projections, their weights and the attention core take it."""
    model = Model("q", layers=1, hidden=4096, heads=64, vocab=8, kv_heads=4, kv_channels=128)
    assert model.head_dim == 128 and Model("q", 1, 4096, 64, 8).head_dim == 64
    # q and o: 64 x 128 = 8192 wide; k and v: 4 x 128 = 512 each; two norms of 4096
    assert model.attention_params == 4096 * (2 * 8192 + 2 * 512) + 4 * 4096 == 71_319_552
    shapes = {op: (k, n) for op, k, n in model.matmuls(tp=2)}
    assert shapes["qkv"] == (4096, (32 + 2 * 2) * 128) and shapes["attn_proj"] == (4096, 4096)
    Model("q", layers=1, hidden=4000, heads=64, vocab=8, kv_channels=128)  # needs no division
    with pytest.raises(SpecError, match="--heads"):
        Model("q", layers=1, hidden=4000, heads=64, vocab=8)


def test_flops_per_token_follow_palm_and_count_recompute():
    none, full, selective = (workload(recompute=r) for r in ("none", "full", "selective"))
    n = none.model.n_params
    attention = 12 * 96 * 96 * 128 * 2048  # 12 L H Q T
    assert none.model_flops_per_token == pytest.approx(6 * n + attention)
    assert full.hardware_flops_per_token == pytest.approx(8 * n + 16 / 12 * attention)
    assert selective.hardware_flops_per_token == pytest.approx(6 * n + 16 / 12 * attention)
    assert full.model_flops_per_token == none.model_flops_per_token


def test_free_collectives_leave_only_efficiency_and_bubble():
    # Every GEMM at 50%, the attention core unfused (GEMMs too) and no HBM bandwidth in the
    # topology (nothing memory bound priced): the step is GEMMs and the bubble only.
    load = replace(
        workload(pp=8, dp=4, global_batch=256),  # 64 micro-batches per pipeline
        training=Training(seq=2048, global_batch=256, attention="unfused"),
    )
    result = estimate(load, make_topology(), free_pricer, EstimateOptions(matmul_efficiency=0.5))
    bubble_share = 7 / 64
    # The busiest (last) stage runs 12 of the 96 layers and all of the logits: it sets the
    # pace, the other stages wait for it (FLOPs per token and TP rank below).
    layer = 72 * 12288**2 + 12 * 12288 * 2048  # weight GEMMs + attention core
    logits = 6 * 12288 * 51200
    busiest_share = (12 * layer + logits) / ((96 * layer + logits) / 8)
    expected = 0.5 * IN_STEP_SHARE / (1 + bubble_share) / busiest_share
    assert result.mfu == pytest.approx(expected, rel=0.01)
    assert result.bubble_s == pytest.approx(result.compute_s * bubble_share)
    assert result.exposed_comm_s == 0 and result.mfu_loss_comm == pytest.approx(0)


def test_uneven_stages_run_at_the_busiest_stage_pace():
    even = estimate(workload(pp=8), make_topology(), free_pricer)  # 96 layers: 12 a stage
    uneven = estimate(
        workload(pp=7, dp=4, global_batch=256), make_topology(nodes=64), free_pricer
    )  # 14 layers on the busiest of 7 stages (13.7 on average)
    assert (even.micro.layers, uneven.micro.layers) == (12, 14)
    assert uneven.micro.layer == even.micro.layer  # the same layer, the same price
    for result in (even, uneven):
        micro = result.micro
        layer_s = sum(op.total_s for op in micro.layer)
        stage_s = sum(op.total_s for op in micro.stage)
        assert micro.total_s == pytest.approx(micro.layers * layer_s + stage_s)
        assert result.compute_s == pytest.approx(
            result.microbatches * micro.total_s + micro.optimizer_s
        )


def test_interleaving_shrinks_the_bubble():
    plain = estimate(workload(), make_topology(), free_pricer)
    interleaved = estimate(workload(virtual_stages=3), make_topology(), free_pricer)
    assert interleaved.bubble_s == pytest.approx(plain.bubble_s / 3)


@pytest.mark.parametrize(
    "change",
    [
        {},
        {"recompute": "full"},
        {"recompute": "selective", "sequence_parallel": True},
        {"zero": 1},
        {"zero": 3},
        {"dp_overlap": False},
        {"pp": 1, "dp": 32},
    ],
)
def test_invariants_hold_for_every_parallelism(change):
    load = workload(**change)
    result = estimate(load, make_topology(), flat_pricer())
    # No operator runs faster than the accelerator's large-matmul rate (the topology gives
    # none: the default); flash attention skips the causal half the FLOP count includes,
    # which is a few percent of the step at most.
    assert 0 < result.mfu <= result.hfu <= DEFAULT_MATMUL_FRACTION
    assert result.mfu_loss_comm >= 0
    assert result.what_if["perfect_overlap"] == pytest.approx(result.mfu + result.mfu_loss_comm)
    parts = result.compute_s + result.bubble_s + result.exposed_comm_s + result.slowdown_s
    assert result.step_time_s == pytest.approx(parts)
    for kind in result.comm:
        assert 0 <= kind.exposed_s <= kind.total_s + 1e-12
    faster = estimate(load, make_topology(), flat_pricer(bandwidth_gbytes_s=400))
    assert faster.mfu >= result.mfu


def test_tp_collectives_are_exposed_unless_said_hidden():
    load = workload(pp=1, dp=1, global_batch=8, tp_async_backward=False)
    exposed = estimate(load, make_topology(), flat_pricer())
    tp = next(kind for kind in exposed.comm if kind.kind == "tp")
    assert (
        tp.exposed_s == tp.total_s > 0
    )  # --tp-overlap 1: tests/unit/analysis/mfu/test_mfu_tp_overlap.py
    # 96 layers x 4 all-reduces x 8 micro-batches of b*s*h*2 bytes
    one = 10e-6 + 2048 * 12288 * 2 / 100e9
    assert tp.total_s == pytest.approx(96 * 4 * 8 * one)
    # Megatron's async backward: the 2 input-gradient all-reduces of a layer run beside
    # weight gradients far longer than they are: half the all-reduces hidden
    hidden = estimate(workload(pp=1, dp=1, global_batch=8), make_topology(), flat_pricer())
    tp_async = next(kind for kind in hidden.comm if kind.kind == "tp")
    assert tp_async.total_s == pytest.approx(tp.total_s)
    assert tp_async.exposed_s == pytest.approx(tp.total_s / 2)


def test_dp_overlap_hides_gradients_behind_the_backward():
    on = estimate(workload(), make_topology(), flat_pricer())
    off = estimate(workload(dp_overlap=False), make_topology(), flat_pricer())
    dp_on, dp_off = (next(k for k in r.comm if k.kind == "dp") for r in (on, off))
    assert dp_off.exposed_s == dp_off.total_s
    assert dp_on.exposed_s < dp_off.exposed_s and on.mfu > off.mfu


def constant_pricer(collective: str, size_bytes: float, ranks: int, stride: int) -> Priced:
    return Priced(1e-3, "constant")  # every call 1 ms, whatever the size: counts calls


def dp_of(result):
    return next(kind for kind in result.comm if kind.kind == "dp")


def test_measured_overlap_hides_its_share_of_the_collective_not_of_the_window():
    # 175B over tp 8 x pp 8: 10.9 GB of fp32 gradients per rank = 10 full 1 GiB buckets and
    # a last, partial one; the backward window (~0.1 s) is far longer than 10 ms of buckets.
    load = workload(dp_bucket_mb=1024)
    result = estimate(
        load,
        make_topology(),
        constant_pricer,
        EstimateOptions(overlap_efficiency=0.4, compute_slowdown=0.25),
    )
    beside_s = 10 * 1e-3  # all buckets but the last run beside the backward
    assert dp_of(result).total_s == pytest.approx(11e-3)
    # 60% of what ran beside compute is not hidden: 25 points of it stretched compute,
    # the rest is exposed, as is the last bucket
    assert result.slowdown_s == pytest.approx(0.25 * beside_s)
    assert dp_of(result).exposed_s == pytest.approx(1e-3 + 0.35 * beside_s)
    # no probe: Lee et al.'s mean slowdown, and the share it takes is all that is not hidden
    usual = estimate(load, make_topology(), constant_pricer)
    assert usual.slowdown_s == pytest.approx(LEE_SLOWDOWN * beside_s)
    assert dp_of(usual).exposed_s == pytest.approx(1e-3)


def test_interleaved_pipeline_sends_run_beside_a_model_chunk_1f1b_waits_for_each():
    def pp_of(result):
        return next(kind for kind in result.comm if kind.kind == "pp")

    # 1F1B: 64 micro-batches x 2 directions = 128 sends of 1 ms, each waited for
    plain = pp_of(estimate(workload(), make_topology(), constant_pricer))
    assert (plain.total_s, plain.exposed_s, plain.slowdown_s) == pytest.approx((0.128, 0.128, 0))
    # v 2: 256 sends, each beside a model chunk (~25 ms forward, ~52 ms backward): hidden,
    # the compute beside each 1 ms slowed by Lee et al.'s mean
    interleaved = pp_of(estimate(workload(virtual_stages=2), make_topology(), constant_pricer))
    assert (interleaved.total_s, interleaved.exposed_s) == pytest.approx((0.256, 0), abs=1e-12)
    assert interleaved.slowdown_s == pytest.approx(256 * LEE_SLOWDOWN * 1e-3)

    # a 40 ms send outlasts a forward chunk by what is exposed, and slows all of that chunk
    def slow_sends(collective: str, size: float, ranks: int, stride: int) -> Priced:
        return Priced(40e-3 if collective == "sendrecv" else 1e-3, "constant")

    result = estimate(workload(virtual_stages=2), make_topology(), slow_sends)
    forward_s, backward_s = result.micro.forward_s / 2, result.micro.backward_s / 2
    assert forward_s < 40e-3 < backward_s
    assert pp_of(result).exposed_s == pytest.approx(128 * (40e-3 - forward_s))
    assert pp_of(result).slowdown_s == pytest.approx(128 * LEE_SLOWDOWN * (forward_s + 40e-3))


def test_a_negative_measured_slowdown_never_beats_perfect_overlap():
    result = estimate(
        workload(),
        make_topology(),
        flat_pricer(bandwidth_gbytes_s=10),
        EstimateOptions(overlap_efficiency=0.5, compute_slowdown=-0.1),
    )
    assert result.slowdown_s == 0 and result.mfu_loss_comm >= 0
    assert result.mfu <= result.what_if["perfect_overlap"]


def test_one_collective_over_all_gradients_cannot_overlap():
    result = estimate(workload(dp_bucket_mb=0), make_topology(), flat_pricer())
    assert dp_of(result).exposed_s == dp_of(result).total_s > 0


def test_buckets_pay_latency_per_bucket():
    load = workload(dp_overlap=False, dp_bucket_mb=0)
    whole = estimate(load, make_topology(), flat_pricer(latency_us=1000))
    buckets = estimate(
        workload(dp_overlap=False, dp_bucket_mb=25), make_topology(), flat_pricer(latency_us=1000)
    )
    grads_mib = load.model.n_params / 64 * 4 / 2**20
    extra_latency_s = (-(-grads_mib // 25) - 1) * 1000e-6
    assert dp_of(buckets).total_s == pytest.approx(dp_of(whole).total_s + extra_latency_s)
    assert "in 25 MiB buckets" in dp_of(buckets).collectives


def test_fp8_weights_make_the_embeddings_part_of_the_edge_bucket():
    """With fp8 weights Megatron's DDP puts the embeddings and the output layer in the last
    fp8 bucket's group (partition_buckets): that group is the edge, priced at its size."""

    def pricer(collective: str, size_bytes: float, ranks: int, stride: int) -> Priced:
        return Priced(1e-3 + size_bytes / 1e9, "model")  # 1 ms + 1 GB/s

    par = Parallelism(dp=8)
    plain = _bucketed(pricer, "reduce_scatter", 10e6, par, 3e6)
    joined = _bucketed(pricer, "reduce_scatter", 10e6, par, 3e6, 2e6)
    # 10 MB in 3 MB buckets: 3 of 4 ms and 1 MB (2 ms) last; 2 MB joined: 2 of 4 ms, 2 + 2 MB last
    assert (plain.time_s, plain.edge_s) == pytest.approx((14e-3, 2e-3))
    assert (joined.time_s, joined.edge_s) == pytest.approx((13e-3, 5e-3))
    fp8 = workload(zero=1)
    fp8 = replace(fp8, training=replace(fp8.training, gather_bytes=1))
    said = "fp8 weights: the embeddings join the last bucket's group"
    assert said in " ".join(estimate(fp8, make_topology(), flat_pricer()).assumptions)
    assert said not in " ".join(
        estimate(workload(zero=1), make_topology(), flat_pricer()).assumptions
    )


@pytest.mark.parametrize(("zero", "calls"), [(0, 1), (1, 2), (2, 64 + 1), (3, 64 + 2 * 64)])
def test_each_zero_stage_issues_its_own_collectives(zero, calls):
    """ZeRO 0/1 reduce once a step, 2/3 after every micro-batch (they keep only their
    shard); 1/2 gather the weights once, 3 for every forward and backward."""
    load = workload(zero=zero, dp_bucket_mb=0)  # 64 micro-batches
    assert dp_of(estimate(load, make_topology(), constant_pricer)).total_s == pytest.approx(
        calls * 1e-3
    )


def test_zero3_gathers_weights_every_pass():
    load = workload(zero=3)
    result = estimate(load, make_topology(), flat_pricer())
    dp = next(kind for kind in result.comm if kind.kind == "dp")
    assert f"x {2 * load.microbatches}" in dp.collectives


def test_fp8_uses_the_fp8_peak_and_refuses_without_one():
    load = replace(workload(), training=Training(seq=2048, global_batch=256, dtype="fp8"))
    assert estimate(load, make_topology(fp8=624.0), free_pricer).peak_tflops == 624.0
    with pytest.raises(SpecError, match="fp8"):
        estimate(load, make_topology(), free_pricer)


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: workload(tp=5), "--tp"),
        (lambda: workload(pp=64, virtual_stages=2), "--pp"),
        (lambda: workload(global_batch=102), "--global-batch"),
        (lambda: workload(recompute="most"), "--recompute"),
        (lambda: workload(tp=1, sequence_parallel=True), "--sequence-parallel"),
        (lambda: workload(zero=4), "--zero"),
        (lambda: workload(dp_bucket_mb=-1), "--dp-bucket-mb"),
        (lambda: Model("m", layers=2, hidden=100, heads=3, vocab=10), "--heads"),
        (lambda: preset("gpt-9"), "--model"),
        (lambda: EstimateOptions(matmul_efficiency=1.5), "--matmul-efficiency"),
    ],
)
def test_bad_workloads_name_the_field(build, field):
    with pytest.raises(SpecError, match=f"^{field}"):
        build()


def test_a_fabric_too_small_is_refused():
    with pytest.raises(SpecError, match="--nodes"):
        estimate(workload(dp=64), make_topology(nodes=8), free_pricer)


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: Training(seq=99999999999999, global_batch=8), "--seq"),
        (lambda: Training(seq=2048, global_batch=10**15), "--global-batch"),
        (lambda: Model("m", layers=4096, hidden=2**21, heads=32, vocab=51200), "--hidden"),
        (lambda: Model("m", layers=4, hidden=256, heads=4, vocab=1000, params=1e300), "--params"),
        (lambda: replace(PRESETS["llama3-8b"], params=16e9), "--params"),
        (lambda: replace(PRESETS["llama3-8b"], params=5e9), "--params"),
    ],
)
def test_absurd_or_inconsistent_magnitudes_are_refused(build, field):
    with pytest.raises(SpecError, match=f"^{field}"):
        build()


def test_params_may_refine_the_shape_within_the_margin():
    from collbench.analysis.mfu.workload import PARAMS_MARGIN

    shape = PRESETS["llama3-8b"].shape_params
    for share in (1 - PARAMS_MARGIN * 0.9, 1 + PARAMS_MARGIN * 0.9):
        assert replace(PRESETS["llama3-8b"], params=shape * share).n_params == shape * share
    with pytest.raises(SpecError, match=f"more than {PARAMS_MARGIN:.0%}"):
        replace(PRESETS["llama3-8b"], params=shape * (1 + PARAMS_MARGIN * 1.1))


def test_measured_curves_skip_rows_without_usable_figures():
    from collbench.analysis.mfu.inputs import fit_measured_curves
    from tests.rows import make_row

    good = [
        make_row(size_bytes=2**k, time_us=10.0 + 2**k / 1e3, world_size=4) for k in range(10, 20)
    ]
    damaged = [
        replace(good[0], time_us=None),
        replace(good[1], time_us=float("inf")),
        replace(good[2], time_us=float("nan")),
        replace(good[3], world_size=0),
        replace(good[4], world_size=None),
        replace(good[5], size_bytes=None),
    ]
    curves, _ = fit_measured_curves([*good, *damaged], "run")
    assert [(c.collective, c.world_size) for c in curves] == [("all_reduce", 4)]


def test_zero3_backward_gathers_and_reductions_share_one_backward():
    """ZeRO 3 gathers the weights again in each backward and reduce-scatters the gradients
    there, on the same links beside the same compute: each alone fits the backward (3/8 and
    3/4 of it here), together they exceed it, and at least the excess (1/8 of each
    micro-batch's backward) is exposed."""
    load = workload(zero=3, pp=1, dp=32)
    backward_s = estimate(load, make_topology(), free_pricer).micro.backward_s
    grads = load.model.n_params / 8 * 4  # fp32 gradients of a tp 8 rank (weights: bf16, half)
    pricer = flat_pricer(bandwidth_gbytes_s=grads / (0.75 * backward_s) / 1e9, latency_us=0)
    dp = dp_of(estimate(load, make_topology(), pricer))
    assert dp.exposed_s >= load.microbatches * backward_s / 8 * 0.99
