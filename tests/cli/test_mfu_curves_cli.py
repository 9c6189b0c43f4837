"""`collbench mfu --curves LABEL=RUN ...` and `--curves TUNE_DIR`: the MFU of each setting's
measured curves side by side, and what tuning recovers. Synthetic sweeps (tests/rows.py)
of the workload's own TP group (8 ranks on one node), one setting slower than the other."""

from __future__ import annotations

import json
from dataclasses import replace

from tests.cli.test_mfu_cli import _sweep_rows, run_mfu, write_fabric
from tests.helpers import collbench
from tests.rows import write_run

JOB = ["--model", "llama3-8b", "--seq", "4096", "--global-batch", "16", "--tp", "8", "--dp", "4"]


def _settings(tmp_path):
    slow = write_run(tmp_path / "default", _sweep_rows(8, 1, busbw_gbps=24.0, latency_us=30))
    fast = write_run(tmp_path / "tuned", _sweep_rows(8, 1, busbw_gbps=96.0, latency_us=30))
    return str(slow), str(fast)


def test_two_labelled_settings_print_both_mfu_figures(tmp_path):
    fabric = write_fabric(tmp_path)
    slow, fast = _settings(tmp_path)
    curves = ["--curves", f"default={slow}", "--curves", f"tuned={fast}"]
    done = collbench("mfu", "--topology", fabric, *JOB, *curves)
    assert done.returncode == 0, done.stderr
    header = next(line for line in done.stdout.splitlines() if "[default]" in line)
    assert "fabric-a [tuned]" in header
    data = run_mfu("--topology", fabric, *JOB, *curves)
    default, tuned = data["fabrics"]
    assert (default["curves_label"], tuned["curves_label"]) == ("default", "tuned")
    assert default["curves_default"] and not tuned["curves_default"]
    assert tuned["mfu"] > default["mfu"]  # 4x the TP busbw
    points = (tuned["mfu"] - default["mfu"]) * 100
    mfu_line = next(line for line in done.stdout.splitlines() if line.startswith("MFU "))
    assert f"{default['mfu']:.1%}" in mfu_line and f"{tuned['mfu']:.1%}" in mfu_line
    assert f"tuning recovers {points:+.2f} MFU points on this fabric (fabric-a)" in done.stdout


def test_a_topology_name_still_names_a_topology_and_a_catalog_slip_is_refused(tmp_path):
    fabric = write_fabric(tmp_path)
    slow, _ = _settings(tmp_path)
    data = run_mfu("--topology", fabric, *JOB, "--curves", f"fabric-a={slow}")
    assert ["curves_label" in item for item in data["fabrics"]] == [False]
    assert data["fabrics"][0]["collectives"]["tp"]["priced"].startswith("measured")
    done = collbench("mfu", "--topology", fabric, *JOB, "--curves", f"dgx-h100={slow}")
    assert done.returncode == 2 and "names no --topology given" in done.stderr


def test_a_tune_directory_gives_its_baseline_and_best_env_setting(tmp_path):
    fabric = write_fabric(tmp_path)
    slow, fast = _settings(tmp_path)
    tune_dir = tmp_path / "tuned-dir"
    settings = tune_dir / "settings"
    for name, source in (("00-base", slow), ("01-algo", fast)):
        (settings / name).mkdir(parents=True)
        for item in ("rows.jsonl",):
            (settings / name / item).write_bytes((tmp_path / source / item).read_bytes())
    tune = {
        "settings": [
            {"knobs": {}, "label": "baseline", "baseline": True, "run_dirs": ["settings/00-base"]},
            {
                "knobs": {"NCCL_ALGO": "Tree"},
                "label": "NCCL_ALGO=Tree",
                "baseline": False,
                "run_dirs": ["settings/01-algo"],
            },
        ],
        "best": [],
        "env": {"knobs": {"NCCL_ALGO": "Tree"}, "setting": "NCCL_ALGO=Tree"},
    }
    (tune_dir / "tune.json").write_text(json.dumps(tune))
    done = collbench("mfu", "--topology", fabric, *JOB, "--curves", str(tune_dir))
    assert done.returncode == 0, done.stderr
    assert "fabric-a [baseline]" in done.stdout and "fabric-a [NCCL_ALGO=Tree]" in done.stdout
    assert "tuning recovers +" in done.stdout


def test_a_runs_dtypes_are_never_pooled_one_is_chosen_and_said(tmp_path):
    """Issue 41 item 1: a run of two dtypes prices the one chosen (first by name at equal
    counts: bfloat16), as a bfloat16-only run does, and says so in one line."""
    fabric = write_fabric(tmp_path)
    bf16 = [replace(row, dtype="bfloat16") for row in _sweep_rows(8, 1, 24.0, 30)]
    both = write_run(tmp_path / "both", [*_sweep_rows(8, 1, 96.0, 30), *bf16])
    done = collbench("mfu", "--topology", fabric, *JOB, "--curves", str(both))
    assert done.returncode == 0, done.stderr
    note = f"--curves {both}: its all_reduce at 8 ranks holds 2 dtype/op sets (bfloat16 sum, "
    assert note + "float32 sum): priced with bfloat16 sum only" in done.stderr
    alone = write_run(tmp_path / "alone", bf16)
    mixed = run_mfu("--topology", fabric, *JOB, "--curves", str(both))
    assert (
        mixed["fabrics"][0]["mfu"]
        == run_mfu("--topology", fabric, *JOB, "--curves", str(alone))["fabrics"][0]["mfu"]
    )
