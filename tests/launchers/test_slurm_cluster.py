"""The test cluster itself: srun and sbatch run jobs on it."""

from __future__ import annotations

import subprocess
import time

import pytest

from tests.launchers.slurm_cluster import SlurmCluster

pytestmark = pytest.mark.slow  # a real Slurm cluster


def _run(cluster: SlurmCluster, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        list(args), capture_output=True, text=True, env=cluster.client_env(), timeout=60
    )


def test_srun_runs_two_tasks(slurm_cluster: SlurmCluster) -> None:
    done = _run(slurm_cluster, "srun", "-N1", "-n2", "hostname")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2 and lines[0] == lines[1], done.stdout


def test_sbatch_job_runs_to_completion(slurm_cluster: SlurmCluster, tmp_path) -> None:
    out = tmp_path / "job.out"
    submitted = _run(
        slurm_cluster,
        "sbatch",
        "--parsable",
        "-p",
        "short",
        "-n2",
        "-o",
        str(out),
        "--wrap",
        "srun hostname; echo done",
    )
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip().split(";")[0]
    deadline = time.monotonic() + 30
    state = ""
    while time.monotonic() < deadline:
        # squeue lists the job while it is pending/running; scontrol keeps it for MinJobAge
        queued = _run(slurm_cluster, "squeue", "-h", "-j", job_id, "-o", "%T")
        if queued.returncode == 0 and queued.stdout.strip():
            time.sleep(0.2)
            continue
        shown = _run(slurm_cluster, "scontrol", "show", "job", job_id)
        state = next(
            (
                word.split("=", 1)[1]
                for word in shown.stdout.split()
                if word.startswith("JobState=")
            ),
            "",
        )
        if state not in ("", "PENDING", "RUNNING", "COMPLETING", "CONFIGURING"):
            break
        time.sleep(0.2)
    assert state == "COMPLETED", (state, slurm_cluster.logs())
    lines = out.read_text().splitlines()
    assert len(lines) == 3 and lines[-1] == "done", lines
