"""Overlap probes, the pure part: the spec, its options, and what the times mean."""

import math

import pytest

from collbench.core.errors import SpecError
from collbench.core.overlap import (
    DEFAULT_RATIOS,
    OverlapSpec,
    overlap_figures,
    parse_ratios,
    parse_shape,
)
from collbench.core.spec import Step, SweepSpec


@pytest.mark.parametrize(
    "times, overlap_pct, exposed_us",
    [
        # t_comm, t_comp, t_both, t_comp_during
        ((100, 100, 100, 100), 100.0, 0.0),  # fully hidden
        ((100, 100, 200, 100), 0.0, 100.0),  # serialized: nothing hidden
        ((100, 100, 150, 100), 50.0, 50.0),
        ((100, 300, 320, 300), 80.0, 20.0),
        ((100, 100, 90, 90), 100.0, 0.0),  # t_both below t_comp (noise): capped, not > 100
        ((100, 100, 260, 180), 0.0, 160.0),  # contention: worse than serial, exposed > t_comm
    ],
)
def test_figures_follow_the_osu_definition(times, overlap_pct, exposed_us):
    figures = overlap_figures(*times)
    assert figures.overlap_pct == pytest.approx(overlap_pct)
    assert figures.exposed_comm_us == pytest.approx(exposed_us)
    assert 0.0 <= figures.overlap_pct <= 100.0


def test_slowdowns_are_never_clamped():
    faster = overlap_figures(100, 200, 210, 180, 90)
    assert faster.compute_slowdown == pytest.approx(-0.1)
    assert faster.comm_slowdown == pytest.approx(-0.1)
    slower = overlap_figures(100, 200, 400, 300, 250)
    assert slower.compute_slowdown == pytest.approx(0.5)
    assert slower.comm_slowdown == pytest.approx(1.5)
    assert slower.comm_wait_us == pytest.approx(100)
    assert slower.compute_ratio_actual == pytest.approx(2.0)


def test_comm_slowdown_is_none_when_not_observed():
    assert overlap_figures(100, 100, 150, 100).comm_slowdown is None
    with pytest.raises(ValueError):
        overlap_figures(0, 100, 150, 100)


def test_spec_defaults_and_fixed_compute():
    assert OverlapSpec().ratios == DEFAULT_RATIOS
    assert OverlapSpec().points() == DEFAULT_RATIOS
    fixed = OverlapSpec(compute_tflop=0.5)
    assert fixed.ratios == () and fixed.points() == (None,)
    assert OverlapSpec(compute_dtype="bf16").compute_dtype == "bfloat16"
    assert OverlapSpec().resolved_dtype("cuda") == "bfloat16"
    assert OverlapSpec().resolved_dtype("cpu") == "float32"
    assert OverlapSpec(compute_dtype="float16").resolved_dtype("cpu") == "float16"


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"ratios": (0,)}, "--compute-ratio: 0.0 must be a number greater than 0"),
        ({"ratios": (1, -2)}, "--compute-ratio: -2.0"),
        ({"ratios": (math.inf,)}, "--compute-ratio: inf"),
        ({"ratios": (1,), "compute_tflop": 2}, "conflicts with --compute-ratio"),
        ({"compute_tflop": 0}, "--compute-tflop: 0 must be greater than 0"),
        ({"compute_dtype": "int8"}, "--compute-dtype: 'int8' is not a matmul dtype"),
        ({"compute_dtype": "fp128"}, "--compute-dtype: 'fp128'"),
        ({"matmul_shape": (0, 4, 4)}, "--matmul-shape"),
        ({"compute_streams": 0}, "--compute-streams: 0 must be between 1 and"),
    ],
)
def test_bad_specs_name_the_option(kwargs, needle):
    with pytest.raises(SpecError) as caught:
        OverlapSpec(**kwargs)
    assert needle in str(caught.value)


def test_option_parsers():
    assert parse_ratios("0.5, 1,2") == (0.5, 1.0, 2.0)
    assert parse_shape("8192x4096X1024") == (8192, 4096, 1024)
    with pytest.raises(SpecError, match="--compute-ratio"):
        parse_ratios("1,two")
    with pytest.raises(SpecError, match="--matmul-shape"):
        parse_shape("8192x4096")


def test_sweep_spec_carries_probes_through_dict_and_args():
    overlap = OverlapSpec(ratios=(0.5, 4), matmul_shape=(64, 32, 16), compute_dtype="float64")
    spec = SweepSpec(
        collectives=("all_reduce", "all_gather"), max_bytes=32, overlap=overlap, sweep_rows=False
    ).with_backend("gloo")
    assert SweepSpec.from_dict(spec.to_dict()) == spec
    assert spec.command == "overlap"
    args = spec.to_args()
    assert "--overlap" not in args
    assert args[args.index("--compute-ratio") + 1] == "0.5,4"
    assert args[args.index("--matmul-shape") + 1] == "64x32x16"
    with_rows = SweepSpec(overlap=OverlapSpec(compute_tflop=0.25), max_bytes=8)
    assert with_rows.command == "sweep" and "--overlap" in with_rows.to_args()
    assert "--compute-tflop" in with_rows.to_args()


def test_probe_steps_follow_the_sweep_steps():
    spec = SweepSpec(
        collectives=("all_reduce", "all_gather"),
        max_bytes=16,
        overlap=OverlapSpec(ratios=(1, 2)),
        repeats=1,
    ).with_backend("gloo")
    steps = spec.steps()
    sweep = [s for s in steps if s.kind == "sweep"]
    probes = [s for s in steps if s.kind == "overlap"]
    assert steps == sweep + probes
    assert len(sweep) == 2 + 4  # all_reduce in place; all_gather both placements
    # one placement per probe (the first supported), one probe per ratio
    assert probes[:4] == [
        Step("overlap", "all_reduce", 8, "in_place", 1.0, dtype="float32", op="sum"),
        Step("overlap", "all_reduce", 8, "in_place", 2.0, dtype="float32", op="sum"),
        Step("overlap", "all_reduce", 16, "in_place", 1.0, dtype="float32", op="sum"),
        Step("overlap", "all_reduce", 16, "in_place", 2.0, dtype="float32", op="sum"),
    ]
    assert {s.placement for s in probes if s.collective == "all_gather"} == {"out_of_place"}
    only = SweepSpec(max_bytes=16, overlap=OverlapSpec(), sweep_rows=False)
    assert {s.kind for s in only.with_backend("gloo").steps()} == {"overlap"}
    with pytest.raises(ValueError):
        SweepSpec(sweep_rows=False)
