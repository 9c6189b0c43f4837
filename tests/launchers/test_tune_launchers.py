"""`collbench tune` through torchrun and mpirun: each setting is a new torchrun round or a new
mpirun, whose ranks get the setting's knobs (the failing one fails in its ranks, not in the
tune)."""

import json

import pytest

from tests.helpers import collbench_process as collbench
from tests.helpers import meta_of

pytestmark = pytest.mark.slow  # a torchrun or mpirun job per setting

SWEEP = ["-c", "all_reduce", "-b", "1K", "-e", "64K", "-f", "8", "-n", "3", "-w", "1"]
SWEEP += ["--repeats", "1"]  # the launcher mechanics: one run per setting


def _check(out, done, launcher):
    assert done.returncode == 0, done.stderr
    settings = json.loads((out / "tune.json").read_text())["settings"]
    assert [entry["status"] for entry in settings] == ["ok", "ok", "failed"]
    assert "nosuch" in settings[2]["error"]
    runs = [meta_of(out / entry["run_dir"]) for entry in settings[:2]]
    assert {meta["launcher"] for meta in runs} == {launcher}
    assert runs[1]["knobs"]["GLOO_SOCKET_IFNAME"] == "lo"
    assert "GLOO_SOCKET_IFNAME" not in runs[0]["knobs"]  # the baseline: the environment as given
    pids = [{rank["pid"] for rank in meta["ranks"]} for meta in runs]
    assert not pids[0] & pids[1]


def test_tune_under_torchrun(tmp_path):
    out = tmp_path / "tuned"
    done = collbench(
        "tune", "run", "--launcher", "torchrun", "--nproc-per-node", "2",
        "--knob", "GLOO_SOCKET_IFNAME=lo,nosuch", *SWEEP, "--out", str(out), timeout=300,
    )  # fmt: skip
    _check(out, done, "torchrun")


@pytest.mark.usefixtures("mpirun")
def test_tune_under_mpirun(tmp_path):
    out = tmp_path / "tuned"
    done = collbench(
        "tune", "run", "--launcher", "mpi", "--nproc", "2",
        "--knob", "GLOO_SOCKET_IFNAME=lo,nosuch", *SWEEP, "--out", str(out), timeout=300,
    )  # fmt: skip
    _check(out, done, "mpi")
