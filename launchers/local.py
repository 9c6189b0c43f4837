"""`--launcher local`: spawn N ranks on this host and watch them until the sweep ends.

The method, in full: docs/launchers.md#launchers-local-py.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from collbench.bench import capacity
from collbench.bench.distributed import free_port, gpu_count, resolve_backend
from collbench.core.errors import SpecError
from collbench.core.knobs import OWN_ENV_VAR, shared_gpu
from collbench.core.spec import SweepSpec
from collbench.launchers.base import (
    DEFAULT_CPU_RANKS,
    DEFAULT_MASTER_PORT,
    LaunchPlan,
    LaunchResult,
    RankCommand,
    rank_argv,
)
from collbench.launchers.forked import RankForker, forks_ranks, preload_parquet_writer
from collbench.launchers.supervise import Handle, ProcessHandle, supervise
from collbench.store.job import Job
from collbench.store.rank_status import PARENT_PID_VAR, STATUS_DIR_VAR
from collbench.store.rundir import new_run_id, prepare_run_dir
from collbench.topologies.detect import usable_cpu_count


class LocalLauncher:
    name = "local"
    options: frozenset[str] = frozenset()
    nproc_refusal = None

    def plan(self, spec: SweepSpec, options: Any, command_line: list[str]) -> Job:
        spec = spec.with_backend(resolve_backend(spec.backend))
        nproc = local_nproc(spec, options.nproc)
        run_id = new_run_id()
        run_dir = Path(options.out) if options.out else Path("results") / run_id
        if not options.print_only:
            prepare_run_dir(run_dir, run_id)
        return Job(spec, run_dir, run_id, self.name, nproc, command_line, rank_env="torch")

    def describe(self, job: Job) -> str:
        """The ranks as shell lines that run on their own, in order: ranks 1.. in the
        background, rank 0 last in the foreground (it prints the table; its exit code is the
        run's). Each is `collbench sweep --launcher none --rank-env torch` with the sweep
        spelled out, run without this collbench (no job.json, no launcher to watch it)."""
        commands = _rank_commands(job, rank_argv(job, "torch"), free_port(), {})
        return "\n".join(
            [
                f"# {job.nproc} rank(s) on this host: run these lines in order in one shell "
                "(rank 0 creates the run directory and prints the table)",
                *(command.shell() + " &" for command in commands[1:]),
                commands[0].shell(),
            ]
        )

    def render(self, job: Job, master_port: int = DEFAULT_MASTER_PORT) -> LaunchPlan:
        """What launch() starts: a worker per rank reading the job.json it writes, watched
        through status files (COLLBENCH_PARENT_PID: a rank whose launcher dies ends itself)."""
        argv = [sys.executable, "-m", "collbench.bench.worker", str(job.run_dir)]
        watched = {
            STATUS_DIR_VAR: str(Path(job.run_dir) / "ranks"),
            PARENT_PID_VAR: str(os.getpid()),
        }
        return LaunchPlan(self.name, _rank_commands(job, argv, master_port, watched))

    def launch(self, job: Job, sink: Any) -> LaunchResult:
        job.save()
        log_dir = Path(job.run_dir) / "logs"
        log_dir.mkdir(exist_ok=True)
        commands = self.render(job, free_port()).commands
        if forks_ranks(job.spec.backend):  # CPU ranks: torch imported once, not per rank
            forker = RankForker.start(Path(job.run_dir), commands, log_dir)
            preload_parquet_writer()  # while the forker imports torch
            try:
                return supervise(job, list(forker.handles()), sink, per_rank=True)
            finally:
                forker.close()
        handles: list[Handle] = [
            ProcessHandle.spawn(
                command, log_dir / f"rank-{rank:05d}.log", f"rank {rank} (pid {{pid}})"
            )
            for rank, command in enumerate(commands)
        ]
        return supervise(job, handles, sink, per_rank=True)


def _rank_commands(
    job: Job, argv: list[str], master_port: int, extra_env: dict[str, str]
) -> tuple[RankCommand, ...]:
    """One command per rank: `argv` with torch's rank variables for a one-host rendezvous."""
    shared = {
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(master_port),
        "WORLD_SIZE": str(job.nproc),
        "LOCAL_WORLD_SIZE": str(job.nproc),
        **extra_env,
    }
    if "OMP_NUM_THREADS" not in os.environ:
        # As torchrun does, but sharing the cores rather than one each: ranks whose
        # intra-op threads outnumber the cores spin against each other, and a matmul
        # (the overlap probe's compute) then varies tenfold from one call to the next.
        shared["OMP_NUM_THREADS"] = str(max(1, usable_cpu_count() // job.nproc))
        shared[OWN_ENV_VAR] = "OMP_NUM_THREADS"  # collbench's choice, not a knob
    return tuple(
        RankCommand(argv, {**shared, "RANK": str(rank), "LOCAL_RANK": str(rank)})
        for rank in range(job.nproc)
    )


def local_nproc(spec: SweepSpec, requested: int | None) -> int:
    """Ranks on this host: as asked, else one per GPU, else DEFAULT_CPU_RANKS; checked."""
    gpus = gpu_count() if spec.backend in ("nccl", "rccl") else 0
    nproc = requested if requested is not None else (gpus or DEFAULT_CPU_RANKS)
    if nproc < 1:
        raise SpecError("--nproc", nproc, "must be at least 1")
    if gpus and nproc > gpus and not shared_gpu():
        raise SpecError("--nproc", nproc, f"exceeds the {gpus} GPU(s) visible on this host")
    capacity.check_world_size(spec, nproc)
    capacity.check_rank_processes(nproc, capacity.host_memory_available())
    if not gpus:
        capacity.check_memory(spec, nproc, nproc, capacity.host_memory_available(), "host")
    return nproc
