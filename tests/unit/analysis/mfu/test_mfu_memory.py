"""The per-accelerator memory estimate: Korthikanti et al. 2022's activation formulas by
hand, the ZeRO stages' sharding, 1F1B's micro-batches in flight, and the verdict against
the accelerator's HBM."""

from __future__ import annotations

import pytest

from collbench.analysis.mfu.memory import (
    GIB,
    OPTIMIZER_BYTES_PER_PARAM,
    layer_activation_bytes,
    memory_estimate,
    microbatches_in_flight,
    oversubscribed,
    stage_params,
)
from collbench.analysis.mfu.presets import preset
from collbench.analysis.mfu.workload import Parallelism, Training, Workload

S, B, H, A = 2048, 1, 12288, 96  # GPT-3 175B: seq, micro-batch, hidden, heads


def gpt3(
    tp: int = 8, pp: int = 8, dp: int = 1, *, sp: bool = False, recompute: str = "none", **par
) -> Workload:
    return Workload(
        preset("gpt3-175b"),
        Training(
            seq=S, attention="unfused", global_batch=64 * dp, micro_batch=B, recompute=recompute
        ),
        Parallelism(tp=tp, pp=pp, dp=dp, sequence_parallel=sp, **par),
    )


@pytest.mark.parametrize(
    ("sp", "recompute", "korthikanti"),
    [
        # Table 2 of the paper, per layer: tensor parallel only, + SP, + selective, both.
        (False, "none", S * B * H * (10 + 24 / 8 + 5 * A * S / (H * 8))),
        (True, "none", S * B * H / 8 * (34 + 5 * A * S / H)),
        (False, "selective", S * B * H * (10 + 24 / 8)),
        (True, "selective", S * B * H * 34 / 8),
    ],
)
def test_a_layer_holds_what_korthikanti_et_al_count(sp, recompute, korthikanti):
    workload = gpt3(sp=sp, recompute=recompute)
    assert layer_activation_bytes(workload, recompute) == pytest.approx(korthikanti)


def test_full_recompute_keeps_each_layer_input_and_one_layer_at_work():
    workload = gpt3(recompute="full")
    memory = memory_estimate(workload, 80)
    layers, in_flight = 12, 8  # 96 layers on 8 stages; 1F1B: pp micro-batches in flight
    stored = 2 * S * B * H * layers * in_flight
    working = layer_activation_bytes(workload, "none")
    assert memory.activations_bytes == pytest.approx(stored + working)


def test_the_first_stage_holds_pp_micro_batches_fewer_if_there_are_fewer():
    assert microbatches_in_flight(gpt3(pp=8)) == 8
    assert microbatches_in_flight(gpt3(pp=1)) == 1
    few = Workload(
        preset("gpt3-175b"),
        Training(seq=S, attention="unfused", global_batch=4),
        Parallelism(tp=8, pp=8),
    )
    assert microbatches_in_flight(few) == 4
    interleaved = gpt3(pp=8, virtual_stages=2)
    assert microbatches_in_flight(interleaved) == pytest.approx(8 * (1 + 7 / 16))


@pytest.mark.parametrize(
    ("zero", "weights", "gradients", "optimizer"),
    [(0, 1, 1, 1), (1, 1, 1, 16), (2, 1, 16, 16), (3, 16, 16, 16)],
)
def test_each_zero_stage_shards_its_states_over_dp(zero, weights, gradients, optimizer):
    workload = gpt3(dp=16, zero=zero)
    params = stage_params(workload) / 8
    memory = memory_estimate(workload, 80)
    assert memory.weights_bytes == pytest.approx(params * 2 / weights)
    assert memory.gradients_bytes == pytest.approx(params * 4 / gradients)  # fp32 main grads
    assert memory.optimizer_bytes == pytest.approx(params * OPTIMIZER_BYTES_PER_PARAM / optimizer)


def test_bf16_gradients_give_the_usual_2_2_12_split():
    workload = Workload(
        preset("gpt3-175b"),
        Training(seq=S, attention="unfused", global_batch=64, grad_bytes=2),
        Parallelism(tp=8, pp=8),
    )
    memory = memory_estimate(workload, 80)
    states = memory.weights_bytes + memory.gradients_bytes + memory.optimizer_bytes
    assert states == pytest.approx(stage_params(workload) / 8 * (2 + 2 + 12))


def test_gpt3_on_one_gpu_per_replica_does_not_fit_and_says_why():
    memory = memory_estimate(gpt3(tp=1, pp=1, dp=128), 80)
    assert memory.fits is False
    # 175e9 parameters x 16+ bytes of states alone: ~2.6 TiB, 12 bytes of it optimizer.
    assert memory.total_bytes > 30 * 80 * GIB
    assert memory.biggest == "optimizer state"
    line = oversubscribed(memory)
    assert "more than the 80 GiB each has" in line and "the biggest is optimizer state" in line
    assert "\n" not in line


def test_unknown_capacity_is_neither_fit_nor_not():
    memory = memory_estimate(gpt3(), None)
    assert memory.fits is None and memory.capacity_bytes is None
    assert memory.to_dict()["capacity_gib"] is None


def test_params_given_by_hand_scale_the_states():
    from dataclasses import replace

    model = preset("gpt3-175b")
    bigger = replace(model, params=model.shape_params * 1.1)
    workload = Workload(
        bigger, Training(seq=S, attention="unfused", global_batch=64), Parallelism(tp=8, pp=8)
    )
    assert stage_params(workload) == pytest.approx(stage_params(gpt3()) * 1.1)


def test_flash_attention_stores_no_scores():
    """FlashAttention recomputes the scores in its backward: with no recompute it holds
    what selective recompute holds, not Korthikanti's 5·a·s²·b."""
    flash = Workload(preset("gpt3-175b"), Training(seq=S, global_batch=64), Parallelism(tp=8))
    assert layer_activation_bytes(flash, "none") == pytest.approx(
        layer_activation_bytes(gpt3(recompute="selective"), "selective")
    )
