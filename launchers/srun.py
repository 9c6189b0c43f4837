"""`--launcher srun`: run the sweep as one srun job step in the Slurm allocation this
process is in (salloc, or an sbatch script), every rank a task of that step.

The method, in full: docs/launchers.md#launchers-srun-py.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from collbench.bench.rank_env import NOT_A_STEP, expand_tasks_per_node
from collbench.core.errors import SpecError
from collbench.core.spec import SweepSpec
from collbench.launchers.base import (
    DEFAULT_CPU_RANKS,
    LaunchPlan,
    LaunchResult,
    RankCommand,
    check_job_values,
    option_flag,
    rank_argv,
    watch_env,
)
from collbench.launchers.process import external_job, launch_process
from collbench.launchers.slurm import ALLOCATION_ONLY, STEP_SHAPE, slurm_count, step_cpus_per_task
from collbench.store.job import Job

OUTSIDE = (
    "runs inside a Slurm allocation (salloc, or an sbatch script); --launcher slurm submits one"
)


@dataclass(frozen=True)
class SrunSettings:
    """The step: how many tasks (ranks) on how many of the allocation's nodes."""

    ntasks: int = DEFAULT_CPU_RANKS
    nodes: int = 1
    # Given only when every node runs the same number of ranks (else srun spreads ntasks).
    ntasks_per_node: int | None = None
    gpus_per_node: int | None = None
    # CPUs per rank: given, else the allocation's (launchers.slurm.step_cpus_per_task)
    cpus_per_task: int | None = None
    # The allocation the step runs in (provenance in job.json; None for --print outside one).
    job_id: str | None = None

    def __post_init__(self) -> None:
        for flag, value in (
            ("--nproc", self.ntasks),
            ("--nodes", self.nodes),
            ("--ntasks-per-node", self.ntasks_per_node),
        ):
            if value is not None and value < 1:
                raise SpecError(flag, value, "must be at least 1")
        if self.gpus_per_node is not None and self.gpus_per_node < 0:
            raise SpecError("--gpus-per-node", self.gpus_per_node, "must not be negative")
        if self.ntasks < self.nodes:
            raise SpecError(
                "--nodes", self.nodes, f"is more nodes than ranks ({self.ntasks}): srun refuses it"
            )

    def srun_options(self) -> list[str]:
        """srun's options for the step, before the command."""
        options = ["--kill-on-bad-exit=1", "--nodes", str(self.nodes), "--ntasks", str(self.ntasks)]
        if self.ntasks_per_node is not None:
            options += ["--ntasks-per-node", str(self.ntasks_per_node)]
        if self.gpus_per_node is not None:
            options += ["--gpus-per-node", str(self.gpus_per_node)]
        if self.cpus_per_task:  # a step does not inherit it from the allocation
            options += ["--cpus-per-task", str(self.cpus_per_task)]
        return options


@dataclass(frozen=True)
class Allocation:
    """The Slurm allocation this process runs in, from the variables salloc/sbatch set."""

    job_id: str
    nodes: int
    tasks_per_node: tuple[int, ...]

    @classmethod
    def detect(cls, environ: Mapping[str, str] | None = None) -> Allocation | None:
        """The allocation, or None outside one. Inside an srun step it is a SpecError: a step
        inside a step would wait for resources its own parent holds."""
        environ = os.environ if environ is None else environ
        job_id = environ.get("SLURM_JOB_ID") or environ.get("SLURM_JOBID")
        if not job_id:
            return None
        step = environ.get("SLURM_STEP_ID") or environ.get("SLURM_STEPID")
        if step and step not in NOT_A_STEP:
            raise SpecError(
                "--launcher",
                "srun",
                f"is already inside srun step {job_id}.{step}: run it once, "
                "in the sbatch script or the salloc shell, not under srun",
            )
        nodes = slurm_count(environ, "SLURM_JOB_NUM_NODES") or slurm_count(environ, "SLURM_NNODES")
        per_node = expand_tasks_per_node(environ.get("SLURM_TASKS_PER_NODE", ""))
        nodes = nodes or len(per_node) or 1
        total = slurm_count(environ, "SLURM_NTASKS")
        gpus = slurm_count(environ, "SLURM_GPUS_PER_NODE")
        if total is None and gpus:
            # no task count asked for (Slurm then says 1 a node): one rank a GPU, as
            # --launcher slurm's default
            per_node = [gpus] * nodes
        elif len(per_node) != nodes or (total is not None and sum(per_node) != total):
            # sbatch -N2 -n3 gives "2,1"; without it, spread SLURM_NTASKS (or 1 a node) as
            # Slurm's block distribution does: the first nodes get one more.
            ntasks = total or nodes
            per_node = [ntasks // nodes + (index < ntasks % nodes) for index in range(nodes)]
        return cls(job_id, nodes, tuple(per_node))


class SrunLauncher:
    name = "srun"
    rank_env = "slurm"
    # --nodes/--ntasks-per-node/--gpus-per-node shape the step; the allocation's own options
    # are accepted here only to be refused with a reason (run_sweep's refusal gives none).
    options = STEP_SHAPE | ALLOCATION_ONLY
    nproc_refusal = None

    def plan(self, spec: SweepSpec, options: Any, command_line: list[str]) -> Job:
        for key in sorted(ALLOCATION_ONLY & set(options.extra)):  # the first one given
            raise SpecError(
                option_flag(key),
                options.extra[key],
                "shapes an allocation: give it to salloc or sbatch "
                "(--launcher srun runs a step in the allocation it is in; --launcher slurm submits one)",
            )
        check_job_values(spec, options)
        allocation = Allocation.detect()
        if allocation is None and not options.print_only:
            raise SpecError("--launcher", "srun", OUTSIDE)
        if shutil.which("srun") is None and not options.print_only:
            raise SpecError("--launcher", "srun", "needs Slurm's srun on PATH")
        settings = step_settings(options.nproc, options.extra, allocation)
        return external_job(self, spec, options, command_line, settings.ntasks, settings)

    def render(self, job: Job) -> LaunchPlan:
        settings = SrunSettings(**job.settings)
        argv = ["srun", *settings.srun_options(), *rank_argv(job, self.rank_env)]
        return LaunchPlan(self.name, (RankCommand(argv, watch_env(job)),))

    def describe(self, job: Job) -> str:
        return RankCommand(self.render(job).commands[0].argv, {}).shell()

    def launch(self, job: Job, sink: Any) -> LaunchResult:
        (command,) = self.render(job).commands
        return launch_process(job, command, "srun", "srun.log", sink)


def step_settings(
    nproc: int | None, extra: Mapping[str, Any], allocation: Allocation | None
) -> SrunSettings:
    """The step from what the user gave, the rest from the allocation (or, for --print
    outside one, --launcher slurm's defaults: one node, DEFAULT_CPU_RANKS ranks)."""
    nodes, per_node = extra.get("nodes"), extra.get("ntasks_per_node")
    gpus = extra.get("gpus_per_node")
    if nproc is not None and per_node is not None:
        raise SpecError(
            "--nproc",
            nproc,
            "conflicts with --ntasks-per-node: give the total or the per-node count",
        )
    held = allocation or Allocation("", 1, (per_node or gpus or DEFAULT_CPU_RANKS,))
    if nodes is not None and nodes > held.nodes and allocation is not None:
        raise SpecError(
            "--nodes", nodes, f"is more than the allocation's {held.nodes} (SLURM_JOB_NUM_NODES)"
        )
    if nproc is not None:
        ntasks, nodes = nproc, nodes or min(held.nodes, nproc)
    elif per_node is not None:
        nodes = nodes or held.nodes
        ntasks = nodes * per_node
    elif nodes is not None:
        per_node = held.tasks_per_node[0]
        ntasks = nodes * per_node
    else:
        ntasks, nodes = sum(held.tasks_per_node), held.nodes
    cpus = extra.get("cpus_per_task")
    if cpus is None and allocation is not None:
        cpus = step_cpus_per_task(os.environ, -(-ntasks // max(1, nodes)))
    job_id = allocation.job_id if allocation else None
    return SrunSettings(ntasks, nodes, per_node, gpus, cpus, job_id)
