"""Orchestrates `collbench sweep`: pick the launcher, plan the job, print or launch it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collbench.bench.rank_env import started_as_rank
from collbench.core.errors import SpecError
from collbench.core.spec import SweepSpec
from collbench.launchers import LAUNCHERS, LaunchResult, get_launcher
from collbench.store.sink import SinkFactory


@dataclass(frozen=True)
class RunOptions:
    """How to run a sweep (as opposed to what to measure, which is the SweepSpec)."""

    launcher: str = "auto"
    # Ranks for the local and mpi launchers; None: one per GPU, else DEFAULT_CPU_RANKS.
    nproc: int | None = None
    out: Path | None = None
    output: str = "table"  # table | json | quiet
    per_repeat: bool = False  # with --repeats: each repeat's tables, not one over them
    # For ranks of a job launched elsewhere: which environment to read (rankenv.RANK_ENVS).
    rank_env: str | None = None
    print_only: bool = False
    per_node: bool = False  # doctor on Slurm: each node checked alone first (run/doctor_nodes)
    # Launcher-specific options as given on the command line (None values left out).
    extra: dict[str, Any] = field(default_factory=dict)


def choose_launcher(requested: str, rank_env: str | None) -> str:
    """auto: run as a rank when this process already is one (torchrun, srun, mpirun), else
    spawn ranks locally."""
    if requested not in (*LAUNCHERS, "auto"):
        raise SpecError("--launcher", requested, f"is not one of auto, {', '.join(LAUNCHERS)}")
    if requested != "auto":
        return requested
    return "none" if rank_env is not None or started_as_rank() else "local"


def run_sweep(
    spec: SweepSpec, options: RunOptions, command_line: list[str], make_sink: SinkFactory
) -> tuple[LaunchResult, Path]:
    """Run (or with print_only, print) a sweep; returns how it ended and where its results are."""
    name = choose_launcher(options.launcher, options.rank_env)
    launcher = get_launcher(name)
    for key, value in options.extra.items():
        if key not in launcher.options:
            flag = "--" + key.replace("_", "-")
            raise SpecError(flag, value, f"does not apply to --launcher {name}")
    if options.rank_env is not None and name != "none":
        raise SpecError(
            "--rank-env",
            options.rank_env,
            f"is for ranks of a job launched elsewhere (--launcher none), not --launcher {name}",
        )
    if options.nproc is not None and launcher.nproc_refusal:
        raise SpecError("--nproc", options.nproc, launcher.nproc_refusal)
    job = launcher.plan(spec, options, command_line)
    if options.print_only:
        print(launcher.describe(job), flush=True)
        return LaunchResult(0, is_primary=False), job.run_dir
    return launcher.launch(job, make_sink(job.spec)), job.run_dir
