"""Local CPU ranks forked from one process that imported torch once (bench/rank_forker.py).

The method, in full: docs/launchers.md#launchers-forked-py.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from collbench.core.errors import EXIT_RUN_FAILED
from collbench.launchers.base import RankCommand
from collbench.launchers.supervise import ProcessHandle, signal_group
from collbench.store.rank_status import pid_alive

# Ranks start by spawning a fresh process each ("spawn"), or forked ("fork", CPU ranks only).
RANK_START_VAR = "COLLBENCH_RANK_START"
# How long stop() waits for the forker to report a rank it has killed.
REPORT_WAIT_S = 5.0


class RankForker:
    """The forker process and what it has said: each rank's pid, and exit code once ended."""

    def __init__(self, proc: subprocess.Popen, nproc: int) -> None:
        self.proc = proc
        self.pids: list[int | None] = [None] * nproc
        self.codes: dict[int, int] = {}
        self.started = time.time()
        self._pending = b""
        self._ended = False

    @classmethod
    def start(cls, run_dir: Path, commands: tuple[RankCommand, ...], log_dir: Path) -> RankForker:
        """Start the forker with the variables every rank shares, and ask for the ranks."""
        common = {
            name: value
            for name, value in commands[0].env.items()
            if all(command.env.get(name) == value for command in commands)
        }
        ranks = [
            {
                "env": {k: v for k, v in command.env.items() if k not in common},
                "log": str(log_dir / f"rank-{rank:05d}.log"),
            }
            for rank, command in enumerate(commands)
        ]
        with open(log_dir / "rank-00000.log", "ab") as log:  # the forker's own errors
            proc = subprocess.Popen(
                [sys.executable, "-m", "collbench.bench.rank_forker"],
                env={**os.environ, **common},
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                start_new_session=True,
            )
        forker = cls(proc, len(commands))
        request = json.dumps({"run_dir": str(run_dir), "ranks": ranks}) + "\n"
        try:
            assert proc.stdin is not None
            proc.stdin.write(request.encode())
            proc.stdin.flush()
        except BrokenPipeError:
            forker.read(0)  # it died at once: its exit says so
        return forker

    def handles(self) -> list[ForkedRank]:
        return [ForkedRank(self, rank) for rank in range(len(self.pids))]

    def wakeup_fd(self) -> int | None:
        """Readable when the forker has news (a rank started or ended); None once it ended."""
        return None if self._ended or self.proc.stdout is None else self.proc.stdout.fileno()

    def read(self, timeout_s: float) -> None:
        """Take in what the forker reported, waiting up to timeout_s for a first word."""
        fd = self.wakeup_fd()
        if fd is None:
            return
        if not select.select([fd], [], [], max(0.0, timeout_s))[0]:
            return
        data = os.read(fd, 65536)
        if not data:
            self._ended = True
            self.proc.wait()
            return
        lines = (self._pending + data).split(b"\n")
        self._pending = lines.pop()
        for line in lines:
            word, first, second = line.decode().split()
            if word == "started":
                self.pids[int(first)] = int(second)
            else:
                self.codes[int(first)] = int(second)

    def code(self, rank: int) -> int | None:
        """Rank's exit code; None while it runs (or may still be started)."""
        pid = self.pids[rank]
        if pid is not None and pid in self.codes:
            return self.codes[pid]
        if not self._ended:
            return None
        if pid is None:  # the forker ended before it started this rank
            return self.proc.returncode or EXIT_RUN_FAILED
        # The forker died before the rank: the rank ends itself (its parent is gone), and
        # only its absence can be seen from here.
        return None if pid_alive(pid) else EXIT_RUN_FAILED

    def wait(self, rank: int, deadline: float) -> int | None:
        while self.code(rank) is None and time.time() < deadline:
            self.read(deadline - time.time())
        return self.code(rank)

    def close(self) -> None:
        """Done watching: the forker exits (it has once every rank ended)."""
        if self.proc.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=REPORT_WAIT_S)
        except subprocess.TimeoutExpired:
            signal_group(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


class ForkedRank:
    """One forked rank as launchers/supervise.py watches it."""

    def __init__(self, forker: RankForker, rank: int) -> None:
        self.forker, self.rank = forker, rank
        self._deadline: float | None = None

    @property
    def pid(self) -> int | None:
        return self.forker.pids[self.rank]

    @property
    def label(self) -> str:
        return f"rank {self.rank} (pid {self.pid})"

    def poll(self) -> int | None:
        self.forker.read(0)
        return self.forker.code(self.rank)

    def running_since(self) -> float | None:
        return self.forker.started

    def wakeup_fd(self) -> int | None:
        return self.forker.wakeup_fd()

    def terminate(self) -> None:
        """SIGTERM its session, and SIGCONT (a stopped rank must run to see it). A rank not
        started yet never will be: the forker is stopped instead."""
        self._deadline = time.time() + ProcessHandle.TERMINATE_GRACE_S
        self.forker.read(0)
        if self.pid is None:
            signal_group(self.forker.proc.pid, signal.SIGKILL)
            return
        signal_group(self.pid, signal.SIGTERM)
        signal_group(self.pid, signal.SIGCONT)

    def stop(self) -> None:
        """SIGKILL its session if it outlives the grace period after terminate()."""
        if self._deadline is None:
            self.terminate()
        if self.pid is None:
            self.forker.wait(self.rank, time.time() + REPORT_WAIT_S)
            return
        if self.forker.wait(self.rank, self._deadline or 0.0) is None:
            signal_group(self.pid, signal.SIGKILL)
            self.forker.wait(self.rank, time.time() + REPORT_WAIT_S)
        signal_group(self.pid, signal.SIGKILL)  # whatever it started and left behind


def preload_parquet_writer() -> None:
    """Import pandas and pyarrow (rows.parquet, written by this launcher for forked ranks) in
    the background: the forker's torch import leaves a core idle for it. A thread, so that a
    Ctrl-C, which only the main thread sees, never lands inside a C extension's import."""

    def load() -> None:
        with contextlib.suppress(ImportError):
            import pandas  # noqa: F401
            import pyarrow.parquet  # noqa: F401

    threading.Thread(target=load, name="collbench-preload", daemon=True).start()


def forks_ranks(backend: str) -> bool:
    """Fork this job's ranks (CPU ranks, unless RANK_START_VAR says spawn)?"""
    return backend == "gloo" and os.environ.get(RANK_START_VAR, "fork") != "spawn"
