"""`--launcher torchrun`: run torchrun for the user, one torchrun per node.

The method, in full: docs/launchers.md#launchers-torchrun-py.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, fields, replace
from typing import Any

from collbench.core.errors import SpecError
from collbench.core.safe_text import refuse_control
from collbench.core.spec import SweepSpec
from collbench.launchers.base import (
    DEFAULT_CPU_RANKS,
    DEFAULT_MASTER_PORT,
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
class TorchrunSettings:
    """torchrun's options, checked as the user gave them."""

    nproc_per_node: int = DEFAULT_CPU_RANKS
    nnodes: int = 1
    node_rank: int = 0
    master_addr: str | None = None
    master_port: int | None = None
    rdzv_endpoint: str | None = None

    def __post_init__(self) -> None:
        for flag, text in (
            ("--master-addr", self.master_addr),
            ("--rdzv-endpoint", self.rdzv_endpoint),
        ):
            if text is not None:
                refuse_control(flag, text)  # a printed line is run on every node
        if self.nproc_per_node < 1:
            raise SpecError("--nproc-per-node", self.nproc_per_node, "must be at least 1")
        if self.nnodes < 1:
            raise SpecError("--nnodes", self.nnodes, "must be at least 1")
        if not 0 <= self.node_rank < self.nnodes:
            raise SpecError("--node-rank", self.node_rank, f"must be in 0..{self.nnodes - 1}")
        if self.master_port is not None and not 0 < self.master_port < 65536:
            raise SpecError("--master-port", self.master_port, "is not a TCP port")
        if self.rdzv_endpoint is not None:
            if self.master_addr is not None or self.master_port is not None:
                raise SpecError(
                    "--rdzv-endpoint",
                    self.rdzv_endpoint,
                    "conflicts with --master-addr/--master-port: give one or the other",
                )
            if self.node_rank:
                raise SpecError(
                    "--node-rank",
                    self.node_rank,
                    "conflicts with --rdzv-endpoint (torchrun numbers the nodes itself)",
                )
        elif self.nnodes > 1 and self.master_addr is None:
            raise SpecError(
                "--nnodes",
                self.nnodes,
                "needs --master-addr (node 0's address) "
                "or --rdzv-endpoint HOST:PORT, the same on every node",
            )


class TorchrunLauncher:
    name = "torchrun"
    rank_env = "torch"
    options = frozenset(field.name for field in fields(TorchrunSettings))
    nproc_refusal = "does not apply to --launcher torchrun: use --nproc-per-node (and --nnodes)"

    def plan(self, spec: SweepSpec, options: Any, command_line: list[str]) -> Job:
        check_job_values(spec, options)
        given = dict(options.extra)
        if "nproc_per_node" not in given:  # one rank a GPU, else DEFAULT_CPU_RANKS
            from collbench.bench.distributed import gpu_count

            given["nproc_per_node"] = (spec.backend != "gloo" and gpu_count()) or DEFAULT_CPU_RANKS
        settings = TorchrunSettings(**given)
        nproc = settings.nnodes * settings.nproc_per_node
        first = settings.node_rank == 0
        return external_job(self, spec, options, command_line, nproc, settings, first)

    def render(self, job: Job) -> LaunchPlan:
        settings = TorchrunSettings(**job.settings)
        argv = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nnodes",
            str(settings.nnodes),
            "--nproc-per-node",
            str(settings.nproc_per_node),
        ]
        if settings.rdzv_endpoint is not None:
            argv += [
                "--rdzv-backend",
                "c10d",
                "--rdzv-endpoint",
                settings.rdzv_endpoint,
                "--rdzv-id",
                "collbench",
            ]
        elif settings.nnodes == 1 and settings.master_addr is None:
            argv += ["--standalone"]
        else:
            argv += [
                "--node-rank",
                str(settings.node_rank),
                "--master-addr",
                settings.master_addr or "127.0.0.1",
                "--master-port",
                str(settings.master_port or DEFAULT_MASTER_PORT),
            ]
        argv += ["--max-restarts", "0", "-m", *rank_argv(job, self.rank_env)[2:]]
        return LaunchPlan(self.name, (RankCommand(argv, watch_env(job)),))

    def describe(self, job: Job) -> str:
        """The torchrun line of every node: one line that every node runs (one node, or a
        c10d rendezvous where torchrun numbers the nodes), else one line per node, its
        --node-rank K, each under a comment naming the node."""
        settings = TorchrunSettings(**job.settings)
        if settings.nnodes == 1 or settings.rdzv_endpoint is not None:
            return RankCommand(self.render(job).commands[0].argv, {}).shell()
        lines = []
        for node in range(settings.nnodes):
            at = {**job.settings, "node_rank": node}
            (command,) = self.render(replace(job, settings=at)).commands
            lines += [f"# node {node} of {settings.nnodes}:", RankCommand(command.argv, {}).shell()]
        return "\n".join(lines)

    def launch(self, job: Job, sink: Any) -> LaunchResult:
        node = job.settings["node_rank"]
        if node != 0:
            sink.mode = "quiet"  # node 0 prints the table
        (command,) = self.render(job).commands
        return launch_process(job, command, "torchrun", f"torchrun-node-{node}.log", sink)
