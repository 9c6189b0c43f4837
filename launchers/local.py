"""`--launcher local`: spawn N ranks on this host and watch them until the sweep ends.

The parent starts `python -m collbench.bench.worker RUN_DIR` per rank, each in its own session
(so Ctrl-C reaches only the parent, which then tears the ranks down), and watches them
(launchers/monitor.py): a rank's own exit code says who died.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from collbench.bench import capacity
from collbench.bench.distributed import free_port, gpu_count, resolve_backend
from collbench.core.errors import SpecError
from collbench.core.spec import SweepSpec
from collbench.launchers.base import (
    DEFAULT_CPU_RANKS,
    DEFAULT_MASTER_PORT,
    LaunchPlan,
    LaunchResult,
    RankCommand,
)
from collbench.launchers.supervise import Handle, ProcessHandle, supervise
from collbench.store.job import Job
from collbench.store.rank_status import PARENT_PID_VAR, STATUS_DIR_VAR
from collbench.store.rundir import new_run_id, prepare_run_dir


class LocalLauncher:
    name = "local"
    options: frozenset[str] = frozenset()

    def plan(self, spec: SweepSpec, options: Any, command_line: list[str]) -> Job:
        spec = spec.with_backend(resolve_backend(spec.backend))
        nproc = local_nproc(spec, options.nproc)
        run_id = new_run_id()
        run_dir = Path(options.out) if options.out else Path("results") / run_id
        if not options.print_only:
            prepare_run_dir(run_dir, run_id)
        return Job(spec, run_dir, run_id, self.name, nproc, command_line, rank_env="torch")

    def describe(self, job: Job) -> str:
        return "\n".join(command.shell() for command in self.render(job).commands)

    def render(self, job: Job, master_port: int = DEFAULT_MASTER_PORT) -> LaunchPlan:
        argv = [sys.executable, "-m", "collbench.bench.worker", str(job.run_dir)]
        shared = {
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(master_port),
            "WORLD_SIZE": str(job.nproc),
            "LOCAL_WORLD_SIZE": str(job.nproc),
            STATUS_DIR_VAR: str(Path(job.run_dir) / "ranks"),
            PARENT_PID_VAR: str(os.getpid()),
        }
        if "OMP_NUM_THREADS" not in os.environ:
            # As torchrun does, but sharing the cores rather than one each: ranks whose
            # intra-op threads outnumber the cores spin against each other, and a matmul
            # (the overlap probe's compute) then varies tenfold from one call to the next.
            shared["OMP_NUM_THREADS"] = str(max(1, _usable_cores() // job.nproc))
        commands = tuple(
            RankCommand(argv, {**shared, "RANK": str(rank), "LOCAL_RANK": str(rank)})
            for rank in range(job.nproc)
        )
        return LaunchPlan(self.name, commands)

    def launch(self, job: Job, sink: Any) -> LaunchResult:
        job.save()
        log_dir = Path(job.run_dir) / "logs"
        log_dir.mkdir(exist_ok=True)
        handles: list[Handle] = [
            ProcessHandle.spawn(
                command, log_dir / f"rank-{rank:05d}.log", f"rank {rank} (pid {{pid}})"
            )
            for rank, command in enumerate(self.render(job, free_port()).commands)
        ]
        return supervise(job, handles, sink, per_rank=True)


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def local_nproc(spec: SweepSpec, requested: int | None) -> int:
    """Ranks on this host: as asked, else one per GPU, else DEFAULT_CPU_RANKS; checked."""
    gpus = gpu_count() if spec.backend in ("nccl", "rccl") else 0
    nproc = requested if requested is not None else (gpus or DEFAULT_CPU_RANKS)
    if nproc < 1:
        raise SpecError("--nproc", nproc, "must be at least 1")
    if gpus and nproc > gpus:
        raise SpecError("--nproc", nproc, f"exceeds the {gpus} GPU(s) visible on this host")
    capacity.check_world_size(spec, nproc)
    capacity.check_rank_processes(nproc, capacity.host_memory_available())
    if not gpus:
        capacity.check_memory(spec, nproc, nproc, capacity.host_memory_available(), "host")
    return nproc
