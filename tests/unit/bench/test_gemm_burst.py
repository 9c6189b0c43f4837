"""gemm measures past the burst: a timed warm-up, operand sets rotated past the cache for
small shapes, and what the matmul math and clocks were, recorded (real CPU matmuls; NVML
cannot run here, so its reader is checked against a stand-in with NVML's calls)."""

import math
from types import SimpleNamespace

import pytest
import torch

from collbench.bench.device_clocks import math_settings, nvml_reader, read_clocks
from collbench.bench.gemm import (
    CPU_MAX_SETS,
    GemmBench,
    cpu_cache_bytes,
    operand_set_bytes,
    rotation_sets,
)
from collbench.core.errors import SpecError
from collbench.run.gemm import GemmJob

MIB = 1024**2


@pytest.mark.parametrize(
    ("set_bytes", "cache_bytes", "max_sets", "sets"),
    [
        (100 * MIB, 50 * MIB, 64, 1),  # one set already fills twice the cache
        (10 * MIB, 50 * MIB, 64, 10),  # 2 x 50 MiB / 10 MiB
        (3 * MIB, 50 * MIB, 64, math.ceil(100 / 3)),
        (1024, 50 * MIB, 64, 64),  # capped
        (1024, 32 * MIB, CPU_MAX_SETS, CPU_MAX_SETS),
    ],
)
def test_rotation_fills_twice_the_cache(set_bytes, cache_bytes, max_sets, sets):
    assert rotation_sets(set_bytes, cache_bytes, max_sets) == sets


def test_operand_set_bytes_counts_a_b_and_the_output():
    assert operand_set_bytes((2, 3, 4), 5, 2) == 2 * 5 * (2 * 4 + 4 * 3 + 2 * 3)


def test_cpu_cache_is_the_largest_sysfs_lists(tmp_path):
    for index, size in enumerate(("32K", "1024K", "32768K")):
        (tmp_path / f"index{index}").mkdir()
        (tmp_path / f"index{index}" / "size").write_text(size + "\n")
    assert cpu_cache_bytes(tmp_path) == 32 * MIB
    assert cpu_cache_bytes(tmp_path / "missing") is None


def test_a_cpu_shape_warms_up_for_the_time_asked_and_rotates():
    bench = GemmBench("cpu", "fp32")
    timing = bench.measure((8, 8, 8), 1, warmup=1, iters=2, warmup_s=0.2)
    assert timing.warmup_s >= 0.2 and timing.operand_sets == CPU_MAX_SETS
    assert len(timing.samples_us) == 2 and timing.time_us > 0
    assert timing.clocks["after"] == {"source": None, "why": "CPU: no accelerator clocks to read"}


def test_math_settings_follow_torch_and_the_override(monkeypatch):
    before = torch.get_float32_matmul_precision()
    try:
        monkeypatch.setenv("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "1")
        torch.set_float32_matmul_precision("high")
        settings = math_settings(torch)
        assert settings["float32_matmul_precision"] == "high"
        assert settings["TORCH_ALLOW_TF32_CUBLAS_OVERRIDE"] == "1"
        assert isinstance(settings["allow_tf32"], bool)
    finally:
        torch.set_float32_matmul_precision(before)


def test_nvml_readings_map_to_named_units():
    nvml = SimpleNamespace(
        NVML_CLOCK_SM=0,
        NVML_CLOCK_MEM=1,
        NVML_TEMPERATURE_GPU=0,
        nvmlDeviceGetClockInfo=lambda handle, kind: {0: 1980, 1: 2619}[kind],
        nvmlDeviceGetPowerUsage=lambda handle: 612_345,  # milliwatts
        nvmlDeviceGetTemperature=lambda handle, kind: 61,
        nvmlDeviceGetCurrentClocksThrottleReasons=lambda handle: 4,
    )
    reading = read_clocks(nvml_reader(nvml, "handle"), "")
    assert reading == {
        "source": "nvml",
        "sm_clock_mhz": 1980,
        "mem_clock_mhz": 2619,
        "power_w": 612.345,
        "temperature_c": 61,
        "throttle_reasons": 4,
    }


def test_warmup_seconds_is_checked():
    with pytest.raises(SpecError, match="--warmup-seconds"):
        GemmJob((), warmup_s=-1)
