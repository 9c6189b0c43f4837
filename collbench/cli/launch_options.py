"""The launchers' own options on `collbench sweep` and `overlap` (torchrun, Slurm, MPI):
each fills a field of that launcher's settings and sits in that launcher's help panel.

Keep this module's imports light: `collbench --help` must not import torch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from collbench.cli.options import Option, given_fields
from collbench.launchers.base import DEFAULT_CPU_RANKS, DEFAULT_MASTER_PORT
from collbench.launchers.mpi import MpiSettings
from collbench.launchers.slurm import SlurmSettings
from collbench.launchers.torchrun import TorchrunSettings

GPU_OR_CPU_RANKS = f"number of GPUs, else {DEFAULT_CPU_RANKS}"


def _settings_option(owner: type, panel: str) -> Callable[..., Option]:
    """Options that fill one launcher's settings: in its help panel, their help naming it."""
    prefix = panel.lower()

    def option(flags: tuple[str, ...], help_text: str, **more: Any) -> Option:
        return Option(flags, f"{prefix}: {help_text}", owner, panel=panel, **more)

    return option


_torchrun = _settings_option(TorchrunSettings, "torchrun")
_slurm = _settings_option(SlurmSettings, "Slurm")
_mpi = _settings_option(MpiSettings, "MPI")

TORCHRUN_OPTIONS = (
    _torchrun(("--nproc-per-node",), "ranks per node.", default_text=GPU_OR_CPU_RANKS),
    _torchrun(("--nnodes",), "nodes in the job."),
    _torchrun(("--node-rank",), "this node's index."),
    _torchrun(("--master-addr",), "node 0's address (static rendezvous).", metavar="HOST"),
    _torchrun(("--master-port",), "node 0's port.", default_text=str(DEFAULT_MASTER_PORT)),
    _torchrun(
        ("--rdzv-endpoint",),
        "HOST:PORT of a c10d rendezvous instead of --master-addr.",
        metavar="HOST:PORT",
    ),
)

SLURM_OPTIONS = (
    _slurm(
        ("--nodes", "-N"),
        "nodes to allocate (srun: nodes of the allocation to run on).",
        default_text=f"{SlurmSettings().nodes}; srun: all the allocation's",
    ),
    _slurm(
        ("--ntasks-per-node",),
        "ranks per node.",
        default_text=f"--gpus-per-node, else {DEFAULT_CPU_RANKS}; srun: the allocation's tasks",
    ),
    _slurm(("--gpus-per-node",), "GPUs per node."),
    _slurm(
        ("--cpus-per-task",),
        "CPUs per rank (0: Slurm's default, one).",
        default_text="the node's CPUs (sinfo) / --ntasks-per-node; srun: the allocation's",
    ),
    _slurm(("--partition", "-p"), "partition.", metavar="NAME"),
    _slurm(("--account", "-A"), "account.", metavar="NAME"),
    _slurm(("--qos",), "quality of service.", metavar="NAME"),
    _slurm(("--time", "-t"), "time limit (MM, HH:MM:SS, D-HH:MM...).", metavar="TIME"),
    _slurm(("--constraint", "-C"), "node features.", metavar="FEATURES"),
    _slurm(("--exclusive",), "whole nodes only."),
    _slurm(
        ("--slurm-arg",),
        "any other sbatch option as KEY=VALUE (repeatable).",
        field="slurm_args",
        kind=list[str],
        metavar="KEY=VALUE",
    ),
    _slurm(("--no-wait",), "submit, print the job id and return (see collbench status/wait)."),
    _slurm(
        ("--print-sbatch",),
        "print the sbatch script --launcher slurm would submit, to submit yourself, and exit.",
    ),
)

MPI_OPTIONS = (
    _mpi(("--hostfile",), "Open MPI hostfile.", metavar="FILE"),
    _mpi(
        ("--mpi-arg",),
        "extra mpirun arguments (repeatable, shell-split).",
        field="mpi_args",
        kind=list[str],
        metavar="ARG",
    ),
)

LAUNCHER_OPTIONS = (*TORCHRUN_OPTIONS, *SLURM_OPTIONS, *MPI_OPTIONS)


def launcher_settings(values: dict[str, Any]) -> dict[str, Any]:
    """The launchers' settings given on the command line (the launcher refuses foreign ones)."""
    given: dict[str, Any] = {}
    for settings in (TorchrunSettings, SlurmSettings, MpiSettings):
        given.update(given_fields(settings, LAUNCHER_OPTIONS, values))
    return given
