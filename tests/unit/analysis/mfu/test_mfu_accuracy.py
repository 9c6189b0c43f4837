"""analysis/mfu/accuracy.py: an estimate's demonstrated error, found by accelerator and regime."""

from __future__ import annotations

from dataclasses import replace

import pytest

from collbench.analysis.mfu.accuracy import (
    DEMONSTRATED,
    Demonstrated,
    accuracy_line,
    band,
    demonstrated,
    family,
    regime,
)
from collbench.analysis.mfu.presets import preset
from collbench.analysis.mfu.workload import Parallelism, Training, Workload
from collbench.topologies.loader import load_topology


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA H100 80GB HBM3 (SXM5)", "H100"),
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("AMD Instinct MI300X", "MI300X"),
        ("NVIDIA B200", "B200"),
        ("x86 CPU", None),
    ],
)
def test_family_is_the_model_number(name, expected):
    assert family(name) == expected


def test_every_h100_topology_shares_the_h100_verdict():
    """The catalog's H100 fabrics (DGX and A3 Mega) run the same accelerator: the same
    published runs speak for both."""
    for name in ("dgx-h100", "a3-mega"):
        accelerator = load_topology(name).accelerator.name
        assert demonstrated(accelerator, "3-D parallel") is DEMONSTRATED["H100 3-D parallel"]


def _workload(**parallelism) -> Workload:
    split = {"tp": 1, "pp": 1, "dp": 8, **parallelism}
    batch = Training(seq=4096, global_batch=8 * split["dp"])
    return Workload(preset("llama3-8b"), batch, Parallelism(**split))


@pytest.mark.parametrize(
    ("workload", "expected"),
    [
        (lambda: _workload(tp=8, pp=4, dp=1), "3-D parallel"),
        (lambda: _workload(dp=8, zero=3), "FSDP"),
        (lambda: _workload(dp=8), "small models"),
        (lambda: _workload(dp=8192, zero=3), "more than 4k GPUs"),  # before FSDP
        (
            lambda: replace(_workload(dp=8), training=Training(4096, 64, framework="eager")),
            "PyTorch eager",
        ),  # fmt: skip
        (
            lambda: Workload(preset("gpt3-175b"), Training(2048, 64), Parallelism(tp=8, dp=8)),
            "TP and DP",
        ),  # fmt: skip
        (
            lambda: Workload(preset("deepseek-v3"), Training(4096, 64), Parallelism(ep=8, dp=8)),
            "MoE",
        ),  # fmt: skip
    ],
)
def test_each_workload_is_in_the_first_regime_that_holds_it(workload, expected):
    assert regime(workload()) == expected


def test_a_regime_no_run_of_its_accelerator_validates_says_not_validated():
    """An H100 estimate of a regime no H100 run is in is not given the other regimes' band."""
    h100 = load_topology("dgx-h100").accelerator.name
    a100 = load_topology("dgx-a100").accelerator.name  # MLPerf's runs: H100, H200, B200
    assert band(a100, "more than 4k GPUs") == band(a100, "small models") == "not validated"
    fsdp = DEMONSTRATED["H100 FSDP"]  # one run so far: its error, said to be one run's
    one = f"{fsdp.low:+.1%} on 1 run"
    assert band(h100, "FSDP") == (one if fsdp.runs == 1 else f"{fsdp.low:+.1%} to {fsdp.high:+.1%}")
    line = accuracy_line("dgx-a100", a100, "small models")
    assert "(A100 small models): no published run of this regime" in line
    b200 = load_topology("dgx-b200").accelerator.name  # the eager runs are A100 and H100
    assert band(b200, "PyTorch eager") == "not validated"


def test_the_line_states_the_range_and_its_sign():
    known = Demonstrated("H100", 10, -0.077, 0.171, 0.093)
    line = known.line("dgx-h100")
    assert "dgx-h100 (H100)" in line and "10 published runs" in line
    assert "-7.7% to +17.1%" in line and "median |error| 9.3%" in line
    assert "+: faster than the run" in line


def test_an_accelerator_no_run_validates_says_its_error_is_not_known():
    line = accuracy_line("mi300x", load_topology("mi300x").accelerator.name, "3-D parallel")
    assert "MI300X 3-D parallel" in line and "no published run" in line and "not known" in line


def test_the_json_form_names_every_figure():
    known = DEMONSTRATED["A100 3-D parallel"]
    assert known.to_dict() == {
        "family": "A100 3-D parallel",
        "runs": known.runs,
        "mfu_error_low": known.low,
        "mfu_error_high": known.high,
        "mfu_error_median_abs": known.median_abs,
    }


def test_moe_workloads_have_their_own_verdict():
    """A MoE estimate is read against the MoE runs, not the dense ones: its all-to-alls
    and their overlap are a model of their own."""
    h100 = load_topology("dgx-h100").accelerator.name
    assert demonstrated(h100, "MoE") is DEMONSTRATED["H100 MoE"]
    a100 = load_topology("dgx-a100").accelerator.name
    line = accuracy_line("dgx-a100", a100, "MoE")
    assert "A100 MoE" in line and "no published run of this regime" in line


def test_one_run_is_stated_as_one_figure():
    line = Demonstrated("H100 MoE", 1, 0.456, 0.456, 0.456).line("dgx-h100")
    assert "on 1 published run the estimated MFU erred +45.6% (" in line
    assert "to" not in line.split("erred")[1].split("(")[0] and "median" not in line


def test_the_sustained_clock_scales_every_dtype_s_burst_fraction():
    """A GEMM that runs on settles at the power-limited clock: the shape model prices the
    burst fraction (MAMF) times the measured sustained share, for bf16 and fp8 alike; an
    entry that measures none is priced at its burst figure."""
    from dataclasses import replace

    from collbench.analysis.model.gemm_model import matmul_fraction

    h100 = load_topology("dgx-h100").accelerator
    assert h100.matmul_sustained is not None and 0.8 < h100.matmul_sustained < 0.9
    assert h100.matmul_fraction is not None and h100.matmul_fraction_fp8 is not None
    assert matmul_fraction(h100) == h100.matmul_fraction * h100.matmul_sustained
    assert matmul_fraction(h100, "fp8") == h100.matmul_fraction_fp8 * h100.matmul_sustained
    burst = replace(h100, matmul_sustained=None)
    assert matmul_fraction(burst) == h100.matmul_fraction
    a100 = load_topology("dgx-a100").accelerator
    assert a100.matmul_sustained is None and matmul_fraction(a100) == a100.matmul_fraction


def test_a_sustained_share_above_one_is_refused(tmp_path):
    from pathlib import Path

    import pytest as _pytest
    import yaml

    from collbench.topologies.schema import TopologyError

    catalog = Path(__file__).resolve().parents[4] / "topologies" / "dgx-h100.yaml"
    data = yaml.safe_load(catalog.read_text())
    data["accelerator"]["matmul_sustained"] = 1.2
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(data))
    with _pytest.raises(TopologyError, match="matmul_sustained"):
        load_topology(str(path))


def test_the_h200_and_h800_carry_the_h100_runs_band_and_say_whose_it_is():
    h100 = load_topology("dgx-h100").accelerator.name
    for accelerator in (load_topology("hgx-h200").accelerator.name, "NVIDIA H800"):
        assert band(accelerator, "FSDP") == band(h100, "FSDP") != "not validated"
        assert "(H100 FSDP): on " in accuracy_line("x", accelerator, "FSDP")
    assert band("AMD Instinct MI300X", "FSDP") == "not validated"
