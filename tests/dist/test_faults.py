"""A rank killed, a rank hung, Ctrl-C: the run ends promptly, names the rank, keeps rows."""

import json
import os
import signal
import subprocess
import time

import pandas as pd
import pytest

from tests.helpers import collbench_process as collbench
from tests.helpers import meta_of, rank_pid, rows_of, start, wait_for_rows

pytestmark = pytest.mark.slow  # real gloo ranks, killed, hung and interrupted

# Long enough that the faults below land mid-sweep.
LONG_SWEEP = ["-c", "all_reduce,all_gather", "-b", "1K", "-e", "4M", "-n", "40", "-w", "2"]
LONG_SWEEP += ["--repeats", "1"]  # fault mechanics: one pass


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
    # Rank 0 saw its launcher vanish and left the run final.
    _assert_final(out, "orphaned")
    assert "the launcher (pid " in meta_of(out)["error"]
    status = collbench("status", str(out))
    assert "state: orphaned" in status.stdout, status.stdout


def _assert_final(out, state):
    """meta.json's state is final, the parquet equals rows.jsonl, and no temp file is left."""
    assert meta_of(out)["state"] == state
    rows, frame = rows_of(out), pd.read_parquet(out / "rows.parquet")
    for column in ("collective", "size_bytes", "placement", "time_us", "busbw_gbps"):
        assert frame[column].tolist() == [row[column] for row in rows]
    assert not list(out.rglob("*.tmp*"))


def test_a_run_killed_with_all_its_ranks_is_dead_and_can_be_finalized(tmp_path):
    out = tmp_path / "run"
    process = start("sweep", *LONG_SWEEP, "--out", str(out))
    wait_for_rows(out, 3)
    pids = [rank_pid(out, rank) for rank in range(2)]
    for pid in (process.pid, *pids):  # all at once: nobody is left to write the state
        os.kill(pid, signal.SIGKILL)
    process.communicate(timeout=30)
    deadline = time.time() + 15
    while time.time() < deadline and _alive(out, 2):
        time.sleep(0.2)
    assert meta_of(out)["state"] == "running" and not (out / "rows.parquet").exists()
    status = collbench("status", str(out))
    assert status.returncode == 0, status.stderr
    assert (
        f"state: dead (meta.json says running, but no rank is alive; run `collbench "
        f"finalize {out}`)" in status.stdout
    )
    done = collbench("finalize", str(out))
    assert done.returncode == 0, done.stderr
    rows = rows_of(out)
    assert done.stdout.strip() == (
        f"run {out}: state orphaned; {len(rows)} row(s) kept in rows.jsonl and rows.parquet"
    )
    _assert_final(out, "orphaned")
    assert len(pd.read_parquet(out / "rows.parquet")) == len(rows)
    again = collbench("finalize", str(out))
    assert again.returncode == 2 and "is already final (state orphaned)" in again.stderr


def test_finalize_refuses_a_run_that_is_still_running(tmp_path):
    out = tmp_path / "run"
    process = start("sweep", *LONG_SWEEP, "--out", str(out))
    try:
        wait_for_rows(out, 1)
        done = collbench("finalize", str(out))
        assert done.returncode == 2 and "is still running (rank " in done.stderr, done.stderr
        assert "state: running" in collbench("status", str(out)).stdout
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=60)


def test_two_runs_on_one_out_one_is_refused(tmp_path):
    out = tmp_path / "run"
    args = ("sweep", "-c", "all_reduce", "-e", "1K", "-n", "2", "-w", "1", "--repeats", "1", "-q")
    first, second = (start(*args, "--out", str(out)) for _ in range(2))
    results = sorted(
        (process.wait(timeout=120), process.communicate()[1]) for process in (first, second)
    )
    assert [code for code, _ in results] == [0, 2], results
    assert results[1][1].strip().splitlines() == [
        f"collbench: error: --out: '{out}' is not an empty directory; choose a new one "
        "(collbench never mixes two runs)"
    ]
    rows = rows_of(out)
    assert len({row["run_id"] for row in rows}) == 1 and meta_of(out)["state"] == "completed"


@pytest.fixture
def small_disk(tmp_path):
    """A 200 KiB tmpfs, mostly filled: the sweep's rows fill the rest."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=200k", "tmpfs", str(disk)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        (disk / "filler").write_bytes(b"\0" * 150_000)
        yield disk
    finally:
        subprocess.run(["umount", str(disk)])


def test_a_full_disk_is_one_line_and_the_run_is_final(small_disk):
    out = small_disk / "run"
    done = collbench("sweep", *LONG_SWEEP, "--out", str(out))
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    rows = rows_of_complete(out)
    assert lines == [
        f"collbench: error: disk full: no space left on the device holding {out} (could not "
        f"write rows.parquet); {len(rows)} finished row(s) kept in {out / 'rows.jsonl'}"
    ], done.stderr
    assert rows and meta_of(out)["state"] == "failed"
    assert not list(small_disk.rglob("*.tmp*"))


def rows_of_complete(out):
    """The rows of rows.jsonl but a last line the full disk cut short: a last row whose
    newline alone did not fit is whole, and counted (as collbench reads it)."""
    *lines, last = (out / "rows.jsonl").read_text().split("\n")
    try:
        return [json.loads(line) for line in [*lines, last] if line]
    except json.JSONDecodeError:  # the last line, cut short
        return [json.loads(line) for line in lines]
