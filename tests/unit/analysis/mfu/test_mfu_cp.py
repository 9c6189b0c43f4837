"""Context parallelism in the MFU estimator (analysis/mfu/moe.py): tokens per rank, the
K/V ring's sizes, calls and exposed part, the all-gather variant, attention and memory per
rank, against figures computed by hand."""

from __future__ import annotations

import pytest

from collbench.analysis.mfu import moe
from collbench.analysis.mfu.compute import micro_batch_compute, model_pricer
from collbench.analysis.mfu.estimate import Priced, estimate
from collbench.analysis.mfu.fabrics import sized_for
from collbench.analysis.mfu.memory import layer_activation_bytes
from collbench.analysis.mfu.presets import preset
from collbench.analysis.mfu.step_collectives import step_collectives
from collbench.analysis.mfu.workload import Parallelism, Training, Workload
from collbench.core.errors import SpecError
from collbench.topologies.loader import load_topology


def _llama(seq=8192, training=None, **par) -> Workload:
    run = Training(seq=seq, global_batch=16, **(training or {}))
    return Workload(preset("llama3-8b"), run, Parallelism(**par))


def test_a_rank_holds_seq_over_cp_and_the_world_counts_cp():
    workload = _llama(cp=4, tp=2, dp=2, pp=2)
    assert workload.micro_tokens == 8192 // 4
    assert workload.parallelism.world_size == 2 * 4 * 2 * 2
    assert workload.parallelism.dp_ranks == 8  # gradients reduced over dp x cp


def test_kv_chunk_is_tokens_x_kv_heads_x_two_head_dims():
    # 4096 tokens x 8 KV heads x (K + V) 128 dims x 2 bytes; tp 2 holds 4 of the 8 heads
    assert moe.kv_bytes(_llama(cp=2, dp=1)) == 4096 * 8 * 2 * 128 * 2
    assert moe.kv_bytes(_llama(cp=2, tp=2, dp=1)) == 4096 * 4 * 2 * 128 * 2


def test_ring_calls_per_layer():
    size = 2048 * 8 * 2 * 128 * 2  # cp 4: 2048 tokens a rank
    calls = moe.cp_calls(_llama(cp=4, dp=1))
    # forward: 3 steps of K/V, + the last dK/dV home; backward: 3 steps of K/V + dK/dV
    assert [(c[1], c[2], c[3], c[4], c[5]) for c in calls] == [
        ("sendrecv", size, 3 + 1, 4, 1),
        ("sendrecv", 2 * size, 3, 4, 1),
    ]
    # selective recompute runs the forward's ring again
    calls = moe.cp_calls(_llama(cp=4, dp=1, training={"recompute": "selective"}))
    assert calls[0][3] == 2 * 3 + 1


def _constant(seconds: float):
    def price(collective: str, size: float, ranks: int, stride: int) -> Priced:
        return Priced(seconds, "test")

    return price


def test_exposed_ring_is_what_each_step_does_not_hide_plus_the_last_send():
    workload = _llama(cp=4, dp=1)
    # each transfer 1 ms; the layer's attention: 2 ms forward (0.5 a step), 8 ms backward
    exchange = moe.cp_exchange(workload, _constant(1e-3), 2e-3, 8e-3)
    repeats = 32 * workload.microbatches
    assert exchange.total_s == pytest.approx((4 + 3) * 1e-3 * repeats)
    forward = 3 * (1e-3 - 0.5e-3)  # 3 steps, each 0.5 ms longer than its compute
    backward = 0.0 + 1e-3  # hidden, but the last dK/dV goes home exposed
    assert exchange.exposed_s == pytest.approx((forward + backward) * repeats)


def test_all_gather_variant_is_exposed():
    workload = _llama(cp=2, dp=1, cp_comm="all_gather")
    calls = moe.cp_calls(workload)
    gathered = 2 * moe.kv_bytes(workload)
    assert [(c[1], c[2], c[3]) for c in calls] == [
        ("all_gather", gathered, 2),
        ("reduce_scatter", gathered, 1),
    ]
    exchange = moe.cp_exchange(workload, _constant(1e-3), 1.0, 1.0)
    assert exchange.exposed_s == exchange.total_s == pytest.approx(3e-3 * 32 * 16)


def test_attention_and_activations_per_rank_are_divided_by_cp():
    topology = load_topology("dgx-h100")
    peak = topology.accelerator.peak_bf16_tflops * 1e12
    pricer = model_pricer(topology.accelerator, peak)

    def attention(workload):
        micro = micro_batch_compute(workload, topology.accelerator, peak, pricer)
        return next(op for op in micro.layer if op.op == "attention")

    one, two = attention(_llama(dp=1)), attention(_llama(cp=2, dp=1))
    assert two.flops == pytest.approx(one.flops / 2)
    # 32 heads x 8192² x (128 + 128) x 2 / 2 (causal) forward, / cp
    assert two.flops == pytest.approx(2 * 32 * 8192 * 8192 * 256 / 2 / 2 * (1 + 2.5))
    assert layer_activation_bytes(_llama(cp=2, dp=1), "none") == pytest.approx(
        layer_activation_bytes(_llama(dp=1), "none") / 2
    )


def test_the_estimate_prices_cp_and_the_step_list_agrees():
    def pricer(collective: str, size: float, ranks: int, stride: int) -> Priced:
        return Priced(10e-6 * stride + size * ranks / 40e9, "test")

    workload = _llama(cp=2, tp=2, dp=2, pp=2, sequence_parallel=True)
    result = estimate(workload, sized_for(workload, load_topology("dgx-h100")), pricer)
    items = step_collectives(workload)
    for kind in result.comm:
        listed = sum(item.time_s(pricer) for item in items if item.kind == kind.kind)
        assert listed == pytest.approx(kind.total_s, rel=1e-9), kind.kind
    assert {item.ranks for item in items if item.kind == "dp"} == {4}  # dp x cp
    assert {(item.ranks, item.stride) for item in items if item.kind == "cp"} == {(2, 2)}


@pytest.mark.parametrize(
    ("build", "flag"),
    [
        (lambda: _llama(seq=8190, cp=2, dp=1), "--cp"),  # 2 x cp chunks must divide seq
        (lambda: _llama(cp=2, dp=1, training={"attention": "unfused"}), "--cp"),
        (lambda: _llama(cp=2, dp=1, cp_comm="a2a"), "--cp-comm"),
        # SP splits seq / cp over tp: 8184 / 4 = 2046 does not split over 8 (8192 / 2 does)
        (lambda: _llama(seq=8184, cp=4, tp=8, dp=1, sequence_parallel=True), "--seq"),
    ],
)
def test_refused(build, flag):
    assert _llama(seq=8192, cp=2, tp=8, dp=1, sequence_parallel=True).micro_tokens == 4096
    with pytest.raises(SpecError) as error:
        build()
    assert flag in str(error.value)
