"""Which backend a fabric runs, knobs recorded for another backend, and where each collective
time of an estimate came from (measured, predicted or both)."""

from __future__ import annotations

import pytest

from collbench.analysis.mfu.estimate import MIXED, PREDICTED, Priced, estimate
from collbench.analysis.mfu.fabrics import fabric_backend, run_warnings
from collbench.analysis.mfu.presets import preset
from collbench.analysis.mfu.workload import Parallelism, Training, Workload
from collbench.topologies.loader import load_topology
from tests.rows import make_row, make_run


@pytest.mark.parametrize(
    ("name", "backend"),
    [
        ("dgx-h100", "nccl"),
        ("dgx-a100", "nccl"),
        ("gb200-nvl72", "nccl"),
        ("mi300x", "rccl"),
        ("mi355x", "rccl"),
        ("cpu-local", "gloo"),
    ],
)
def test_each_catalog_fabric_has_its_backend(name, backend):
    assert fabric_backend(load_topology(name)) == backend


def test_nccl_knobs_on_a_gloo_fabric_are_named():
    run = make_run("r", [make_row(knobs={"env": {"NCCL_ALGO": "Ring", "OMP_NUM_THREADS": "1"}})])
    warnings = run_warnings(run, "--curves", load_topology("cpu-local"))
    assert warnings == [
        "--curves r recorded knobs for another backend than cpu-local's gloo: NCCL_ALGO "
        "is read by nccl/rccl, not by gloo"
    ]


def test_a_run_on_the_fabrics_own_platform_gets_no_warning():
    ranks = [{"device": "cuda:0", "device_name": "NVIDIA H100 80GB HBM3"}]
    run = make_run("r", [make_row(backend="nccl")], backend="nccl", ranks=ranks)
    assert run_warnings(run, "--overlap", load_topology("dgx-h100")) == []
    assert (
        "measured with nccl on H100" in run_warnings(run, "--overlap", load_topology("mi300x"))[0]
    )


def test_each_collective_kind_says_where_its_time_came_from():
    """DP with ZeRO 1: a measured reduce-scatter and a predicted all-gather make it both."""
    topology = load_topology("dgx-h100").with_nodes(4)
    workload = Workload(
        preset("llama3-8b"),
        Training(seq=4096, global_batch=32),
        Parallelism(tp=8, dp=4, zero=1),
    )

    def pricer(collective: str, size_bytes: float, ranks: int, stride: int) -> Priced:
        measured = collective == "reduce_scatter"
        return Priced(1e-3, "measured run" if measured else "model", measured=measured)

    result = estimate(workload, topology, pricer)
    origins = {kind.kind: kind.origin for kind in result.comm}
    assert origins == {"tp": PREDICTED, "pp": "-", "dp": MIXED}
    assert result.origin == MIXED
    dp = next(kind for kind in result.comm if kind.kind == "dp")
    assert dp.source == "reduce_scatter measured run; all_gather model"


def test_a_figure_the_entry_did_not_measure_is_named_beside_its_fabric():
    """gb200-nvl72 borrows the DGX B200's sustained clock (its source starts NOT MEASURED):
    its estimate says so, with the source's first sentence; dgx-b200's, measured, does not."""
    workload = Workload(preset("llama3-8b"), Training(seq=4096, global_batch=32), Parallelism())

    def pricer(collective: str, size_bytes: float, ranks: int, stride: int) -> Priced:
        return Priced(1e-3, "model")

    def unmeasured(name: str) -> list[str]:
        assumed = estimate(workload, load_topology(name), pricer).assumptions
        return [text for text in assumed if "NOT MEASURED" in text]

    assert unmeasured("dgx-b200") == []
    (line,) = unmeasured("gb200-nvl72")
    assert line.startswith("accelerator.matmul_sustained: NOT MEASURED on GB200: the DGX B200")
    assert line.endswith("the same B200 die at 1,000 W instead of 1,200 W")
