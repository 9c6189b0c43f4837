"""What the accelerator ran at and how matmul math was set: recorded beside gemm's figures.

The method, in full: docs/architecture.md#collbench-bench-device-clocks-py.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

TF32_OVERRIDE_VAR = "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE"
NO_READER = "no reader: install nvidia-ml-py (NVIDIA) or amdsmi (ROCm) to record clocks"


def math_settings(torch: Any) -> dict[str, Any]:
    """torch's matmul math settings as this process runs them (meta.json's gemm.math)."""
    matmul = torch.backends.cuda.matmul
    settings: dict[str, Any] = {
        "allow_tf32": bool(matmul.allow_tf32),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        TF32_OVERRIDE_VAR: os.environ.get(TF32_OVERRIDE_VAR),
    }
    precision = getattr(matmul, "fp32_precision", None)  # torch >= 2.9's setting
    if precision is not None:
        settings["fp32_precision"] = str(precision)
    return settings


@dataclass(frozen=True)
class ClockReader:
    """Clocks (MHz), power (W), temperature (C) and throttle reasons of one GPU."""

    source: str  # nvml or amdsmi
    read: Callable[[], dict[str, Any]]


def nvml_reader(nvml: Any, handle: Any) -> ClockReader:
    def read() -> dict[str, Any]:
        return {
            "sm_clock_mhz": nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM),
            "mem_clock_mhz": nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM),
            "power_w": nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
            "temperature_c": nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU),
            "throttle_reasons": int(nvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle)),
        }

    return ClockReader("nvml", read)


def amdsmi_reader(smi: Any, handle: Any) -> ClockReader:
    def read() -> dict[str, Any]:
        clocks = smi.amdsmi_get_clock_info(handle, smi.AmdSmiClkType.GFX)
        power = smi.amdsmi_get_power_info(handle)
        return {
            "sm_clock_mhz": clocks.get("clk"),
            "power_w": power.get("current_socket_power") or power.get("average_socket_power"),
            "temperature_c": smi.amdsmi_get_temp_metric(
                handle, smi.AmdSmiTemperatureType.EDGE, smi.AmdSmiTemperatureMetric.CURRENT
            ),
        }

    return ClockReader("amdsmi", read)


def clock_reader(torch: Any, device: Any) -> tuple[ClockReader | None, str]:
    """A reader for `device`'s clocks, or None and why there is none."""
    if device.type != "cuda":
        return None, "CPU: no accelerator clocks to read"
    props = torch.cuda.get_device_properties(device)
    try:
        return (_amdsmi(props) if getattr(torch.version, "hip", None) else _nvml(props)), ""
    except ImportError:
        return None, NO_READER
    except Exception as error:  # a driver or library without this call: say so, measure on
        return None, f"reader failed: {type(error).__name__}: {error}"


def read_clocks(reader: ClockReader | None, why: str) -> dict[str, Any]:
    """One reading for a row: the figures and their source, or why there are none."""
    if reader is None:
        return {"source": None, "why": why}
    try:
        return {"source": reader.source, **reader.read()}
    except Exception as error:  # one failed reading must not lose the measurement
        return {"source": reader.source, "why": f"{type(error).__name__}: {error}"}


def _nvml(props: Any) -> ClockReader:
    import pynvml

    pynvml.nvmlInit()
    uuid = getattr(props, "uuid", None)
    if uuid is not None:
        text = str(uuid)
        handle = pynvml.nvmlDeviceGetHandleByUUID(
            text if text.startswith("GPU-") else f"GPU-{text}"
        )
    else:
        bus = f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
        handle = pynvml.nvmlDeviceGetHandleByPciBusId(bus)
    return nvml_reader(pynvml, handle)


def _amdsmi(props: Any) -> ClockReader:
    import amdsmi

    amdsmi.amdsmi_init()
    bus = f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
    return amdsmi_reader(amdsmi, amdsmi.amdsmi_get_processor_handle_from_bdf(bus))
