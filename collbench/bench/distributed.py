"""Which backend to use, the rendezvous address, and process-group set-up/teardown."""

from __future__ import annotations

import os
import socket
import sys
from dataclasses import replace
from datetime import timedelta
from typing import Any

from collbench.bench.rank_env import RunEnv
from collbench.core.errors import SpecError


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
            raise SpecError(
                "--backend",
                requested,
                "needs a visible GPU and a GPU build of "
                "torch; this one has none (use --backend gloo)",
            )
        # RCCL is reached through torch's "nccl" backend; record what really runs.
        return "rccl" if on_rocm else "nccl"
    return requested


def torch_backend(backend: str) -> str:
    """torch.distributed's name for a collbench backend (RCCL answers to 'nccl')."""
    return "nccl" if backend in ("nccl", "rccl") else backend


def gpu_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def mpi_rendezvous(env: RunEnv) -> RunEnv:
    """Under mpirun: rank 0 picks the address and a free port and broadcasts them (mpi4py)."""
    try:
        from mpi4py import MPI
    except ImportError:
        raise SpecError(
            "rank environment",
            "mpi",
            "needs mpi4py to agree on a rendezvous "
            "address: pip install 'collbench[mpi]' (or set MASTER_ADDR and "
            "MASTER_PORT for every rank)",
        ) from None
    comm = MPI.COMM_WORLD
    if (comm.Get_rank(), comm.Get_size()) != (env.rank, env.world_size):
        raise SpecError(
            "rank environment",
            env.evidence,
            f"disagrees with MPI itself (rank {comm.Get_rank()} of {comm.Get_size()})",
        )
    hosts = comm.allgather(socket.gethostname())
    choice = None
    if comm.Get_rank() == 0:
        choice = (_address_for_peers(hosts), free_port(""))
    addr, port = comm.bcast(choice, root=0)
    return replace(env, master_addr=addr, master_port=port)


def _address_for_peers(hosts: list[str]) -> str:
    """Rank 0's address as its peers can reach it: loopback on one host, else the address of
    the interface that routes to another rank's host (a hostname may resolve to 127.0.1.1)."""
    others = [host for host in hosts if host != hosts[0]]
    if not others:
        return "127.0.0.1"
    try:
        peer = socket.getaddrinfo(others[0], None, socket.AF_INET)[0][4][0]
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((peer, 9))  # UDP connect sends nothing: it only picks the route
            return probe.getsockname()[0]
    except OSError:
        return socket.getfqdn()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port the OS says is free right now on `host` ("" = every interface)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def finalize_mpi(clean: bool) -> None:
    """mpirun counts a rank that initialized MPI and exits without finalizing as failed."""
    module = sys.modules.get("mpi4py.MPI")
    if clean and module is not None and module.Is_initialized() and not module.Is_finalized():
        module.Finalize()


def init_distributed(env: RunEnv, backend: str, timeout_s: float) -> tuple[Any, RunEnv]:
    """Join the process group; returns this rank's device and its completed RunEnv."""
    import torch
    import torch.distributed as dist

    if env.master_addr is None or env.master_port is None:
        env = mpi_rendezvous(env)
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
    return device, env


def _host_for_url(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def teardown(clean: bool) -> None:
    """Leave the process group. After a failure peers may be gone, so do not wait on them."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and clean:
        dist.destroy_process_group()
