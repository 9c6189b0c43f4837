"""The GPU acceptance kit (benchmarks/gpu_acceptance.py, issues 27 and 40) cannot rot: its
dry run prints the plan and runs every step's CPU part on real gloo ranks, its JSON says
which steps passed and which are not applicable without a GPU, and its archive holds it all;
a node with too few GPUs runs a multi-rank step in the shared-GPU test mode where its point
survives that, never judged, and not applicable where not; a short budget skips."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

KIT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_acceptance.py"
# Steps whose every part needs NCCL or a GPU: not applicable in the dry run, saying why.
GPU_ONLY = {"pytest_gpu", "too_many_ranks", "nccl_choices", "tune_algo_proto", "tune_verify", "gemm_long"}  # fmt: skip


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


def _modules():
    sys.path.insert(0, str(KIT.parent))
    try:
        import gpu_acceptance
        import gpu_acceptance_steps
    finally:
        sys.path.remove(str(KIT.parent))
    return gpu_acceptance, gpu_acceptance_steps


def test_a_range_is_judged_only_where_it_applies():
    kit, _ = _modules()
    FAIL, PASS, Step = kit.FAIL, kit.PASS, kit.Step
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
    assert "# dry run: CPU parts on gloo" in done.stdout and "# plan on 8 GPU(s)" in done.stdout
    document = json.loads((out / "acceptance.json").read_text())
    steps = {step["name"]: step for step in document["steps"]}
    assert document["dry_run"] is True and document["ranges_judged"] is False
    assert document["summary"]["fail"] == 0
    for name, step in steps.items():
        if name in GPU_ONLY:
            assert step["status"] == "not applicable" and step["note"], name
            continue
        assert step["status"] == "pass", step
        assert step["commands"] and step["checks"], name
        assert all(check["ok"] in (True, None) for check in step["checks"]), name
        for command in step["commands"]:
            assert Path(command["log"]).exists()
    assert set(steps) > GPU_ONLY and len(steps) == 18
    plugin = steps["tune_verify"]["figures"]["tuner plugin"]  # built where the source is
    assert plugin.startswith("built" if os.environ.get("COLLBENCH_TUNER_EXAMPLE") else "not built")
    assert document["summary"]["not applicable"] == len(GPU_ONLY)
    with tarfile.open(out / "acceptance.tar.gz") as tar:  # everything measured, in one file
        names = set(tar.getnames())
    assert {"kit/acceptance.json", "kit/logs", "kit/runs"} <= names
    assert any(name.endswith("rows.jsonl") for name in names)
    # what the CPU parts prove: a wrong rank exits 3, the refusals, Tree kept all-reduce
    assert steps["corrupt_rank"]["commands"][0]["exit_code"] == 3
    assert steps["graph_latency"]["commands"][0]["exit_code"] == 2
    tree = steps["tune_ring_tree"]["figures"]["ring_tree: settings"]["NCCL_ALGO=Tree"]
    assert tree["status"] == "failed" and tree["rows"] > 0


def test_the_plan_says_what_fits_the_budget_on_one_gpu_and_on_eight():
    done = _kit("--plan", "--budget", "540")
    assert done.returncode == 0, done.stderr
    one, eight = done.stdout.split("# plan on 8 GPU(s)")
    assert "# plan on 1 GPU(s), within 540 s (times are ESTIMATES" in one
    # a multi-rank step on 1 GPU: its ranks share it (test mode), unless its point is lost
    assert (
        "sweep_all          runs in test mode (COLLBENCH_SHARED_GPU=1, 2 ranks on 1 GPU(s)" in one
    )
    assert (
        "corrupt_rank       runs in test mode" in one and "doctor_one_node    runs in test" in one
    )
    assert "overlap_channels   not applicable: needs 2 GPUs, this node has 1; no test mode" in one
    assert "gemm_bf16          runs, ~" in one and "sweep_all          runs, ~" in eight
    assert "test mode" not in eight
    assert "past the budget" in eight  # 8 GPUs: more than 540 s of steps
    ends = [int(x) for x in re.findall(r"done by ~(\d+) s", eight)]
    assert ends == sorted(ends) and ends[-1] <= 540


def test_too_few_gpus_is_test_mode_or_not_applicable_and_over_budget_is_skipped(
    tmp_path, monkeypatch
):
    """On a 1-GPU node a 4-rank step runs its 4 ranks in the shared-GPU test mode (its
    commands get COLLBENCH_SHARED_GPU=1, its ranges are not judged); a 2-GPU step whose point
    does not survive sharing is not applicable; the others never inherit the mode; a step
    whose estimate no longer fits the budget is skipped (real commands stand in for GPU ones)."""
    kit, steps = _modules()
    monkeypatch.setenv("COLLBENCH_SHARED_GPU", "1")  # exported by hand: not for unshared steps
    seen = {}

    def body(k, step):
        child = "import os; print(os.environ.get('COLLBENCH_SHARED_GPU'))"
        done = k.command(step, "env", [sys.executable, "-c", child])
        seen[step.name] = (k.gpus, k.judged, done.stdout.strip())

    plan = [
        steps.KitStep("four", "shares", body, 4, (0, 10)),
        steps.KitStep("apart", "needs 2", body, 2, (0, 10), "figures mean nothing shared"),
        steps.KitStep("one", "fits", body, 1, (30, 30)),
        steps.KitStep("long", "too long", body, 1, (100, 100)),
    ]
    document = kit.run_steps(steps.Kit(tmp_path, False, 1, "H100"), plan, budget=60)
    status = {step["name"]: step for step in document["steps"]}
    assert seen == {"four": (4, False, "1"), "one": (1, False, "None")}
    four = status["four"]
    assert four["status"] == "pass" and four["commands"][0]["env"] == {"COLLBENCH_SHARED_GPU": "1"}
    assert four["test_mode"] == "COLLBENCH_SHARED_GPU=1, 4 ranks on 1 GPU(s), figures not judged"
    assert status["one"]["test_mode"] is None and status["one"]["commands"][0]["env"] == {}
    assert status["apart"]["status"] == "not applicable" and status["apart"]["test_mode"] is None
    assert status["apart"]["note"] == (
        "needs 2 GPUs, this node has 1; no test mode: figures mean nothing shared"
    )
    assert status["long"]["status"] == "skip" and "over the budget" in status["long"]["note"]
    assert document["summary"] == {"pass": 2, "fail": 0, "not applicable": 1, "skip": 1}
    sharing = steps.Kit(tmp_path, False, 8, "H100", shared=True)  # 8 ranks on fewer GPUs
    assert steps.Kit(tmp_path, False, 8, "H100").judged and not sharing.judged


def test_summary_kept_when_the_lease_ends_mid_step(tmp_path):
    """acceptance.json is rewritten after every step: a run killed in its 9th step (a lent
    GPU's lease ran out) lost the 8 steps done, their figures and logs unread."""
    kit, steps = _modules()

    def lease_ends(k, step):
        raise KeyboardInterrupt

    plan = [
        steps.KitStep("done", "runs", lambda k, step: step.figures.update(x=1), 1, (0, 0)),
        steps.KitStep("killed", "lease ends", lease_ends, 1, (0, 0)),
    ]
    with pytest.raises(KeyboardInterrupt):
        kit.run_steps(steps.Kit(tmp_path, False, 1, "H100"), plan, budget=None)
    document = json.loads((tmp_path / "acceptance.json").read_text())
    assert [(s["name"], s["status"], s["figures"]) for s in document["steps"]] == [
        ("done", "pass", {"x": 1})
    ]


def test_too_many_ranks_expects_the_refusal_local_launcher_gives(monkeypatch):
    """The refusal names the GPU count, not the host (the kit expected the host name)."""
    from collbench.core.errors import SpecError
    from collbench.core.spec import SweepSpec
    from collbench.launchers import local

    _, steps = _modules()
    monkeypatch.setattr(local, "gpu_count", lambda: 1)
    with pytest.raises(SpecError) as error:
        local.local_nproc(SweepSpec(backend="nccl"), 2)
    assert steps.too_many_ranks_refusal(1) in str(error.value)
