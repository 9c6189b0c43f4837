"""Per-rank status files and a heartbeat, so a watching launcher can tell who died or hung.

The method, in full: docs/run-directory.md#collbench-store-rank-status-py.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from collbench.core.errors import SpecError
from collbench.store.reading import read_json_file
from collbench.store.rundir import write_json_atomic

STATUS_DIR_VAR = "COLLBENCH_STATUS_DIR"
# The watching launcher's pid: if it disappears, the rank ends itself rather than run on
# (or hang) as an orphan nobody reads.
PARENT_PID_VAR = "COLLBENCH_PARENT_PID"
HEARTBEAT_S = 1.0
EXIT_ORPHANED = 1
# Linux's id of the current boot: a start time in ticks since boot means nothing without it.
_BOOT_ID = "/proc/sys/kernel/random/boot_id"
# /proc/PID/stat states of a process that has ended (zombie, dead).
_DEAD_STATES = frozenset({"Z", "X", "x"})


def status_path(status_dir: Path, rank: int) -> Path:
    return Path(status_dir) / f"rank-{rank:05d}.json"


def read_status(status_dir: Path, rank: int) -> dict[str, Any] | None:
    try:  # within core.limits: a FIFO or a device in its place is unreadable, not a hang
        return read_json_file(status_path(status_dir, rank), "rank status")
    except SpecError:
        return None


def read_statuses(status_dir: Path) -> list[dict[str, Any]]:
    """Every rank's status file there is, in rank order (unreadable ones left out)."""
    statuses = []
    for path in sorted(Path(status_dir).glob("rank-*.json")):
        try:
            status = read_json_file(path, "rank status")
        except SpecError:
            continue
        if isinstance(status, dict) and isinstance(status.get("rank"), int):
            statuses.append(status)
    return statuses


def process_token(pid: int) -> str | None:
    """`BOOT_ID:START_TICKS` of a live process (None: no such process, a zombie, or no /proc
    to ask): the same pid with another token is another process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
        boot_id = Path(_BOOT_ID).read_text(encoding="ascii").strip()
    except (OSError, ValueError):
        return None
    # Field 2 (the command) is in parentheses and may hold spaces and ")": split after the last.
    fields = stat[stat.rfind(")") + 2 :].split()
    if len(fields) < 20 or fields[0] in _DEAD_STATES:
        return None
    return f"{boot_id}:{fields[19]}"  # fields[0] is field 3 (state); fields[19] is field 22


def pid_alive(pid: Any, token: Any = None) -> bool:
    """Is `pid` a live process on this host (not a zombie), and the one that recorded `token`
    (process_token) when one was recorded? A pid that is no positive number, pid 1 (init:
    never a rank) and a reused pid (another token) are not. Without /proc: kill(pid, 0)."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 1:
        return False
    if Path(_BOOT_ID).exists():
        current = process_token(pid)
        return current is not None and (token is None or current == token)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    except (OverflowError, OSError):
        return False
    return True


def is_alive(status: dict[str, Any]) -> bool:
    """Is the rank behind this status still there? Its process on this host (pid_alive, with
    the start token it recorded), else its heartbeat; a field that is not what collbench
    writes (a pid that is no number, a heartbeat that is no time) reads as not alive."""
    if status.get("host") == socket.gethostname():
        return pid_alive(status.get("pid"), status.get("pid_token"))
    heartbeat = status.get("heartbeat")
    if not isinstance(heartbeat, (int, float)) or isinstance(heartbeat, bool):
        return False
    return time.time() - heartbeat < 3 * HEARTBEAT_S


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
            "pid_token": process_token(os.getpid()),
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
                    with contextlib.suppress(Exception):  # ending the rank matters more
                        self.on_orphaned(self.orphan_error)
                self._lock.acquire()  # no status write of the main thread is cut in half
                os._exit(EXIT_ORPHANED)

    def _write(self) -> None:
        if self._dir is None:
            return
        # a full disk: the last status stays; the rank's exit code speaks
        with contextlib.suppress(OSError):
            write_json_atomic(status_path(self._dir, self._state["rank"]), self._state, indent=None)
