"""A Job: one sweep to run, as the launcher hands it to every rank (job.json)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from collbench.core.errors import SpecError
from collbench.core.spec import SweepSpec
from collbench.store.rundir import write_json_atomic

JOB_FILE = "job.json"


@dataclass(frozen=True)
class Job:
    """What every rank needs: the spec (backend resolved), where results go, and why."""

    spec: SweepSpec
    run_dir: Path
    run_id: str
    launcher: str
    nproc: int
    command_line: list[str] = field(default_factory=list)
    # Which rank environment the ranks read (collbench.bench.rank_env.RANK_ENVS); None: detect.
    rank_env: str | None = None
    # False: rank 0 creates the run directory (a job launched without collbench's help).
    dir_prepared: bool = True
    # The launcher's own settings (torchrun nodes, Slurm partition, ...), as plain values.
    settings: dict = field(default_factory=dict)

    def save(self) -> Path:
        path = Path(self.run_dir) / JOB_FILE
        write_json_atomic(
            path,
            {
                "spec": self.spec.to_dict(),
                "run_dir": str(self.run_dir),
                "run_id": self.run_id,
                "launcher": self.launcher,
                "nproc": self.nproc,
                "command_line": self.command_line,
                "rank_env": self.rank_env,
                "dir_prepared": self.dir_prepared,
                "settings": self.settings,
            },
        )
        return path

    @classmethod
    def load(cls, run_dir: Path) -> Job:
        """The job of a run directory; a job.json that is not one is a SpecError naming it."""
        path = Path(run_dir) / JOB_FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return cls(
                spec=SweepSpec.from_dict(data["spec"]),
                run_dir=Path(data["run_dir"]),
                run_id=str(data["run_id"]),
                launcher=str(data["launcher"]),
                nproc=int(data["nproc"]),
                command_line=list(data["command_line"]),
                rank_env=data.get("rank_env"),
                dir_prepared=bool(data.get("dir_prepared", True)),
                settings=dict(data.get("settings") or {}),
            )
        except SpecError as error:
            raise SpecError(JOB_FILE, str(path), f"is corrupt: {error}") from None
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
            why = f"lacks {error}" if isinstance(error, KeyError) else _first_line(error)
            raise SpecError(JOB_FILE, str(path), f"is corrupt or unreadable ({why})") from None


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
