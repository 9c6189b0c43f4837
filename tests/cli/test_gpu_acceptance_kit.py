"""The GPU acceptance kit (benchmarks/gpu_acceptance.py, issue 27) cannot rot: its dry run
prints the plan and runs every step's CPU part on real gloo ranks, and its JSON says which
steps passed and which need a GPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

KIT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_acceptance.py"
# Steps whose every part needs NCCL or a GPU: the dry run skips them, saying why.
GPU_ONLY = {"pytest_gpu", "too_many_ranks", "nccl_choices", "tune_algo_proto", "gemm_long"}


def _kit(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(KIT), *args], capture_output=True, text=True, timeout=timeout
    )


def test_bad_options_exit_2_in_one_line(tmp_path):
    done = _kit("--dry-run", "--only", "sweep_al", "--out", str(tmp_path / "k"))
    assert done.returncode == 2 and "unknown step(s) sweep_al" in done.stderr
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    done = _kit("--dry-run", "--out", str(tmp_path / "full"))
    assert done.returncode == 2 and "is not empty" in done.stderr


def test_a_range_is_judged_only_where_it_applies():
    sys.path.insert(0, str(KIT.parent))
    try:
        from gpu_acceptance import FAIL, PASS, Step
    finally:
        sys.path.remove(str(KIT.parent))
    step = Step("s", "what")
    assert step.within("busbw", 350.0, 330.0, 380.0, judged=True) is True
    assert step.within("busbw", 100.0, 330.0, 380.0, judged=False) is None
    assert step.status == PASS
    assert step.within("busbw", 100.0, 330.0, 380.0, judged=True) is False
    assert step.status == FAIL and step.checks[-1]["expected"] == [330.0, 380.0]


@pytest.mark.slow  # ~20 real collbench runs (1-4 min on 2 shared cores)
@pytest.mark.timeout(900)
def test_the_dry_run_runs_every_cpu_part_and_writes_one_json(tmp_path):
    out = tmp_path / "kit"
    done = _kit("--dry-run", "--out", str(out), timeout=850)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "# plan (dry run" in done.stdout
    document = json.loads((out / "acceptance.json").read_text())
    steps = {step["name"]: step for step in document["steps"]}
    assert document["dry_run"] is True and document["ranges_judged"] is False
    assert document["summary"]["fail"] == 0
    for name, step in steps.items():
        if name in GPU_ONLY:
            assert step["status"] == "skip" and step["note"], name
            continue
        assert step["status"] == "pass", step
        assert step["commands"] and step["checks"], name
        assert all(check["ok"] in (True, None) for check in step["checks"]), name
        for command in step["commands"]:
            assert Path(command["log"]).exists()
    assert set(steps) > GPU_ONLY and len(steps) == 17
    # what the CPU parts prove: a wrong rank exits 3, the refusals, Tree kept all-reduce
    assert steps["corrupt_rank"]["commands"][0]["exit_code"] == 3
    assert steps["graph_latency"]["commands"][0]["exit_code"] == 2
    tree = steps["tune_ring_tree"]["figures"]["ring_tree: settings"]["NCCL_ALGO=Tree"]
    assert tree["status"] == "failed" and tree["rows"] > 0
