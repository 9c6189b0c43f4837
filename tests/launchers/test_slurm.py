"""--launcher slurm against a real one-node Slurm cluster (slurmctld + slurmd, via submitit)."""

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from submitit.core.utils import DelayedSubmission

from collbench.launchers.slurm_state import job_state, slurm_job
from tests.helpers import (
    assert_asked_for_is_recorded,
    error_naming_rank,
    meta_of,
    rank_pid,
    rows_of,
    start,
    wait_for_rows,
)
from tests.helpers import collbench_process as collbench
from tests.launchers.slurm_cluster import requeue_now

pytestmark = pytest.mark.slow  # a real Slurm cluster and its jobs

SMALL = ["-c", "all_reduce,all_gather", "-b", "1K", "-e", "16K", "-n", "5", "-w", "1"]
SMALL += ["--repeats", "1"]  # launcher mechanics: one pass
REPO = Path(__file__).resolve().parents[2]
LONG = ["-c", "all_reduce,all_gather", "-b", "1K", "-e", "4M", "-n", "40", "-w", "2"]
LONG += ["--repeats", "1"]  # launcher mechanics: one pass


def _key(rows):
    return [
        (r["collective"], r["size_bytes"], r["placement"], r["count"], r["world_size"])
        for r in rows
    ]


def _job_id(stderr):
    for line in stderr.splitlines():
        if "submitted Slurm job" in line:
            return line.split("submitted Slurm job ")[1].split(";")[0]
    raise AssertionError(f"no job id in: {stderr}")


@pytest.mark.parametrize("tasks", [2, 4])
def test_slurm_sweep_matches_a_local_sweep(tmp_path, slurm_cluster, tasks, monkeypatch):
    local, remote = tmp_path / "local", tmp_path / "slurm"
    done = collbench(
        "sweep", *SMALL, "--nproc", str(tasks), "--out", str(local), "--quiet", timeout=300
    )
    assert done.returncode == 0, done.stderr
    done = collbench(
        "sweep",
        "--launcher",
        "slurm",
        "--ntasks-per-node",
        str(tasks),
        "--partition",
        "debug",
        "--time",
        "5",
        *SMALL,
        "--out",
        str(remote),
        env=slurm_cluster.env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "# Collective: all_gather" in done.stdout
    assert "submitted Slurm job" in done.stderr and "COMPLETED" in done.stderr
    rows = rows_of(remote)
    assert _key(rows) == _key(rows_of(local))
    assert all(row["n_wrong"] == 0 and row["nodes"] == 1 for row in rows)
    meta = meta_of(remote)
    assert (meta["launcher"], meta["state"], meta["world_size"]) == ("slurm", "completed", tasks)
    assert len(list((remote / "logs").glob("rank-*.log"))) == tasks
    # submitted through submitit: each task ran the argv of the printed script's srun line
    (pickled,) = (remote / "slurm").glob("*_submitted.pkl")
    ran = list(DelayedSubmission.load(pickled).function.argv)
    printed = collbench(
        "sweep", "--launcher", "slurm", "--ntasks-per-node", str(tasks), "--partition",
        "debug", "--time", "5", *SMALL, "--out", str(remote), "--print-sbatch",
    )  # fmt: skip
    (srun,) = [line for line in printed.stdout.splitlines() if line.startswith("srun ")]
    words = shlex.split(srun.replace("${SLURM_JOB_ID}", "7"))
    words[words.index("--out") + 1] = str(remote)
    assert words[-len(ran) :] == ran and words[0] == "srun"
    assert len(list((remote / "slurm").glob("*_log.out"))) == tasks
    # followed through submitit's job object, made again from the run directory (as `wait`
    # and `status` do): Slurm's accounting, which submitit reads, knows how the job ended
    monkeypatch.setenv("SLURM_CONF", slurm_cluster.env["SLURM_CONF"])
    job = slurm_job(_job_id(done.stderr), remote / "slurm")
    assert job.state == "COMPLETED" and job_state(job)[0] == "COMPLETED"
    assert job_state(slurm_job("987654")) == ("", "", "")  # neither sacct nor scontrol knows


def test_unknown_partition_is_refused_before_submitting(tmp_path, slurm_cluster):
    done = collbench(
        "sweep",
        "--launcher",
        "slurm",
        "--partition",
        "nosuch",
        *SMALL,
        "--out",
        str(tmp_path / "run"),
        env=slurm_cluster.env,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "collbench: error: --partition: 'nosuch' is not a partition of this cluster "
        "(sinfo lists: debug, short)"
    ]


def test_a_failing_task_is_named_and_rows_are_kept(tmp_path, slurm_cluster):
    out = tmp_path / "run"
    process = start(
        "sweep",
        "--launcher",
        "slurm",
        *LONG,
        "--out",
        str(out),
        "--timeout",
        "30",
        env=slurm_cluster.env,
    )
    wait_for_rows(out, 3, timeout=120)
    pid = rank_pid(out, 1)
    os.kill(pid, signal.SIGKILL)
    assert "finished row(s) kept" in error_naming_rank(process, 1, pid, timeout=120)
    assert len(rows_of(out)) >= 3 and meta_of(out)["state"] == "failed"


def _running_long_sweep(out, cluster):
    """A long Slurm sweep, started and past its first rows: (process, job id)."""
    process = start("sweep", "--launcher", "slurm", *LONG, "--out", str(out), env=cluster.env)
    wait_for_rows(out, 2, timeout=120)
    return process, json.loads((out / "slurm.json").read_text())["job_id"]


def test_scancel_while_waiting(tmp_path, slurm_cluster):
    out = tmp_path / "run"
    process, job_id = _running_long_sweep(out, slurm_cluster)
    subprocess.run(["scancel", job_id], env=slurm_cluster.client_env(), check=True)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 1, stderr
    last = stderr.strip().splitlines()[-1]
    assert f"Slurm job {job_id} ended CANCELLED" in last and "row(s) kept" in last
    assert rows_of(out)
    # the partial table says the run did not finish, never "0 OK" for the cut collective
    lines = stdout.splitlines()
    checks = [line for line in lines if line.startswith("# Out of bounds values")]
    assert checks and "INCOMPLETE (the run was cancelled after " in checks[-1], stdout
    assert lines[-1].startswith("# Run cancelled: ") and lines[-1].endswith(" rows measured")
    assert "# Out of bounds values : 0 OK" not in lines[-6:]
    status = collbench("status", str(out), env=slurm_cluster.env)
    assert f"Slurm job {job_id}: CANCELLED" in status.stdout, status.stdout
    assert "state: failed" in status.stdout and "CANCELLED" in status.stdout.splitlines()[-1]


def test_status_of_a_job_cancelled_before_any_rank_started(tmp_path, slurm_cluster):
    out = tmp_path / "run"
    # the `short` partition allows 5 minutes: this job pends until it is cancelled
    done = collbench(
        "sweep",
        "--launcher",
        "slurm",
        "--no-wait",
        "--partition",
        "short",
        "--time",
        "1-0",
        *SMALL,
        "--out",
        str(out),
        env=slurm_cluster.env,
    )
    assert done.returncode == 0, done.stderr
    job_id = _job_id(done.stderr)
    subprocess.run(["scancel", job_id], env=slurm_cluster.client_env(), check=True)
    deadline = time.time() + 30
    while time.time() < deadline:
        status = collbench("status", str(out), env=slurm_cluster.env)
        if "CANCELLED" in status.stdout:
            break
        time.sleep(0.5)
    assert status.returncode == 0, status.stderr
    assert status.stdout.splitlines()[-1] == (
        "rows: none; the Slurm job was cancelled before rank 0 wrote any (no rank had started)"
    )


def test_a_refused_submission_leaves_no_run_directory_and_one_error(tmp_path, slurm_cluster):
    out = tmp_path / "run"
    done = collbench(
        "sweep",
        "--launcher",
        "slurm",
        "--slurm-arg",
        "mem=99999999",
        *SMALL,
        "--out",
        str(out),
        env=slurm_cluster.env,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr  # sbatch's message once, in collbench's error line
    assert lines[0].startswith("collbench: error: --launcher: 'slurm' sbatch refused the job: ")
    assert "Memory specification can not be satisfied" in lines[0]
    assert not out.exists()  # nothing half-made for later commands to trip on
    kept = tmp_path / "kept"
    kept.mkdir()  # a directory the user made is emptied of collbench's files, not removed
    done = collbench(
        "sweep",
        "--launcher",
        "slurm",
        "--slurm-arg",
        "mem=99999999",
        *SMALL,
        "--out",
        str(kept),
        env=slurm_cluster.env,
    )
    assert done.returncode == 2 and kept.is_dir() and not any(kept.iterdir())


def test_ctrl_c_cancels_the_job(tmp_path, slurm_cluster):
    out = tmp_path / "run"
    process, job_id = _running_long_sweep(out, slurm_cluster)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    deadline = time.time() + 30
    while time.time() < deadline:
        state = subprocess.run(
            ["scontrol", "show", "job", job_id],
            capture_output=True,
            text=True,
            env=slurm_cluster.client_env(),
        ).stdout
        if "JobState=CANCELLED" in state or not state:
            break
        time.sleep(0.5)
    assert "JobState=CANCELLED" in state


def test_no_wait_then_status_and_wait(tmp_path, slurm_cluster):
    out = tmp_path / "run"
    done = collbench(
        "sweep",
        "--launcher",
        "slurm",
        "--no-wait",
        *SMALL,
        "--out",
        str(out),
        env=slurm_cluster.env,
    )
    assert done.returncode == 0, done.stderr
    job_id = _job_id(done.stderr)
    assert f"collbench wait {out}" in done.stderr and done.stdout == ""
    status = collbench("status", str(out), env=slurm_cluster.env)
    assert status.returncode == 0 and f"Slurm job {job_id}" in status.stdout
    waited = collbench("wait", str(out), env=slurm_cluster.env, timeout=300)
    assert waited.returncode == 0, waited.stderr
    assert "# Collective: all_reduce" in waited.stdout and f"# Results: {out}" in waited.stdout
    assert meta_of(out)["state"] == "completed"
    status = collbench("status", str(out), env=slurm_cluster.env)
    assert "state: completed" in status.stdout


def test_a_job_that_can_never_start_is_cancelled_with_exit_2(tmp_path, slurm_cluster):
    # the `short` partition allows 5 minutes: Slurm accepts the job but would pend forever
    done = collbench(
        "sweep",
        "--launcher",
        "slurm",
        "--partition",
        "short",
        "--time",
        "1-0",
        *SMALL,
        "--out",
        str(tmp_path / "run"),
        env=slurm_cluster.env,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "can never start: PartitionTimeLimit (--time is above the partition's limit)" in last
    job_id = _job_id(done.stderr)
    state = subprocess.run(
        ["scontrol", "show", "job", job_id],
        capture_output=True,
        text=True,
        env=slurm_cluster.client_env(),
    ).stdout
    assert "JobState=CANCELLED" in state


def _wait_for_state(out, states=("completed", "failed"), timeout=180):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if (out / "meta.json").exists() and meta_of(out)["state"] in states:
            return meta_of(out)
        time.sleep(0.5)
    raise AssertionError(f"{out} did not finish in {timeout} s")


def test_printed_sbatch_script_runs_as_is_and_again(tmp_path, slurm_cluster, monkeypatch):
    """Printed with a knob and a topology, from a directory with no results/, submitted
    unchanged: every job completes and records both (issue 25)."""
    submit_dir = tmp_path / "submit"
    submit_dir.mkdir()
    monkeypatch.chdir(submit_dir)
    knob = ["--knob", "NCCL_ALGO=Ring", "--topology", "dgx-h100"]
    printed = collbench(
        "sweep", "--launcher", "slurm", "--print-sbatch", *SMALL, *knob, env=slurm_cluster.env
    )
    assert printed.returncode == 0, printed.stderr
    assert not (submit_dir / "results").exists()  # printing prepares nothing
    script = tmp_path / "sweep.sbatch"
    script.write_text(printed.stdout)
    job_ids = []
    for _ in range(2):  # each submission gets its own run directory: OUT-JOBID
        submitted = subprocess.run(
            ["sbatch", "--parsable", str(script)],
            capture_output=True,
            text=True,
            env={**slurm_cluster.client_env(), "PYTHONPATH": str(REPO)},
            cwd=submit_dir,
        )
        assert submitted.returncode == 0, submitted.stderr
        job_ids.append(submitted.stdout.strip().split(";")[0])
    for job_id in job_ids:
        deadline = time.time() + 120
        while not (runs := list(submit_dir.glob(f"results/*-{job_id}"))):
            assert time.time() < deadline, f"job {job_id} made no run directory"
            time.sleep(0.5)
        (run,) = runs
        assert _wait_for_state(run)["launcher"] == "none"
        assert_asked_for_is_recorded(run, 2)
        assert (submit_dir / f"collbench-{job_id}.out").is_file()  # where sbatch could write


def test_srun_starts_ranks_directly(tmp_path, slurm_cluster):
    out = tmp_path / "run"
    done = subprocess.run(
        [
            "srun",
            "-N1",
            "-n2",
            sys.executable,
            "-m",
            "collbench",
            "sweep",
            *SMALL,
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=slurm_cluster.client_env(),
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("# Results:") == 1
    meta = meta_of(out)
    assert (meta["state"], meta["world_size"], meta["rank_env"]) == ("completed", 2, "slurm")
    assert meta["rendezvous"].startswith("localhost:")


def test_srun_with_pmix_agrees_on_the_address_through_mpi(tmp_path, slurm_cluster, mpirun):
    out = tmp_path / "run"
    done = subprocess.run(
        [
            "srun",
            "--mpi=pmix",
            "-N1",
            "-n2",
            sys.executable,
            "-m",
            "collbench",
            "sweep",
            *SMALL,
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=slurm_cluster.client_env(),
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    meta = meta_of(out)
    assert (meta["state"], meta["rank_env"]) == ("completed", "slurm")
    assert meta["rendezvous"].endswith("(broadcast by rank 0 through MPI)")
    assert rows_of(out) and all(row["n_wrong"] == 0 for row in rows_of(out))


def test_a_requeued_sweep_resumes_without_measuring_a_size_twice(tmp_path, slurm_cluster):
    out = tmp_path / "run"
    # ~0.4 s at 4 MiB and ~25 s a run: requeued halfway, the second attempt still has sizes to do
    slow = [*LONG[:-4], "-n", "100", "--repeats", "2"]
    process = start("sweep", "--launcher", "slurm", *slow, "--out", str(out), env=slurm_cluster.env)
    wait_for_rows(out, 4, timeout=120)
    job_id = json.loads((out / "slurm.json").read_text())["job_id"]
    env = slurm_cluster.client_env()
    requeue_now(job_id, env)
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr
    assert f"Slurm job {job_id} was requeued" in stderr
    rows = rows_of(out)
    steps = [(r["collective"], r["size_bytes"], r["placement"], r["repeat"]) for r in rows]
    assert len(steps) == len(set(steps))  # no size measured twice
    meta = meta_of(out)
    assert meta["state"] == "completed" and meta["rows"] == len(rows)
    attempts = meta["attempts"]
    assert [a["attempt"] for a in attempts] == [0, 1] and attempts[1]["rows_kept"] >= 4
    assert "# Collective: all_gather" in stdout


def test_the_api_docs_slurm_example(tmp_path, slurm_cluster, monkeypatch):
    from tests.cli.test_api_docs import python_blocks, run_block

    for name, value in slurm_cluster.env.items():
        monkeypatch.setenv(name, value)
    printed = run_block(python_blocks()[2], tmp_path, monkeypatch)
    assert printed.startswith("Slurm job ") and printed.split()[-1] == "COMPLETED"
    assert list((tmp_path / "api-slurm" / "slurm").glob("*_submission.sh"))
