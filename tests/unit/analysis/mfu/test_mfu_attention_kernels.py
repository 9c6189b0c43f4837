"""--attention flash2 / flash1: older FlashAttention kernels, priced as shares of the rate
`flash` prices (FlashAttention-3 / cuDNN on Hopper and Blackwell, FlashAttention-2 else);
every kernel's rate by head dim and sequence length (FA2 README's benchmark figures)."""

from __future__ import annotations

import pytest

from collbench.analysis.mfu.accuracy import family
from collbench.analysis.mfu.compute import FLASH3_FAMILIES
from collbench.analysis.mfu.workload import Model, Parallelism, Training, Workload
from collbench.core.errors import SpecError
from tests.unit.analysis.mfu.test_mfu_recompute_layers import micro

TINY = Model("tiny", layers=4, hidden=512, heads=4, vocab=128)  # head dim 128
TINY_64 = Model("tiny", layers=4, hidden=512, heads=8, vocab=128)  # the same FLOPs at 64
TINY_96 = Model("tiny", layers=4, hidden=384, heads=4, vocab=128)


def attention_s(kernel: str, topology: str, model: Model = TINY, seq: int = 4096) -> float:
    workload = Workload(model, Training(seq=seq, global_batch=8, attention=kernel), Parallelism())
    (core,) = [op for op in micro(workload, topology).layer if op.op == "attention"]
    return core.forward_s + core.backward_s


@pytest.mark.parametrize("topology", ["dgx-h100", "hgx-h200", "dgx-b200", "gb200-nvl72"])
def test_on_hopper_and_blackwell_fa2_runs_at_057_of_flash_and_fa1_at_044_of_that(topology):
    # FA3 paper (arXiv 2407.08608) Figs. 5-6: FA2 / FA3 = 298 / 521 ... 318 / 559 ~ 0.57.
    flash = attention_s("flash", topology)
    assert attention_s("flash2", topology) == pytest.approx(flash / 0.57)
    assert attention_s("flash1", topology) == pytest.approx(flash / 0.57 / 0.44)


@pytest.mark.parametrize("topology", ["dgx-a100", "mi300x"])
def test_elsewhere_flash_is_fa2_and_fa1_runs_at_044_of_it_at_head_dim_128(topology):
    flash = attention_s("flash", topology)
    assert attention_s("flash2", topology) == pytest.approx(flash)
    assert attention_s("flash1", topology) == pytest.approx(flash / 0.44)


def test_head_dim_64_runs_flash_at_089_and_flash1_at_056_of_it_linear_between():
    # FA2 README, causal fwd + bwd: FA2 at 64 / at 128 0.90 (A100), 0.88 (H100); FA1 / FA2
    # 0.54 (A100 Triton), 0.58 (H100) at 64, 0.44 at 128. Head dim 96: 0.945 and 0.50.
    flash = attention_s("flash", "dgx-a100")
    assert attention_s("flash", "dgx-a100", TINY_64) == pytest.approx(flash / 0.89)
    assert attention_s("flash1", "dgx-a100", TINY_64) == pytest.approx(flash / 0.89 / 0.56)
    ratio = attention_s("flash1", "dgx-a100", TINY_96) / attention_s("flash", "dgx-a100", TINY_96)
    assert ratio == pytest.approx(1 / 0.50)
    flash_96 = attention_s("flash", "dgx-a100", TINY_96) * (512 / 384)  # FLOPs go with dims
    assert flash_96 == pytest.approx(flash * 1.0 / 0.945)


@pytest.mark.parametrize("seq,share", [(512, 0.54), (2048, 0.86), (3000, 0.90956), (65536, 1.0)])
def test_shorter_sequences_run_fused_attention_slower(seq, share):
    # FA2 README, causal fwd + bwd at head dim 128, of its 8k rate: 0.54 at 512 tokens, 0.86
    # at 2k, 0.95 at 4k, linear in log2 tokens between (3000: 0.86 + 0.09 x 0.5507); flat past
    # 8k. Attention FLOPs go with seq squared.
    at_8k = attention_s("flash", "dgx-h100", seq=8192)
    assert attention_s("flash", "dgx-h100", seq=seq) == pytest.approx(
        at_8k * (seq / 8192) ** 2 / share, rel=1e-4
    )


def test_context_parallelism_takes_any_fused_kernel_not_the_unfused_one():
    for kernel in ("flash", "flash2", "flash1"):
        Workload(TINY, Training(seq=4096, global_batch=8, attention=kernel), Parallelism(cp=2))
    with pytest.raises(SpecError, match="--cp"):
        Workload(TINY, Training(seq=4096, global_batch=8, attention="unfused"), Parallelism(cp=2))


def test_hopper_and_blackwell_are_known_by_any_of_their_names():
    for name in ("NVIDIA H20", "NVIDIA H800", "NVIDIA GB200", "GB300 NVL72", "NVIDIA B300"):
        assert family(name) in FLASH3_FAMILIES, name
    for name in ("NVIDIA A100-SXM4-80GB", "AMD Instinct MI300X", "NVIDIA L40S", "NVIDIA H2"):
        assert family(name) not in FLASH3_FAMILIES, name
