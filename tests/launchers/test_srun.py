"""--launcher srun (one srun step in the allocation this process is in) and slurm_batch (a
driver submitted once that runs several steps in its one allocation), against a real
one-node Slurm cluster; the pure parts (rendering, the step's size) without one."""

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collbench.core.errors import SpecError
from collbench.launchers import get_launcher, slurm_state
from collbench.launchers.slurm import SlurmSettings
from collbench.launchers.slurm_batch import (
    driver_output,
    driver_script,
    script_exit_code,
    submit_driver,
    wait_job,
)
from collbench.launchers.srun import Allocation, SrunSettings, step_settings
from tests.helpers import meta_of, rank_pid, rows_of, wait_for_rows
from tests.launchers.slurm_cluster import SlurmCluster
from tests.launchers.test_render import _check, _job

REPO = Path(__file__).resolve().parents[2]
SMALL = ["-c", "all_reduce", "-b", "1K", "-e", "4K", "-n", "3", "-w", "1"]
SMALL += ["--repeats", "1"]  # launcher mechanics: one pass
LONG = ["-c", "all_reduce,all_gather", "-b", "1K", "-e", "4M", "-n", "40", "-w", "2"]
LONG += ["--repeats", "1"]  # launcher mechanics: one pass
OUTSIDE = (
    "collbench: error: --launcher: 'srun' runs inside a Slurm allocation "
    "(salloc, or an sbatch script); --launcher slurm submits one"
)


def _no_slurm_env() -> dict[str, str]:
    """This process's environment without an allocation (pytest may itself run in one)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}


def _cluster_env(cluster: SlurmCluster) -> dict[str, str]:
    return {**_no_slurm_env(), **cluster.env, "PYTHONPATH": str(REPO)}


def _sweep(*args: str, prefix: tuple[str, ...] = ()) -> list[str]:
    return [*prefix, sys.executable, "-m", "collbench", "sweep", "--launcher", "srun", *args]


@pytest.fixture
def in_cluster_env(slurm_cluster, monkeypatch) -> SlurmCluster:
    """This process talks to the test cluster (submit_driver runs sbatch with os.environ)."""
    for name in [k for k in os.environ if k.startswith("SLURM_")]:
        monkeypatch.delenv(name)
    for name, value in _cluster_env(slurm_cluster).items():
        monkeypatch.setenv(name, value)
    return slurm_cluster


def _run(argv: list[str], env: dict[str, str], timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout)


# --- pure: renderings and the step's size -------------------------------------------------


@pytest.mark.parametrize(
    ("name", "settings"),
    [
        ("srun.txt", SrunSettings(16, 2, ntasks_per_node=8, gpus_per_node=8, job_id="4242")),
        ("srun-allocation.txt", SrunSettings(3, 2, job_id="4242")),
    ],
)
def test_srun_renderings(name, settings):
    launcher = get_launcher("srun")
    job = _job("srun", settings.ntasks, vars(settings))
    (command,) = launcher.render(job).commands
    assert command.env["COLLBENCH_STATUS_DIR"] == "/shared/results/run-1/ranks"
    _check(name, launcher.describe(job))


ALLOC = {"SLURM_JOB_ID": "7", "SLURM_JOB_NUM_NODES": "2", "SLURM_NTASKS": "3"}


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, None),
        ({**ALLOC, "SLURM_TASKS_PER_NODE": "2,1"}, Allocation("7", 2, (2, 1))),
        (  # sbatch's batch script: SLURM_PROCID=0 but no step id
            {**ALLOC, "SLURM_NTASKS": "16", "SLURM_TASKS_PER_NODE": "8(x2)", "SLURM_PROCID": "0"},
            Allocation("7", 2, (8, 8)),
        ),
        (  # salloc -N2 --exclusive: no SLURM_NTASKS, one task a node
            {"SLURM_JOB_ID": "7", "SLURM_JOB_NUM_NODES": "2", "SLURM_TASKS_PER_NODE": "1(x2)"},
            Allocation("7", 2, (1, 1)),
        ),
        (  # salloc -N2 --gpus-per-node h100:4: one rank a GPU
            {
                "SLURM_JOB_ID": "7",
                "SLURM_JOB_NUM_NODES": "2",
                "SLURM_TASKS_PER_NODE": "1(x2)",
                "SLURM_GPUS_PER_NODE": "h100:4",
            },
            Allocation("7", 2, (4, 4)),
        ),
        (  # asked for tasks: they win over the GPUs
            {**ALLOC, "SLURM_TASKS_PER_NODE": "2,1", "SLURM_GPUS_PER_NODE": "4"},
            Allocation("7", 2, (2, 1)),
        ),
    ],
)
def test_allocation_from_environment(environ, expected):
    assert Allocation.detect(environ) == expected


def test_inside_a_step_is_refused():
    with pytest.raises(SpecError, match=r"already inside srun step 7\.0"):
        Allocation.detect({**ALLOC, "SLURM_STEP_ID": "0", "SLURM_PROCID": "1"})


@pytest.mark.parametrize(
    ("nproc", "extra", "expected"),
    [
        (None, {}, SrunSettings(16, 2, job_id="7")),
        (None, {"ntasks_per_node": 2}, SrunSettings(4, 2, 2, job_id="7")),
        (None, {"nodes": 1}, SrunSettings(8, 1, 8, job_id="7")),
        (3, {}, SrunSettings(3, 2, job_id="7")),
        (1, {}, SrunSettings(1, 1, job_id="7")),
        (None, {"gpus_per_node": 8}, SrunSettings(16, 2, None, 8, job_id="7")),
    ],
)
def test_step_defaults_to_the_allocation(nproc, extra, expected):
    assert step_settings(nproc, extra, Allocation("7", 2, (8, 8))) == expected


@pytest.mark.parametrize(
    ("nproc", "extra", "flag"),
    [
        (None, {"nodes": 3}, "--nodes"),
        (4, {"ntasks_per_node": 2}, "--nproc"),
        (0, {}, "--nproc"),
        (2, {"nodes": 2, "ntasks_per_node": None}, None),
    ],
)
def test_step_that_does_not_fit_is_refused(nproc, extra, flag):
    if flag is None:  # two ranks on the two nodes fit
        assert step_settings(nproc, extra, Allocation("7", 2, (1, 1))).nodes == 2
        return
    with pytest.raises(SpecError, match=flag):
        step_settings(nproc, extra, Allocation("7", 2, (1, 1)))


@pytest.mark.slow
def test_outside_an_allocation_exit_2():
    done = _run(_sweep(*SMALL), env=_no_slurm_env(), timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == OUTSIDE


@pytest.mark.parametrize(
    "option",
    [["--partition", "debug"], ["--time", "5"], ["--no-wait"], ["--print-sbatch"]],
)
@pytest.mark.slow
def test_allocation_options_are_refused(option):
    done = _run(_sweep(*option, "--print"), env=_no_slurm_env(), timeout=60)
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert (
        last.startswith((f"collbench: error: {option[0]}: ", f"collbench: error: {option[0]} "))
        and "salloc or sbatch" in last
    )


@pytest.mark.slow
def test_print_outside_an_allocation_shows_the_srun_line(tmp_path):
    out = tmp_path / "run"
    done = _run(
        _sweep("--nodes", "2", "--ntasks-per-node", "4", "--print", "--out", str(out)),
        env=_no_slurm_env(),
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("srun --kill-on-bad-exit=1 --nodes 2 --ntasks 8 ")
    assert "--launcher none --rank-env slurm" in done.stdout and not out.exists()


def test_driver_script_runs_once(tmp_path):
    text = driver_script(["python", "-m", "x y"], SlurmSettings(time="5"), tmp_path)
    assert f"#SBATCH --output={tmp_path}/driver-%j.out" in text.splitlines()
    assert text.splitlines()[-2:] == ["", "exec python -m 'x y'"]
    assert "srun" not in text.split("#SBATCH --output")[1]


@pytest.mark.parametrize(("text", "code"), [("0:0", 0), ("3:0", 3), ("0:15", None), ("", None)])
def test_script_exit_code(text, code):
    assert script_exit_code(text) == code


# --- the real cluster ---------------------------------------------------------------------


@pytest.mark.slow
def test_sweep_in_salloc_is_one_step_of_two_ranks(tmp_path, slurm_cluster):
    out = tmp_path / "run"
    argv = _sweep(*SMALL, "--out", str(out), "-q", prefix=("salloc", "-n2"))
    done = _run(argv, env=_cluster_env(slurm_cluster))
    assert done.returncode == 0, done.stderr + slurm_cluster.logs()
    meta = meta_of(out)
    assert (meta["state"], meta["launcher"], meta["world_size"]) == ("completed", "srun", 2)
    assert meta["rank_env"] == "slurm" and "job and step ids" in meta["rendezvous"]
    assert meta["command_line"][:4] == ["collbench", "sweep", "--launcher", "srun"]
    assert {p.name for p in (out / "logs").iterdir()} == {
        "srun.log",
        "rank-00000.log",
        "rank-00001.log",
    }
    rows = rows_of(out)
    assert rows and all(r["world_size"] == 2 and r["n_wrong"] == 0 for r in rows)


@pytest.mark.slow
def test_srun_under_srun_is_refused(slurm_cluster):
    argv = _sweep(*SMALL, "--print", prefix=("srun", "-n1"))
    done = _run(argv, env=_cluster_env(slurm_cluster))
    assert done.returncode == 2, done.stderr
    assert "is already inside srun step" in done.stderr


@pytest.mark.slow
def test_killed_rank_in_the_step_is_named_and_rows_kept(tmp_path, slurm_cluster):
    out = tmp_path / "run"
    argv = _sweep(*LONG, "--out", str(out), "--timeout", "30", prefix=("salloc", "-n2"))
    process = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_cluster_env(slurm_cluster),
    )
    wait_for_rows(out, 3)
    pid = rank_pid(out, 1)
    os.kill(pid, signal.SIGKILL)
    killed_at = time.time()
    _, stderr = process.communicate(timeout=90)
    assert time.time() - killed_at < 30
    assert process.returncode == 1, stderr
    last = next(line for line in reversed(stderr.splitlines()) if "collbench: error" in line)
    assert last.startswith(f"collbench: error: rank 1 (pid {pid}) on "), stderr
    assert "finished row(s) kept" in last
    assert len(rows_of(out)) >= 3 and meta_of(out)["state"] == "failed"


@pytest.mark.slow
def test_a_job_slurm_does_not_know_ends_unknown_and_is_not_waited_for(in_cluster_env, monkeypatch):
    monkeypatch.setattr(slurm_state, "UNKNOWN_AFTER_S", 0.5)  # 60 s in use
    seen = []
    assert wait_job("987654", on_state=seen.append, poll_s=0.2) == ("UNKNOWN", None)
    assert seen == ["UNKNOWN"]


@pytest.mark.slow
def test_driver_runs_two_steps_in_one_allocation(tmp_path, in_cluster_env):
    steps = tmp_path / "steps"
    step = 'echo "$SLURM_JOB_ID.$SLURM_STEP_ID $SLURM_PROCID" >> "$0"'
    script = f"srun -n2 bash -c '{step}' {steps}; srun -n1 bash -c '{step}' {steps}; exit 3"
    seen = []
    job_id = submit_driver(["bash", "-c", script], SlurmSettings(time="5"), tmp_path / "driver")
    state, code = wait_job(job_id, on_state=seen.append, poll_s=0.2)
    assert (state, code) == ("FAILED", 3), driver_output(tmp_path / "driver", job_id).read_text()
    # the end as Slurm states it, with its reason (Slurm 22.05: NonZeroExitCode)
    assert seen[-1].split()[0] == "FAILED" and (driver_output(tmp_path / "driver", job_id)).exists()
    lines = sorted(steps.read_text().splitlines())
    assert lines == [
        f"{job_id}.0 0",
        f"{job_id}.0 1",
        f"{job_id}.1 0",
    ], lines


@pytest.mark.slow
def test_driver_runs_srun_sweeps_one_after_another(tmp_path, in_cluster_env):
    """What `tune run --launcher slurm` does: sweeps as steps of one submitted driver."""
    runs = [tmp_path / "one", tmp_path / "two"]
    sweeps = [shlex.join(_sweep(*SMALL, "--out", str(run), "-q")) for run in runs]
    job_id = submit_driver(
        ["bash", "-c", " && ".join(sweeps)],
        SlurmSettings(ntasks_per_node=2, time="5"),
        tmp_path / "driver",
    )
    assert wait_job(job_id, poll_s=0.5) == ("COMPLETED", 0), (
        driver_output(tmp_path / "driver", job_id)
    ).read_text()
    for run in runs:
        meta = meta_of(run)
        assert (meta["state"], meta["launcher"], meta["world_size"]) == ("completed", "srun", 2)


@pytest.mark.slow
def test_hopeless_driver_is_cancelled(tmp_path, in_cluster_env):
    job_id = submit_driver(
        ["true"], SlurmSettings(partition="short", time="10"), tmp_path / "driver"
    )
    with pytest.raises(SpecError, match="can never start: Partition"):
        wait_job(job_id, poll_s=0.2)
    assert wait_job(job_id, poll_s=0.2)[0] == "CANCELLED"


@pytest.mark.slow
def test_refused_driver_is_a_spec_error(tmp_path, in_cluster_env):
    with pytest.raises(SpecError, match="sbatch refused the job: .*--bogus"):
        submit_driver(["true"], SlurmSettings(slurm_args=("bogus=1",)), tmp_path / "driver")
