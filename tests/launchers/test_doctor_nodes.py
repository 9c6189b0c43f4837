"""`collbench doctor --launcher slurm --per-node` on the test Slurm: a job array of
single-node doctors, gathered into one table; an element whose rank is killed is named with
its error while the others are still judged."""

import json
import os
import signal
import time

import pytest

from tests.helpers import collbench_process as collbench
from tests.helpers import start
from tests.launchers.slurm_cluster import requeue_now

pytestmark = pytest.mark.slow  # a real Slurm cluster and its jobs

DOCTOR = ["doctor", "--launcher", "slurm", "--per-node", "--ntasks-per-node", "2"]
DOCTOR += ["--time", "5", "--size", "64K", "--iters", "20", "--warmup", "2"]


def test_per_node_names_a_crashed_node_and_judges_the_rest(tmp_path, slurm_cluster):
    out = tmp_path / "doctor"
    process = start(*DOCTOR, "-N", "2", "--repeats", "40", "--out", str(out), env=slurm_cluster.env)
    element = out / "nodes" / "1"
    deadline = time.time() + 240
    while not _measuring(element) and time.time() < deadline and process.poll() is None:
        time.sleep(0.2)
    status = json.loads((element / "ranks" / "rank-00001.json").read_text())
    os.kill(status["pid"], signal.SIGKILL)  # element 1's second rank crashes mid-round
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 5, stderr
    record = json.loads((out / "nodes.json").read_text())
    first, second = record["nodes"]
    assert first["verdict"] in ("healthy", "flagged", "unjudged") and first["host"] != "?"
    if first["verdict"] != "flagged":  # its GPU-pair stage ran (2 ranks); a gemm needs a GPU
        assert first["reason"] == "gemm skipped: no GPU: the burn-in loads GPUs"
    assert second["verdict"] == "failed" and second["state"] == "FAILED"
    assert second["host"] == first["host"]  # the test cluster has one node
    assert "died during doctor" in second["reason"] and "row(s) kept" in second["reason"]
    lines = stdout.splitlines()
    passed = int(first["verdict"] == "healthy")
    assert lines[0] == f"# Per-node checks: {passed} of 2 nodes passed"
    assert "# Multi-node rounds: not run (fewer than 2 nodes passed)" in lines


def _measuring(element):
    rows = element / "rows.jsonl"
    return rows.exists() and rows.stat().st_size > 0


def test_per_node_needs_slurm(tmp_path):
    done = collbench("doctor", "--per-node", "--out", str(tmp_path / "d"))
    assert done.returncode == 2 and "--per-node" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_requeued_doctor_keeps_the_rounds_it_wrote_and_measures_the_rest(tmp_path, slurm_cluster):
    out = tmp_path / "doctor"
    argv = ["doctor", "--launcher", "slurm", "--ntasks-per-node", "2", "--time", "5"]
    argv += ["--size", "64K", "--iters", "20", "--repeats", "60", "--out", str(out)]
    process = start(*argv, env=slurm_cluster.env)
    deadline = time.time() + 120
    while not _measuring(out) and time.time() < deadline and process.poll() is None:
        time.sleep(0.2)
    job_id = json.loads((out / "slurm.json").read_text())["job_id"]
    env = slurm_cluster.client_env()
    requeue_now(job_id, env)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode in (0, 5, 6), stderr
    earlier = (out / "rows-attempt-0.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()]
    keys = [(r["stage"], r["group"], r["round_index"], r["repeat"]) for r in rows]
    assert earlier and len(keys) == len(set(keys)) and {r["repeat"] for r in rows} == set(range(60))
    attempts = json.loads((out / "meta.json").read_text())["attempts"]
    assert [a["attempt"] for a in attempts] == [0, 1]
    kept = attempts[1]["rows_kept"]  # every whole row: not measured again
    assert 0 < kept >= len(earlier) - 1  # (one row a round: the last may be cut short)
    stamps = [json.loads(line)["timestamp_utc"] for line in earlier[:kept]]
    assert [row["timestamp_utc"] for row in rows[:kept]] == stamps
