"""Launchers: one small module each behind one interface (render, launch)."""

from __future__ import annotations

from collbench.launchers.base import Launcher, LaunchResult

LAUNCHERS = ("local", "none")


def get_launcher(name: str) -> Launcher:
    """The launcher called `name` (imported on demand: each may pull in heavy modules)."""
    if name == "local":
        from collbench.launchers.local import LocalLauncher

        return LocalLauncher()
    if name == "none":
        from collbench.launchers.none import NoneLauncher

        return NoneLauncher()
    raise ValueError(f"unknown launcher {name!r}")


__all__ = ["LAUNCHERS", "LaunchResult", "Launcher", "get_launcher"]
