"""`--launcher local`: spawn N ranks on this host and watch them until the sweep ends.

The parent never measures: it starts `python -m collbench.worker RUN_DIR` per rank (each in
its own session, so Ctrl-C reaches only the parent, which then tears the ranks down),
streams rows.jsonl to the console as rank 0 appends to it, and watches the ranks' status
files. A rank that exits with an error, is killed, or stops making progress for --timeout
seconds ends the run with exit 1 and a line naming that rank, its pid and host.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from collbench.errors import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_RUN_FAILED,
    EXIT_TERMINATED,
    EXIT_USAGE,
    EXIT_WRONG_DATA,
)
from collbench.job import Job
from collbench.launchers.base import LaunchResult, RankCommand
from collbench.rankstatus import PARENT_PID_VAR, STATUS_DIR_VAR, read_status
from collbench.results import ROWS_FILE, load_rows, read_meta, update_meta, utc_now, write_parquet

POLL_S = 0.1
# After a first rank fails, how long to wait for the others' exits before assigning blame.
SETTLE_S = 1.0
TERMINATE_GRACE_S = 3.0
# Error texts of ranks that died only because a peer went away first.
_PEER_ERRORS = ("Connection closed by peer", "Connection reset", "Broken pipe",
                "Timed out", "timed out", "Connection refused", "closed by remote",
                "Application timeout caused pair closure", "Read error")


class _Terminated(Exception):
    """SIGTERM reached the launcher: stop the ranks as for Ctrl-C."""


def _raise_terminated(signum: int, frame: Any) -> None:
    raise _Terminated()


def free_port() -> int:
    """A TCP port the OS says is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LocalLauncher:
    name = "local"

    def render(self, job: Job, master_port: int = 29500) -> list[RankCommand]:
        argv = [sys.executable, "-m", "collbench.worker", str(job.run_dir)]
        shared = {
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(master_port),
            "WORLD_SIZE": str(job.nproc), "LOCAL_WORLD_SIZE": str(job.nproc),
            STATUS_DIR_VAR: str(Path(job.run_dir) / "ranks"),
            PARENT_PID_VAR: str(os.getpid()),
        }
        return [RankCommand(argv, {**shared, "RANK": str(rank), "LOCAL_RANK": str(rank)})
                for rank in range(job.nproc)]

    def launch(self, job: Job, sink: Any) -> LaunchResult:
        job.save()
        log_dir = Path(job.run_dir) / "logs"
        log_dir.mkdir(exist_ok=True)
        procs = []
        for rank, command in enumerate(self.render(job, free_port())):
            with open(log_dir / f"rank-{rank:05d}.log", "wb") as log:
                procs.append(subprocess.Popen(
                    command.argv, env={**os.environ, **command.env}, stdout=log,
                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True))
        monitor = _Monitor(job, procs, sink)
        previous = signal.signal(signal.SIGTERM, _raise_terminated)
        try:
            result = monitor.watch()
        except KeyboardInterrupt:
            result = LaunchResult(EXIT_INTERRUPTED, "interrupted (Ctrl-C)")
        except _Terminated:
            result = LaunchResult(EXIT_TERMINATED, "terminated (SIGTERM)")
        finally:
            monitor.stop_all()
            signal.signal(signal.SIGTERM, previous)
        monitor.drain()
        sink.finish()
        return _finalize(job, result)


def _finalize(job: Job, result: LaunchResult) -> LaunchResult:
    """Make a cut-short run's directory as complete as a finished one, minus the missing rows."""
    if result.code in (EXIT_OK, EXIT_WRONG_DATA):
        return result
    rows = load_rows(job.run_dir)
    if rows:
        write_parquet(job.run_dir)
    state = "interrupted" if result.code in (EXIT_INTERRUPTED, EXIT_TERMINATED) else "failed"
    if read_meta(job.run_dir) is not None:
        update_meta(job.run_dir, state=state, finished_utc=utc_now(), error=result.error)
    kept = f"{len(rows)} finished row(s) kept in {Path(job.run_dir) / ROWS_FILE}"
    return LaunchResult(result.code, f"{result.error}; {kept}")


class _Monitor:
    """Streams rows to the sink and decides when (and why) the ranks' run is over."""

    def __init__(self, job: Job, procs: list[subprocess.Popen], sink: Any) -> None:
        self.job = job
        self.procs = procs
        self.sink = sink
        self.status_dir = Path(job.run_dir) / "ranks"
        self.rows_path = Path(job.run_dir) / ROWS_FILE
        self.timeout_s = job.spec.timeout_s
        self._offset = 0
        self._partial = b""
        self._started = time.time()
        self._meta_seen = False

    def watch(self) -> LaunchResult:
        while True:
            self.drain()
            codes = [proc.poll() for proc in self.procs]
            if all(code is not None for code in codes):
                return self._ended(codes)
            if any(code not in (None, EXIT_OK, EXIT_WRONG_DATA) for code in codes):
                return self._ended(self._settle())
            hang = self._hang()
            if hang:
                return LaunchResult(EXIT_RUN_FAILED, hang)
            time.sleep(POLL_S)

    def drain(self) -> None:
        """Hand every complete new row to the sink (the meta first, once it exists)."""
        if not self.sink_started():
            return
        try:
            with open(self.rows_path, "rb") as rows:
                rows.seek(self._offset)
                data = rows.read()
        except FileNotFoundError:
            return
        self._offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        for line in lines:
            if line.strip():
                self.sink.row(json.loads(line))

    def sink_started(self) -> bool:
        if not self._meta_seen:
            meta = read_meta(self.job.run_dir)
            if meta is None:
                return False
            self.sink.start(meta)
            self._meta_seen = True
        return True

    def _settle(self) -> list[int | None]:
        deadline = time.time() + SETTLE_S
        while time.time() < deadline:
            codes = [proc.poll() for proc in self.procs]
            if all(code is not None for code in codes):
                return codes
            time.sleep(POLL_S)
        return [proc.poll() for proc in self.procs]

    def _ended(self, codes: list[int | None]) -> LaunchResult:
        if all(code == EXIT_OK for code in codes):
            return LaunchResult(EXIT_OK)
        if all(code in (EXIT_OK, EXIT_WRONG_DATA) for code in codes):
            rows = load_rows(self.job.run_dir)
            wrong = sum(row["n_wrong"] or 0 for row in rows)
            bad = sum(1 for row in rows if row["n_wrong"])
            return LaunchResult(EXIT_WRONG_DATA, f"data check failed: {wrong} wrong element(s) "
                                f"in {bad} row(s) (see n_wrong in {self.rows_path})")
        statuses = [read_status(self.status_dir, rank) or {} for rank in range(len(codes))]
        usage = [s for s in statuses if s.get("usage_error")]
        if usage and all(code in (EXIT_USAGE, None) for code in codes):
            return LaunchResult(EXIT_USAGE, usage[0]["error"])
        return LaunchResult(EXIT_RUN_FAILED, self._blame(codes, statuses))

    def _blame(self, codes: list[int | None], statuses: list[dict]) -> str:
        failed = [r for r, code in enumerate(codes) if code not in (None, EXIT_OK, EXIT_WRONG_DATA)]
        killed = [r for r in failed if codes[r] < 0]
        if killed:
            rank = killed[0]
            try:
                name = signal.Signals(-codes[rank]).name
            except ValueError:
                name = f"signal {-codes[rank]}"
            return (f"{self._who(rank, statuses)} was killed by {name} during "
                    f"{_label(statuses[rank])}")
        primary = [r for r in failed if not _is_peer_error(statuses[r].get("error"))]
        rank = (primary or failed)[0]
        reason = statuses[rank].get("error") or f"exit code {codes[rank]}"
        return f"{self._who(rank, statuses)} failed during {_label(statuses[rank])}: {reason}"

    def _who(self, rank: int, statuses: list[dict]) -> str:
        status = statuses[rank]
        host = status.get("host") or socket.gethostname()
        return f"rank {rank} (pid {self.procs[rank].pid}) on {host}"

    def _hang(self) -> str | None:
        now = time.time()
        statuses = [read_status(self.status_dir, r) for r in range(len(self.procs))]
        for rank, status in enumerate(statuses):
            if status is None:
                if now - self._started > self.timeout_s:
                    return f"rank {rank} (pid {self.procs[rank].pid}) did not start within " \
                           f"{self.timeout_s:g} s"
                continue
            silent = now - status["heartbeat"]
            if status["state"] in ("starting", "running") and silent > self.timeout_s:
                return (f"{self._who(rank, statuses)} stopped responding: no heartbeat for "
                        f"{silent:.0f} s during {_label(status)} (stopped or wedged)")
        active = [s for s in statuses if s and s["state"] in ("starting", "running")]
        if not active or now - min(s["step_started"] for s in active) <= self.timeout_s:
            return None
        slowest = min(s["step"] for s in active)
        laggards = [s for s in active if s["step"] == slowest]
        stuck = laggards[0]
        if len(laggards) < len(self.procs):
            return (f"{self._who(stuck['rank'], statuses)} made no progress for "
                    f"{self.timeout_s:g} s during {_label(stuck)} while other ranks moved on")
        return (f"no rank finished {_label(stuck)} within {self.timeout_s:g} s "
                f"(all {len(self.procs)} ranks waiting in it; raise --timeout for huge sizes)")

    def stop_all(self) -> None:
        """SIGTERM every rank still running, then SIGKILL what is left after a grace period."""
        running = [proc for proc in self.procs if proc.poll() is None]
        for proc in running:
            _signal_group(proc, signal.SIGTERM)
            _signal_group(proc, signal.SIGCONT)  # a stopped rank must run to see SIGTERM
        deadline = time.time() + TERMINATE_GRACE_S
        for proc in running:
            try:
                proc.wait(timeout=max(0.0, deadline - time.time()))
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait()


def _signal_group(proc: subprocess.Popen, sig: signal.Signals) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _label(status: dict) -> str:
    return status.get("label") or "start-up"


def _is_peer_error(error: str | None) -> bool:
    return bool(error) and any(marker in error for marker in _PEER_ERRORS)
