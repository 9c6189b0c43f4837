"""Ranks that resolve differently stop in seconds with one line naming what differs.

Real `collbench sweep --launcher none` ranks (gloo) started by hand with the torch rank
environment. The test hook COLLBENCH_TEST_RESOLVE_BACKEND=1:nccl makes rank 1 resolve
--backend auto as a GPU node would while rank 0 resolves gloo: the bring-up case of a node
whose GPUs are unusable. Without the agreement both would wait in init_process_group
until --timeout (here 120 s).
"""

import os
import subprocess
import sys
import time

import pytest

from collbench.bench.distributed import RESOLVE_BACKEND_VAR
from collbench.launchers.local import free_port
from tests.helpers import rows_of


def _start(out, rank, nproc, port, extra_env, local_rank=True):
    env = {
        **os.environ,
        "RANK": str(rank),
        "WORLD_SIZE": str(nproc),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        **extra_env,
    }
    env.pop("LOCAL_RANK", None)
    if local_rank:
        env["LOCAL_RANK"] = str(rank)
    argv = [sys.executable, "-m", "collbench", "sweep", "--launcher", "none"]
    argv += ["-c", "all_reduce", "-b", "1K", "-e", "1K", "-n", "2", "--repeats", "1"]
    argv += ["--timeout", "120", "--out", str(out)]
    return subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


@pytest.mark.slow
def test_a_rank_that_resolves_another_backend_stops_every_rank_fast(tmp_path):
    port = free_port()
    started = time.monotonic()
    procs = [_start(tmp_path / "run", r, 2, port, {RESOLVE_BACKEND_VAR: "1:nccl"}) for r in (0, 1)]
    outputs = [proc.communicate(timeout=100) for proc in procs]
    elapsed = time.monotonic() - started
    assert [proc.returncode for proc in procs] == [1, 1], outputs
    assert elapsed < 60, f"took {elapsed:.0f} s: the ranks waited instead of agreeing"
    for rank, (_, err) in enumerate(outputs):
        line = err.strip().splitlines()[-1]
        assert line.startswith(f"collbench: error: rank {rank}: the ranks disagree"), err
        assert "backend: gloo on " in line and "(rank 0), nccl on " in line, line
        assert "(rank 1)" in line and "Traceback" not in err


@pytest.mark.slow
def test_ranks_without_a_local_rank_variable_derive_it_and_run(tmp_path):
    """No LOCAL_RANK (as under some MPI launchers): the ranks group by host and run."""
    port = free_port()
    out = tmp_path / "run"
    procs = [_start(out, r, 2, port, {}, local_rank=False) for r in (0, 1)]
    outputs = [proc.communicate(timeout=120) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outputs
    rows = rows_of(out)
    assert rows and all(row["n_wrong"] == 0 for row in rows)
