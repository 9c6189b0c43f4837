"""The launcher interface: `render(job)` says exactly what would run; `launch(job)` runs it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from collbench.job import Job


@dataclass(frozen=True)
class LaunchResult:
    """How a launched sweep ended: an exit code and, on failure, one line saying why."""

    code: int
    error: str | None = None
    # False on ranks other than 0 of a job launched elsewhere: they print no summary.
    is_primary: bool = True


@dataclass(frozen=True)
class RankCommand:
    """One process to start: its argv and the environment variables set for it."""

    argv: list[str]
    env: dict[str, str]


class Launcher(Protocol):
    name: str

    def render(self, job: Job) -> Any:
        """What would run, without running it (pure: tested against golden renderings)."""

    def launch(self, job: Job, sink: Any) -> LaunchResult:
        """Run the job; rows reach `sink` as they are measured."""
