"""A Slurm job that can never start, against the real one-node cluster: the run directory it
leaves is marked `cancelled` with Slurm's reason, and `status` and `report` say so."""

import json
import re
import subprocess
import time

import pytest

from collbench.launchers.slurm_state import HOPELESS
from tests.helpers import collbench_process as collbench
from tests.helpers import start

pytestmark = pytest.mark.slow  # a real Slurm cluster and its jobs

SMALL = ["-c", "all_reduce", "-b", "1K", "-e", "4K", "-n", "2", "-w", "1", "--repeats", "1"]
# five nodes on a one-node cluster: Slurm accepts the job, and it pends for ever
TOO_MANY_NODES = ["--launcher", "slurm", "--nodes", "5", *SMALL]


def _pending_reason(stderr: str) -> str:
    """The reason Slurm gave while the job pended, as the watching collbench printed it."""
    found = re.findall(r"Slurm job \d+: PENDING \((\w+)\)", stderr)
    assert found, stderr
    return found[-1]


def test_a_never_startable_job_leaves_a_cancelled_run_with_slurms_reason(tmp_path, slurm_cluster):
    out = tmp_path / "run"
    done = collbench("sweep", *TOO_MANY_NODES, "--out", str(out), env=slurm_cluster.env)
    assert done.returncode == 2, done.stderr
    reason = _pending_reason(done.stderr)
    assert reason in HOPELESS  # PartitionConfig on Slurm 22.05; PartitionNodeLimit elsewhere
    meta = json.loads((out / "meta.json").read_text())
    assert meta["state"] == "cancelled"
    assert meta["scheduler"]["reason"] == reason and meta["scheduler"]["state"] == "CANCELLED"
    assert f"can never start: {reason} ({HOPELESS[reason]})" in meta["error"]
    assert json.loads((out / "slurm.json").read_text())["reason"] == reason
    assert not (out / "rows.jsonl").exists()

    status = collbench("status", str(out), env=slurm_cluster.env)
    assert status.returncode == 0, status.stderr
    lines = status.stdout.splitlines()
    assert re.fullmatch(rf"Slurm job \d+: CANCELLED \({reason}\), exit code \S+", lines[1])
    assert lines[2].startswith("rows: 0 of 3; state: cancelled; error: Slurm job ")
    assert f"can never start: {reason}" in lines[2]

    # once scontrol has forgotten the job (MinJobAge after its end; here a job id it never
    # knew), what the watcher saw, in slurm.json, tells
    record = json.loads((out / "slurm.json").read_text())
    (out / "slurm.json").write_text(json.dumps({**record, "job_id": "987654"}))
    forgotten = collbench("status", str(out), env=slurm_cluster.env)
    assert re.fullmatch(
        rf"Slurm job \d+: CANCELLED \({reason}\), as last seen", forgotten.stdout.splitlines()[1]
    )

    report = collbench("report", str(out), "--out", str(tmp_path / "r.html"), env=slurm_cluster.env)
    assert report.returncode == 2 and report.stderr.count("\n") == 1, report.stderr
    assert "holds no result rows (the run ended cancelled before measuring any: " in report.stderr
    assert f"can never start: {reason} ({HOPELESS[reason]})" in report.stderr
    assert not (tmp_path / "r.html").exists()


def test_status_names_a_hopeless_pending_job_and_wait_marks_it(tmp_path, slurm_cluster):
    out = tmp_path / "run"
    done = collbench(
        "sweep", *TOO_MANY_NODES, "--no-wait", "--out", str(out), env=slurm_cluster.env
    )
    assert done.returncode == 0, done.stderr
    deadline = time.time() + 30
    while time.time() < deadline:  # until Slurm has judged the job (a scheduler pass)
        slurm_line = collbench("status", str(out), env=slurm_cluster.env).stdout.splitlines()[1]
        if "can never start" in slurm_line:
            break
        time.sleep(0.5)
    reason = re.search(r"PENDING \((\w+)\)", slurm_line)
    assert reason and reason[1] in HOPELESS, slurm_line
    assert slurm_line.endswith(
        f"; it can never start as asked ({HOPELESS[reason[1]]}): `collbench wait {out}` "
        "cancels it and marks the run cancelled, or scancel " + slurm_line.split()[2][:-1]
    )
    assert "exit code" not in slurm_line  # a pending job's 0:0 says nothing

    waited = collbench("wait", str(out), env=slurm_cluster.env)
    assert waited.returncode == 2, waited.stderr
    assert json.loads((out / "meta.json").read_text())["state"] == "cancelled"
    status = collbench("status", str(out), env=slurm_cluster.env)
    assert "state: cancelled" in status.stdout.splitlines()[-1]


def _job_state(job_id: str, env: dict) -> str:
    shown = subprocess.run(
        ["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True, env=env
    )
    found = re.search(r"JobState=(\S+)", shown.stdout)
    return found[1] if found else ""


def test_a_job_scancelled_while_it_pends_leaves_a_cancelled_run(tmp_path, slurm_cluster):
    env = slurm_cluster.client_env()
    blocker = (
        subprocess.run(  # every CPU of the node, so the sweep's job pends (Resources)
            ["sbatch", "--parsable", "-n", "4", "--wrap", "sleep 300", "-o", "/dev/null"],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        .stdout.split(";")[0]
        .strip()
    )
    out = tmp_path / "run"
    try:
        deadline = time.time() + 30
        while _job_state(blocker, env) != "RUNNING" and time.time() < deadline:
            time.sleep(0.3)
        process = start(
            "sweep", "--launcher", "slurm", *SMALL, "--out", str(out), env=slurm_cluster.env
        )
        while not (out / "slurm.json").exists() and time.time() < deadline + 30:
            time.sleep(0.3)
        job_id = json.loads((out / "slurm.json").read_text())["job_id"]
        assert _job_state(job_id, env) == "PENDING"
        subprocess.run(["scancel", job_id], env=env, check=True)
        _, stderr = process.communicate(timeout=60)
    finally:
        subprocess.run(["scancel", blocker], env=env, capture_output=True)
    assert process.returncode == 1, stderr
    assert f"Slurm job {job_id} ended CANCELLED" in stderr.strip().splitlines()[-1]
    meta = json.loads((out / "meta.json").read_text())
    assert meta["state"] == "cancelled" and meta["scheduler"]["state"] == "CANCELLED"
    assert meta["scheduler"]["job_id"] == job_id
    status = collbench("status", str(out), env=slurm_cluster.env)
    assert status.stdout.splitlines()[-1].startswith("rows: 0 of 3; state: cancelled; error: ")
