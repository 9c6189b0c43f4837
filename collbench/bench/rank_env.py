"""Where this process sits in a job, read from exactly one launcher's environment.

The method, in full: docs/architecture.md#collbench-bench-rank-env-py.
"""

from __future__ import annotations

import importlib.util
import os
import re
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from collbench.core.errors import SpecError

RANK_ENVS = ("torch", "slurm", "mpi")
_LABELS = {"torch": "torchrun", "slurm": "Slurm", "mpi": "MPI"}
# Ports a Slurm step derives from its job and step id, when nothing else names one: every
# task computes the same port without talking to the others. Below Linux's ephemeral range
# (32768-60999), where an outgoing connection may hold the port already (EADDRINUSE).
SLURM_PORT_MIN, SLURM_PORT_SPAN = 20000, 12768
# Slurm's step ids for what is not a task of an srun step (the batch script, the extern one).
NOT_A_STEP = frozenset({"batch", "extern", "4294967294", "4294967291"})


@dataclass(frozen=True)
class RunEnv:
    """This process's place in the job. master_addr is None until the MPI ranks agree on one."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    master_addr: str | None
    master_port: int | None
    source: str = "torch"
    node_rank: int = 0
    # Which variables said so, for error messages: "RANK=1, WORLD_SIZE=2".
    evidence: str = ""
    # How the rendezvous address was found (provenance, in meta.json).
    rendezvous: str = ""
    # False when no variable gave the local rank (some MPI launchers): local_rank and
    # local_world_size are then placeholders until the ranks derive them from their hosts
    # (bench/agreement.py), never a silent 0 that puts every rank on GPU 0.
    local_known: bool = True

    def __post_init__(self) -> None:
        if self.world_size < 1 or not 0 <= self.rank < self.world_size:
            raise SpecError(
                "rank environment",
                self.evidence,
                f"rank {self.rank} is not a rank of world size {self.world_size}",
            )

    @classmethod
    def detect(cls, environ: Mapping[str, str] | None = None, choice: str | None = None) -> RunEnv:
        """The rank environment of this process; `choice` names one of RANK_ENVS."""
        environ = os.environ if environ is None else environ
        found = {name: reader(environ) for name, reader in _READERS.items()}
        present = {name: env for name, env in found.items() if env is not None}
        if choice is not None:
            if choice not in RANK_ENVS:
                raise SpecError("--rank-env", choice, f"is not one of {', '.join(RANK_ENVS)}")
            if choice not in present:
                raise SpecError(
                    "--rank-env",
                    choice,
                    f"but this process has no "
                    f"{_LABELS[choice]} rank environment ({_HINTS[choice]})",
                )
            env = present[choice]
        elif not present:
            raise SpecError(
                "--launcher",
                "none",
                "but this process was not started as a "
                "rank (no RANK/WORLD_SIZE, SLURM_PROCID or OMPI_COMM_WORLD_RANK): "
                "start it under torchrun, srun or mpirun, or use --launcher local",
            )
        elif len({(env.rank, env.world_size) for env in present.values()}) > 1:
            views = "; ".join(
                f"{_LABELS[env.source]} says rank {env.rank} of {env.world_size} ({env.evidence})"
                for env in present.values()
            )
            raise SpecError(
                "rank environment",
                "ambiguous",
                f"({views}): name the launcher "
                f"that started this process with --rank-env "
                f"{'|'.join(present)}",
            )
        else:
            env = next(iter(present.values()))
        return _rendezvous(env, environ)


_HINTS = {
    "torch": "needs RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT",
    "slurm": "needs SLURM_PROCID and SLURM_NTASKS inside an srun step",
    "mpi": "needs OMPI_COMM_WORLD_RANK/SIZE or PMI_RANK/PMI_SIZE from mpirun",
}


def _rendezvous(env: RunEnv, environ: Mapping[str, str]) -> RunEnv:
    """Under `srun --mpi=pmix` (PMIX_RANK beside Slurm's variables), rank 0 picks a free port
    and tells the others through MPI, which beats a port derived from the job id; MASTER_ADDR /
    MASTER_PORT set by hand win over what a scheduler's variables imply."""
    if env.source == "slurm" and "PMIX_RANK" in environ and importlib.util.find_spec("mpi4py"):
        env = replace(env, master_addr=None, master_port=None)
    how = "broadcast by rank 0 through MPI"  # an MPI rank's, and a Slurm step's without nodes
    if env.master_addr is not None:
        how = {
            "torch": "MASTER_ADDR/MASTER_PORT from the launcher",
            "slurm": "the step's first node, a port from the job and step ids",
        }[env.source]
    if env.source != "torch" and (environ.get("MASTER_ADDR") or environ.get("MASTER_PORT")):
        how = "MASTER_ADDR/MASTER_PORT set by hand"
    addr = environ.get("MASTER_ADDR") or env.master_addr
    port = _int(environ, "MASTER_PORT") if environ.get("MASTER_PORT") else env.master_port
    return replace(env, master_addr=addr, master_port=port, rendezvous=how)


def _int(environ: Mapping[str, str], name: str, default: int | None = None) -> int:
    raw = environ.get(name)
    if raw is None or raw == "":
        if default is not None:
            return default
        raise SpecError(name, raw, "is missing")
    try:
        return int(raw)
    except ValueError:
        raise SpecError(name, raw, "is not an integer") from None


def read_torch(environ: Mapping[str, str]) -> RunEnv | None:
    """torchrun / torch.distributed's env:// variables."""
    if "RANK" not in environ or "WORLD_SIZE" not in environ:
        return None
    missing = [name for name in ("MASTER_ADDR", "MASTER_PORT") if not environ.get(name)]
    if missing:
        raise SpecError(
            "rank environment",
            "torch",
            f"RANK and WORLD_SIZE are set but {', '.join(missing)} is not",
        )
    return RunEnv(
        rank=_int(environ, "RANK"),
        world_size=_int(environ, "WORLD_SIZE"),
        local_rank=_int(environ, "LOCAL_RANK", 0),
        local_world_size=_int(environ, "LOCAL_WORLD_SIZE", 1),
        master_addr=environ["MASTER_ADDR"],
        master_port=_int(environ, "MASTER_PORT"),
        source="torch",
        node_rank=_int(environ, "GROUP_RANK", 0),
        evidence=f"RANK={environ['RANK']}, WORLD_SIZE={environ['WORLD_SIZE']}",
        local_known=bool(environ.get("LOCAL_RANK")),
    )


def read_slurm(environ: Mapping[str, str]) -> RunEnv | None:
    """An srun step's task variables. A batch script is not a step: it runs once, not per task."""
    # without a step id, a process is no more a task of a step than the batch script is
    if "SLURM_PROCID" not in environ or environ.get("SLURM_STEP_ID", "batch") in NOT_A_STEP:
        return None
    nodes_var = (
        "SLURM_STEP_NODELIST" if environ.get("SLURM_STEP_NODELIST") else "SLURM_JOB_NODELIST"
    )
    node_rank = _int(environ, "SLURM_NODEID", 0)
    per_node = expand_tasks_per_node(
        environ.get("SLURM_STEP_TASKS_PER_NODE") or environ.get("SLURM_TASKS_PER_NODE") or ""
    )
    local_world = per_node[node_rank] if node_rank < len(per_node) else 1
    job_id, step_id = _int(environ, "SLURM_JOB_ID", 0), _int(environ, "SLURM_STEP_ID", 0)
    port = SLURM_PORT_MIN + zlib.crc32(f"{job_id}.{step_id}".encode()) % SLURM_PORT_SPAN
    nodelist = environ.get(nodes_var, "")
    return RunEnv(
        rank=_int(environ, "SLURM_PROCID"),
        world_size=_int(environ, "SLURM_STEP_NUM_TASKS", 0) or _int(environ, "SLURM_NTASKS"),
        local_rank=_int(environ, "SLURM_LOCALID", 0),
        local_world_size=local_world,
        master_addr=first_host(nodelist) if nodelist else None,
        master_port=port,
        source="slurm",
        node_rank=node_rank,
        evidence=f"SLURM_PROCID={environ['SLURM_PROCID']}, "
        f"SLURM_NTASKS={environ.get('SLURM_NTASKS')}",
        local_known=bool(environ.get("SLURM_LOCALID")),
    )


def read_mpi(environ: Mapping[str, str]) -> RunEnv | None:
    """Open MPI's, MPICH/Intel MPI's (PMI) or PMIx's rank variables (the address comes later)."""
    for rank_var, size_var, local_var, local_size_var, node_var in _MPI_FLAVOURS:
        if rank_var in environ and size_var in environ:
            return RunEnv(
                rank=_int(environ, rank_var),
                world_size=_int(environ, size_var),
                local_rank=_int(environ, local_var, 0),
                local_world_size=_int(environ, local_size_var, 1),
                master_addr=None,
                master_port=None,
                source="mpi",
                node_rank=_int(environ, node_var, 0),
                evidence=f"{rank_var}={environ[rank_var]}, {size_var}={environ[size_var]}",
                local_known=bool(environ.get(local_var)),
            )
    return None


_MPI_FLAVOURS = (
    (
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "OMPI_COMM_WORLD_LOCAL_SIZE",
        "OMPI_COMM_WORLD_NODE_RANK",
    ),
    ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "PMI_NODE_RANK"),
)

_READERS: dict[str, Callable[[Mapping[str, str]], RunEnv | None]] = {
    "torch": read_torch,
    "slurm": read_slurm,
    "mpi": read_mpi,
}


def first_host(nodelist: str) -> str:
    """The first host of a Slurm node list: "gpu[003-010,012],cpu01" -> "gpu003"."""
    match = re.match(r"([^,\[]*)(?:\[([^\]]*)\])?", nodelist.strip())
    if not match or not (match.group(1) or match.group(2)):
        raise SpecError("SLURM_STEP_NODELIST", nodelist, "is not a Slurm node list")
    prefix, ranges = match.group(1), match.group(2)
    return prefix if ranges is None else prefix + re.split(r"[-,]", ranges)[0]


def expand_tasks_per_node(value: str) -> list[int]:
    """Slurm's compact per-node task counts: "2(x3),1" -> [2, 2, 2, 1]."""
    counts: list[int] = []
    for part in filter(None, value.split(",")):
        match = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if not match:
            raise SpecError("SLURM_TASKS_PER_NODE", value, "is not a Slurm task count list")
        counts.extend([int(match.group(1))] * int(match.group(2) or 1))
    return counts


def started_as_rank(environ: Mapping[str, str] | None = None) -> bool:
    """Was this process started as one rank of a job (torchrun, an srun step of several
    tasks, mpirun)? A one-task srun step or mpirun -np 1 is not: it may spawn ranks itself."""
    environ = os.environ if environ is None else environ
    if "RANK" in environ and "WORLD_SIZE" in environ:
        return True
    for reader in (read_slurm, read_mpi):
        try:
            env = reader(environ)
        except SpecError:
            return True  # malformed: let detect() say what is wrong with it
        if env is not None and env.world_size > 1:
            return True
    return False
