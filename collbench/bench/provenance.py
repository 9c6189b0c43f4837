"""What a result needs to be reproduced and compared: versions, knobs, hosts, devices."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import collbench


def versions(torch: Any, backend: str) -> dict[str, Any]:
    """collbench, python, torch, CUDA/HIP, NCCL/RCCL and driver versions."""
    info: dict[str, Any] = {
        "collbench": collbench.__version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": getattr(torch.version, "cuda", None),
        "hip": getattr(torch.version, "hip", None),
        "nccl": None,
        "rccl": None,
        "driver": driver_version(),
    }
    if backend in ("nccl", "rccl") and torch.cuda.is_available():
        raw = torch.cuda.nccl.version()
        text = ".".join(str(part) for part in raw) if isinstance(raw, tuple) else str(raw)
        info[backend] = text
    return info


def driver_version() -> str | None:
    """The NVIDIA or AMD kernel driver version, if one is loaded."""
    nvidia = Path("/proc/driver/nvidia/version")
    if nvidia.exists():
        for word in nvidia.read_text(errors="replace").split():
            if word[:1].isdigit() and "." in word:
                return f"nvidia {word}"
    amd = Path("/sys/module/amdgpu/version")
    if amd.exists():
        return f"amdgpu {amd.read_text().strip()}"
    return None


def git_sha() -> str | None:
    """The commit collbench runs from, when it runs from a git checkout."""
    source = Path(collbench.__file__).resolve().parent.parent
    try:
        done = subprocess.run(
            ["git", "-C", str(source), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def device_name(torch: Any, device: Any) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return cpu_model()


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def rank_identity(torch: Any, device: Any, rank: int) -> dict[str, Any]:
    """This rank's host, pid and device, gathered by rank 0 into meta.json."""
    return {
        "rank": rank,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "device": str(device),
        "device_name": device_name(torch, device),
    }


def command_line() -> list[str]:
    return [Path(sys.argv[0]).name, *sys.argv[1:]]
