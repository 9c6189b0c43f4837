"""`--launcher none`: collbench as the ranks of a job launched by someone else."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from collbench.launchers.local import free_port
from tests.helpers import meta_of, rows_of

pytestmark = pytest.mark.slow  # real ranks started by hand and by torchrun


def _start_ranks(out, *sweep_args, nproc=2):
    """Start nproc `collbench sweep --launcher none` processes with the torch rank env."""
    port = free_port()
    procs = []
    for rank in range(nproc):
        env = {
            **os.environ,
            "RANK": str(rank),
            "WORLD_SIZE": str(nproc),
            "LOCAL_RANK": str(rank),
            "LOCAL_WORLD_SIZE": str(nproc),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
        }
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "collbench",
                    "sweep",
                    "--launcher",
                    "none",
                    "--repeats",
                    "1",
                    *sweep_args,
                    "--out",
                    str(out),
                ],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    return procs


def test_ranks_started_by_hand_with_torch_env(tmp_path):
    out = tmp_path / "run"
    procs = _start_ranks(out, "-c", "all_reduce,all_gather", "-b", "1K", "-e", "4K", "-n", "2")
    outputs = [proc.communicate(timeout=120) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outputs
    # both collectives' closing summaries, the last one included
    assert outputs[0][0].count("# Out of bounds values : 0 OK") == 2
    assert outputs[0][0].count("# Peak bus bandwidth") == 2
    assert outputs[1][0] == ""  # only rank 0 prints
    assert len(rows_of(out)) == 9
    assert meta_of(out)["launcher"] == "none"


@pytest.mark.skipif(shutil.which("torchrun") is None, reason="torchrun not on PATH")
def test_under_torchrun(tmp_path):
    out = tmp_path / "run"
    done = subprocess.run(
        [
            "torchrun",
            "--standalone",
            "--nproc-per-node",
            "2",
            "-m",
            "collbench",
            "sweep",
            "--launcher",
            "none",
            "-c",
            "reduce_scatter",
            "-b",
            "1K",
            "-e",
            "2K",
            "-n",
            "2",
            "--repeats",
            "1",
            "--out",
            str(out),
            "--quiet",
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = rows_of(out)
    assert len(rows) == 4 and all(row["n_wrong"] == 0 for row in rows)


def test_rank_zero_refuses_a_non_empty_out_and_every_rank_stops(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "old.txt").write_text("previous run")
    procs = _start_ranks(out)
    outputs = [proc.communicate(timeout=120) for proc in procs]
    assert [proc.returncode for proc in procs] == [2, 2]
    for _, err in outputs:
        assert "is not an empty directory" in err and "Traceback" not in err


def test_a_dead_peer_ends_rank_zero_with_rows_kept(tmp_path):
    out = tmp_path / "run"
    procs = _start_ranks(
        out, "-c", "all_reduce", "-b", "1K", "-e", "16M", "-n", "40", "--timeout", "20"
    )
    deadline = time.time() + 60
    while len(rows_of(out)) < 3 and time.time() < deadline:
        time.sleep(0.05)
    procs[1].send_signal(signal.SIGKILL)
    _, stderr = procs[0].communicate(timeout=60)
    procs[1].wait()
    assert procs[0].returncode == 1
    assert stderr.strip().splitlines()[-1].startswith("collbench: error: rank 0: ")
    meta = json.loads((out / "meta.json").read_text())
    assert meta["state"] == "failed" and meta["error"]
    assert len(pd.read_parquet(out / "rows.parquet")) == len(rows_of(out)) >= 3
