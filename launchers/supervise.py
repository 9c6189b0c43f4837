"""The launching process's watch over a running job, whatever started its ranks.

The method, in full: docs/launchers.md#launchers-supervise-py.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any, Protocol

from collbench.core.errors import (
    EXIT_HANGUP,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_RUN_FAILED,
    EXIT_TERMINATED,
    EXIT_USAGE,
    EXIT_WRONG_DATA,
)
from collbench.launchers.base import LaunchResult
from collbench.store.job import Job
from collbench.store.meta import RunMeta
from collbench.store.rank_status import HEARTBEAT_S, is_alive, read_status
from collbench.store.rows import row_from_dict, utc_now
from collbench.store.rundir import (
    META_FILE,
    PARQUET_FILE,
    ROWS_FILE,
    TEMP_ATTEMPTS,
    is_disk_full,
    load_rows,
    read_meta,
    remove_temp_files,
    update_meta,
    write_json_atomic,
    write_parquet,
)
from collbench.store.side_files import SideFiles, read_side_files

POLL_S = 0.1
# The rank torchrun (its root cause) or mpirun says failed first, in the end of its output.
FIRST_FAILED = re.compile(
    r"(?:first observed failure\):\n(?:.*\n){0,3}?\s*rank\s*:|noticed that process rank) (\d+)"
)
# After a first rank fails, how long to wait for the others' exits before assigning blame.
SETTLE_S = 1.0
# A rank whose heartbeat thread is this quiet is stopped or wedged, not slow.
STALE_HEARTBEAT_S = 3 * HEARTBEAT_S
# Error texts of ranks that died only because a peer went away first.
_PEER_ERRORS = (
    "Connection closed by peer",
    "Connection reset",
    "Broken pipe",
    "Timed out",
    "timed out",
    "Connection refused",
    "closed by remote",
    "Application timeout caused pair closure",
    "Read error",
)


class Handle(Protocol):
    """Something the launcher started: a rank, torchrun, mpirun, a Slurm job."""

    label: str  # "torchrun (pid 123)", "Slurm job 42"

    def poll(self) -> int | None:
        """The exit code once ended (negative: killed by that signal), else None."""

    def running_since(self) -> float | None:
        """When its ranks could start (a Slurm job waits in the queue first)."""

    def terminate(self) -> None:
        """Ask it, and everything it started, to end (no waiting)."""

    def stop(self) -> None:
        """Make sure it has ended: wait a little after terminate(), then force it."""


# The signals that stop a run as Ctrl-C does, with the exit code and words of each: SIGHUP
# is a closed terminal or a dropped ssh session, and ends the run like SIGTERM.
STOP_SIGNALS = {
    signal.SIGINT: (EXIT_INTERRUPTED, "interrupted (Ctrl-C)"),
    signal.SIGTERM: (EXIT_TERMINATED, "terminated (SIGTERM)"),
    signal.SIGHUP: (EXIT_HANGUP, "terminated (SIGHUP: the terminal or connection closed)"),
}
STOPPED_CODES = tuple(code for code, _ in STOP_SIGNALS.values())


class Stopped(KeyboardInterrupt):
    """SIGINT, SIGTERM or SIGHUP reached the launching process: stop the ranks, keep the
    rows. A KeyboardInterrupt, so whatever lets Ctrl-C through lets these through too."""

    def __init__(self, signum: int) -> None:
        self.code, self.message = STOP_SIGNALS[signal.Signals(signum)]
        super().__init__(self.message)


class StopSignals:
    """Inside `with StopSignals() as stops:` the first stop signal raises Stopped; from then
    on (and after `stops.shield()`) every further one is ignored, so a second
    Ctrl-C cannot cut short the clean-up the first one began (meta.json's final state,
    rows.parquet). The handlers in place before are put back on leaving, unless a stop
    signal came: the process is then on its way out with the signal's exit code, which a
    second Ctrl-C pressed a moment later must not turn into death by SIGINT."""

    def __init__(self) -> None:
        self.shielded = False
        self.stopped = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        for signum in STOP_SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, signal.SIG_IGN if self.stopped else handler)

    def shield(self) -> None:
        self.shielded = True

    def _handle(self, signum: int, frame: Any) -> None:
        if self.shielded:
            return
        self.shielded = self.stopped = True
        raise Stopped(signum)


def supervise(job: Job, handles: list[Handle], sink: Any, per_rank: bool) -> LaunchResult:
    """Watch the job to its end; Ctrl-C (130), SIGTERM (143) and SIGHUP (129) stop it, and
    a second one waits for the clean-up the first began. Rows are kept."""
    monitor = Monitor(job, handles, sink, per_rank)
    # Import now what reading rows may need: a stop raised inside a C extension's first
    # import (numpy's) leaves it unimportable, and the drain after the stop needs it.
    import numpy  # noqa: F401

    with StopSignals() as stops:
        try:
            result = monitor.watch()
        except Stopped as stopped:
            result = LaunchResult(stopped.code, stopped.message)
        except KeyboardInterrupt:  # a SIGINT handler of someone else's
            result = LaunchResult(EXIT_INTERRUPTED, "interrupted (Ctrl-C)")
        finally:
            stops.shield()
            running = [handle for handle in handles if handle.poll() is None]
            for handle in running:
                handle.terminate()
            for handle in running:
                handle.stop()
            if not per_rank:
                monitor.kill_leftover_ranks()
        monitor.drain()
        sink.finish(how_it_ended(result, handles))
        monitor.side_files_done()
        return finalize(job, result)


def how_it_ended(result: LaunchResult, handles: list[Handle]) -> str | None:
    """None for a run that completed (wrong data included: every size was measured), else
    one word for the table's footer: interrupted, cancelled (or another scheduler end), failed."""
    if result.code in (EXIT_OK, EXIT_WRONG_DATA):
        return None
    if result.code in STOPPED_CODES:
        return "interrupted"
    for handle in handles:
        ended = getattr(handle, "scheduler_end", None)
        if ended:
            return ended
    return "failed"


def finalize(job: Job, result: LaunchResult) -> LaunchResult:
    """Make a cut-short run's directory as complete as a finished one, minus the missing rows.

    A full disk is said in one line (what could not be written, how many rows are kept); the
    final state is set when meta.json can still be written, and no temporary file is left."""
    if result.code in (EXIT_OK, EXIT_WRONG_DATA):
        return _complete_parquet(job, result)
    run_dir = Path(job.run_dir)
    # A row cut short at the end is expected here (a rank died writing it): no warning.
    rows = load_rows(run_dir, warn=False)
    full: list[Path] = []  # what a full disk kept us from writing
    _unless_disk_full(lambda: write_parquet(run_dir, rows), run_dir / PARQUET_FILE, full)
    error = result.error
    if full or "disk full: " in (error or ""):
        error = _disk_full_error(run_dir, full)
    state = "interrupted" if result.code in STOPPED_CODES else "failed"
    meta = read_meta(run_dir)
    if meta is None and error:  # rank 0 never wrote one (a rank died at the rendezvous)
        _unless_disk_full(lambda: write_launcher_meta(job, state, error), run_dir / META_FILE, full)
    elif meta is not None and meta.state in ("running", None):
        final = {"state": state, "finished_utc": utc_now(), "error": error}
        _unless_disk_full(lambda: update_meta(run_dir, **final), run_dir / META_FILE, full)
    elif meta is not None:
        _unless_disk_full(lambda: update_meta(run_dir, error=error), run_dir / META_FILE, full)
    remove_temp_files(run_dir)
    if result.code == EXIT_USAGE:
        return result
    if full:  # meta.json may have failed too: name everything that could not be written
        error = _disk_full_error(run_dir, full)
    kept = f"{len(rows)} finished row(s) kept in {run_dir / ROWS_FILE}"
    return LaunchResult(result.code, f"{error}; {kept}")


def _complete_parquet(job: Job, result: LaunchResult) -> LaunchResult:
    """rows.parquet of a completed run whose rank 0 left it to the launcher (forked ranks:
    bench/session.py PARQUET_BY_LAUNCHER_VAR); a full disk is the run's one-line error, and
    the run `failed`: `completed` says every file of the run is there."""
    run_dir = Path(job.run_dir)
    if (run_dir / PARQUET_FILE).exists() or not (run_dir / ROWS_FILE).exists():
        return result
    full: list[Path] = []
    rows = load_rows(run_dir, warn=False)
    _unless_disk_full(lambda: write_parquet(run_dir, rows), run_dir / PARQUET_FILE, full)
    remove_temp_files(run_dir)
    if not full:
        return result
    failed = {"state": "failed", "error": _disk_full_error(run_dir, full)}
    _unless_disk_full(lambda: update_meta(run_dir, **failed), run_dir / META_FILE, full)
    kept = f"{len(rows)} finished row(s) kept in {run_dir / ROWS_FILE}"
    return LaunchResult(EXIT_RUN_FAILED, f"{_disk_full_error(run_dir, full)}; {kept}")


def write_launcher_meta(job: Job, state: str, error: str) -> None:
    """meta.json for a run whose rank 0 never wrote one: the job as planned, its final state
    and why. Created only where none exists (a rank 0 starting late writes over it)."""
    meta = RunMeta(
        run_id=job.run_id,
        state=state,
        finished_utc=utc_now(),
        command_line=job.command_line,
        launcher=job.launcher,
        backend=job.spec.backend,
        world_size=job.nproc or None,
        spec=job.spec.to_dict(),
        topology=job.spec.topology,
        extra={"error": error, "written_by": "launcher (rank 0 never wrote meta.json)"},
    )
    path = Path(job.run_dir) / META_FILE
    tmp = path.with_name(f"{META_FILE}.tmp{os.getpid()}-launcher")
    for attempt in range(TEMP_ATTEMPTS):
        try:
            write_json_atomic(tmp, meta.to_dict())
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)  # never over a meta.json rank 0 wrote meanwhile
            return
        except FileNotFoundError:  # another node's clean-up took the temporary file
            if attempt + 1 == TEMP_ATTEMPTS:
                raise
        finally:
            tmp.unlink(missing_ok=True)


def _disk_full_error(run_dir: Path, full: list[Path]) -> str:
    lost = f" (could not write {', '.join(path.name for path in full)})" if full else ""
    return f"disk full: no space left on the device holding {run_dir}{lost}"


def _unless_disk_full(write: Any, path: Path, full: list[Path]) -> None:
    """Run `write` (of `path`); a full disk adds `path` to `full` rather than raising."""
    try:
        write()
    except OSError as error:
        if not is_disk_full(error):
            raise
        full.append(path)


class Monitor:
    """Streams rows to the sink and decides when (and why) the job is over.

    per_rank: handles[i] is rank i (local launcher), so exit codes say who died; otherwise
    one handle started all ranks and the status files say who.
    """

    def __init__(self, job: Job, handles: list[Handle], sink: Any, per_rank: bool) -> None:
        self.job, self.handles, self.sink, self.per_rank = job, handles, sink, per_rank
        self.status_dir = Path(job.run_dir) / "ranks"
        self.rows_path = Path(job.run_dir) / ROWS_FILE
        self.timeout_s = job.spec.timeout_s
        self._offset, self._partial, self._lines_read, self._inode = 0, b"", 0, 0
        self._meta_seen = False

    def watch(self) -> LaunchResult:
        while True:
            self.drain()
            codes = [handle.poll() for handle in self.handles]
            if all(code is not None for code in codes):
                return self._ended(codes)
            if self.per_rank and any(
                code not in (None, EXIT_OK, EXIT_WRONG_DATA) for code in codes
            ):
                return self._ended(self._settle())
            hang = self._hang()
            if hang:
                return LaunchResult(EXIT_RUN_FAILED, hang)
            pause(self.handles, POLL_S)

    def drain(self) -> None:
        """Hand every complete new row to the sink (the meta first, once it exists)."""
        if not self._sink_started():
            return
        try:
            with open(self.rows_path, "rb") as rows:
                self._follow(os.fstat(rows.fileno()))
                rows.seek(self._offset)
                data = rows.read()
        except FileNotFoundError:
            return
        self._offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        for line in lines:
            self._lines_read += 1
            if line.strip():
                where = f"{self.rows_path} line {self._lines_read}"
                self.sink.row(row_from_dict(json.loads(line), where))

    def _follow(self, stat: os.stat_result) -> None:
        """A requeued job's new attempt (bench/resume.py) replaces rows.jsonl (a doctor) or
        cuts the row its kill left half-written (a sweep): read on from there."""
        if self._inode and stat.st_ino != self._inode:
            self._offset, self._partial, self._lines_read = 0, b"", 0
        elif stat.st_size < self._offset:
            self._offset, self._partial = stat.st_size, b""
        self._inode = stat.st_ino

    def _sink_started(self) -> bool:
        if not self._meta_seen:
            meta = read_meta(self.job.run_dir)
            if meta is None:
                return False
            self.sink.start(meta)
            self._meta_seen = True
            self._record_side_files(meta)
        return True

    def _record_side_files(self, meta: RunMeta) -> None:
        """Name the sink's --csv / -J files in the run (store/side_files.py), so that
        `collbench finalize` can complete them should this process die before the ranks."""
        csv_path, json_path = getattr(self.sink, "side_files", lambda: (None, None))()
        if csv_path is None and json_path is None:
            return
        collectives = tuple((meta.spec or {}).get("collectives") or ())
        record = SideFiles.of_launcher(csv_path, json_path, collectives)
        with contextlib.suppress(OSError):  # a full disk: the files are written anyway
            record.save(self.job.run_dir)

    def side_files_done(self) -> None:
        """The sink has written every row to its side files and closed them."""
        record = read_side_files(self.job.run_dir)
        if record is not None and record.pid == os.getpid() and not record.complete:
            with contextlib.suppress(OSError):
                record.completed().save(self.job.run_dir)

    def _settle(self) -> list[int | None]:
        deadline = time.time() + SETTLE_S
        while time.time() < deadline and any(handle.poll() is None for handle in self.handles):
            time.sleep(POLL_S)
        return [handle.poll() for handle in self.handles]

    def _statuses(self) -> list[dict]:
        return [read_status(self.status_dir, rank) or {} for rank in range(self.job.nproc)]

    def _ended(self, codes: list[int | None]) -> LaunchResult:
        if all(code == EXIT_OK for code in codes):
            return LaunchResult(EXIT_OK)
        # torchrun, mpirun or srun may not pass a rank's exit 3 on: rank 0's meta.json says it
        meta = None if self.per_rank else read_meta(self.job.run_dir)
        if all(code in (EXIT_OK, EXIT_WRONG_DATA) for code in codes) or (
            meta is not None and meta.state == "completed" and meta.extra.get("n_wrong_total")
        ):
            rows = load_rows(self.job.run_dir)
            wrong = sum(row.n_wrong or 0 for row in rows)
            bad = sum(1 for row in rows if row.n_wrong)
            return LaunchResult(
                EXIT_WRONG_DATA,
                f"data check failed: {wrong} wrong element(s) "
                f"in {bad} row(s) (see n_wrong in {self.rows_path})",
            )
        for handle in self.handles:
            failure = getattr(handle, "failure", lambda: None)()
            if failure:  # the scheduler ended it (cancelled, out of time), not a rank
                return LaunchResult(*failure)
        statuses = self._statuses()
        usage = [s for s in statuses if s.get("usage_error")]
        if usage and all(
            not s or s.get("usage_error") or s.get("state") == "failed" for s in statuses
        ):
            return LaunchResult(EXIT_USAGE, usage[0]["error"])
        if self.per_rank:
            return LaunchResult(EXIT_RUN_FAILED, self._blame_rank_exits(codes, statuses))
        return LaunchResult(EXIT_RUN_FAILED, self._blame_statuses(codes, statuses))

    def _blame_rank_exits(self, codes: list[int | None], statuses: list[dict]) -> str:
        failed = [r for r, code in enumerate(codes) if code not in (None, EXIT_OK, EXIT_WRONG_DATA)]
        killed = [r for r in failed if codes[r] < 0]
        if killed:
            rank = killed[0]
            return (
                f"{self._who(rank, statuses)} was killed by {signal_name(-codes[rank])} "
                f"during {_label(statuses[rank])}"
            )
        primary = [r for r in failed if not _is_peer_error(statuses[r].get("error"))]
        rank = (primary or failed)[0]
        reason = statuses[rank].get("error") or f"exit code {codes[rank]}"
        return f"{self._who(rank, statuses)} failed during {_label(statuses[rank])}: {reason}"

    def _blame_statuses(self, codes: list[int | None], statuses: list[dict]) -> str:
        """Who ended a job whose ranks' exit codes only its launcher saw."""
        failed = [s for s in statuses if s.get("state") == "failed"]
        primary = [s for s in failed if not _is_peer_error(s.get("error"))]
        if primary:
            return self._failed_line(primary[0], statuses)
        # A rank that vanished mid-step without a word was killed or crashed; the launcher
        # killed the rest after it: the one it saw fail first, else whose heartbeat stopped first.
        vanished = sorted(
            (s for s in statuses if s.get("state") in ("starting", "running") and not is_alive(s)),
            key=lambda s: s["heartbeat"],
        )
        if vanished:
            first = {getattr(h, "first_failed_rank", lambda: None)() for h in self.handles}
            named = next((s for s in vanished if s["rank"] in first), None)
            status, by = named or vanished[0], "the launcher's report" if named else "heartbeat"
            how = f"the first of {len(vanished)} gone, by {by}; " * (len(vanished) > 1)
            return (
                f"{self._who(status['rank'], statuses)} died during {_label(status)} "
                f"(killed or crashed; {how}see logs/rank-{status['rank']:05d}.log)"
            )
        if failed:
            return self._failed_line(failed[0], statuses)
        code = next((c for c in codes if c not in (None, EXIT_OK)), None)
        ended = "no exit code" if code is None else f"exit code {code}"
        ended = signal_name(-code) if code is not None and code < 0 else ended
        return (
            f"{self.handles[0].label} ended with {ended} before any rank "
            f"reported (see {Path(self.job.run_dir) / 'logs'})"
        )

    def _failed_line(self, status: dict, statuses: list[dict]) -> str:
        return (
            f"{self._who(status['rank'], statuses)} failed during {_label(status)}: "
            f"{status.get('error')}"
        )

    def _who(self, rank: int, statuses: list[dict] | list[dict | None]) -> str:
        status = (statuses[rank] if rank < len(statuses) else None) or {}
        host = status.get("host") or socket.gethostname()
        pid = status.get("pid")
        if pid is None and self.per_rank:
            pid = getattr(self.handles[rank], "pid", None)
        return f"rank {rank} (pid {pid}) on {host}"

    def kill_leftover_ranks(self) -> None:
        """Ranks on this host that outlived their launcher (a stopped rank ignores torchrun's
        SIGTERM; its launcher may be gone before it wakes) are killed, never left behind."""
        for status in self._statuses():
            if status.get("state") not in ("starting", "running") or not is_alive(status):
                continue
            if status.get("host") != socket.gethostname() or not _is_collbench(status["pid"]):
                continue
            for sig in (signal.SIGKILL, signal.SIGCONT):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(status["pid"], sig)

    def _hang(self) -> str | None:
        now = time.time()
        since = [h.running_since() for h in self.handles]
        if any(s is None for s in since):
            return None  # still queued: the clock starts when the job runs
        started = max(s for s in since if s is not None)
        statuses = [read_status(self.status_dir, r) for r in range(self.job.nproc)]
        seen = [s for s in statuses if s is not None]
        progressed = any(s["step"] >= 0 for s in seen)
        if now - started > self.timeout_s and not progressed:
            missing = [r for r, s in enumerate(statuses) if s is None]
            if missing and (self.per_rank or not seen):
                return (
                    f"rank {missing[0]} did not start within {self.timeout_s:g} s "
                    f"(see {Path(self.job.run_dir) / 'logs'})"
                )
        for status in seen:
            silent = now - status["heartbeat"]
            if status["state"] in ("starting", "running") and silent > self.timeout_s:
                return self._silent(status, statuses, silent)
        active = [s for s in seen if s["state"] in ("starting", "running")]
        if not active or now - min(s["step_started"] for s in active) <= self.timeout_s:
            return None
        stale = [s for s in active if now - s["heartbeat"] > STALE_HEARTBEAT_S]
        if stale and len(stale) < len(active):
            # Stopped, not slow: its heartbeat thread is silent while the others' beat on.
            # Say so whichever of the two clocks ran out first, and whether or not the
            # others have moved past its step (a stopped rank stalls a round for everyone).
            worst = min(stale, key=lambda s: s["heartbeat"])
            return self._silent(worst, statuses, now - worst["heartbeat"])
        slowest = min(s["step"] for s in active)
        laggards = [s for s in active if s["step"] == slowest]
        stuck = laggards[0]
        if len(laggards) < len(active):
            return (
                f"{self._who(stuck['rank'], statuses)} made no progress "
                f"for {self.timeout_s:g} s during {_label(stuck)} while other ranks moved on"
            )
        return (
            f"no rank finished {_label(stuck)} within {self.timeout_s:g} s "
            f"(all {len(active)} ranks waiting in it; raise --timeout for huge sizes)"
        )

    def _silent(self, status: dict, statuses: list[dict | None], silent: float) -> str:
        return (
            f"{self._who(status['rank'], statuses)} stopped "
            f"responding: no heartbeat for {silent:.0f} s during {_label(status)} "
            "(stopped or wedged)"
        )


def pause(handles: list[Handle], seconds: float) -> None:
    """Wait `seconds`, or less: until a handle with a wake-up descriptor (a forked rank's
    forker, launchers/forked.py) has news, so a rank's end is seen when it happens."""
    wakeups = (getattr(handle, "wakeup_fd", lambda: None)() for handle in handles)
    fds = sorted({fd for fd in wakeups if fd is not None})
    if fds:
        select.select(fds, [], [], seconds)
    else:
        time.sleep(seconds)


class ProcessHandle:
    """A process this launcher started in its own session (so Ctrl-C reaches only us)."""

    TERMINATE_GRACE_S = 3.0

    def __init__(self, proc: subprocess.Popen, label: str, log_path: Path) -> None:
        self.proc, self.pid, self.label, self.log_path = proc, proc.pid, label, log_path
        self._started = time.time()
        self._deadline: float | None = None

    @classmethod
    def spawn(cls, command: Any, log_path: Path, label: str) -> ProcessHandle:
        """Start a RankCommand in its own session, output appended to log_path; `label` may
        use {pid}."""
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                command.argv,
                env={**os.environ, **command.env},
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        return cls(proc, label.format(pid=proc.pid), log_path)

    def poll(self) -> int | None:
        return self.proc.poll()

    def running_since(self) -> float | None:
        return self._started

    def first_failed_rank(self) -> int | None:
        """The rank its output says failed first (FIRST_FAILED), None where it names none."""
        with contextlib.suppress(OSError), open(self.log_path, "rb") as log:
            log.seek(max(0, log.seek(0, os.SEEK_END) - (1 << 16)))  # its last 64 KiB
            found = FIRST_FAILED.search(log.read().decode(errors="replace"))
            return int(found[1]) if found else None
        return None

    def terminate(self) -> None:
        """SIGTERM its process group, and SIGCONT: a stopped process must run to see it."""
        self._deadline = time.time() + self.TERMINATE_GRACE_S
        signal_group(self.pid, signal.SIGTERM)
        signal_group(self.pid, signal.SIGCONT)

    def stop(self) -> None:
        """SIGKILL the group if it outlives the grace period after terminate()."""
        if self._deadline is None:
            self.terminate()
        try:
            self.proc.wait(timeout=max(0.0, (self._deadline or 0.0) - time.time()))
        except subprocess.TimeoutExpired:
            signal_group(self.pid, signal.SIGKILL)
            self.proc.wait()
        signal_group(self.pid, signal.SIGKILL)  # whatever it started and left behind


def signal_group(pid: int, sig: signal.Signals) -> None:
    """Signal a process group (a session this launcher started); gone already is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _is_collbench(pid: int) -> bool:
    """Is pid still a collbench rank (and not a new process that got the same number)?"""
    try:
        return b"collbench" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _label(status: dict) -> str:
    return status.get("label") or "start-up"


def _is_peer_error(error: str | None) -> bool:
    return bool(error) and any(marker in error for marker in _PEER_ERRORS)
