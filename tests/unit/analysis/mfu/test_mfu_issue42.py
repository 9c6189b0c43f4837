"""Issue 42's estimator options, each against hand-computed figures: the MI300X's matmul
fraction from its cited table, --matmul-efficiency per fabric, the fp8 output layer priced
in bf16, and the dtypes of the data-parallel traffic (--dp-dtypes)."""

from __future__ import annotations

import pytest

from collbench.analysis.mfu.estimate import EstimateOptions, gemm_pricer, parse_efficiencies
from collbench.analysis.mfu.step_collectives import step_collectives
from collbench.analysis.mfu.workload import Model, Parallelism, Training, Workload
from collbench.analysis.model.gemm_model import Gemm
from collbench.cli.workload import dp_dtype_bytes
from collbench.core.errors import SpecError
from collbench.topologies.loader import load_topology
from tests.unit.analysis.mfu.test_mfu import make_topology


def test_mi300x_matmul_fraction_is_its_cited_tables_current_row():
    # ml-engineering's MAMF table: MI300X 668.4 TFLOP/s; the catalog's peak 1307.4
    assert load_topology("mi300x").accelerator.matmul_fraction == 0.511 == round(668.4 / 1307.4, 3)


def test_matmul_efficiency_per_fabric_by_topology_then_accelerator_then_plain():
    assert parse_efficiencies("0.6") == 0.6  # a plain number: every fabric, as before
    given = parse_efficiencies("MI300X=0.5,h100=0.4,0.25")
    assert given == (("mi300x", 0.5), ("h100", 0.4), ("", 0.25))
    options = EstimateOptions(matmul_efficiency=given)
    shares = {name: options.on(load_topology(name)).matmul_efficiency for name in
              ("mi300x", "dgx-h100", "dgx-a100")}  # fmt: skip
    assert shares == {"mi300x": 0.5, "dgx-h100": 0.4, "dgx-a100": 0.25}
    assert (
        EstimateOptions(matmul_efficiency=(("mi300x", 0.5),))
        .on(load_topology("dgx-a100"))
        .matmul_efficiency
        is None
    )  # not named: its GEMMs by shape
    for bad in ("mi300x=x", "mi300x=1.5", "0", "0.5,"):
        with pytest.raises(SpecError, match="--matmul-efficiency"):
            parse_efficiencies(bad)


def test_fp8_prices_the_output_layer_in_bf16():
    topology = make_topology(fp8=624.0)  # bf16 peak 312 TFLOP/s, fp8 624
    price = gemm_pricer(topology, 624e12, EstimateOptions(matmul_efficiency=0.5), None, "fp8")
    head, layer = Gemm("logits", "fwd", 1024, 1000, 512), Gemm("qkv", "fwd", 1024, 1000, 512)
    flops = 2 * 1024 * 1000 * 512
    assert price(head).time_s == pytest.approx(flops / (312e12 * 0.5))  # bf16, at half rate
    assert price(layer).time_s == pytest.approx(flops / (624e12 * 0.5))
    bf16 = gemm_pricer(topology, 312e12, EstimateOptions(matmul_efficiency=0.5), None, "bf16")
    assert bf16(head).time_s == price(head).time_s


def test_dp_dtypes_set_the_bytes_the_reduction_and_the_gather_move():
    assert dp_dtype_bytes(None) == {}
    assert dp_dtype_bytes("bf16") == {"grad_bytes": 2}
    assert dp_dtype_bytes("fp32,fp8") == {"grad_bytes": 4, "gather_bytes": 1}
    for bad in ("fp8", "bf16,int8", "x"):
        with pytest.raises(SpecError, match="--dp-dtypes"):
            dp_dtype_bytes(bad)
    model = Model("m", layers=2, hidden=64, heads=2, vocab=128, params=1e5)

    def sizes(**training):
        workload = Workload(
            model,
            Training(seq=32, global_batch=8, **training),
            Parallelism(dp=8, zero=3, dp_bucket_mb=0),
        )
        return {c.collective: c.size_bytes for c in step_collectives(workload) if c.kind == "dp"}

    # 1e5 parameters: fp32 gradients 400 kB, bf16 weights gathered 200 kB (the defaults)
    assert sizes() == {"reduce_scatter": 4e5, "all_gather": 2e5}
    assert sizes(**dp_dtype_bytes("bf16,fp8")) == {"reduce_scatter": 2e5, "all_gather": 1e5}
