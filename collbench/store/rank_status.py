"""Per-rank status files and a heartbeat, so a watching launcher can tell who died or hung.

Written only when the launcher sets COLLBENCH_STATUS_DIR (the local launcher does). Each
rank writes ranks/rank-NNNNN.json atomically: its host and pid, the step it is in, when that
step began, a heartbeat refreshed every second by a background thread, and its final state.
A rank stopped by a signal or wedged in the interpreter stops its heartbeat; a rank stuck
inside a collective keeps it but its step stops advancing.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from collbench.store.rundir import write_json_atomic

STATUS_DIR_VAR = "COLLBENCH_STATUS_DIR"
# The watching launcher's pid: if it disappears, the rank ends itself rather than run on
# (or hang) as an orphan nobody reads.
PARENT_PID_VAR = "COLLBENCH_PARENT_PID"
HEARTBEAT_S = 1.0
EXIT_ORPHANED = 1


def status_path(status_dir: Path, rank: int) -> Path:
    return Path(status_dir) / f"rank-{rank:05d}.json"


def read_status(status_dir: Path, rank: int) -> dict[str, Any] | None:
    try:
        return json.loads(status_path(status_dir, rank).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None


def read_statuses(status_dir: Path) -> list[dict[str, Any]]:
    """Every rank's status file there is, in rank order (unreadable ones left out)."""
    statuses = []
    for path in sorted(Path(status_dir).glob("rank-*.json")):
        try:
            status = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(status, dict) and isinstance(status.get("rank"), int):
            statuses.append(status)
    return statuses


def is_alive(status: dict[str, Any]) -> bool:
    """Is the rank behind this status still there? Its pid on this host, else its heartbeat."""
    if status.get("host") == socket.gethostname():
        try:
            os.kill(int(status["pid"]), 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return time.time() - float(status.get("heartbeat") or 0) < 3 * HEARTBEAT_S


def live_ranks(status_dir: Path) -> list[dict[str, Any]]:
    """The statuses of ranks still starting or running whose process is there."""
    return [
        status
        for status in read_statuses(status_dir)
        if status.get("state") in ("starting", "running") and is_alive(status)
    ]


class RankStatus:
    """This rank's status file (a no-op when no launcher is watching)."""

    def __init__(
        self, rank: int, status_dir: str | None = None, parent_pid: int | None = None
    ) -> None:
        self._dir = Path(status_dir) if status_dir else None
        self._parent_pid = parent_pid
        # Called (from the heartbeat thread) with the reason, just before an orphaned rank
        # ends itself: rank 0 leaves the run directory in a final state.
        self.on_orphaned: Callable[[str], None] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        now = time.time()
        self._state: dict[str, Any] = {
            "rank": rank,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "state": "starting",
            "step": -1,
            "label": "start-up",
            "step_started": now,
            "heartbeat": now,
            "error": None,
            "usage_error": False,
        }
        if self._dir is not None:
            self._dir.mkdir(parents=True, exist_ok=True)
            self._write()
            threading.Thread(target=self._beat, name="collbench-heartbeat", daemon=True).start()

    @classmethod
    def from_environ(cls, rank: int) -> RankStatus:
        parent = os.environ.get(PARENT_PID_VAR)
        return cls(rank, os.environ.get(STATUS_DIR_VAR), int(parent) if parent else None)

    def step(self, index: int, label: str) -> None:
        self._update(state="running", step=index, label=label, step_started=time.time())

    def done(self) -> None:
        self._update(state="done")
        self._stop.set()

    def fail(self, error: str, usage_error: bool = False) -> None:
        self._update(state="failed", error=error, usage_error=usage_error)
        self._stop.set()

    @property
    def label(self) -> str:
        return self._state["label"]

    @property
    def orphaned(self) -> bool:
        """Has the watching launcher gone away (this rank was re-parented)?"""
        return self._parent_pid is not None and os.getppid() != self._parent_pid

    @property
    def orphan_error(self) -> str:
        return f"the launcher (pid {self._parent_pid}) is gone; rank stopped"

    def _update(self, **fields: Any) -> None:
        with self._lock:
            self._state.update(fields)
            self._state["heartbeat"] = time.time()
            self._write()

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            self._update()
            if self.orphaned:
                self.fail(self.orphan_error)
                if self.on_orphaned is not None:
                    try:
                        self.on_orphaned(self.orphan_error)
                    except Exception:  # noqa: BLE001, S110 - ending the rank matters more
                        pass
                self._lock.acquire()  # no status write of the main thread is cut in half
                os._exit(EXIT_ORPHANED)

    def _write(self) -> None:
        if self._dir is None:
            return
        try:
            write_json_atomic(status_path(self._dir, self._state["rank"]), self._state, indent=None)
        except OSError:  # a full disk: the last status stays; the rank's exit code speaks
            pass
