"""Run one command once inside a new Slurm allocation, and follow the job to its end.

The method, in full: docs/launchers.md#launchers-slurm-batch-py.
"""

from __future__ import annotations

import contextlib
import io
import shlex
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from collbench.core.errors import SpecError
from collbench.core.safe_text import refuse_control
from collbench.launchers.base import check_command
from collbench.launchers.slurm import (
    SUBMITIT_ENV,
    RankTask,
    SlurmSettings,
    check_cluster,
    sbatch_directives,
    sbatch_quote,
    submit_task,
    with_node_cpus,
)
from collbench.launchers.slurm_state import HOPELESS, JobWatch

# %j: sbatch puts the job id in the name, so a folder used twice keeps both outputs.
DRIVER_OUTPUT = "driver-%j.out"


def driver_output(folder: Path, job_id: str) -> Path:
    """Where the driver's stdout and stderr go (DRIVER_OUTPUT with the job id)."""
    return Path(folder).absolute() / DRIVER_OUTPUT.replace("%j", str(job_id))


def driver_script(
    argv: list[str], settings: SlurmSettings, folder: Path, wrapper: str | None = None
) -> str:
    """The batch script that runs `argv` once (pure): through submitit's `wrapper` (which
    runs `argv`: slurm.RankTask) when given. SpecError when a value holds a control
    character (base.check_command)."""
    check_command(argv)
    folder = Path(folder).absolute()
    refuse_control("--out", str(folder))
    lines = [
        "#!/bin/bash",
        "# collbench driver: runs once on the allocation's first node; it starts srun steps.",
        *sbatch_directives(settings.sbatch_options()),
        f"#SBATCH --output={sbatch_quote(str(folder / DRIVER_OUTPUT))}",
        "#SBATCH --open-mode=append",  # a requeued job's output follows the first attempt's
        "",
        *((*SUBMITIT_ENV, f"# runs: {shlex.join(argv)}") if wrapper else ()),
        "exec " + (wrapper or shlex.join(argv)),
        "",
    ]
    return "\n".join(lines)


def submit_driver(argv: list[str], settings: SlurmSettings, folder: Path) -> str:
    """sbatch a script (written into `folder`, its output there too) that runs `argv` once
    in an allocation shaped by `settings`; returns the job id. SpecError (exit 2) when
    Slurm is missing, the partition is unknown or sbatch refuses the job."""
    check_cluster(settings)
    settings = with_node_cpus(settings)  # the allocation's; each srun step reads it back
    folder = Path(folder).absolute()
    return submit_task(
        folder,
        RankTask(tuple(argv)),
        lambda wrapper: driver_script(argv, settings, folder, wrapper),
    )


def wait_job(
    job_id: str, on_state: Callable[[str], None] | None = None, poll_s: float = 1.0
) -> tuple[str, int | None]:
    """Poll the job until it ends: (Slurm's final state, the script's exit code).

    The exit code is None when a signal ended the script (scancel, the time limit) or Slurm
    no longer knows the job (state "UNKNOWN"). `on_state` hears each change, as "PENDING
    (Priority)", "RUNNING", "COMPLETED". A job that can never start (say --time above the
    partition's limit) is cancelled and raised as a SpecError; Ctrl-C cancels the job too.
    """
    tell = on_state or (lambda shown: None)
    return wait_jobs([job_id], lambda _job, shown: tell(shown), poll_s)[0]


def wait_jobs(
    job_ids: list[str], on_state: Callable[[str, str], None], poll_s: float = 1.0
) -> list[tuple[str, int | None]]:
    """wait_job for several jobs at once (a job array's elements, "JOBID_INDEX"): each one's
    end, in their order; `on_state` hears (job id, change). Ctrl-C cancels them all."""
    watches = [JobWatch(job, partial(on_state, job)) for job in job_ids]
    try:
        while not all(watch.ended for watch in watches):
            for watch in watches:
                watch.check(time.monotonic())
                if watch.hopeless:
                    raise SpecError(
                        "Slurm job",
                        watch.job_id,
                        f"can never start: {watch.hopeless} ({HOPELESS[watch.hopeless]}); "
                        "cancelled it",
                    )
            if not all(watch.ended for watch in watches):
                time.sleep(poll_s)
    except KeyboardInterrupt:
        for watch in watches:
            watch.job.cancel(check=False)
        raise
    return [(watch.state, script_exit_code(watch.exit_code)) for watch in watches]


def submit_array(argvs: list[list[str]], settings: SlurmSettings, folder: Path) -> list[str]:
    """One job per argv, each in an allocation shaped by `settings` and run once there (as a
    driver: it starts its own srun step), submitted by submitit as one job array (its
    pickles, script and output in `folder`); the elements' job ids, in order. SpecError
    (exit 2) when Slurm is missing, the partition is unknown or sbatch refuses the array."""
    import submitit
    from submitit.core.utils import FailedJobError

    check_cluster(settings)
    settings = with_node_cpus(settings)
    for argv in argvs:
        check_command(argv)
    options = settings.sbatch_options()
    named = {key.replace("-", "_"): options.pop(key) for key in list(options) if key in _NAMED}
    executor = submitit.SlurmExecutor(folder=Path(folder).absolute(), max_num_timeout=0)
    executor.update_parameters(
        **named,
        use_srun=False,
        stderr_to_stdout=True,
        setup=list(SUBMITIT_ENV),
        additional_parameters=options,
        array_parallelism=len(argvs),
    )
    try:  # submitit prints sbatch's refusal too: the one line below says it
        with contextlib.redirect_stderr(io.StringIO()), executor.batch():
            jobs = [executor.submit(RankTask(tuple(argv))) for argv in argvs]
    except FailedJobError as error:
        raise SpecError("--launcher", "slurm", f"sbatch refused the job array: {error}") from None
    return [str(job.job_id) for job in jobs]


# sbatch options submitit's SlurmExecutor names itself (the others go as they are).
_NAMED = frozenset(
    {"job-name", "nodes", "ntasks-per-node", "gpus-per-node", "cpus-per-task", "partition"}
    | {"account", "qos", "constraint", "time", "exclusive"}
)


def script_exit_code(exit_code: str) -> int | None:
    """scontrol's ExitCode "CODE:SIGNAL" as the script's exit code; None after a signal."""
    code, _, signal = exit_code.partition(":")
    return int(code) if code.isdigit() and not (signal.isdigit() and int(signal)) else None
