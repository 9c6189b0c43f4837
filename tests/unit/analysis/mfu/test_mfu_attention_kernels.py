"""--attention flash2 / flash1: older FlashAttention kernels, priced as shares of the rate
`flash` prices (FlashAttention-3 / cuDNN on Hopper and Blackwell, FlashAttention-2 else)."""

from __future__ import annotations

import pytest

from collbench.analysis.mfu.accuracy import family
from collbench.analysis.mfu.compute import FLASH3_FAMILIES
from collbench.analysis.mfu.workload import Model, Parallelism, Training, Workload
from collbench.core.errors import SpecError
from tests.unit.analysis.mfu.test_mfu_recompute_layers import micro

TINY = Model("tiny", layers=4, hidden=512, heads=4, vocab=128)


def attention_s(kernel: str, topology: str) -> float:
    workload = Workload(TINY, Training(seq=4096, global_batch=8, attention=kernel), Parallelism())
    (core,) = [op for op in micro(workload, topology).layer if op.op == "attention"]
    return core.forward_s + core.backward_s


@pytest.mark.parametrize("topology", ["dgx-h100", "hgx-h200", "dgx-b200", "gb200-nvl72"])
def test_on_hopper_and_blackwell_fa2_runs_at_057_of_flash_and_fa1_at_half_that(topology):
    # FA3 paper (arXiv 2407.08608) Figs. 5-6: FA2 / FA3 = 298 / 521 ... 318 / 559 ~ 0.57.
    flash = attention_s("flash", topology)
    assert attention_s("flash2", topology) == pytest.approx(flash / 0.57)
    assert attention_s("flash1", topology) == pytest.approx(flash / 0.57 / 0.5)


@pytest.mark.parametrize("topology", ["dgx-a100", "mi300x"])
def test_elsewhere_flash_is_fa2_and_fa1_runs_at_half(topology):
    flash = attention_s("flash", topology)
    assert attention_s("flash2", topology) == pytest.approx(flash)
    assert attention_s("flash1", topology) == pytest.approx(flash / 0.5)


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
