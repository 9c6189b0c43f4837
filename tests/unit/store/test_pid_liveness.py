"""A rank is alive only if its pid names a live process that is the one it recorded: a zombie,
pid 1 written as a rank's pid, a pid now given to another process, or a pid that is no number
reads as dead, so `status` says "dead" and `finalize` finalizes (issue 29). A meta.json state
collbench never writes is said to be one, on one line.

Real processes (this one, a child left a zombie, pid 1), no mocks; the zombie and the killed
run are real children of the test."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collbench.core.spec import SweepSpec
from collbench.store.job import Job
from collbench.store.meta import RunMeta
from collbench.store.rank_status import (
    RankStatus,
    is_alive,
    live_ranks,
    pid_alive,
    process_token,
    status_path,
)
from collbench.store.rundir import write_meta
from tests.helpers import collbench

HOST = socket.gethostname()
LINUX = Path("/proc/sys/kernel/random/boot_id").exists()
needs_proc = pytest.mark.skipif(not LINUX, reason="process start tokens read /proc")


def _zombie() -> subprocess.Popen:
    """A child that has exited and is not reaped yet: `kill(pid, 0)` still succeeds."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.time() + 10
    while time.time() < deadline:
        state = Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if state == "Z":
            return child
        time.sleep(0.01)
    raise AssertionError("the child did not become a zombie")


@needs_proc
def test_this_process_has_a_token_and_is_alive_with_it():
    token = process_token(os.getpid())
    assert token and token.count(":") == 1
    assert process_token(os.getpid()) == token  # stable: the start time does not move
    assert pid_alive(os.getpid(), token)
    assert pid_alive(os.getpid())  # a status written before tokens: the process is there


@needs_proc
def test_a_zombie_is_dead_though_kill_0_answers():
    child = _zombie()
    try:
        os.kill(child.pid, 0)  # what the old check asked: it says alive
        assert process_token(child.pid) is None
        assert not pid_alive(child.pid)
        assert not is_alive({"host": HOST, "pid": child.pid})
    finally:
        child.wait()


@needs_proc
def test_a_reused_pid_is_another_process():
    token = process_token(os.getpid())
    boot, ticks = token.split(":")
    assert not pid_alive(os.getpid(), f"{boot}:{int(ticks) + 1}")  # started at another time
    assert not pid_alive(os.getpid(), f"another-boot:{ticks}")  # before a reboot


@pytest.mark.parametrize(
    "pid",
    [1, 0, -1, None, "1234", 1.5, True, [], 2**40, 4_194_305],
    ids=repr,
)
def test_pids_that_name_no_rank_are_not_alive(pid):
    assert not pid_alive(pid)
    assert not is_alive({"host": HOST, "pid": pid, "heartbeat": time.time()})


@pytest.mark.parametrize("heartbeat", [None, "now", [], True, float("nan")], ids=repr)
def test_a_remote_rank_with_a_heartbeat_that_is_no_time_is_not_alive(heartbeat):
    assert not is_alive({"host": "elsewhere", "pid": 1234, "heartbeat": heartbeat})


def test_a_remote_rank_is_judged_by_its_heartbeat():
    assert is_alive({"host": "elsewhere", "pid": 1, "heartbeat": time.time()})
    assert not is_alive({"host": "elsewhere", "pid": 1, "heartbeat": time.time() - 60})


@needs_proc
def test_a_rank_records_its_token(tmp_path):
    status = RankStatus(0, str(tmp_path))
    try:
        recorded = json.loads(status_path(tmp_path, 0).read_text())
        assert recorded["pid_token"] == process_token(os.getpid())
        assert [item["rank"] for item in live_ranks(tmp_path)] == [0]
    finally:
        status.done()


def _running_run(path: Path, ranks: list[dict]) -> Path:
    """A run left `running` (its launcher killed), its ranks' status files as given."""
    spec = SweepSpec().with_backend("gloo")
    path.mkdir()
    Job(spec, path.absolute(), "r1", "local", len(ranks), ["collbench", "sweep"]).save()
    write_meta(
        path, RunMeta.from_dict({"run_id": "r1", "state": "running", "spec": spec.to_dict()})
    )
    (path / "ranks").mkdir()
    for rank, fields in enumerate(ranks):
        status = {"rank": rank, "host": HOST, "state": "running", "heartbeat": time.time()}
        status_path(path / "ranks", rank).write_text(json.dumps({**status, **fields}))
    return path


DEAD_RANKS = {
    "pid 1": [{"pid": 1}],
    "pid 1 with a token": [{"pid": 1, "pid_token": "x:1"}],
    "a pid that is no number": [{"pid": "1; rm -rf /"}],
    "no pid": [{}],
    "a gone pid": [{"pid": 4_194_305}],
    "this process with another's token": [{"pid": os.getpid(), "pid_token": "x:1"}],
}


@needs_proc
@pytest.mark.parametrize("ranks", DEAD_RANKS.values(), ids=DEAD_RANKS)
def test_status_says_dead_and_finalize_finalizes(tmp_path, ranks):
    run = _running_run(tmp_path / "run", ranks)
    status = collbench("status", str(run))
    assert status.returncode == 0, status.stderr
    assert "state: dead (meta.json says running, but no rank is alive" in status.stdout
    done = collbench("finalize", str(run))
    assert done.returncode == 0, done.stderr
    assert json.loads((run / "meta.json").read_text())["state"] == "orphaned"


@needs_proc
def test_a_live_rank_still_counts(tmp_path):
    run = _running_run(
        tmp_path / "run", [{"pid": os.getpid(), "pid_token": process_token(os.getpid())}]
    )
    assert "state: running" in collbench("status", str(run)).stdout
    done = collbench("finalize", str(run))
    assert done.returncode == 2 and "is still running (rank 0" in done.stderr


BOGUS_STATES = {
    "a word": "banana",
    "a newline": "running\nstate: completed",
    "a number": 7,
    "a list": ["running"],
}


@pytest.mark.parametrize("state", BOGUS_STATES.values(), ids=BOGUS_STATES)
def test_status_of_a_state_collbench_never_writes_is_one_clear_line(tmp_path, state):
    run = _running_run(tmp_path / "run", [{"pid": 1}])
    meta = json.loads((run / "meta.json").read_text())
    (run / "meta.json").write_text(json.dumps({**meta, "state": state}))
    status = collbench("status", str(run))
    assert status.returncode in (0, 2), status.stderr
    text = status.stdout + status.stderr
    assert "Traceback" not in text
    if status.returncode == 0:
        (line,) = [line for line in status.stdout.splitlines() if line.startswith("rows:")]
        assert "state: unknown (meta.json holds " in line and "the file is damaged" in line
        assert len(status.stdout.splitlines()) == 2
    else:
        assert len(status.stderr.strip().splitlines()) == 1


@pytest.mark.slow  # real rank processes, killed with their launcher
@needs_proc
def test_a_killed_run_is_dead_to_status_in_a_real_process(tmp_path):
    from tests.helpers import collbench_process, start, wait_for_rows

    out = tmp_path / "run"
    process = start(
        "sweep", "-c", "all_reduce", "-b", "8", "-e", "64M", "-n", "2", "-w", "1",
        "--iters", "50", "-q", "--out", str(out),
    )  # fmt: skip
    wait_for_rows(out, 1)
    pids = [json.loads(status_path(out / "ranks", rank).read_text())["pid"] for rank in (0, 1)]
    for pid in (process.pid, *pids):
        os.kill(pid, signal.SIGKILL)
    process.communicate(timeout=30)
    deadline = time.time() + 15
    while time.time() < deadline and live_ranks(out / "ranks"):
        time.sleep(0.2)
    status = collbench_process("status", str(out))
    assert "state: dead (meta.json says running" in status.stdout, status.stdout + status.stderr
