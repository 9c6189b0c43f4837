"""`collbench mfu --skew-from RUN`: the gemm burn-ins of one-node doctor runs (a GPU writes
them; here meta.json as a GPU doctor writes it), pooled, price the slowest accelerator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import collbench

H100 = "NVIDIA H100 80GB HBM3"
JOB = ["--model", "llama3-8b", "--seq", "4096", "--global-batch", "512", "--tp", "8"]
JOB += ["--nodes", "64"]  # 512 accelerators


def doctor_node(run: Path, rates, device=H100) -> Path:
    """A one-node doctor run's meta.json with its gemm burn-in, one rate per rank."""
    run.mkdir(parents=True)
    meta = {
        "run_id": run.name,
        "ranks": [{"rank": rank, "device_name": device} for rank in range(len(rates))],
        "doctor": {"gemm": {"shape": "8192x8192x8192 bf16", "seconds": 10, "tflops": rates}},
    }
    (run / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    return run


def test_a_per_node_run_pools_its_nodes_burn_ins(tmp_path):
    """nodes/0 and nodes/1 hold 4 rates each; nodes/2 (a node that failed) none: 8 rates,
    mean 700, sd sqrt(178 / 7) = 5.04268 (by hand); the slowest of 512: 700 - 5.04268 x
    3.030658 = 684.717."""
    doctor_node(tmp_path / "fleet/nodes/0", [700.0, 705.0, 695.0, 700.0])
    doctor_node(tmp_path / "fleet/nodes/1", [708.0, 692.0, 700.0, 700.0])
    (tmp_path / "fleet/nodes/2").mkdir()
    fleet = str(tmp_path / "fleet")
    done = collbench("mfu", "-T", "dgx-h100", *JOB, "--skew-from", fleet, "--json")
    assert done.returncode == 0, done.stderr
    fabric = json.loads(done.stdout)["fabrics"][0]
    breakdown = fabric["breakdown"]
    stretch = 700.0 / 684.717 - 1
    assert breakdown["straggler_s"] == pytest.approx(
        (breakdown["compute_s"] + breakdown["bubble_s"]) * stretch, rel=1e-4
    )
    said = [text for text in fabric["assumptions"] if text.startswith("stragglers:")]
    assert "slowest of 512 accelerators at 684.7 TFLOP/s" in said[0], said
    assert f"8 gemm burn-ins, {fleet}" in said[0]

    done = collbench("mfu", "-T", "dgx-h100", "-T", "mi300x", *JOB, "--skew-from", fleet)
    assert done.returncode == 0, done.stderr
    row = next(line for line in done.stdout.splitlines() if "slowest accelerator" in line)
    share = breakdown["straggler_s"] / fabric["step_time_s"]
    assert row.split()[2:] == [f"{breakdown['straggler_s']:.3f}", f"({share:.0%})", "-"], row
    assert "assumed: mi300x: stragglers: none priced" in done.stdout
    assert (
        f"collbench: warning: --skew-from {fleet}: measured on {H100}, not mi300x's AMD "
        "Instinct MI300X: no stragglers priced there"
    ) in done.stderr


@pytest.mark.parametrize(
    "runs, why",
    [
        ({"a": None}, "holds no gemm burn-in: no meta.json there"),
        ({"a": []}, "holds no gemm burn-in: not a one-node doctor run"),
        ({"a": [700.0]}, "needs 2+ of one accelerator: 1 burn-in rate(s)"),
        ({"a": [700.0, 690.0], "b": [300.0, 310.0]}, "needs 2+ of one accelerator: mixed"),
        ({"a": [700.0, "fast"]}, "has a damaged burn-in"),
        ({"a": "77"}, "has a damaged burn-in"),
        ({"a": [700.0, float("nan")]}, "has a damaged burn-in"),
        ({"a": [700.0, 0.0]}, "has a damaged burn-in"),
        ({"a": [700.0, 1e308]}, "has a damaged burn-in"),
    ],
)
def test_runs_without_two_rates_of_one_accelerator_are_refused(tmp_path, runs, why):
    args = []
    for name, rates in runs.items():
        run = tmp_path / name
        if rates is None:
            run.mkdir()
        else:
            doctor_node(run, rates, H100 if name == "a" else "NVIDIA A100-SXM4-80GB")
        args += ["--skew-from", str(run)]
    done = collbench("mfu", "-T", "dgx-h100", *JOB, *args)
    assert done.returncode == 2 and why in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "meta",
    [
        {"doctor": "oops"},
        {"doctor": {"gemm": ["x"]}},
        {"doctor": {"skipped": "x"}},
        {"doctor": {"gemm": {"tflops": [700.0, 690.0]}}, "ranks": ["rank 0"]},
        {"doctor": {"gemm": {"tflops": [700.0, 690.0]}}, "ranks": []},
        {"doctor": {"gemm": {"tflops": [700.0, 690.0]}}, "ranks": [{"device_name": 7}]},
    ],
)
def test_a_damaged_meta_json_is_one_line_not_a_traceback(tmp_path, meta):
    for node in ("0", "1"):  # the same inside a --per-node run
        run = tmp_path / "fleet" / "nodes" / node
        run.mkdir(parents=True)
        (run / "meta.json").write_text(json.dumps({"run_id": node, **meta}), encoding="utf-8")
    for given in (tmp_path / "fleet", tmp_path / "fleet" / "nodes" / "0"):
        done = collbench("mfu", "-T", "dgx-h100", *JOB, "--skew-from", str(given))
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip().endswith("0' has a damaged burn-in"), done.stderr


@pytest.mark.slow  # a real 2-rank gloo doctor, ~7 s
def test_a_cpu_doctor_run_says_why_it_has_no_burn_in(tmp_path):
    run = tmp_path / "doctor"
    done = collbench("doctor", "-g", "2", "--repeats", "3", "--size", "1M", "--out", str(run))
    assert done.returncode in (0, 6), done.stderr
    done = collbench("mfu", "-T", "dgx-h100", *JOB, "--skew-from", str(run))
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        f"collbench: error: --skew-from: '{run}' holds no gemm burn-in: no GPU: the burn-in "
        "loads GPUs"
    )
