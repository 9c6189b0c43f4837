"""Launchers: one small module each behind one interface (plan, render, launch)."""

from __future__ import annotations

import importlib

from collbench.launchers.base import Launcher, LaunchResult

# name -> "module:class", imported on demand: each may pull in heavy modules.
_REGISTRY = {
    "local": "collbench.launchers.local:LocalLauncher",
    "none": "collbench.launchers.none:NoneLauncher",
    "torchrun": "collbench.launchers.torchrun:TorchrunLauncher",
    "mpi": "collbench.launchers.mpi:MpiLauncher",
    "slurm": "collbench.launchers.slurm:SlurmLauncher",
    "srun": "collbench.launchers.srun:SrunLauncher",
}
LAUNCHERS = tuple(_REGISTRY)


def get_launcher(name: str) -> Launcher:
    """The launcher called `name` (one of LAUNCHERS: run.sweep.choose_launcher checks it)."""
    module_name, class_name = _REGISTRY[name].split(":")
    return getattr(importlib.import_module(module_name), class_name)()


__all__ = ["LAUNCHERS", "LaunchResult", "Launcher", "get_launcher"]
