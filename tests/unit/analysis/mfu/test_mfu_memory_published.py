"""The memory estimate on published configurations (tests/published_memory.py): each
estimate and error pinned, every configuration consistent with what it reported, the
check's allowance derived from the table, and one small case by hand."""

from __future__ import annotations

import pytest

from benchmarks.mfu_memory import demonstrated_error, table
from collbench.analysis.mfu import memory as memory_module
from collbench.analysis.mfu.memory import (
    DEMONSTRATED_ERROR,
    GIB,
    VALIDATED_CONFIGURATIONS,
    memory_estimate,
    microbatches_in_flight,
    stage_layers,
    within_error,
)
from collbench.analysis.mfu.presets import preset
from collbench.analysis.mfu.workload import Model, Parallelism, Training, Workload
from tests.published_memory import CASES

# case: (estimate GiB, error); error None: ran and fits (or OOM and refused).
PINNED = {
    "22b-sp-selective-step": (48.7, None),
    "22b-full-step": (47.7, None),
    "175b-sp-selective-step": (56.4, None),
    "175b-full-step": (51.9, None),
    "530b-sp-selective-step": (51.3, None),
    "530b-full-step": (42.9, None),
    "1t-sp-selective-step": (62.3, None),
    "1t-full-step": (49.2, None),
    "1t-hfu": (49.2, None),
    "145b-hfu": (43.6, None),
    "gpt3-175b-bf16-dgxc": (57.0, None),  # bf16 gradient buffer (grad_sync_dtype)
    "nemotron4-15b-bf16-dgxc": (50.9, None),  # bf16 gradients, no dropout masks
    "llama3-70b-fp8-gbs128": (71.6, None),
    "llama3-8b-fp8-fsdp": (52.9, None),
    "nemotron4-340b-256gpu": (63.3, None),
    "nemotron4-340b-384gpu": (57.9, None),
    "nemotron4-340b-128gpu": (79.4, None),
    "nemotron4-340b-64gpu": (111.6, None),
    "llama3-405b-8k": (77.9, None),
    "llama3-70b-sft-fp8-vp5": (66.4, -0.170),
    "llama3-70b-sft-fp8-vp10": (64.8, None),
}


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.case)
def test_each_published_configuration_is_pinned_and_consistent(case):
    estimate, error = PINNED[case.case]
    memory = case.estimate()
    assert memory.total_bytes / GIB == pytest.approx(estimate, abs=0.05)
    if error is None:
        assert case.error(memory) is None
    else:
        assert case.error(memory) == pytest.approx(error, abs=0.0005)
    assert case.consistent(memory)


def test_every_configuration_that_ran_is_accepted():
    for case in CASES:
        memory = case.estimate()
        if case.outcome != "oom":
            assert memory.fits or memory.may_fit, case.case


@pytest.mark.slow
def test_the_checks_allowance_is_what_the_table_demonstrates():
    assert len(PINNED) == len(CASES) == VALIDATED_CONFIGURATIONS
    assert round(demonstrated_error(), 2) == DEMONSTRATED_ERROR
    assert "21 configurations, 21 consistent" in table()


def test_a_small_case_by_hand():
    """A 4-layer model, h 1024, 8 heads, vocab 1000, on tp 2 pp 2 dp 2 with ZeRO 1 and
    sequence parallelism, no dropout, flash attention, 4 micro-batches of 1 x 512."""
    model = Model("tiny", layers=4, hidden=1024, heads=8, vocab=1000, dropout=False)
    workload = Workload(
        model,
        Training(seq=512, global_batch=8),
        Parallelism(tp=2, pp=2, dp=2, zero=1, sequence_parallel=True),
    )
    s, h, t = 512, 1024, 2
    layer = h * 2 * h + h * 2 * h + 2 * h * 4 * h + 4 * h  # q, o; k, v; MLP; norms
    # Per layer and micro-batch: (8 + 4 + 4 + 16) h bytes a token (norms and inputs; Q, K, V,
    # o's input; the MLP's 4h twice), all / t with sequence parallelism.
    per_layer = s * h * (8 + 8 + 16) / t
    # Stage 0: 2 layers + the embedding, 2 micro-batches in flight (pp - 0).
    first = (2 * layer + 1000 * h) / t
    first_total = first * (2 + 4 + 12 / 2) + 2 * 2 * per_layer
    # Stage 1: 2 layers + the output layer, 1 micro-batch in flight, fp32 logits.
    last = (2 * layer + 1000 * h) / t
    last_total = last * (2 + 4 + 12 / 2) + 2 * 1 * per_layer + 4 * s * 1000 / t
    assert microbatches_in_flight(workload, 0) == 2 and microbatches_in_flight(workload, 1) == 1
    memory = memory_estimate(workload, 80)
    assert memory.total_bytes == pytest.approx(max(first_total, last_total))
    assert memory.stage == (0 if first_total >= last_total else 1)


def test_interleaving_holds_what_megatron_warms_up_on_every_stage():
    workload = Workload(
        preset("llama3-70b"),
        Training(seq=4096, global_batch=32),
        Parallelism(tp=4, pp=4, dp=2, virtual_stages=5),
    )
    # Stage r: 2 (pp - r - 1) + (v - 1) pp + 1 chunks of 1/v stage.
    for rank in range(4):
        chunks = 2 * (4 - rank - 1) + 4 * 4 + 1
        assert microbatches_in_flight(workload, rank) == pytest.approx(chunks / 5)
    assert microbatches_in_flight(workload, 0) == pytest.approx(4 * (1 + 3 / 20))


def test_an_uneven_split_leaves_its_short_stages_at_the_ends():
    workload = Workload(
        preset("llama3-405b"), Training(seq=8192, global_batch=64), Parallelism(tp=8, pp=16)
    )
    layers = [stage_layers(workload, rank) for rank in range(16)]
    assert layers == [7] + [8] * 14 + [7] and sum(layers) == 126


def test_the_margin_is_warned_about_within_the_error_and_refused_beyond(monkeypatch):
    workload = Workload(
        preset("llama3-405b"),
        Training(seq=8192, global_batch=2048),
        Parallelism(tp=8, pp=16, dp=64, zero=1, sequence_parallel=True),
    )
    total = memory_estimate(workload, None).total_bytes / GIB
    monkeypatch.setattr(memory_module, "DEMONSTRATED_ERROR", 0.10)
    inside = memory_estimate(workload, total / 1.05)
    assert inside.fits is False and inside.may_fit
    line = within_error(inside)
    assert "within the estimate's error (+/-10% on 21 published configurations" in line
    assert "may fit" in line and "+5%" in line
    beyond = memory_estimate(workload, total / 1.2)
    assert beyond.fits is False and not beyond.may_fit
