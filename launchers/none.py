"""`--launcher none`: this process is one rank of a job someone else launched (torchrun...)."""

from __future__ import annotations

from typing import Any

from collbench.distributed import RunEnv
from collbench.job import Job
from collbench.launchers.base import LaunchResult, RankCommand


class NoneLauncher:
    name = "none"

    def render(self, job: Job) -> list[RankCommand]:
        """Nothing is started: the current process runs the sweep as the rank it already is."""
        return []

    def launch(self, job: Job, sink: Any) -> LaunchResult:
        from collbench.worker import run_rank

        env = RunEnv.detect()
        outcome = run_rank(job, env, sink if env.rank == 0 else None)
        if env.rank == 0:
            sink.finish()  # the last collective's summary, even after a failure
        error = f"rank {env.rank}: {outcome.error}" if outcome.error else None
        return LaunchResult(outcome.code, error, is_primary=env.rank == 0)
