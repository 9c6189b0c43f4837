"""Orchestrates `collbench sweep`: resolve, validate, prepare the run directory, launch."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from collbench import capacity
from collbench.console import ConsoleSink
from collbench.distributed import gpu_count, resolve_backend
from collbench.errors import SpecError
from collbench.job import Job
from collbench.launchers import LaunchResult, get_launcher
from collbench.results import new_run_id, prepare_run_dir
from collbench.spec import SweepSpec

DEFAULT_CPU_RANKS = 2


@dataclass(frozen=True)
class RunOptions:
    """How to run a sweep (as opposed to what to measure, which is the SweepSpec)."""

    launcher: str = "local"
    # Ranks to spawn with the local launcher; None: one per GPU, else DEFAULT_CPU_RANKS.
    nproc: int | None = None
    out: Path | None = None
    output: str = "table"  # table | json | quiet


def run_sweep(spec: SweepSpec, options: RunOptions,
              command_line: list[str]) -> tuple[LaunchResult, Path]:
    """Run a sweep to completion; returns how it ended and where its results are."""
    spec = spec.with_backend(resolve_backend(spec.backend))
    run_id = new_run_id()
    if options.launcher == "none":
        if options.nproc is not None:
            raise SpecError("--nproc", options.nproc, "conflicts with --launcher none (the "
                            "job's launcher decides the rank count)")
        nproc = int(os.environ.get("WORLD_SIZE", "1"))
        run_dir = Path(options.out) if options.out else Path("results") / run_id
    else:
        nproc = _local_nproc(spec, options.nproc)
        run_dir = prepare_run_dir(options.out, run_id)
    job = Job(spec, run_dir, run_id, options.launcher, nproc, command_line)
    show_progress = options.output != "quiet" and sys.stderr.isatty()
    sink = ConsoleSink(spec, options.output, progress=show_progress)
    return get_launcher(options.launcher).launch(job, sink), run_dir


def _local_nproc(spec: SweepSpec, requested: int | None) -> int:
    gpus = gpu_count() if spec.backend in ("nccl", "rccl") else 0
    nproc = requested if requested is not None else (gpus or DEFAULT_CPU_RANKS)
    if nproc < 1:
        raise SpecError("--nproc", nproc, "must be at least 1")
    if gpus and nproc > gpus:
        raise SpecError("--nproc", nproc, f"exceeds the {gpus} GPU(s) visible on this host")
    capacity.check_world_size(spec, nproc)
    if not gpus:
        capacity.check_memory(spec, nproc, nproc, capacity.host_memory_available(), "host")
    return nproc
