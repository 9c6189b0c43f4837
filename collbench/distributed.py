"""Where this rank sits (RunEnv), which backend to use, and process-group set-up/teardown."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from collbench.errors import SpecError

_TORCH_VARS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


@dataclass(frozen=True)
class RunEnv:
    """This process's place in the job, read from exactly one launcher's environment."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    master_addr: str
    master_port: int

    @classmethod
    def detect(cls, environ: Mapping[str, str] | None = None) -> RunEnv:
        """The torch launcher environment (torchrun, collbench's local launcher)."""
        environ = os.environ if environ is None else environ
        missing = [name for name in _TORCH_VARS if name not in environ]
        if missing:
            raise SpecError("--launcher", "none", "needs the torch rank environment; missing "
                            f"{', '.join(missing)} (start collbench under torchrun, or use "
                            "--launcher local)")
        rank = _int_var(environ, "RANK")
        world_size = _int_var(environ, "WORLD_SIZE")
        if world_size < 1 or not 0 <= rank < world_size:
            raise SpecError("RANK", rank, f"is not a rank of WORLD_SIZE={world_size}")
        return cls(
            rank=rank,
            world_size=world_size,
            local_rank=_int_var(environ, "LOCAL_RANK", 0),
            local_world_size=_int_var(environ, "LOCAL_WORLD_SIZE", 1),
            master_addr=environ["MASTER_ADDR"],
            master_port=_int_var(environ, "MASTER_PORT"),
        )


def _int_var(environ: Mapping[str, str], name: str, default: int | None = None) -> int:
    raw = environ.get(name)
    if raw is None and default is not None:
        return default
    try:
        return int(str(raw))
    except ValueError:
        raise SpecError(name, raw, "is not an integer") from None


def resolve_backend(requested: str) -> str:
    """auto -> nccl on CUDA torch, rccl on ROCm torch, gloo otherwise; check the rest."""
    import torch

    has_gpu = torch.cuda.is_available()
    on_rocm = bool(getattr(torch.version, "hip", None))
    if requested == "auto":
        if not has_gpu:
            return "gloo"
        return "rccl" if on_rocm else "nccl"
    if requested in ("nccl", "rccl"):
        if not has_gpu:
            raise SpecError("--backend", requested, "needs a visible GPU and a GPU build of "
                            "torch; this one has none (use --backend gloo)")
        # RCCL is reached through torch's "nccl" backend; record what really runs.
        return "rccl" if on_rocm else "nccl"
    return requested


def torch_backend(backend: str) -> str:
    """torch.distributed's name for a collbench backend (RCCL answers to 'nccl')."""
    return "nccl" if backend in ("nccl", "rccl") else backend


def gpu_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def init_distributed(env: RunEnv, backend: str, timeout_s: float) -> Any:
    """Join the process group; returns the device this rank's buffers live on."""
    import torch
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", env.master_addr)
    os.environ.setdefault("MASTER_PORT", str(env.master_port))
    kwargs: dict[str, Any] = {}
    device = torch.device("cpu")
    if backend in ("nccl", "rccl"):
        device = torch.device("cuda", env.local_rank % max(1, torch.cuda.device_count()))
        torch.cuda.set_device(device)
        kwargs["device_id"] = device
    dist.init_process_group(
        torch_backend(backend),
        init_method=f"tcp://{_host_for_url(env.master_addr)}:{env.master_port}",
        rank=env.rank,
        world_size=env.world_size,
        timeout=timedelta(seconds=timeout_s),
        **kwargs,
    )
    return device


def _host_for_url(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def teardown(clean: bool) -> None:
    """Leave the process group. After a failure peers may be gone, so do not wait on them."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and clean:
        dist.destroy_process_group()
