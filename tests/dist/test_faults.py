"""A rank killed, a rank hung, Ctrl-C: the run ends promptly, names the rank, keeps rows."""

import os
import signal
import time

import pandas as pd
import pytest

from tests.helpers import meta_of, rank_pid, rows_of, start, wait_for_rows

pytestmark = pytest.mark.slow  # real gloo ranks, killed, hung and interrupted

# Long enough that the faults below land mid-sweep.
LONG_SWEEP = ["-c", "all_reduce,all_gather", "-b", "1K", "-e", "4M", "-n", "40", "-w", "2"]


def _finished_cleanly(out, process, stderr, code):
    assert process.returncode == code, stderr
    lines = stderr.strip().splitlines()
    assert lines[-1].startswith("collbench: error: "), stderr
    assert "Traceback" not in stderr
    rows = rows_of(out)  # every line parses: nothing half-written
    assert rows, "finished rows must be kept"
    assert all(row["n_wrong"] == 0 for row in rows)
    assert f"{len(rows)} finished row(s) kept" in lines[-1]
    assert len(pd.read_parquet(out / "rows.parquet")) == len(rows)
    return lines[-1], rows


@pytest.mark.parametrize("victim", [1, 0])
def test_killed_rank_is_named_and_rows_are_kept(tmp_path, victim):
    out = tmp_path / "run"
    process = start("sweep", *LONG_SWEEP, "--out", str(out), "--timeout", "30")
    wait_for_rows(out, 3)
    pid = rank_pid(out, victim)
    os.kill(pid, signal.SIGKILL)
    killed_at = time.time()
    _, stderr = process.communicate(timeout=60)
    assert time.time() - killed_at < 15
    message, _ = _finished_cleanly(out, process, stderr, 1)
    assert f"rank {victim} (pid {pid}) on " in message and "killed by SIGKILL" in message
    assert meta_of(out)["state"] == "failed"
    assert not _alive(out, 2)


def test_hung_rank_is_named_within_the_timeout(tmp_path):
    out = tmp_path / "run"
    process = start("sweep", *LONG_SWEEP, "--out", str(out), "--timeout", "6")
    wait_for_rows(out, 3)
    pid = rank_pid(out, 1)
    os.kill(pid, signal.SIGSTOP)
    stopped_at = time.time()
    try:
        _, stderr = process.communicate(timeout=60)
    finally:
        _continue(pid)
    assert time.time() - stopped_at < 6 + 10
    message, _ = _finished_cleanly(out, process, stderr, 1)
    assert f"rank 1 (pid {pid}) on " in message and "stopped responding" in message
    assert not _alive(out, 2)


def test_ctrl_c_stops_the_ranks_and_exits_130(tmp_path):
    out = tmp_path / "run"
    process = start("sweep", *LONG_SWEEP, "--out", str(out))
    wait_for_rows(out, 3)
    process.send_signal(signal.SIGINT)
    interrupted_at = time.time()
    _, stderr = process.communicate(timeout=60)
    assert time.time() - interrupted_at < 10
    message, _ = _finished_cleanly(out, process, stderr, 130)
    assert "interrupted" in message
    assert meta_of(out)["state"] == "interrupted"
    assert not _alive(out, 2)


def _alive(out, nproc):
    alive = []
    for rank in range(nproc):
        try:
            os.kill(rank_pid(out, rank), 0)
            alive.append(rank)
        except ProcessLookupError:
            pass
    return alive


def _continue(pid):
    try:
        os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
        pass


def test_sigterm_to_collbench_stops_the_ranks(tmp_path):
    out = tmp_path / "run"
    process = start("sweep", *LONG_SWEEP, "--out", str(out))
    wait_for_rows(out, 3)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    message, _ = _finished_cleanly(out, process, stderr, 143)
    assert "terminated (SIGTERM)" in message
    assert not _alive(out, 2)


def test_ranks_end_themselves_when_the_launcher_is_killed(tmp_path):
    out = tmp_path / "run"
    process = start("sweep", *LONG_SWEEP, "--out", str(out))
    wait_for_rows(out, 3)
    pids = [rank_pid(out, rank) for rank in range(2)]
    process.kill()
    process.communicate(timeout=30)
    deadline = time.time() + 15
    while time.time() < deadline and _alive(out, 2):
        time.sleep(0.2)
    assert not _alive(out, 2), f"orphaned ranks {pids} kept running"
    assert rows_of(out)  # what was measured before is still there
