"""`mfu --gemm RUN`: measured GEMM rates replace the shape model shape by shape, only on a
fabric with the same accelerator, and what does not apply is named in a warning."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from collbench.analysis.mfu.accuracy import family
from collbench.analysis.mfu.compute import model_pricer, workload_gemms
from collbench.analysis.mfu.estimate import estimate
from collbench.analysis.mfu.fabrics import sized_for
from collbench.analysis.mfu.gemm_prices import (
    gemm_pricer_for,
    measured_gemms,
    same_accelerator,
)
from collbench.analysis.mfu.inputs import cost_model_pricer
from collbench.analysis.mfu.presets import preset
from collbench.analysis.mfu.workload import Parallelism, Training, Workload
from collbench.core.errors import SpecError
from collbench.topologies.loader import load_topology


def llama(tp: int = 8) -> Workload:
    return Workload(
        preset("llama3-8b"),
        Training(seq=4096, global_batch=64),
        Parallelism(tp=tp, pp=1, dp=8),
    )


def rows_for(workload: Workload, tflops: float, device: str = "NVIDIA H100 80GB HBM3"):
    return [
        SimpleNamespace(
            kind="gemm", shape=gemm.shape, tflops=tflops, accelerator=device, dtype="bf16"
        )
        for gemm in workload_gemms(workload)
    ]


@pytest.mark.parametrize(
    ("device", "catalog", "same"),
    [
        ("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3 (SXM5)", True),
        ("NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB", True),
        ("NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3 (SXM5)", False),
        ("AMD Instinct MI300X", "AMD Instinct MI300X", True),
        ("AMD Instinct MI300X", "AMD Instinct MI355X", False),
        ("NVIDIA H200", "NVIDIA H100 80GB HBM3 (SXM5)", False),
        ("AMD EPYC 7B13", "CPU (one vCPU of an AMD EPYC VM)", False),
        ("AMD EPYC", "CPU (one vCPU of an AMD EPYC VM)", True),
        ("AMD EPYC", "NVIDIA H100 80GB HBM3 (SXM5)", False),
    ],
)
def test_accelerators_are_compared_by_model(device, catalog, same):
    assert same_accelerator(device, catalog) is same


def test_model_tokens():
    assert family("NVIDIA A100-SXM4-80GB") == "A100"
    assert family("NVIDIA GH200 480GB") == "GH200"
    assert family("something else") is None


def test_measured_rates_replace_the_model_shape_by_shape():
    workload = llama()
    topology = sized_for(workload, load_topology("dgx-h100"))
    measured = measured_gemms(rows_for(workload, 400.0), "runs/g")
    fallback = model_pricer(topology.accelerator, 989e12)
    pricer, warnings = gemm_pricer_for(measured, workload, topology, fallback)
    assert pricer is not None and warnings == []
    result = estimate(workload, topology, cost_model_pricer(topology), gemms=pricer)
    model = estimate(workload, topology, cost_model_pricer(topology))
    assert result.micro is not None and model.micro is not None
    for gemm, price in result.micro.gemms:
        assert price.bound == "measured"
        assert price.time_s == pytest.approx(gemm.flops / 400e12)
    # 400 TFLOP/s is below the model's rate for these shapes: the step is slower.
    assert result.step_time_s > model.step_time_s
    assert any("measured rate (--gemm)" in text for text in result.assumptions)


def test_a_run_from_another_accelerator_is_named_and_not_used():
    workload = llama()
    topology = sized_for(workload, load_topology("dgx-a100"))
    measured = measured_gemms(rows_for(workload, 400.0), "runs/g")
    pricer, warnings = gemm_pricer_for(measured, workload, topology, lambda gemm: None)
    assert pricer is None
    assert warnings == [
        "--gemm runs/g was measured on NVIDIA H100 80GB HBM3, not on dgx-a100's NVIDIA "
        "A100-SXM4-80GB: not used there (its GEMMs priced by shape)"
    ]


def test_missing_and_foreign_shapes_are_named():
    workload = llama()
    topology = sized_for(workload, load_topology("dgx-h100"))
    rows = rows_for(workload, 500.0)[1:]  # the first shape not measured
    rows.append(
        SimpleNamespace(
            kind="gemm",
            shape="4096x4096x4096",
            tflops=700.0,
            accelerator="NVIDIA H100 80GB HBM3",
            dtype="bf16",
        )
    )
    measured = measured_gemms(rows, "runs/g")
    fallback = model_pricer(topology.accelerator, 989e12)
    pricer, warnings = gemm_pricer_for(measured, workload, topology, fallback)
    assert pricer is not None
    first = workload_gemms(workload)[0]
    count = len(workload_gemms(workload))
    assert warnings[0].startswith(
        f"--gemm runs/g did not measure 1 of the workload's {count} GEMM shapes "
        f"({first.shape} qkv fwd): priced by shape"
    )
    assert warnings[1] == (
        "--gemm runs/g: 1 measured shape (4096x4096x4096) the workload does not run: not used"
    )
    assert pricer(first).bound == "compute"  # the shape model's


def test_another_workload_entirely_is_not_used():
    measured = measured_gemms(rows_for(llama(tp=1), 500.0), "runs/g")
    workload = llama(tp=8)
    topology = sized_for(workload, load_topology("dgx-h100"))
    pricer, warnings = gemm_pricer_for(measured, workload, topology, lambda gemm: None)
    assert pricer is None and "did not measure" in warnings[0]


def test_a_run_without_gemm_rows_is_refused():
    with pytest.raises(SpecError, match="holds no gemm rows"):
        measured_gemms([], "runs/s")
