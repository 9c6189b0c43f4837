"""`collbench fit` says how far a fit and a topology comparison can be trusted (issue 17):
the quality line and JSON field, latencies below the clock, a peak above anything measured,
goodness on all points, and `--topology` with one measure said one way everywhere."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from collbench.analysis.fit.vs_topology import MEASURE, MEASURE_DEFINITION, MODEL_WRONG_SPEEDUP
from collbench.cli import app
from tests.rows import make_row, write_run

SIZES = [2**power for power in range(3, 25)]  # 8 B .. 16 MiB, as a gloo sweep


def _invoke(*args: str):
    return CliRunner().invoke(app, ["fit", *args])


def _run(path: Path, times_us, sizes=SIZES, world_size: int = 2, **columns) -> Path:
    rows = [
        make_row(
            world_size=world_size,
            nodes=1,
            size_bytes=int(size),
            time_us=float(time_us),
            **columns,
        )
        for size, time_us in zip(sizes, times_us, strict=True)
    ]
    return write_run(path, rows, {"run_id": path.name})


def _noisy_times(seed: int = 0) -> np.ndarray:
    """400 us + S / 0.5 GB/s under the 50% log-normal noise of a loaded CPU box."""
    rng = np.random.default_rng(seed)
    clean = 400.0 + np.array(SIZES) / 0.5e3
    return clean * np.exp(0.5 * rng.standard_normal(len(SIZES)))


def test_a_poor_fit_says_so_in_the_table_and_the_json(tmp_path):
    run = _run(tmp_path / "noisy", _noisy_times())
    text = _invoke(str(run))
    assert text.exit_code == 0, text.output
    (line,) = [line for line in text.output.splitlines() if "fit quality" in line]
    assert line.startswith("  fit quality poor: rms error ") and "on all 22 points" in line
    regimes = [
        line for line in text.output.splitlines() if re.match(r"^\s+\d+\s+\d+ \w?B \.\.", line)
    ]
    assert 1 <= len(regimes) <= 2  # before: 5 regimes from these 22 points
    (group,) = json.loads(_invoke(str(run), "--json").output)
    assert group["quality"]["verdict"] == "poor"
    assert group["quality"]["notes"][0] == line.split(": ", 1)[1].split("; ")[0]
    assert group["r2_log_time_all"] <= 1 and group["rmse_log_time_all"] > 0.2


def test_a_latency_below_the_clock_is_never_printed_as_a_number(tmp_path):
    # imported-log style times (2 decimals) of a pure bandwidth curve: alpha fits to ~0
    sizes = [2**power for power in range(10, 31)]
    rng = np.random.default_rng(3)
    times = np.round(np.array(sizes) / 50e3 * np.exp(0.02 * rng.standard_normal(len(sizes))), 2)
    run = _run(tmp_path / "bw", times, sizes=sizes)
    done = _invoke(str(run))
    assert done.exit_code == 0, done.output
    assert "alpha < 0.01 us (below the clock's resolution)" in done.output
    assert not re.search(r"\d\.\d+e-\d+", done.output.split("regime  sizes")[1])
    assert "<0.01" in done.output.split("regime  sizes")[1]  # the regime table too
    (group,) = json.loads(_invoke(str(run), "--json").output)
    quality = group["quality"]
    assert quality["clock_resolution_us"] == 0.01 and quality["alpha_resolved"] is False


def test_a_peak_above_anything_measured_is_flagged_with_its_interval(tmp_path):
    rng = np.random.default_rng(1)
    times = (20000.0 + np.array(SIZES) / 0.78e3) * np.exp(0.01 * rng.standard_normal(22))
    run = _run(tmp_path / "short", times)
    done = _invoke(str(run))
    assert done.exit_code == 0, done.output
    (summary,) = [line for line in done.output.splitlines() if line.startswith("  alpha ")]
    measured = max(np.array(SIZES) / (times * 1e3))
    assert re.search(r"peak busbw 0\.7\d* GB/s \[[\d.]+, [\d.]+\] \(!\) above", summary)
    assert f"above the highest measured {measured:.4g} GB/s" in summary
    assert "fitted peak busbw" in done.output and "never reached" in done.output


def test_dropped_outliers_are_reported_with_the_fit_on_all_points(tmp_path):
    sizes = [2**power for power in range(18, 28)]
    times = 40.0 + np.array(sizes) * 1.75 / 180e3
    times[[2, 4, 6]] *= [1.6, 0.55, 1.8]
    run = _run(tmp_path / "spiky", times, sizes=sizes, world_size=8)
    done = _invoke(str(run))
    assert done.exit_code == 0, done.output
    (line,) = [line for line in done.output.splitlines() if line.startswith("  fit on ")]
    assert re.match(
        r"  fit on the 7 kept points: rms [\d.]+% of time, r2 1\.00000; on all 10: "
        r"rms [\d.]+% of time, r2 0\.9\d+ \(log time\)",
        line,
    )
    assert "3 of 10 points dropped as outliers" in done.output


# ---------------------------------------------------------------- --topology


def _topology(path: Path, latency_us: float) -> Path:
    """8 accelerators per node on a 200 GB/s link, `latency_us` per hop."""
    data = {
        "name": "test-fabric",
        "nodes": 1,
        "accelerators_per_node": 8,
        "accelerator": {"name": "gpu", "peak_bf16_tflops": 100.0},
        "scale_up": {
            "kind": "nvlink",
            "bandwidth_gbytes_s": 200.0,
            "latency_us": latency_us,
            "domain_size": 8,
        },
    }
    path.write_text(yaml.safe_dump(data))
    return path


def _gpu_run(path: Path, topology: str | None = None) -> Path:
    """8 ranks: 10 us + S / 20 GB/s below 1 MiB, 40 us + S / 180 GB/s from there."""
    sizes = [2**power for power in range(3, 31)]
    times = [
        (10.0 + size * 1.75 / 20e3) if size < 2**20 else (40.0 + size * 1.75 / 180e3)
        for size in sizes
    ]
    return _run(path, times, sizes=sizes, world_size=8, backend="nccl", topology=topology)


def test_the_header_names_the_topology_given(tmp_path):
    run = _gpu_run(tmp_path / "a")
    done = _invoke(str(run), "--topology", str(_topology(tmp_path / "f.yaml", 1.0)))
    assert done.exit_code == 0, done.output
    header = done.output.splitlines()[0]
    assert "| topology test-fabric (from --topology; the rows record none) |" in header
    recorded = _gpu_run(tmp_path / "b", topology="dgx-h100")
    header = _invoke(str(recorded), "--topology", "dgx-h100").output.splitlines()[0]
    assert "| topology dgx-h100 |" in header


def test_one_measure_said_the_same_way_in_help_text_and_json(tmp_path):
    run = _gpu_run(tmp_path / "a")
    fabric = str(_topology(tmp_path / "f.yaml", 1.0))
    help_text = " ".join(
        re.sub(r"[│╭╮╰╯─]", " ", CliRunner().invoke(app, ["fit", "--help"]).output).split()
    )
    assert f"{MEASURE} = {MEASURE_DEFINITION}" in help_text
    assert "measured time as % of prediction" not in help_text
    text = _invoke(str(run), "--topology", fabric).output
    assert f"{MEASURE} = {MEASURE_DEFINITION}" in text
    compared = text.split("vs topology")[1].splitlines()[1:]
    for line in compared:
        assert len(re.findall(r"\d+%", line)) == 1 and f"%{MEASURE[1:]}" in line, line
        assert "geomean;" not in line and "of predicted" not in line
    (group,) = json.loads(_invoke(str(run), "--json", "--topology", fabric).output)
    versus = group["vs_topology"]
    assert versus["measure"] == f"{MEASURE} = {MEASURE_DEFINITION}"
    band = versus["bands"][-1]
    assert f"{band['pct_of_model_speed_geomean']:.0f}% of model speed (geomean)" in text
    at = band["at_max_bytes"]
    assert f"{at['pct_of_model_speed']:.0f}% of model speed:" in text


def test_far_faster_than_the_model_says_the_model_is_wrong_not_a_bound(tmp_path):
    # 2 us per hop: the model's 14 hops take 28 us where the run's small sizes take 10 us
    run = _gpu_run(tmp_path / "a")
    fabric = str(_topology(tmp_path / "slow-model.yaml", 2.0))
    text = _invoke(str(run), "--topology", fabric).output
    lines = [line.strip() for line in text.split("vs topology")[1].splitlines()[1:]]
    small, at_small = lines[0], lines[1]
    assert small.startswith("small (") and "the model is wrong here, not the fabric" in small
    assert at_small.startswith("at 32 KiB:") and "the model is wrong here" in at_small
    assert "bound)" not in at_small and "latency term" in at_small
    large_at = lines[-1]
    assert large_at.endswith("bound)") and "wrong" not in large_at
    (group,) = json.loads(_invoke(str(run), "--json", "--topology", fabric).output)
    small_band = group["vs_topology"]["bands"][0]
    assert small_band["model_wrong"] is True
    assert small_band["pct_of_model_speed_geomean"] > 100 * MODEL_WRONG_SPEEDUP
    assert group["vs_topology"]["bands"][-1]["model_wrong"] is False


@pytest.mark.parametrize("latency_us", [1.0])
def test_no_model_wrong_wording_within_the_threshold(tmp_path, latency_us):
    run = _gpu_run(tmp_path / "a")
    text = _invoke(str(run), "--topology", str(_topology(tmp_path / "f.yaml", latency_us))).output
    assert "wrong here" not in text.split("vs topology")[1]


@pytest.mark.slow
def test_a_real_gloo_sweep_fits_without_warnings_and_says_how_good_it_is(tmp_path):
    from tests.helpers import collbench_process as collbench  # PYTHONWARNINGS needs a process

    run = tmp_path / "gloo"
    sweep = ("-g", "2", "-c", "all_reduce", "-b", "8", "-e", "1M", "-n", "5", "-w", "1")
    sweep += ("--repeats", "1")
    done = collbench("sweep", *sweep, "--out", str(run), "--quiet", timeout=600)
    assert done.returncode == 0, done.stderr
    text = collbench("fit", str(run), env={"PYTHONWARNINGS": "error::RuntimeWarning"})
    assert text.returncode == 0 and "Warning" not in text.stderr, text.stderr
    assert re.search(r"^  fit quality (good|fair|poor)", text.stdout, re.MULTILINE)
    assert not re.search(r"alpha \d\.\d+e-\d+ us", text.stdout)
    for group in json.loads(collbench("fit", str(run), "--json").stdout):
        assert group["quality"]["verdict"] in ("good", "fair", "poor")
        points_per_parameter = group["n_points"] / (3 * len(group["regimes"]) - 1)
        assert len(group["regimes"]) == 1 or points_per_parameter >= 2, group["regimes"]
