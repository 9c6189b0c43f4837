"""`collbench tune run --knob ... --workload` for real: two settings, each a fresh spawn of 2 gloo
ranks, and best.env is the one whose measured busbw makes the training job's modelled step
fastest (a 2-rank data-parallel job on this machine's topology, cpu-local)."""

import json

import pytest

from tests.helpers import collbench_process as collbench

pytestmark = pytest.mark.slow  # real ranks per setting

SWEEP = ["-c", "all_reduce", "-b", "64K", "-e", "1M", "-f", "4", "-n", "4", "-w", "1"]
SWEEP += ["--nproc", "2", "--timeout", "60", "--repeats", "1"]
JOB = "layers: 2\nhidden: 256\nheads: 4\nvocab: 1000\nseq: 128\nglobal-batch: 4\ndp: 2\n"
JOB += "dp-bucket-mb: 0.125\n"


def test_tune_workload_exports_the_setting_with_the_fastest_modelled_step(tmp_path):
    out = tmp_path / "tuned"
    (tmp_path / "job.yaml").write_text(JOB)
    job = ["--workload", str(tmp_path / "job.yaml"), "--topology", "cpu-local"]
    knob = ["--knob", "GLOO_SOCKET_IFNAME=lo"]
    done = collbench("tune", "run", *knob, *job, *SWEEP, "--out", str(out), timeout=300)
    assert done.returncode == 0, done.stderr
    document = json.loads((out / "tune.json").read_text())
    entry = document["workload"]
    steps = {step["setting"]: step for step in entry["settings"]}
    assert set(steps) == {"baseline", "GLOO_SOCKET_IFNAME=lo"}
    fastest = min(steps, key=lambda name: steps[name]["step_time_s"])
    assert entry["chosen"] == fastest
    # best.env: the fastest only when its gain is more than the measurements resolve (two
    # alike settings on loopback: a gain from noise alone is not exported)
    assert document["env"]["setting"] == entry["export"]["setting"] in (fastest, "baseline")
    # the modelled step: 2 ranks' DP all-reduce in 128 KiB buckets, priced from each
    # setting's own rows (which differ: two fresh measurements)
    assert [item["collective"] for item in entry["collectives"]] == ["all_reduce"] * 2
    assert {item["priced"] for item in entry["collectives"]} == {"busbw"}
    assert steps["baseline"]["comm_s"] != steps["GLOO_SOCKET_IFNAME=lo"]["comm_s"]
    exported = "export GLOO_SOCKET_IFNAME=lo" in (out / "best.env").read_text()
    assert exported == (entry["export"]["setting"] != "baseline")
    assert "# workload: custom" in done.stdout and "(best.env)" in done.stdout
    assert f"# best.env: {entry['export']['text']}" in done.stdout
