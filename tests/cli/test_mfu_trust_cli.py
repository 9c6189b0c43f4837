"""`collbench mfu` guard rails, end to end in a real subprocess: a workload that does not
fit the accelerators' memory is refused (or warned about), every figure says whether
measured or predicted collective times are under it, inputs that do not apply are named
in warnings, and --nodes may go with a --dp that agrees with it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_mfu_cli import _sweep_rows, write_fabric
from tests.helpers import collbench
from tests.rows import make_row, write_run

# Megatron's unfused attention (the paper's accounting: the scores are stored).
GPT3_ONE_GPU = ["--model", "gpt3-175b", "--global-batch", "1536", "--tp", "1", "--pp", "1"]
GPT3_ONE_GPU += ["--attention", "unfused"]
GPT3_MEGATRON = ["--model", "gpt3-175b", "--global-batch", "1536", "--tp", "8", "--pp", "8"]
GPT3_MEGATRON += ["--recompute", "selective", "--sequence-parallel"]
# TP 8 inside a node and DP 4 across four: an 8-rank all-reduce curve matches the TP group.
SMALL = ["--model", "llama3-8b", "--seq", "4096", "--global-batch", "16", "--tp", "8"]
SMALL += ["--dp", "4", "--recompute", "selective"]


def test_a_model_that_does_not_fit_is_refused_in_one_line():
    done = collbench("mfu", "--topology", "dgx-h100", *GPT3_ONE_GPU, "--dp", "128")
    assert done.returncode == 2, done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("collbench: error: --topology: 'dgx-h100'")
    for needle in ("needs ~3,183.5 GiB per accelerator", "80 GiB", "biggest is optimizer state"):
        assert needle in lines[0], lines[0]
    assert "--allow-oversubscribed-memory" in lines[0]


def test_allowed_oversubscription_warns_and_reports_the_memory():
    done = collbench(
        "mfu",
        "--topology",
        "dgx-h100",
        *GPT3_ONE_GPU,
        "--dp",
        "128",
        "--allow-oversubscribed-memory",
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("collbench: warning: --topology dgx-h100 is too small")
    row = next(line for line in done.stdout.splitlines() if "memory per acc." in line)
    assert row.split()[-4:] == ["3,183.5", "of", "80", "OVER"]
    assert "optimizer state 1,951.1" in done.stdout


def test_a_fitting_run_shows_its_memory_in_the_json():
    done = collbench("mfu", "--topology", "dgx-a100", *GPT3_MEGATRON, "--dp", "24", "--json")
    assert done.returncode == 0, done.stderr
    memory = json.loads(done.stdout)["fabrics"][0]["memory_per_accelerator"]
    assert memory["fits"] is True and memory["capacity_gib"] == 80
    parts = ("weights", "gradients", "optimizer_state", "activations")
    assert sum(memory[f"{part}_gib"] for part in parts) == memory["total_gib"] < 80


def test_nodes_that_agree_with_dp_are_accepted_and_others_refused():
    agree = collbench(
        "mfu", "--topology", "dgx-a100", *GPT3_MEGATRON, "--nodes", "192", "--dp", "24"
    )
    assert agree.returncode == 0, agree.stderr
    assert "1536 (192)" in agree.stdout
    clash = collbench(
        "mfu", "--topology", "dgx-a100", *GPT3_MEGATRON, "--nodes", "1024", "--dp", "24"
    )
    assert clash.returncode == 2
    assert clash.stderr.strip() == (
        "collbench: error: --nodes: 1024 conflicts with --dp 24: tp 8 x pp 8 x dp 24 = 1,536 "
        "accelerators fill 192 nodes of 8 on dgx-a100, not 1,024 (8,192 accelerators); give "
        "one of them or make them agree"
    )


def _curve_run(path: Path, world: int, nodes: int, **columns) -> str:
    rows = [
        make_row(**{**row.__dict__, **columns}) if columns else row
        for row in _sweep_rows(world, nodes, busbw_gbps=24.0, latency_us=30)
    ]
    return str(write_run(path, rows))


def test_each_column_says_measured_or_predicted(tmp_path):
    measured = write_fabric(tmp_path, "fabric-a", accelerator__memory_gib=80)
    predicted = write_fabric(tmp_path, "fabric-b", accelerator__memory_gib=80)
    run = _curve_run(tmp_path / "tp8", 8, 1, backend="nccl")
    args = ["--topology", measured, "--topology", predicted, *SMALL, "--curves", f"fabric-a={run}"]
    done = collbench("mfu", *args)
    assert done.returncode == 0, done.stderr
    rows = {line[:26].strip(): line[26:].split() for line in done.stdout.splitlines()[2:22]}
    assert rows["collectives priced by"] == ["measured+predicted", "predicted"]
    # "12.3% m+p [not validated]  45.6% p [not validated]" (the fabrics' accelerator "X")
    assert rows["MFU"][1::4] == ["m+p", "p"] and rows["MFU"][2::4] == ["[not"] * 2
    assert rows["exposed tp"][-1] == "p" and rows["exposed tp"][2] == "m"
    data = json.loads(collbench("mfu", *args, "--json").stdout)
    first, second = data["fabrics"]
    assert (first["priced_by"], second["priced_by"]) == ("measured+predicted", "predicted")
    assert first["collectives"]["tp"]["priced_by"] == "measured"
    assert "m: from measured curves" in done.stdout


def test_inputs_that_do_not_apply_are_named_in_warnings(tmp_path):
    fabric = write_fabric(tmp_path, accelerator__memory_gib=80)
    knobs = {"env": {"RCCL_MSCCL_ENABLE": "1", "NCCL_ALGO": "Ring"}}
    wrong_ranks = _curve_run(tmp_path / "ar16", 16, 2, backend="nccl", knobs=knobs)
    wrong_nodes = _curve_run(tmp_path / "ar4", 4, 1, backend="nccl")
    wrong_kind = _curve_run(tmp_path / "a2a", 8, 1, backend="nccl", collective="all_to_all")
    probe = write_run(
        tmp_path / "probe",
        [make_row(kind="overlap", overlap_pct=50.0, compute_slowdown=0.1) for _ in range(3)],
        {"backend": "gloo", "ranks": [{"device": "cpu", "device_name": "Intel Xeon"}] * 2},
    )
    curves = [arg for run in (wrong_ranks, wrong_nodes, wrong_kind) for arg in ("--curves", run)]
    done = collbench("mfu", "--topology", fabric, *SMALL, *curves, "--overlap", str(probe))
    assert done.returncode == 0, done.stderr
    warnings = done.stderr.strip().splitlines()
    assert all(line.startswith("collbench: warning: ") for line in warnings), warnings
    expected = [
        f"--curves {wrong_ranks}: its all_reduce at 16 ranks over 2 nodes was not used on "
        "fabric-a: no all_reduce group of the workload has 16 ranks",
        f"--curves {wrong_nodes}: its all_reduce at 4 ranks over 1 node was not used on "
        "fabric-a: the workload's 4-rank all_reduce spans another node count",
        f"--curves {wrong_kind}: its all_to_all at 8 ranks over 1 node was not used on "
        "fabric-a: the workload runs no all_to_all",
        f"--curves {wrong_ranks} recorded knobs for another backend than fabric-a's nccl: "
        "RCCL_MSCCL_ENABLE is read by rccl, not by nccl",
        f"--overlap {probe} was measured with gloo on cpu, not as fabric-a runs (nccl on X)",
    ]
    for needle in expected:
        assert sum(needle in line for line in warnings) == 1, (needle, warnings)
    assert not any("NCCL_ALGO" in line for line in warnings)
