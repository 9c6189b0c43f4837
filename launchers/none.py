"""`--launcher none`: this process is one rank of a job someone else launched (torchrun,
srun, mpirun), or that a launching collbench started through one of them."""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from collbench.bench.rank_env import RunEnv
from collbench.core.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_WRONG_DATA, SpecError
from collbench.launchers.base import LOG_DIR_VAR, LaunchPlan, LaunchResult, parent_launch
from collbench.store.job import Job
from collbench.store.rundir import new_run_id


class NoneLauncher:
    name = "none"
    options: frozenset[str] = frozenset()
    nproc_refusal = "conflicts with --launcher none (the job's launcher decides the rank count)"

    def plan(self, spec: Any, options: Any, command_line: list[str]) -> Job:
        if options.print_only:
            raise SpecError(
                "--print",
                True,
                "needs a launcher that starts something "
                "(local, torchrun, mpi, slurm), not --launcher none",
            )
        parent = parent_launch()
        if parent:  # started for a launching collbench: its run, its directory
            launched = [parent[key] for key in ("run_id", "launcher", "world_size", "command_line")]
            return Job(spec, Path(options.out), *launched, options.rank_env)
        run_id = new_run_id()
        run_dir = Path(options.out) if options.out else Path("results") / run_id
        return Job(
            spec, run_dir, run_id, "none", 0, command_line, options.rank_env, dir_prepared=False
        )

    def render(self, job: Job) -> LaunchPlan:
        """Nothing is started: the current process runs the sweep as the rank it already is."""
        return LaunchPlan(self.name)

    def describe(self, job: Job) -> str:
        return ""

    def launch(self, job: Job, sink: Any) -> LaunchResult:
        from collbench.bench.distributed import resolve_rank_backend
        from collbench.bench.worker import reset_stop_signals, run_rank

        reset_stop_signals()

        env = RunEnv.detect(choice=job.rank_env)
        _redirect_output(env.rank)
        # Each rank resolves --backend for itself; the ranks compare what they resolved
        # before they join (bench/agreement.py), so a node that differs stops the run.
        backend = resolve_rank_backend(job.spec.backend, env.rank)
        job = replace(job, nproc=env.world_size, spec=job.spec.with_backend(backend))
        outcome = run_rank(job, env, sink if env.rank == 0 else None)
        if env.rank == 0:  # the last collective's summary, even after a failure
            ended = {EXIT_OK: None, EXIT_WRONG_DATA: None, EXIT_INTERRUPTED: "interrupted"}
            sink.finish(ended.get(outcome.code, "failed"))
        error = f"rank {env.rank}: {outcome.error}" if outcome.error else None
        return LaunchResult(outcome.code, error, is_primary=env.rank == 0, is_rank=True)


def _redirect_output(rank: int) -> None:
    """Under a launching collbench, each rank's output goes to logs/rank-NNNNN.log."""
    log_dir = os.environ.get(LOG_DIR_VAR)
    if not log_dir:
        return
    Path(log_dir).mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(Path(log_dir) / f"rank-{rank:05d}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
