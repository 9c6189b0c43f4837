"""`--launcher mpi`: run the ranks with Open MPI's mpirun.

The method, in full: docs/launchers.md#launchers-mpi-py.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collbench.core.errors import SpecError
from collbench.core.knobs import LOGGING_KNOBS, is_setting_knob, knob_env
from collbench.core.safe_text import refuse_control
from collbench.core.spec import SweepSpec
from collbench.launchers.base import (
    DEFAULT_CPU_RANKS,
    LaunchPlan,
    LaunchResult,
    RankCommand,
    check_job_values,
    rank_argv,
    watch_env,
)
from collbench.launchers.process import external_job, launch_process
from collbench.store.job import Job


@dataclass(frozen=True)
class MpiSettings:
    """mpirun's options. as_root and oversubscribe are decided when planning, so that
    rendering stays a pure function of the job."""

    nproc: int = DEFAULT_CPU_RANKS
    hostfile: str | None = None
    mpi_args: tuple[str, ...] = ()
    # Variables mpirun must forward to ranks on other hosts, with their values when planned:
    # `-x NAME` when this collbench runs mpirun (its environment has them), `-x NAME=VALUE`
    # in a printed line, which runs in a shell that may not.
    export: tuple[tuple[str, str], ...] = ()
    as_root: bool = False
    oversubscribe: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "mpi_args", tuple(self.mpi_args))
        object.__setattr__(self, "export", tuple((str(n), str(v)) for n, v in self.export))
        if self.nproc < 1:
            raise SpecError("--nproc", self.nproc, "must be at least 1")
        # A printed line passes each as `-x NAME=VALUE`, run in a shell on another host.
        if self.hostfile is not None:
            refuse_control("--hostfile", self.hostfile)
        for arg in self.mpi_args:
            refuse_control("--mpi-arg", arg)
        for name, value in self.export:
            refuse_control(f"environment variable {name}", value, name + value)


def _split_mpi_arg(text: str) -> list[str]:
    """One --mpi-arg split as a shell would; SpecError where it cannot be (a lone quote)."""
    try:
        return shlex.split(text)
    except ValueError as error:  # shlex: "No closing quotation", "No escaped character"
        raise SpecError("--mpi-arg", text, f"cannot be split into arguments: {error}") from None


class MpiLauncher:
    name = "mpi"
    rank_env = "mpi"
    options = frozenset({"hostfile", "mpi_args"})
    nproc_refusal = None

    def plan(self, spec: SweepSpec, options: Any, command_line: list[str]) -> Job:
        check_job_values(spec, options)
        if shutil.which("mpirun") is None and not options.print_only:
            raise SpecError(
                "--launcher",
                "mpi",
                "needs mpirun on PATH (Open MPI: "
                "apt-get install openmpi-bin), or use --print to see the command",
            )
        if importlib.util.find_spec("mpi4py") is None:
            needs = "needs mpi4py in this Python: pip install 'collbench[mpi]'"
            if not options.print_only:
                raise SpecError("--launcher", "mpi", needs)
            print(f"collbench: warning: the printed command {needs}", file=sys.stderr)
        hostfile = options.extra.get("hostfile")
        if hostfile is not None and not Path(hostfile).is_file():
            raise SpecError("--hostfile", hostfile, "is not a readable file")
        nproc = options.nproc if options.nproc is not None else DEFAULT_CPU_RANKS
        extra_args = tuple(
            arg for text in options.extra.get("mpi_args", ()) for arg in _split_mpi_arg(text)
        )
        # Knobs (settings and logging) and the Python environment, so remote ranks run like
        # local ones; never placement (CUDA_VISIBLE_DEVICES: each host has its own GPUs) nor
        # what describes the head's install (CUDA_HOME, NCCL_VERSION).
        knobs = [(n, v) for n, v in knob_env().items() if is_setting_knob(n) or n in LOGGING_KNOBS]
        python = [name for name in ("PATH", "PYTHONPATH", "VIRTUAL_ENV") if name in os.environ]
        settings = MpiSettings(
            nproc=nproc,
            hostfile=str(Path(hostfile).absolute()) if hostfile else None,
            mpi_args=extra_args,
            export=(*knobs, *((name, os.environ[name]) for name in python)),
            as_root=os.geteuid() == 0,
            oversubscribe=hostfile is None and nproc > (os.cpu_count() or 1),
        )
        return external_job(self, spec, options, command_line, nproc, settings)

    def render(self, job: Job, watched: bool = True) -> LaunchPlan:
        """mpirun as this collbench runs it (`watched`: with the variables it watches the
        ranks through), or as `--print` shows it, to run in a fresh shell."""
        settings = MpiSettings(**job.settings)
        env = watch_env(job) if watched else {}
        argv = ["mpirun", "-np", str(settings.nproc)]
        if settings.hostfile:
            argv += ["--hostfile", settings.hostfile]
        if settings.as_root:
            argv += ["--allow-run-as-root"]
        if settings.oversubscribe:
            argv += ["--oversubscribe"]
        for name in sorted(env):
            argv += ["-x", name]
        for name, value in settings.export:
            argv += ["-x", name if watched or name == "PATH" else f"{name}={value}"]
        argv += [*settings.mpi_args, *rank_argv(job, self.rank_env)]
        return LaunchPlan(self.name, (RankCommand(argv, env),))

    def describe(self, job: Job) -> str:
        return self.render(job, watched=False).commands[0].shell()

    def launch(self, job: Job, sink: Any) -> LaunchResult:
        (command,) = self.render(job).commands
        return launch_process(job, command, "mpirun", "mpirun.log", sink)
