"""Shared helpers: run `collbench` (in this process, or as a real process) and read its results.

`collbench(...)` is the default: the same `main()` the console script runs, in the test process,
so a case costs no interpreter start. `collbench_process(...)` and `start(...)` start the real
`python -m collbench`; use them only where a test needs a process: rank processes run in it,
it is signalled or killed, it leaves through `os._exit`, its imports or start-up time are
measured, or interpreter options (PYTHONWARNINGS, ...) must apply.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import pytest

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
# Every skip for missing shared data starts with this; tests/conftest.py counts them in the summary.
SHARED_DATA_ABSENT = "shared/data absent"


def require_shared_data(path: Path) -> Path:
    """`path` (under SHARED_DATA) when it exists; otherwise skip the test, saying what is missing.

    The real logs live beside the checkout (../shared/data), not in it, so a fresh clone skips
    these tests; the skip is listed by `-ra` and counted at the end of every run.
    """
    __tracebackhide__ = True  # `-ra` then names the test that skipped, not this line
    if not path.exists():
        pytest.skip(f"{SHARED_DATA_ABSENT}: {path} is missing (expected beside the checkout)")
    return path


# Read once, at interpreter start: setting them for one in-process call would silently do nothing.
_INTERPRETER_ONLY = (
    "PYTHONWARNINGS",
    "PYTHONPATH",
    "PYTHONHASHSEED",
    "PYTHONSTARTUP",
    "PYTHONDEVMODE",
)


class InProcessExit(AssertionError):
    """`collbench` left through os._exit (a rank does): that needs collbench_process."""


def collbench(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`collbench ARGS` run to completion in this process, as a CompletedProcess.

    What a fresh process would have is given to each call and taken back after it: the
    environment (plus `env`), sys.argv, the working directory, the signal handlers, the
    warning filters (Python's defaults, printed to stderr) and file descriptors 1 and 2
    (so the output of child processes that inherit them is captured too). An uncaught
    exception is a traceback on stderr and exit code 1, as the interpreter would make it.
    COLLBENCH_TESTS_IN_PROCESS=0 makes every call a real process, to tell the two apart.
    """
    if os.environ.get("COLLBENCH_TESTS_IN_PROCESS") == "0":
        return collbench_process(*args, env=env)
    from collbench.cli import main

    refused = sorted(set(env or ()) & set(_INTERPRETER_ONLY))
    if refused:
        raise ValueError(
            f"{', '.join(refused)} only act at interpreter start: use collbench_process"
        )
    with _fresh_process_state(args, env) as (out, err):
        try:
            main(list(args))
            code: int = 0
        except SystemExit as done:
            code = _exit_code(done.code)
        except InProcessExit:
            raise
        except BaseException:  # noqa: BLE001 - the interpreter's top level, as a test sees it
            traceback.print_exc()
            code = 1
    return subprocess.CompletedProcess(["collbench", *args], code, out.text, err.text)


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # sys.exit("message") prints it and exits 1
    return 1


class _Captured:
    """One of the call's output streams: a temporary file under its fd; `text` once done."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.text = ""
        self._file = tempfile.TemporaryFile()
        self._saved_fd = os.dup(fd)
        os.dup2(self._file.fileno(), fd)
        self.stream: TextIO = open(  # noqa: SIM115 - closed in restore()
            fd, "w", encoding="utf-8", errors="backslashreplace", buffering=1, closefd=False
        )

    def restore(self) -> None:
        self.stream.close()
        os.dup2(self._saved_fd, self.fd)
        os.close(self._saved_fd)
        self._file.seek(0)
        self.text = self._file.read().decode("utf-8", errors="replace")
        self._file.close()


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


@contextlib.contextmanager
def _fresh_process_state(
    args: tuple[str, ...], env: dict[str, str] | None
) -> Iterator[tuple[_Captured, _Captured]]:
    saved_environ = dict(os.environ)
    saved_argv, saved_cwd = sys.argv, os.getcwd()
    saved_streams = sys.stdout, sys.stderr
    saved_signals = {number: signal.getsignal(number) for number in _SIGNALS}
    saved_exit = os._exit
    sys.stdout.flush()
    sys.stderr.flush()
    out, err = _Captured(1), _Captured(2)
    try:
        os.environ.update(env or {})
        sys.argv = ["collbench", *args]
        sys.stdout, sys.stderr = out.stream, err.stream
        os._exit = _refuse_os_exit
        with warnings.catch_warnings():
            warnings.resetwarnings()  # a fresh interpreter's filters, not pytest's
            for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning):
                warnings.simplefilter("ignore", category)
            warnings.simplefilter("ignore", ResourceWarning)
            warnings.showwarning = _show_warning
            yield out, err
    finally:
        os._exit = saved_exit
        sys.stdout, sys.stderr = saved_streams
        out.restore()
        err.restore()
        for number, handler in saved_signals.items():
            if handler is not None:
                signal.signal(number, handler)
        os.chdir(saved_cwd)
        sys.argv = saved_argv
        os.environ.clear()
        os.environ.update(saved_environ)


_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD, signal.SIGUSR1)


def _refuse_os_exit(code: int) -> None:
    raise InProcessExit(f"collbench called os._exit({code}) (a rank exit): use collbench_process")


def collbench_process(
    *args: str, env: dict[str, str] | None = None, timeout: float = 180
) -> subprocess.CompletedProcess:
    """Run the real `python -m collbench ARGS` to completion, capturing its output."""
    return subprocess.run(
        [sys.executable, "-m", "collbench", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def start(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start `python -m collbench ARGS` in the background."""
    return subprocess.Popen(
        [sys.executable, "-m", "collbench", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def rows_of(run_dir: Path) -> list[dict[str, Any]]:
    path = Path(run_dir) / "rows.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def meta_of(run_dir: Path) -> dict[str, Any]:
    return json.loads((Path(run_dir) / "meta.json").read_text())


def wait_for_rows(run_dir: Path, count: int, timeout: float = 60) -> None:
    """Block until the run has at least `count` rows on disk."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if len(rows_of(run_dir)) >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"{run_dir} did not reach {count} rows in {timeout} s")


def error_naming_rank(process: subprocess.Popen, rank: int, pid: int, timeout: float = 90) -> str:
    """The last stderr line of a run that ended with exit 1 naming rank `rank` (pid `pid`)."""
    _, stderr = process.communicate(timeout=timeout)
    assert process.returncode == 1, stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith(f"collbench: error: rank {rank} (pid {pid}) on "), stderr
    return last


def rank_pid(run_dir: Path, rank: int) -> int:
    status = json.loads((Path(run_dir) / "ranks" / f"rank-{rank:05d}.json").read_text())
    return status["pid"]


def assert_asked_for_is_recorded(
    out: Path, world_size: int, knob=("NCCL_ALGO", "Ring"), topology="dgx-h100"
) -> None:
    """A completed run whose meta.json and every row carry the knob and the topology it was
    given (printed commands and scripts measure what was asked for: issue 25)."""
    name, value = knob
    meta = meta_of(out)
    assert (meta["state"], meta["world_size"]) == ("completed", world_size)
    assert (meta["topology"], meta["knobs"].get(name)) == (topology, value)
    assert meta["spec"]["knobs"] == {name: value}
    rows = rows_of(out)
    assert rows and all(row["n_wrong"] == 0 for row in rows)
    assert {row["topology"] for row in rows} == {topology}
    assert {row["knobs"]["env"].get(name) for row in rows} == {value}
