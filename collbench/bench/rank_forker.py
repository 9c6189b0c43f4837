"""One process that imports torch once and forks every rank of a local CPU (gloo) job.

The method, in full: docs/architecture.md#collbench-bench-rank-forker-py.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
from typing import Any

from collbench.bench.session import PARQUET_BY_LAUNCHER_VAR
from collbench.core.errors import EXIT_RUN_FAILED
from collbench.store.rank_status import PARENT_PID_VAR

# What every rank imports before it measures: imported here once, before the fork.
PRELOAD = (
    "torch",
    "torch.distributed",
    "collbench.bench.worker",
    "collbench.bench.session",
    "collbench.bench.runner",
    "collbench.bench.timing",
    "collbench.bench.provenance",
)


def main() -> None:
    reports = os.dup(1)
    os.dup2(2, 1)  # stray prints (an import's) go to the log, never into the launcher's pipe
    request = _read_request(0)
    for name in PRELOAD:
        __import__(name)
    import torch

    if torch.cuda.is_initialized():  # never fork an initialised GPU runtime
        raise SystemExit("collbench rank forker: CUDA is initialised; refusing to fork ranks")
    sys.stdout.flush()
    sys.stderr.flush()  # nothing buffered here is written again by each rank
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    pids = []
    forker = os.getpid()
    os.environ[PARQUET_BY_LAUNCHER_VAR] = "1"  # the launcher has pandas imported by the end
    for rank, entry in enumerate(request["ranks"]):
        pid = os.fork()
        if pid == 0:
            _become_rank(request["run_dir"], entry, forker, (reports, wake_r, wake_w))
        pids.append(pid)
        _report(reports, f"started {rank} {pid}")
    _watch(set(pids), reports, wake_r)


def _read_request(fd: int) -> dict[str, Any]:
    """The first line of stdin, read unbuffered (what follows is only watched for EOF)."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(fd, 1)
        if not chunk:
            raise SystemExit(0)  # the launcher went away before asking anything
        data += chunk
    return json.loads(data)


def _become_rank(
    run_dir: str, entry: dict[str, Any], forker: int, inherited: tuple[int, ...]
) -> None:
    """In the child: its own session, environment and log, then the rank's main. Never
    returns (worker.main ends the process, and so does anything that escapes it)."""
    try:
        os.setsid()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in inherited:
            os.close(fd)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        log = os.open(entry["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.environ.update(entry["env"])
        os.environ[PARENT_PID_VAR] = str(forker)
        from collbench.bench.worker import main as rank_main

        rank_main([run_dir])
    except BaseException:  # noqa: BLE001 - said in the log; the exit code says the rest
        import traceback

        traceback.print_exc()
        sys.stderr.flush()
    os._exit(EXIT_RUN_FAILED)


def _watch(running: set[int], reports: int, wake: int) -> None:
    """Report each rank's exit until none runs, or until the launcher closes stdin."""
    while running:
        ready, _, _ = select.select([0, wake], [], [])
        if 0 in ready and not os.read(0, 4096):
            os._exit(0)  # the launcher is gone: ranks see their parent go and end
        if wake in ready:
            os.read(wake, 4096)
        while running:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                break
            running.discard(pid)
            _report(reports, f"exited {pid} {os.waitstatus_to_exitcode(status)}")


def _report(fd: int, line: str) -> None:
    try:
        os.write(fd, (line + "\n").encode())
    except BrokenPipeError:
        os._exit(0)  # the launcher is gone


if __name__ == "__main__":
    main()
    os._exit(0)
