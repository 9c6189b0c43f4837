"""`collbench tune run --launcher slurm` against a real one-node Slurm: one job for the whole
tune, whose driver runs an srun step per setting (fresh ranks, no queueing per setting)."""

import json

import pytest

from tests.helpers import collbench_process as collbench
from tests.helpers import meta_of
from tests.launchers.slurm_cluster import requeue_now

pytestmark = pytest.mark.slow  # a real Slurm job with a step per setting

SWEEP = ["-c", "all_reduce", "-b", "1K", "-e", "64K", "-f", "8", "-n", "3", "-w", "1"]
SWEEP += ["--repeats", "1"]  # the launcher mechanics: one run per setting


def test_tune_runs_one_allocation_with_a_step_per_setting(tmp_path, slurm_cluster):
    out = tmp_path / "tuned"
    done = collbench(
        "tune", "run", "--launcher", "slurm", "--ntasks-per-node", "2", "--time", "5",
        "--knob", "GLOO_SOCKET_IFNAME=lo,nosuch", *SWEEP, "--out", str(out),
        env=slurm_cluster.env, timeout=400,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr + done.stdout
    settings = json.loads((out / "tune.json").read_text())["settings"]
    assert [entry["status"] for entry in settings] == ["ok", "ok", "failed"]
    assert "nosuch" in settings[2]["error"]
    runs = [meta_of(out / entry["run_dir"]) for entry in settings[:2]]
    assert {meta["launcher"] for meta in runs} == {"srun"}
    assert {meta["world_size"] for meta in runs} == {2}
    assert "tune: setting 3/3 GLOO_SOCKET_IFNAME=nosuch: FAILED" in done.stderr  # echoed
    assert "# collective" in done.stdout
    assert len(list((out / "slurm").glob("driver-*.out"))) == 1  # one job, one driver


def test_a_requeued_tune_keeps_the_settings_it_measured(tmp_path, slurm_cluster):
    import time

    from tests.helpers import start

    out = tmp_path / "tuned"
    slow = [*SWEEP[:-2], "-n", "300", "--repeats", "2"]  # seconds a setting
    knob = "NCCL_DEBUG=WARN,INFO"  # gloo reads neither: three settings alike, steps matter
    process = start(
        "tune", "run", "--launcher", "slurm", "--ntasks-per-node", "2", "--time", "5",
        "--knob", knob, *slow, "--out", str(out), env=slurm_cluster.env,
    )  # fmt: skip
    env = slurm_cluster.client_env()
    deadline = time.time() + 240
    first = None
    while first is None and time.time() < deadline and process.poll() is None:
        done = [p for p in out.rglob("meta.json") if '"completed"' in p.read_text()]
        first = done[0].parent if done else None
        time.sleep(0.2)
    assert first is not None, process.communicate()[1]
    started = meta_of(first)["started_utc"]
    (driver,) = out.glob("slurm/driver-*.out")
    job_id = driver.name.removeprefix("driver-").removesuffix(".out")
    requeue_now(job_id, env)
    _, stderr = process.communicate(timeout=400)
    kept = f"tune: {first.relative_to(out)} kept from an earlier attempt of the job"
    assert kept in stderr, stderr
    assert meta_of(first)["started_utc"] == started  # not measured again
    settings = json.loads((out / "tune.json").read_text())["settings"]
    assert all(meta_of(out / entry["run_dir"])["state"] == "completed" for entry in settings)
