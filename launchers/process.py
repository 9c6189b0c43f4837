"""What torchrun and mpirun launches share: start one process that starts the ranks, send its
output to logs/, and watch the ranks through their status files (launchers/supervise.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from collbench.launchers.base import LaunchResult, RankCommand
from collbench.launchers.supervise import ProcessHandle, supervise
from collbench.store.job import Job
from collbench.store.outputs import path_error
from collbench.store.rundir import new_run_id, prepare_run_dir


def external_job(
    launcher: Any,
    spec: Any,
    options: Any,
    command_line: list[str],
    nproc: int,
    settings: Any,
    first_node: bool = True,
) -> Job:
    """The job of a launcher whose ranks another tool starts (its `name` and `rank_env`),
    `settings` kept as plain values, in a new run id and an absolute run directory (ranks may
    start in another working directory), made unless printing: prepared by the first node."""
    run_id = new_run_id()
    run_dir = (Path(options.out) if options.out else Path("results") / run_id).absolute()
    if not options.print_only:
        if first_node:  # another node's launcher (same filesystem) may have made logs/, ranks/
            prepare_run_dir(run_dir, run_id, allowed=frozenset({"logs", "ranks"}))
        else:
            try:
                run_dir.mkdir(parents=True, exist_ok=True)
            except OSError as error:  # one line, as prepare_run_dir says it (store/outputs.py)
                raise path_error("--out", run_dir, error) from None
    fields = (spec, run_dir, run_id, launcher.name, nproc, command_line, launcher.rank_env)
    return Job(*fields, settings=vars(settings))


def launch_process(
    job: Job, command: RankCommand, label: str, log_name: str, sink: Any
) -> LaunchResult:
    """Start `command` in its own session, its output in logs/LOG_NAME, and watch the job."""
    log_path = Path(job.run_dir) / "logs" / log_name
    log_path.parent.mkdir(parents=True, exist_ok=True)
    handle = ProcessHandle.spawn(command, log_path, f"{label} (pid {{pid}}, output in {log_path})")
    return supervise(job, [handle], sink, per_rank=False)
