"""`collbench mfu` end to end: a real subprocess, topology files of the test's own, measured
curves and probe runs written as rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from collbench.store.rows import ResultRow
from tests.helpers import collbench
from tests.rows import make_row, write_run

FABRIC = {
    "name": "fabric-a",
    "nodes": 4,
    "accelerators_per_node": 8,
    "accelerator": {"name": "X", "peak_bf16_tflops": 312.0},
    "scale_up": {"kind": "nvlink", "bandwidth_gbytes_s": 300, "latency_us": 2, "domain_size": 8},
    "scale_out": {"kind": "infiniband", "nics_per_node": 8, "nic_gbits_s": 200, "latency_us": 5},
}
CATALOG = Path(__file__).resolve().parents[2] / "topologies"
LLAMA = ["--model", "llama3-8b", "--seq", "4096", "--global-batch", "64", "--tp", "2", "--dp", "16"]


def write_fabric(tmp_path: Path, name: str = "fabric-a", **changes) -> str:
    data = {**FABRIC, "name": name}
    for key, value in changes.items():
        section, _, field = key.partition("__")
        if field:
            data[section] = {**data[section], field: value}
        else:
            data[section] = value
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return str(path)


def run_mfu(*args: str) -> dict:
    done = collbench("mfu", *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_two_fabrics_side_by_side(tmp_path):
    slow = write_fabric(tmp_path, "slow-nics", scale_out__nic_gbits_s=25)
    fast = write_fabric(tmp_path)
    done = collbench("mfu", "--topology", slow, "--topology", fast, *LLAMA, "--zero", "1")
    assert done.returncode == 0, done.stderr
    header = next(line for line in done.stdout.splitlines() if "slow-nics" in line)
    assert "fabric-a" in header
    for label in (
        "step time (s)",
        "exposed dp",
        "pipeline bubble",
        "MFU lost to exposed comm",
        "what if: perfect overlap",
        "what if: 2x scale-out",
    ):
        assert label in done.stdout
    data = run_mfu("--topology", slow, "--topology", fast, *LLAMA, "--zero", "1")
    first, second = data["fabrics"]
    for key in ("mfu", "mfu_loss_comm", "step_time_s", "breakdown"):
        assert key in first
    assert first["mfu"] < second["mfu"]  # 25 Gb/s NICs cost MFU that 200 Gb/s ones do not
    assert first["what_if_mfu"]["scale_out_2x"] > first["mfu"]
    assert first["what_if_mfu"]["perfect_overlap"] == pytest.approx(
        first["mfu"] + first["mfu_loss_comm"]
    )


def test_a_llama_shape_given_by_hand_is_the_preset(tmp_path):
    fabric = write_fabric(tmp_path)
    common = ["--topology", fabric, "--global-batch", "64", "--tp", "8", "--dp", "4"]
    preset = run_mfu(*common, "--model", "llama3-8b")
    by_hand = run_mfu(
        *common,
        "--layers",
        "32",
        "--hidden",
        "4096",
        "--heads",
        "32",
        "--kv-heads",
        "8",
        "--ffn-hidden",
        "14336",
        "--vocab",
        "128256",
        "--gated-mlp",
        "--untied-embeddings",
    )
    assert by_hand["workload"]["params"] == pytest.approx(preset["workload"]["params"])
    assert by_hand["fabrics"][0]["mfu"] == pytest.approx(preset["fabrics"][0]["mfu"])


def test_shape_flags_and_derived_dp(tmp_path):
    data = run_mfu(
        "--topology",
        write_fabric(tmp_path),
        "--layers",
        "24",
        "--hidden",
        "2048",
        "--heads",
        "16",
        "--vocab",
        "50304",
        "--global-batch",
        "64",
        "--tp",
        "2",
    )
    assert data["workload"]["dp"] == 16  # 4 nodes x 8 / tp 2
    assert data["workload"]["model"] == "custom"
    assert 0 < data["fabrics"][0]["mfu"] < 0.65


def _write_rows(run: Path, rows: list[ResultRow]) -> str:
    return str(write_run(run, rows))  # no meta.json: the rows are what --curves reads


def _sweep_rows(world: int, nodes: int, busbw_gbps: float, latency_us: float) -> list[ResultRow]:
    rows = []
    for power in range(10, 31, 2):
        size = 2**power
        time_us = latency_us + size * 2 * (world - 1) / world / (busbw_gbps * 1e3)
        rows.append(make_row(world_size=world, nodes=nodes, size_bytes=size, time_us=time_us))
    return rows


def test_measured_curves_replace_predictions_for_matching_groups(tmp_path):
    fabric = write_fabric(tmp_path)
    # TP 8 all-reduces inside one node, measured ten times slower than the fabric's bound.
    run = _write_rows(tmp_path / "measured", _sweep_rows(8, 1, busbw_gbps=24.0, latency_us=30))
    args = [
        "--topology",
        fabric,
        "--model",
        "llama3-8b",
        "--seq",
        "4096",
        "--global-batch",
        "16",
        "--tp",
        "8",
        "--dp",
        "4",
    ]
    predicted = run_mfu(*args)["fabrics"][0]
    measured = run_mfu(*args, "--curves", run)["fabrics"][0]
    assert measured["collectives"]["tp"]["priced"].startswith("measured")
    assert predicted["collectives"]["tp"]["priced"].startswith("predicted")
    assert measured["collectives"]["dp"]["priced"].startswith("predicted")  # no 4-rank curve
    assert (
        measured["breakdown"]["exposed_comm_s"]["tp"]
        > 5 * (predicted["breakdown"]["exposed_comm_s"]["tp"])
    )


def test_overlap_probe_figures_are_used_and_said(tmp_path):
    fabric = write_fabric(tmp_path, scale_out__nic_gbits_s=25)
    probes = [
        make_row(
            kind="overlap",
            size_bytes=1 << 24,
            overlap_pct=40.0,
            compute_slowdown=0.25,
            compute_ratio_actual=1.9,
        )
        for _ in range(3)
    ]
    # short compute can hide little: these rows must not drag the median down
    probes += [
        make_row(
            kind="overlap",
            size_bytes=1 << 24,
            overlap_pct=5.0,
            compute_slowdown=0.5,
            compute_ratio_actual=0.5,
        )
        for _ in range(4)
    ]
    run = _write_rows(tmp_path / "probe", probes)
    usual = run_mfu("--topology", fabric, *LLAMA)["fabrics"][0]
    probed = run_mfu("--topology", fabric, *LLAMA, "--overlap", run)["fabrics"][0]
    assert any("40% of the collective hidden" in text for text in probed["assumptions"])
    assert any("Lee et al. 2025's mean (no probe" in text for text in usual["assumptions"])
    assert probed["breakdown"]["compute_slowdown_s"] > usual["breakdown"]["compute_slowdown_s"]
    assert probed["mfu"] < usual["mfu"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--model", "gpt-9", "--global-batch", "8"], "--model: 'gpt-9' is not a preset"),
        (["--model", "llama3-8b"], "--global-batch is required"),
        (["--global-batch", "8"], "--model (a preset) or the shape is required: missing --layers"),
        (
            ["--model", "llama3-8b", "--layers", "4", "--global-batch", "8"],
            "conflicts with --model",
        ),
        (["--model", "llama3-8b", "--global-batch", "8", "--tp", "3"], "--tp: 3 must divide"),
        (["--model", "llama3-8b", "--global-batch", "8", "--recompute", "some"], "--recompute"),
        (["--model", "llama3-8b", "--global-batch", "8", "--dtype", "fp8"], "no fp8 peak"),
        (
            ["--model", "llama3-8b", "--global-batch", "8", "--matmul-efficiency", "2"],
            "--matmul-efficiency: 2.0 must be from 0.01 to 1",
        ),
        (["--model", "llama3-8b", "--global-batch", "8", "--tp", "0"], "--tp: 0 must be"),
        (["--model", "llama3-8b", "--global-batch", "8", "--nodes", "2"], "conflicts with --dp"),
        (["--model", "llama3-8b", "--global-batch", "8", "--params", "nan"], "--params: nan"),
        (
            ["--model", "llama3-8b", "--global-batch", "8", "--kv-heads", "4"],
            "--kv-heads: 4 conflicts with --model",
        ),
        (
            ["--model", "llama3-8b", "--global-batch", "8", "--comm-efficiency", "0"],
            "--comm-efficiency: 0.0 must be from 0.01 to 1",
        ),
        (
            [
                "--model",
                "llama3-8b",
                "--global-batch",
                "8",
                "-T",
                "dgx-h100",
                "-T",
                str(CATALOG / "dgx-h100.yaml"),
            ],
            "--topology: 'dgx-h100' is given twice",
        ),
        (
            ["--model", "llama3-8b", "--global-batch", "8", "--curves", "/no/such/run"],
            "--curves: '/no/such/run' holds no result rows",
        ),
        (
            ["--model", "llama3-8b", "--global-batch", "8", "--overlap", "/no/such/run"],
            "--overlap: '/no/such/run' holds no result rows",
        ),
    ],
)
@pytest.mark.slow  # one real `collbench mfu` per case, ~7 s together; one stays below
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, needle):
    done = collbench("mfu", "--topology", write_fabric(tmp_path), "--dp", "1", *args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("collbench: error: "), done.stderr
    assert needle in lines[0], lines[0]


def test_a_bad_topology_file_names_the_field(tmp_path):
    bad = write_fabric(tmp_path, scale_up__bandwidth_gbytes_s=-3)
    done = collbench("mfu", "--topology", bad, "--model", "llama3-8b", "--global-batch", "8")
    assert done.returncode == 2
    assert "scale_up.bandwidth_gbytes_s: -3 must be from 0.001 to 1e+06" in done.stderr


def test_a_recipe_s_userbuffer_configuration_is_read_from_yaml(tmp_path):
    """--tp-overlap FILE takes TE's ub_cfg as NeMo writes it (userbuffer overlap, 1); a pair
    it cannot price is one line and exit 2."""
    config = tmp_path / "ub.yaml"
    config.write_text(
        "ub_tp_comm_overlap_cfg:\n"
        "  proj_fprop: {method: ring_exchange, num_sm: 1, set_sm_margin: 1}\n"
        "  qkv_wgrad: {method: bulk, num_sm: 24, cga_size: 2}\n",
        encoding="utf-8",
    )
    common = ["--topology", "dgx-h100", "--model", "llama3-8b", "--global-batch", "8",
              "--tp", "4", "--dp", "2", "--sequence-parallel", "--tp-overlap"]  # fmt: skip
    document = run_mfu(*common, str(config))
    assumed = " ".join(document["fabrics"][0]["assumptions"])
    assert "as configured (--tp-overlap FILE): proj_fprop ring_exchange on 1 SM" in assumed
    assert "qkv_wgrad bulk on 24 SMs" in assumed
    config.write_text("proj_fprop: {method: bulk}\n", encoding="utf-8")
    done = collbench("mfu", *common, str(config))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "proj_fprop takes pipeline or ring_exchange" in done.stderr
    config.write_text("", encoding="utf-8")  # an empty file is named, not called None
    done = collbench("mfu", *common, str(config))
    assert f"--tp-overlap: '{config}' must map TE's pair names" in done.stderr, done.stderr


def test_too_few_accelerators_names_every_model_parallel_dimension():
    done = collbench(
        "mfu", "-T", "dgx-h100", "-m", "llama3-8b", "--global-batch", "16", "--cp", "4096"
    )
    assert done.returncode == 2, done.stderr
    assert "fewer than tp 1 x cp 4096 x pp 1 = 4,096" in done.stderr, done.stderr
