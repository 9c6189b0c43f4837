"""exports.json: which `--csv` / `-J` files a run's launching collbench writes its rows to.

The method, in full: docs/run-directory.md#collbench-store-side-files-py.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, replace
from pathlib import Path

import msgspec

from collbench.core.convert import to_builtins
from collbench.core.errors import SpecError
from collbench.store.rank_status import is_alive, process_token
from collbench.store.reading import read_json_file
from collbench.store.rundir import write_json_atomic

SIDE_FILES = "exports.json"


@dataclass(frozen=True)
class SideFiles:
    """The --csv and -J files of one run, as its launcher recorded them."""

    csv: str | None = None
    nccl_json: str | None = None  # the -J FILE as given (render.export.json_paths names each)
    collectives: tuple[str, ...] = ()
    pid: int | None = None  # the launching collbench
    pid_token: str | None = None  # its start token (rank_status.process_token): not a reused pid
    host: str | None = None
    complete: bool = False  # the launcher wrote every row to them and closed them

    @classmethod
    def of_launcher(
        cls, csv: Path | None, nccl_json: Path | None, collectives: tuple[str, ...]
    ) -> SideFiles:
        """This process's record of the files it is about to write."""
        return cls(
            csv=None if csv is None else str(Path(csv).absolute()),
            nccl_json=None if nccl_json is None else str(Path(nccl_json).absolute()),
            collectives=tuple(collectives),
            pid=os.getpid(),
            pid_token=process_token(os.getpid()),
            host=socket.gethostname(),
        )

    def writer_alive(self) -> bool:
        """Is the launching collbench that writes them still there?"""
        if self.pid is None or self.pid == os.getpid():
            return False
        status = {"pid": self.pid, "pid_token": self.pid_token, "host": self.host}
        return is_alive({**status, "heartbeat": 0})

    def completed(self) -> SideFiles:
        return replace(self, complete=True)

    def save(self, run_dir: Path) -> None:
        write_json_atomic(Path(run_dir) / SIDE_FILES, to_builtins(self))


def read_side_files(run_dir: Path) -> SideFiles | None:
    """A run's record (None: none, or one that is not a record: nothing to complete)."""
    try:
        return msgspec.convert(read_json_file(Path(run_dir) / SIDE_FILES, SIDE_FILES), SideFiles)
    except (SpecError, msgspec.ValidationError):  # not a record collbench could have written
        return None
