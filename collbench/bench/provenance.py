"""What a result needs to be reproduced and compared: versions, knobs, hosts, devices."""

from __future__ import annotations

import contextlib
import itertools
import os
import platform
import socket
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import collbench
from collbench.core.knobs import shared_gpu


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
        info[backend] = library_version(backend)
    return info


def library_version(backend: str) -> str | None:
    """The NCCL (RCCL on ROCm) release torch runs `backend` on, "2.21.5" (also read before
    any rank starts, to check knob ranges); None for gloo or a torch built without it."""
    if backend not in ("nccl", "rccl"):
        return None
    import torch

    try:
        raw = torch.cuda.nccl.version()
    except (AttributeError, RuntimeError):
        return None
    return ".".join(map(str, raw)) if isinstance(raw, tuple) else str(raw)


def driver_version() -> str | None:
    """The NVIDIA or AMD kernel driver version, if one is loaded."""
    nvidia = Path("/proc/driver/nvidia/version")
    if nvidia.exists():
        for word in nvidia.read_text(errors="replace").split():
            if word[:1].isdigit() and "." in word:
                return f"nvidia {word}"
    amd = Path("/sys/module/amdgpu/version")
    return f"amdgpu {amd.read_text().strip()}" if amd.exists() else None


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
    with contextlib.suppress(OSError):  # the CPU's model
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def rank_host(rank: int) -> str:
    """This rank's host name; in the shared-GPU test mode a host of its own (core/knobs.py)."""
    return socket.gethostname() + (f"~r{rank}" if shared_gpu() else "")


def rank_identity(torch: Any, device: Any, rank: int) -> dict[str, Any]:
    """This rank's host, pid and device, gathered by rank 0 into meta.json."""
    return {
        "rank": rank,
        "host": rank_host(rank),
        "pid": os.getpid(),
        "device": str(device),
        "device_name": device_name(torch, device),
        "binding": rank_binding(),  # its CPUs and Slurm's binding
    }


def command_line() -> list[str]:
    return [Path(sys.argv[0]).name, *sys.argv[1:]]


CONF_FILE_MAX_BYTES = 64 * 1024  # more of an NCCL config file than this is not recorded


def nccl_conf_files(
    environ: Mapping[str, str], home: str | Path | None, etc_dir: str | Path = "/etc"
) -> dict[str, str]:
    """The NCCL/RCCL config files that exist, path -> contents, in the order the library
    reads them; they set variables silently (a variable already in the environment wins).

    NCCL reads ${NCCL_CONF_FILE} when set, else ~/.nccl.conf, then /etc/nccl.conf; RCCL
    releases read ~/.rccl.conf and /etc/rccl.conf. A file that cannot be read, or is longer
    than CONF_FILE_MAX_BYTES, gets a `# collbench: ...` note (a comment line to NCCL).
    home: the user's home directory (None: none); etc_dir: where the system files live.
    """
    candidates: list[Path] = []
    if environ.get("NCCL_CONF_FILE"):
        candidates.append(Path(environ["NCCL_CONF_FILE"]))
    elif home is not None:
        candidates.append(Path(home) / ".nccl.conf")
    candidates.append(Path(etc_dir) / "nccl.conf")
    if home is not None:
        candidates.append(Path(home) / ".rccl.conf")
    candidates.append(Path(etc_dir) / "rccl.conf")
    # os.path.exists: False for a path that cannot be looked at (a name too long, ...)
    return {str(path): _conf_text(path) for path in candidates if os.path.exists(path)}


def _conf_text(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            data = handle.read(CONF_FILE_MAX_BYTES + 1)
    except OSError as error:
        return f"# collbench: not read: {error.strerror or error}"
    text = data[:CONF_FILE_MAX_BYTES].decode(errors="replace")
    if len(data) > CONF_FILE_MAX_BYTES:
        text += f"\n# collbench: truncated after {CONF_FILE_MAX_BYTES} bytes"
    return text


# A rank pinned to one core shares it with NCCL's proxy thread and torch's watchdog, and its
# figures say so only indirectly: every rank records its affinity and Slurm's binding.
BINDING_VARS = ("SLURM_CPUS_PER_TASK", "SLURM_CPUS_ON_NODE")
BINDING_PREFIX = "SLURM_CPU_BIND"


def rank_binding(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """This process's CPUs ("0-3,8"), their count, and Slurm's binding variables if any."""
    environ = os.environ if environ is None else environ
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cpus = []
    slurm = {
        name: value
        for name, value in sorted(environ.items())
        if name.startswith(BINDING_PREFIX) or name in BINDING_VARS
    }
    return {"cpus": cpu_ranges(cpus), "cpu_count": len(cpus), "slurm": slurm}


def cpu_ranges(cpus: Iterable[int]) -> str:
    """CPU numbers as Linux lists them: [0, 1, 2, 3, 8] -> "0-3,8"."""
    parts = []
    for _, run in itertools.groupby(enumerate(sorted(set(cpus))), lambda pair: pair[1] - pair[0]):
        first, *rest = (cpu for _, cpu in run)
        parts.append(f"{first}-{rest[-1]}" if rest else str(first))
    return ",".join(parts)
