"""A Job: one sweep to run, as the launcher hands it to every rank (job.json)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

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
        data = json.loads((Path(run_dir) / JOB_FILE).read_text(encoding="utf-8"))
        return cls(
            spec=SweepSpec.from_dict(data["spec"]),
            run_dir=Path(data["run_dir"]),
            run_id=data["run_id"],
            launcher=data["launcher"],
            nproc=data["nproc"],
            command_line=data["command_line"],
            rank_env=data.get("rank_env"),
            dir_prepared=data.get("dir_prepared", True),
            settings=data.get("settings", {}),
        )
