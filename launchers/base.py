"""The launcher interface: `plan` a job, `render(job)` says exactly what would run (pure),
`launch(job)` runs it. Launchers that start ranks through another tool (torchrun, mpirun,
Slurm) all have the ranks run the same thing: `collbench sweep --launcher none --rank-env X`
with the sweep spelled out, so a printed command also runs on its own."""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from collbench.core.safe_text import refuse_control, refuse_control_args
from collbench.store.job import Job
from collbench.store.rank_status import STATUS_DIR_VAR

# Set by a launching collbench for ranks started through another tool: which run they are
# part of (run id, launcher, the user's command line), so rank 0 records the run as the user
# started it and writes into the directory the launcher prepared.
LAUNCH_VAR = "COLLBENCH_LAUNCH"
# Where each rank sends its output (logs/rank-NNNNN.log), like the local launcher does.
LOG_DIR_VAR = "COLLBENCH_LOG_DIR"
# Ranks per host when no GPU decides it: every launcher's default.
DEFAULT_CPU_RANKS = 2
# Rendezvous port of torchrun's static form, and the one a printed local command shows.
DEFAULT_MASTER_PORT = 29500


@dataclass(frozen=True)
class LaunchResult:
    """How a launched sweep ended: an exit code and, on failure, one line saying why."""

    code: int
    error: str | None = None
    # False on ranks other than 0 of a job launched elsewhere: they print no summary.
    is_primary: bool = True
    # This process was a rank (--launcher none): it must end without interpreter teardown.
    is_rank: bool = False


@dataclass(frozen=True)
class RankCommand:
    """One process to start: its argv and the environment variables set for it."""

    argv: list[str]
    env: dict[str, str]

    def shell(self) -> str:
        """The command as one shell line (environment assignments first); SpecError when a
        value holds a control character (quoting cannot keep a newline on one line)."""
        check_command(self.argv, self.env)
        assignments = [f"{name}={shlex.quote(value)}" for name, value in self.env.items()]
        return " ".join([*assignments, *map(shlex.quote, self.argv)])


@dataclass(frozen=True)
class LaunchPlan:
    """What a launcher would run for a job, whichever launcher it is (`render`'s one type).

    `commands` are the processes started on this host: one per rank (local), one tool that
    starts the ranks (torchrun, mpirun), or none (a rank already running; a batch job).
    A batch scheduler (Slurm) instead submits `batch_options`, and every task runs `task`.
    """

    launcher: str
    commands: tuple[RankCommand, ...] = ()
    batch_options: dict[str, Any] | None = None
    task: RankCommand | None = None


class Launcher(Protocol):
    name: str
    # Launcher-specific `collbench sweep` options it accepts (RunOptions.extra keys).
    options: frozenset[str]
    # Why `--nproc` is refused (the rank count comes from other options); None: it takes it.
    nproc_refusal: str | None

    def plan(self, spec: Any, options: Any, command_line: list[str]) -> Job:
        """Check the options and fix the job (ranks, run directory) without starting it."""

    def render(self, job: Job) -> LaunchPlan:
        """What would run, without running it (pure: tested against golden renderings)."""

    def describe(self, job: Job) -> str:
        """render() as text a person can read or paste (`--print`)."""

    def launch(self, job: Job, sink: Any) -> LaunchResult:
        """Run the job; rows reach `sink` as they are measured."""


def check_command(argv: list[str], env: dict[str, str] | None = None) -> None:
    """SpecError naming the option (or variable) whose value holds a control character: a
    newline in a value written into a script or a printed command line starts a new command
    there (an injected `#SBATCH` directive, a `touch` that runs). See core/safe_text.py."""
    refuse_control_args(list(argv))
    for name, value in (env or {}).items():
        refuse_control(name, value, f"{name}{value}")


def check_job_values(spec: Any, options: Any) -> None:
    """Before a launcher makes the run directory: SpecError for a control character in the
    sweep's options (a --topology path, ...), --out, or a launcher option as given
    (`options`: run.sweep.RunOptions; the option named as the user spells it)."""
    check_command([*spec.to_args(), "--out", str(options.out or "")])
    for key, value in options.extra.items():
        flag = option_flag(key)
        for item in value if isinstance(value, (list, tuple)) else (value,):
            refuse_control(flag, str(item))


def option_flag(key: str) -> str:
    """The command-line option of a launcher setting: slurm_args -> --slurm-arg."""
    return "--" + key.replace("_", "-").replace("slurm-args", "slurm-arg").replace(
        "mpi-args", "mpi-arg"
    )


def collbench_argv(
    command: Sequence[str], launcher: str, args: Sequence[str], out: Any
) -> list[str]:
    """`python -m collbench COMMAND --launcher LAUNCHER ARGS --out OUT`: what a rank runs
    (rank_argv) and what the driver of `tune run --launcher slurm` runs, ARGS from the
    specs' own to_args."""
    return [
        sys.executable,
        "-m",
        "collbench",
        *command,
        "--launcher",
        launcher,
        *args,
        "--out",
        str(out),
    ]


def rank_argv(job: Job, rank_env: str) -> list[str]:
    """What every rank started by torchrun, mpirun or srun runs."""
    args = ["--rank-env", rank_env, *job.spec.to_args()]
    return collbench_argv((job.spec.command,), "none", args, job.run_dir)


def watch_env(job: Job) -> dict[str, str]:
    """Variables that let the launching collbench watch ranks it did not start itself."""
    run_dir = Path(job.run_dir)
    launch = {
        "run_id": job.run_id,
        "launcher": job.launcher,
        "command_line": job.command_line,
        "world_size": job.nproc,
    }
    return {
        LAUNCH_VAR: json.dumps(launch, separators=(",", ":")),
        STATUS_DIR_VAR: str(run_dir / "ranks"),
        LOG_DIR_VAR: str(run_dir / "logs"),
    }


def parent_launch() -> dict[str, Any] | None:
    """What the launching collbench told this rank (LAUNCH_VAR), if one launched it."""
    raw = os.environ.get(LAUNCH_VAR)
    return json.loads(raw) if raw else None
