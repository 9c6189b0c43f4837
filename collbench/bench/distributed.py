"""Which backend to use, the rendezvous address, and process-group set-up/teardown."""

from __future__ import annotations

import ast
import contextlib
import glob
import importlib.util
import ipaddress
import os
import socket
import sys
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from collbench.bench.agreement import collect_facts, exchange
from collbench.bench.provenance import rank_host
from collbench.bench.rank_env import RunEnv
from collbench.core.errors import SpecError
from collbench.core.knobs import OWN_ENV_VAR, shared_gpu


def resolve_backend(requested: str) -> str:
    """auto -> nccl on CUDA torch, rccl on ROCm torch, gloo otherwise; check the rest.

    Torch is imported only to ask about GPUs (a launcher must not pay ~1 s of import to
    start gloo ranks, or to --print them): not for gloo, nor for auto on a CPU-only build."""
    if requested not in ("auto", "nccl", "rccl"):
        return requested
    if requested == "auto" and _torch_build_has_gpu() is False:
        return _gloo_on_a_gpu_host()
    import torch

    if not torch.cuda.is_available():
        if requested == "auto":
            return _gloo_on_a_gpu_host()
        raise SpecError(
            "--backend",
            requested,
            "needs a visible GPU and a GPU build of torch; this one has none (use --backend gloo)",
        )
    # RCCL is reached through torch's "nccl" backend; record what really runs.
    return "rccl" if getattr(torch.version, "hip", None) else "nccl"


# Where an NVIDIA driver shows its GPUs, whatever torch says (a test points it elsewhere).
NVIDIA_DEVICES = "/dev/nvidia[0-9]*"


def _gloo_on_a_gpu_host() -> str:
    """auto's gloo, said loudly where this host has an NVIDIA GPU torch cannot use (a
    CPU-only torch on a GPU node would otherwise measure gloo in silence)."""
    if glob.glob(NVIDIA_DEVICES):
        print(
            "collbench: warning: this host has NVIDIA GPUs but torch sees none (a CPU-only "
            "torch build?): --backend auto runs gloo on the CPU",
            file=sys.stderr,
        )
    return "gloo"


def _torch_build_has_gpu() -> bool | None:
    """Was the installed torch built for CUDA or ROCm? Read from its generated version.py
    without importing torch; None when that cannot tell (torch then answers itself)."""
    if "torch" in sys.modules:
        return None
    try:
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.origin is None:
            return None
        tree = ast.parse(Path(spec.origin).with_name("version.py").read_text())
    except (OSError, ValueError, SyntaxError, ImportError):
        return None
    values: dict[str, Any] = {}
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        if isinstance(target, ast.Name) and node.value is not None:
            with contextlib.suppress(ValueError, TypeError, SyntaxError):
                values[target.id] = ast.literal_eval(node.value)
    if "cuda" not in values or "hip" not in values:
        return None
    return bool(values["cuda"] or values["hip"])


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


# Test hook: "RANK:BACKEND" makes that rank resolve --backend to BACKEND, as a rank on a
# node whose GPUs are unusable resolves auto to gloo while its peers resolve nccl.
RESOLVE_BACKEND_VAR = "COLLBENCH_TEST_RESOLVE_BACKEND"


def resolve_rank_backend(requested: str, rank: int) -> str:
    """resolve_backend on one rank of a job whose ranks resolve it each for themselves
    (--launcher none); RESOLVE_BACKEND_VAR's test hook stands in for a broken node."""
    named, _, backend = os.environ.get(RESOLVE_BACKEND_VAR, "").partition(":")
    return backend if backend and named == str(rank) else resolve_backend(requested)


def init_distributed(
    env: RunEnv, backend: str, timeout_s: float, plan: str = ""
) -> tuple[Any, RunEnv]:
    """Join the process group; returns this rank's device and its completed RunEnv.

    First every rank agrees with the others through the rendezvous store (bench/agreement.py:
    same backend, versions and plan; no GPU shared; the local rank where no variable gave
    it), so a rank that resolved differently stops the run in seconds, not at --timeout."""
    import torch
    import torch.distributed as dist

    if env.master_addr is None or env.master_port is None:
        env = mpi_rendezvous(env)
    os.environ.setdefault("MASTER_ADDR", env.master_addr)
    os.environ.setdefault("MASTER_PORT", str(env.master_port))
    kwargs: dict[str, Any] = {}
    timeout = timedelta(seconds=timeout_s)
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        # torchrun's agent already serves the store; the ranks only connect to it.
        host = env.master_addr  # an IPv6 address, bracketed in a URL
        host = f"[{host}]" if ":" in host and not host.startswith("[") else host
        kwargs["init_method"] = f"tcp://{host}:{env.master_port}"
        store = dist.TCPStore(
            str(env.master_addr), int(env.master_port), env.world_size, False, timeout=timeout
        )
    else:
        kwargs["store"] = store = _rendezvous_store(env, timeout)
    env = _agree(torch, store, env, backend, timeout_s, plan)
    device = torch.device("cpu")
    if backend in ("nccl", "rccl"):
        device = torch.device("cuda", env.local_rank % max(1, torch.cuda.device_count()))
        torch.cuda.set_device(device)
        kwargs["device_id"] = device
    dist.init_process_group(
        torch_backend(backend), rank=env.rank, world_size=env.world_size, timeout=timeout, **kwargs
    )
    return device, env


def _agree(
    torch: Any, store: Any, env: RunEnv, backend: str, timeout_s: float, plan: str
) -> RunEnv:
    """The ranks' agreement (bench/agreement.py): raises its one-line error; returns env with
    the local rank derived from the hosts where no variable gave it. In the shared-GPU test
    mode each rank's host is its own, and NCCL is told so (NCCL_HOSTID, collbench's setting)."""
    local = env.local_rank if env.local_known else None
    host = rank_host(env.rank)
    if shared_gpu() and backend in ("nccl", "rccl"):  # NCCL takes each rank for a node
        os.environ["NCCL_HOSTID"] = host
        own = os.environ.get(OWN_ENV_VAR)
        os.environ[OWN_ENV_VAR] = f"{own},NCCL_HOSTID" if own else "NCCL_HOSTID"
    facts = collect_facts(torch, backend, plan, local, host)
    verdict = exchange(store, env.rank, env.world_size, facts, timeout_s)
    verdict.raise_error()
    place = verdict.placement(env.rank)
    if env.local_known or place is None:
        return env
    return replace(
        env,
        local_rank=place.local_rank,
        local_world_size=place.local_world_size,
        node_rank=place.node_rank,
        local_known=True,
    )


def rendezvous_bind(master_addr: str, single_host: bool = False) -> str:
    """The address rank 0's store listens on: the one the ranks rendezvous on, never every
    interface when that is a loopback address (a single-host run is unreachable from the
    network). "" (every interface) only for a host name that resolves to loopback here but
    may name another address to peers on other hosts (Debian's 127.0.1.1 hostname entry);
    with every rank on this host (`single_host`) it is that loopback address."""
    try:
        literal = ipaddress.ip_address(master_addr.strip("[]"))
    except ValueError:
        literal = None
    if literal is not None:
        return str(literal)
    try:
        resolved = ipaddress.ip_address(socket.getaddrinfo(master_addr, None)[0][4][0])
    except (OSError, ValueError):
        return ""
    if resolved.is_loopback and master_addr != "localhost" and not single_host:
        return ""
    return str(resolved)


def _rendezvous_store(env: RunEnv, timeout: timedelta) -> Any:
    """The TCPStore the process group rendezvous on. Rank 0 serves it on a socket it binds
    itself (rendezvous_bind), since TCPStore alone listens on every interface."""
    import torch.distributed as dist

    host, port = str(env.master_addr), int(env.master_port or 0)
    if env.rank != 0:
        return dist.TCPStore(host, port, env.world_size, False, timeout=timeout)
    bind = rendezvous_bind(host, single_host(env))
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((bind, port))
        listener.listen(max(128, env.world_size))
        store = _serve_store(dist, host, port, env.world_size, timeout, listener.fileno())
    except BaseException:
        listener.close()
        raise
    _LISTENERS.append(listener)  # the store serves on its descriptor: keep it open
    return store


_LISTENERS: list[socket.socket] = []


def _serve_store(
    dist: Any, host: str, port: int, world_size: int, timeout: timedelta, listen_fd: int
) -> Any:
    """A TCPStore server on an already bound socket. torch's libuv backend (the default since
    2.4) takes a listening descriptor only in recent releases; older ones refuse it, and
    then the classic backend, which always could, serves it."""
    options = {"timeout": timeout, "wait_for_workers": False, "master_listen_fd": listen_fd}
    try:
        return dist.TCPStore(host, port, world_size, True, **options)
    except (RuntimeError, ValueError, TypeError):
        return dist.TCPStore(host, port, world_size, True, use_libuv=False, **options)


def single_host(env: RunEnv) -> bool:
    """Are all ranks on this host (as the rank environment says)?"""
    return env.local_world_size >= env.world_size


def teardown(clean: bool) -> None:
    """Leave the process group, and MPI (mpirun counts a rank that initialized MPI and exits
    without finalizing as failed). After a failure peers may be gone, so do not wait on them."""
    if not clean:
        return
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
    module = sys.modules.get("mpi4py.MPI")
    if module is not None and module.Is_initialized() and not module.Is_finalized():
        module.Finalize()
