"""What every rank runs: join the group, run its session (bench/session.py: measure each
step, rank 0 streams rows to disk; bench/doctor_rounds.py for a doctor), and end with an outcome.

The method, in full: docs/architecture.md#collbench-bench-worker-py.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path

from collbench.bench.agreement import plan_digest
from collbench.bench.distributed import init_distributed, teardown
from collbench.bench.rank_env import RunEnv
from collbench.bench.session import WRITE_LOCK, RankLog, Session
from collbench.core.doctor_spec import DOCTOR
from collbench.core.errors import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_RUN_FAILED,
    EXIT_USAGE,
    EXIT_WRONG_DATA,
    CollbenchError,
)
from collbench.core.knobs import apply_knobs
from collbench.core.watchdog import process_group_timeout_s
from collbench.store.job import Job
from collbench.store.rank_status import STATUS_DIR_VAR, RankStatus
from collbench.store.rows import utc_now
from collbench.store.rundir import META_FILE, is_disk_full, read_meta, update_meta, write_parquet
from collbench.store.sink import RowSink

# When a launcher watches the ranks, it decides about hangs first (and names the rank);
# the process group's own timeout is the backstop (with the longest queued batch on top:
# core/watchdog.py).
WATCHED_GRACE_S = 30.0


@dataclass(frozen=True)
class RankOutcome:
    code: int
    error: str | None = None


def reset_stop_signals() -> None:
    """A rank ends on its launcher's SIGTERM (and SIGHUP) and on Ctrl-C whatever it
    inherited: a signal ignored where the launcher started (nohup, a CI runner, a launcher
    that had begun stopping) stays ignored across exec, and a rank ignoring SIGTERM would go on
    measuring, and mark a stopped run completed."""
    if threading.current_thread() is not threading.main_thread():
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def run_rank(job: Job, env: RunEnv, sink: RowSink | None = None) -> RankOutcome:
    """Run the whole sweep as this rank. Never raises: the outcome carries the error."""
    # Before the library starts: it reads its knobs once (a no-op where the CLI set them).
    apply_knobs(job.spec.knobs)
    status = RankStatus.from_environ(env.rank)
    if env.rank == 0:
        status.on_orphaned = lambda message: _finish(job, "orphaned", message, last=True)
    watched = bool(os.environ.get(STATUS_DIR_VAR))
    spec = job.spec
    clean = False
    try:
        timeout_s = process_group_timeout_s(
            spec, env.world_size, WATCHED_GRACE_S if watched else 0.0
        )
        device, env = init_distributed(env, spec.backend, timeout_s, plan_digest(spec))
        log = RankLog(env.rank, watched)
        log.write(
            f"{env.world_size} rank(s), backend {spec.backend} on {device}, pid {os.getpid()}, "
            f"rendezvous {env.master_addr}:{env.master_port}; run {job.run_dir}"
        )
        if spec.command == DOCTOR:
            from collbench.bench.doctor_rounds import DoctorSession

            total_wrong = DoctorSession(job, env, device, sink).run(status, log)
        else:
            total_wrong = Session(job, env, device, sink).run(status, log)
            log.write(f"done: {len(spec.steps())} step(s), {total_wrong} wrong element(s)")
        status.done()
        clean = True
        return RankOutcome(EXIT_WRONG_DATA if total_wrong else EXIT_OK)
    except CollbenchError as error:  # a one-line error of its own (a SpecError: exit 2)
        return _failed(job, env, status, error.exit_code, str(error))
    except KeyboardInterrupt:
        return _failed(job, env, status, EXIT_INTERRUPTED, "interrupted (Ctrl-C)")
    except Exception as error:  # noqa: BLE001 - every failure becomes an outcome
        message = _describe_error(error, job, env)
        _log_traceback(job, env, watched)
        return _failed(job, env, status, EXIT_RUN_FAILED, message)
    finally:
        teardown(clean)


def _failed(job: Job, env: RunEnv, status: RankStatus, code: int, message: str) -> RankOutcome:
    if status.orphaned:  # peers left because the launcher did: that is the cause
        message = status.orphan_error
    status.fail(message, usage_error=code == EXIT_USAGE)
    RankLog(env.rank, bool(os.environ.get(STATUS_DIR_VAR))).write(f"failed: {message}")
    if env.rank == 0:
        state = "interrupted" if code == EXIT_INTERRUPTED else "failed"
        _finish(job, "orphaned" if status.orphaned else state, message)
    return RankOutcome(code, message)


def _finish(job: Job, state: str, message: str, last: bool = False) -> None:
    """Rank 0 leaves a cut-short run final: rows.parquet and the state, once it has begun.

    The main thread (a failure) and the heartbeat thread (an orphan) may both get here; the
    lock keeps one write whole. `last`: the process ends right after, so the lock is kept
    (the other thread must not start a write that the exit would cut in half)."""
    WRITE_LOCK.acquire()  # also held while rank 0 appends a row (bench/session.py)
    try:
        meta = read_meta(job.run_dir)
        if (Path(job.run_dir) / META_FILE).exists() and not (meta and meta.state == "completed"):
            write_parquet(job.run_dir)
            update_meta(job.run_dir, state=state, finished_utc=utc_now(), error=message)
    except Exception:  # noqa: BLE001, S110 - a full disk: the launching collbench retries
        pass
    finally:
        if not last:
            WRITE_LOCK.release()


def _describe_error(error: Exception, job: Job, env: RunEnv) -> str:
    """An unexpected error as the one line a person sees."""
    if is_disk_full(error):
        where = getattr(error, "filename", None) or job.run_dir
        return f"disk full: no space left on the device writing {where}"
    first = str(error).strip()
    text = f"{type(error).__name__}: {first.splitlines()[0] if first else repr(error)}"
    if "EADDRINUSE" in text or "address already in use" in text.lower():
        return (
            f"the rendezvous port {env.master_port} on {env.master_addr} is already in use "
            f"(MASTER_PORT); choose a free one ({text})"
        )
    return text


def _log_traceback(job: Job, env: RunEnv, watched: bool) -> None:
    """The traceback goes to the rank's log, never to a person's terminal: a watched rank's
    output is its log already; a rank started by hand logs to RUN/logs when RUN exists."""
    text = traceback.format_exc()
    if watched:  # a launching collbench set COLLBENCH_STATUS_DIR and sends output to logs/
        print(text, file=sys.stderr, flush=True)
        return
    log_dir = Path(job.run_dir) / "logs"
    if not Path(job.run_dir).is_dir():
        return  # nothing was written yet; the one-line error says what happened
    with contextlib.suppress(OSError):
        log_dir.mkdir(exist_ok=True)
        with open(log_dir / f"rank-{env.rank:05d}.log", "a", encoding="utf-8") as log:
            log.write(text)


def main(argv: list[str] | None = None) -> None:
    """Entry point of a rank process started by a launcher."""
    argv = sys.argv[1:] if argv is None else argv
    reset_stop_signals()
    job = Job.load(Path(argv[0]))
    outcome = run_rank(job, RunEnv.detect(choice=job.rank_env))
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: after a failure, library threads may wait on dead peers.
    os._exit(outcome.code)


if __name__ == "__main__":
    main()
