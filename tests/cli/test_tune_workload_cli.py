"""`collbench tune from RUN... --workload`: best.env is the setting that makes the training
job's modelled step fastest, and the output says the step under the default and under it,
where it loses, and the assumptions. Synthetic runs (tests/rows.py), the CLI in process."""

import json

from tests.helpers import collbench
from tests.rows import make_row, write_run

SIZES = [2**power for power in range(16, 25)]  # 64 KiB .. 16 MiB
TREE = {"NCCL_ALGO": "Tree"}
# a small model on one DGX H100 node: tp 2 x dp 4, gradients of a few MiB per TP rank
JOB = "layers: 2\nhidden: 256\nheads: 4\nvocab: 1000\nseq: 128\nglobal-batch: 8\ntp: 2\ndp: 4\n"
JOB += "matmul-efficiency: 0.5\n"


def _job(tmp_path, more=""):
    """--workload FILE: the job as mfu's options, in a config file."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "job.yaml").write_text(JOB + more)
    return ["--workload", str(tmp_path / "job.yaml"), "--topology", "dgx-h100"]


def _write(path, fast_small, knobs=None):
    """all_reduce on 8 ranks: 80 GB/s busbw below 1 MiB and 20 above (`fast_small`), or
    the reverse."""
    env = dict(knobs or {})
    rows = []
    for size in SIZES:
        busbw = 80.0 if (size < 1 << 20) == fast_small else 20.0
        time_us = size * 2 * 7 / 8 / (busbw * 1e3)
        rows.append(
            make_row(
                run_id=path.name,
                backend="nccl",
                size_bytes=size,
                time_us=time_us,
                world_size=8,
                knobs={"env": env},
            )
        )
    meta = {"run_id": path.name, "timing_method": "perf_counter", "knobs": {"env": env}}
    return str(write_run(path, rows, meta))


def _tune(tmp_path, *args):
    base = _write(tmp_path / "base", fast_small=True)
    tree = _write(tmp_path / "tree", fast_small=False, knobs=TREE)
    out = tmp_path / "tuned"
    return collbench("tune", "from", base, tree, "--out", str(out), *args), out


def test_small_buckets_keep_the_default_one_big_reduction_exports_tree(tmp_path):
    done, out = _tune(tmp_path / "a", *_job(tmp_path / "a", "dp-bucket-mb: 0.25"))
    assert done.returncode == 0, done.stderr
    document = json.loads((out / "tune.json").read_text())
    entry = document["workload"]
    steps = {step["setting"]: step for step in entry["settings"]}
    assert entry["chosen"] == min(steps, key=lambda name: steps[name]["step_time_s"])
    assert entry["chosen"] == document["env"]["setting"] == "baseline"
    assert "# workload: custom" in done.stdout and "step ms" in done.stdout
    assert "priced by busbw" in done.stdout and "8 ranks" in done.stdout

    done, out = _tune(tmp_path / "b", *_job(tmp_path / "b", "dp-bucket-mb: 0"))
    assert done.returncode == 0, done.stderr
    document = json.loads((out / "tune.json").read_text())
    assert document["workload"]["chosen"] == "NCCL_ALGO=Tree"
    # a plain NCCL_ALGO=Tree would fail the job's all-gathers: exported per collective
    assert "export NCCL_ALGO=allreduce:tree" in (out / "best.env").read_text()
    assert "shortest modelled step" in (out / "best.env").read_text()
    # the TP all-reduces (64 KiB) are the default's: what Tree loses there is said
    assert "where NCCL_ALGO=Tree is not the fastest" in done.stdout
    assert "tp all_reduce 64 KiB" in done.stdout
    assert "tuning recovers" in done.stdout


def test_a_workload_needs_a_topology_and_a_file_of_mfu_options(tmp_path):
    done, _ = _tune(tmp_path / "a", *_job(tmp_path / "a")[:2])
    assert done.returncode == 2 and "--topology" in done.stderr
    done, _ = _tune(tmp_path / "b", *_job(tmp_path / "b", "curves: [x]\n"))
    assert done.returncode == 2 and "'curves'" in done.stderr and done.stderr.count("\n") == 1


def test_every_setting_s_step_is_listed_and_the_export_rule_stated(tmp_path):
    third = _write(tmp_path / "ll", fast_small=False, knobs={"NCCL_PROTO": "LL"})
    done, out = _tune(tmp_path, third, *_job(tmp_path, "dp-bucket-mb: 0"))
    assert done.returncode == 0, done.stderr
    table = [line for line in done.stdout.splitlines() if line.startswith("  ")]
    for label in ("baseline (default)", "NCCL_ALGO=Tree", "NCCL_PROTO=LL"):
        assert any(line.lstrip().startswith(label) for line in table)
    export = json.loads((out / "tune.json").read_text())["workload"]["export"]
    assert f"# best.env: {export['text']}" in done.stdout and "only when" in export["text"]


def test_a_job_mfu_refuses_for_memory_is_refused_alike(tmp_path):
    job = "model: llama3-8b\nglobal-batch: 8\n"  # ~144 GiB per accelerator of cpu-local
    (tmp_path / "job.yaml").write_text(job)
    mfu = collbench("mfu", "--model", "llama3-8b", "--global-batch", "8", "-T", "cpu-local")
    args = ("--workload", str(tmp_path / "job.yaml"), "--topology", "cpu-local")
    done, out = _tune(tmp_path, *args)
    assert mfu.returncode == done.returncode == 2 and not out.exists()
    assert done.stderr == mfu.stderr and "GiB per accelerator" in done.stderr
