"""torchrun and mpirun for real: started by collbench, or starting collbench themselves."""

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from tests.helpers import collbench_process as collbench
from tests.helpers import error_naming_rank, meta_of, rank_pid, rows_of, start, wait_for_rows

pytestmark = pytest.mark.slow  # real torchrun and mpirun jobs

SMALL = ["-c", "all_reduce,all_gather", "-b", "1K", "-e", "16K", "-n", "5", "-w", "1"]
SMALL += ["--repeats", "1"]  # launcher mechanics: one pass
LONG = ["-c", "all_reduce,all_gather", "-b", "1K", "-e", "4M", "-n", "40", "-w", "2"]
LONG += ["--repeats", "1"]  # launcher mechanics: one pass


def _same_measurements(rows, reference):
    key = [
        (r["collective"], r["size_bytes"], r["placement"], r["count"], r["world_size"])
        for r in rows
    ]
    assert key == [
        (r["collective"], r["size_bytes"], r["placement"], r["count"], r["world_size"])
        for r in reference
    ]
    assert all(row["n_wrong"] == 0 for row in rows)


@pytest.fixture(scope="module")
def local_reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("ref") / "run"
    done = collbench("sweep", *SMALL, "--out", str(out), "--quiet")
    assert done.returncode == 0, done.stderr
    return rows_of(out)


def test_launcher_torchrun(tmp_path, local_reference):
    out = tmp_path / "run"
    done = collbench(
        "sweep", "--launcher", "torchrun", "--nproc-per-node", "2", *SMALL, "--out", str(out)
    )
    assert done.returncode == 0, done.stderr
    assert "# Collective: all_gather" in done.stdout and f"# Results: {out}" in done.stdout
    _same_measurements(rows_of(out), local_reference)
    meta = meta_of(out)
    assert meta["launcher"] == "torchrun" and meta["state"] == "completed"
    assert meta["command_line"][:4] == ["collbench", "sweep", "--launcher", "torchrun"]
    assert sorted(p.name for p in (out / "logs").iterdir()) == [
        "rank-00000.log",
        "rank-00001.log",
        "torchrun-node-0.log",
    ]


def test_started_by_torchrun_directly(tmp_path, local_reference):
    out = tmp_path / "run"
    torchrun = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        "-m",
        "collbench",
        "sweep",
        *SMALL,
        "--out",
        str(out),
    ]
    done = subprocess.run(torchrun, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("# Results:") == 1  # rank 0 alone prints the table
    _same_measurements(rows_of(out), local_reference)
    assert meta_of(out)["launcher"] == "none"


@pytest.mark.usefixtures("mpirun")
def test_launcher_mpi(tmp_path, local_reference):
    out = tmp_path / "run"
    done = collbench("sweep", "--launcher", "mpi", "--nproc", "2", *SMALL, "--out", str(out))
    assert done.returncode == 0, done.stderr
    _same_measurements(rows_of(out), local_reference)
    meta = meta_of(out)
    assert meta["launcher"] == "mpi" and meta["rank_env"] == "mpi"
    assert meta["rendezvous"] == meta["rendezvous"].split(" ")[
        0
    ] + " (broadcast by rank 0 through MPI)" and meta["rendezvous"].startswith("127.0.0.1:")
    assert "mpirun.log" in {p.name for p in (out / "logs").iterdir()}


def test_started_by_mpirun_directly(tmp_path, mpirun, local_reference):
    out = tmp_path / "run"
    command = [
        mpirun,
        "-np",
        "2",
        "--allow-run-as-root",
        "--oversubscribe",
        sys.executable,
        "-m",
        "collbench",
        "sweep",
        *SMALL,
        "--out",
        str(out),
    ]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=180,
        env={
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("MASTER_", "RANK", "WORLD_SIZE"))
        },
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("# Results:") == 1
    _same_measurements(rows_of(out), local_reference)


def _two_measuring_ranks(out, launcher):
    """A long two-rank sweep under `launcher`, once it has written three rows."""
    if launcher == "mpi" and (
        shutil.which("mpirun") is None or __import__("importlib").util.find_spec("mpi4py") is None
    ):
        pytest.skip("mpirun or mpi4py missing (run .ci/install-schedulers)")
    size = ["--nproc-per-node", "2"] if launcher == "torchrun" else ["--nproc", "2"]
    process = start(
        "sweep", "--launcher", launcher, *size, *LONG, "--out", str(out), "--timeout", "30"
    )
    wait_for_rows(out, 3)
    return process


@pytest.mark.parametrize("launcher", ["torchrun", "mpi"])
def test_killed_rank_is_named_and_rows_kept(tmp_path, launcher):
    out = tmp_path / "run"
    process = _two_measuring_ranks(out, launcher)
    pid = rank_pid(out, 1)
    os.kill(pid, signal.SIGKILL)
    killed_at = time.time()
    last = error_naming_rank(process, 1, pid)
    assert time.time() - killed_at < 30
    assert "died during" in last and "finished row(s) kept" in last
    rows = rows_of(out)
    assert len(rows) >= 3 and all(row["n_wrong"] == 0 for row in rows)
    assert meta_of(out)["state"] == "failed"


@pytest.mark.parametrize("launcher", ["torchrun", "mpi"])
def test_the_rank_its_launcher_saw_fail_first_is_named(tmp_path, launcher):
    """Rank 0 frozen (its heartbeat stops), rank 1 killed 1.5 s later, then rank 0: both
    vanished mid-step without a word and rank 0 went silent first, but torchrun and mpirun
    saw rank 1 fail first (rank 0 was there, frozen): rank 1 is the one named."""
    out = tmp_path / "run"
    process = _two_measuring_ranks(out, launcher)
    first, second = rank_pid(out, 0), rank_pid(out, 1)
    os.kill(first, signal.SIGSTOP)
    time.sleep(1.5)
    os.kill(second, signal.SIGKILL)
    time.sleep(1.0)  # the launcher sees rank 1 gone; rank 0 cannot answer its SIGTERM
    os.kill(first, signal.SIGKILL)
    last = error_naming_rank(process, 1, second)
    assert "died during" in last and "the first of 2 gone, by the launcher's report" in last


def test_hung_rank_under_torchrun_is_named_and_nothing_is_left_behind(tmp_path):
    out = tmp_path / "run"
    process = start(
        "sweep",
        "--launcher",
        "torchrun",
        "--nproc-per-node",
        "2",
        *LONG,
        "--out",
        str(out),
        "--timeout",
        "6",
    )
    wait_for_rows(out, 3)
    pids = [rank_pid(out, rank) for rank in (0, 1)]
    os.kill(pids[1], signal.SIGSTOP)
    stopped_at = time.time()
    _, stderr = process.communicate(timeout=90)
    assert time.time() - stopped_at < 6 + 15
    assert process.returncode == 1, stderr
    last = stderr.strip().splitlines()[-1]
    assert f"rank 1 (pid {pids[1]}) on " in last and "stopped responding" in last, stderr
    assert "finished row(s) kept" in last
    time.sleep(1)
    for pid in pids:  # both ranks are gone, the stopped one included
        assert (
            not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z"
        )
