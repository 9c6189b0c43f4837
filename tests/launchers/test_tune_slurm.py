"""`collbench tune run --launcher slurm` against a real one-node Slurm: one job for the whole
tune, whose driver runs an srun step per setting (fresh ranks, no queueing per setting)."""

import json

import pytest

from tests.helpers import collbench_process as collbench
from tests.helpers import meta_of

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
