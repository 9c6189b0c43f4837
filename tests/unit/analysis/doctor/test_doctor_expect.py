"""Doctor expectations: --expect-busbw > topology bound > baseline > fleet, the topology's
bounds by hand, and the fleet's bar."""

from __future__ import annotations

import math

import pytest

from collbench.analysis.doctor.expect import (
    FLEET,
    TOPOLOGY_EFFICIENCY,
    bar_for,
    expectation_from,
    fleet_bar,
    topology_bounds,
)
from collbench.analysis.rules.decision import Evidence, spread_pct
from collbench.core.doctor_spec import STAGES, DoctorSpec
from collbench.core.errors import SpecError
from collbench.store.rows import DoctorRow
from collbench.topologies.loader import load_topology
from collbench.topologies.schema import TopologyError
from tests.unit.analysis.doctor.test_doctor_analysis import doctor_row

MIB = 1024**2
S = 256 * MIB


@pytest.fixture(scope="module")
def dgx_h100():
    return load_topology("dgx-h100")


def baseline(size_bytes: int = 16 * MIB, repeats: int = 3) -> list:
    """A baseline doctor run of 3 nodes, every row once per repeat (the same figures)."""
    return [
        DoctorRow(**{**row.to_dict(), "repeat": repeat})
        for repeat in range(repeats)
        for row in _baseline_rows(size_bytes)
    ]


def _baseline_rows(size_bytes: int) -> list:
    hosts = ["h0", "h1", "h2"]
    return [
        doctor_row("pair", "h0<->h1", 1.0, hosts[:2], [0, 1], size_bytes=size_bytes),
        doctor_row("pair", "h0<->h2", 3.0, ["h0", "h2"], [0, 2], size_bytes=size_bytes),
        doctor_row("shuffle", "h1<->h2", 2.0, hosts[1:], [1, 2], size_bytes=size_bytes),
        doctor_row("intra", "node h0", 5.0, ["h0"], [0, 1], size_bytes=size_bytes),
        doctor_row("intra", "node h1", 0.0, ["h1"], [2], size_bytes=size_bytes),  # one rank
        doctor_row("full", "all", 4.0, hosts, [0, 1, 2], size_bytes=size_bytes),
    ]


# --- the order: --expect-busbw > topology > baseline > fleet ------------------------------


def test_expect_busbw_is_the_same_figure_for_every_stage_and_wins(dgx_h100):
    spec = DoctorSpec(expect_busbw_gbps=40.0, tolerance_pct=10.0)
    expectation = expectation_from(spec, topology=dgx_h100, baseline_rows=baseline())
    assert expectation.source == "--expect-busbw"
    assert expectation.busbw_gbps == dict.fromkeys(STAGES, 40.0)
    assert expectation.tolerance_pct == 10.0


def test_a_topology_comes_before_a_baseline(dgx_h100):
    expectation = expectation_from(
        DoctorSpec(), topology=dgx_h100, baseline_rows=baseline(), nodes=2, ranks_per_node=8
    )
    assert expectation.source == "topology dgx-h100 at 80% of its bound"
    assert expectation.busbw_gbps["pair"] == pytest.approx(50.0 * TOPOLOGY_EFFICIENCY)


def test_a_baseline_gives_each_stages_median_at_the_same_size():
    spec = DoctorSpec(tolerance_pct=5.0)
    expectation = expectation_from(
        spec, baseline_rows=baseline(), baseline_path="runs/good", backend="gloo"
    )
    assert expectation.source == "baseline runs/good"
    # pair and shuffle rows together; the one-rank intra row (busbw 0) left out
    figures = {"pair": 2.0, "shuffle": 2.0, "intra": 5.0, "full": 4.0}
    assert expectation.busbw_gbps == pytest.approx(figures)
    assert expectation.tolerance_pct == 5.0
    assert expectation.spread_pct == dict.fromkeys(figures, 0.0)  # identical repeats
    assert expectation.evidence["pair"].n_repeats == 3


def test_a_baseline_bar_sits_below_its_figure_by_its_spread_when_wider_than_the_tolerance():
    rows = baseline()
    # the pair stage's repeat figures (medians over its rows): 2.0, 2.2, 1.8
    scale = {0: 1.0, 1: 1.1, 2: 0.9}
    rows = [
        DoctorRow(**{**row.to_dict(), "busbw_gbps": row.busbw_gbps * scale[row.repeat_index]})
        if row.stage in ("pair", "shuffle")
        else row
        for row in rows
    ]
    spec = DoctorSpec(tolerance_pct=5.0)
    expectation = expectation_from(spec, baseline_rows=rows, baseline_path="runs/good")
    spread = spread_pct(Evidence.of([2.0, 2.2, 1.8]))  # the one rule's: 1.5 x the range
    assert expectation.spread_pct["pair"] == pytest.approx(spread) and spread > 5.0
    bar = bar_for("pair", [], expectation, spec)
    assert bar.threshold_gbps == pytest.approx(expectation.busbw_gbps["pair"] * (1 - spread / 100))
    assert f"(its spread {spread:.0f}%)" in bar.describe()
    intra = bar_for("intra", [], expectation, spec)  # no spread: the tolerance
    assert intra.threshold_gbps == pytest.approx(5.0 * 0.95)


def test_a_baseline_without_repeats_leaves_the_stages_to_the_fleet_and_says_why():
    expectation = expectation_from(
        DoctorSpec(), baseline_rows=baseline(repeats=1), baseline_path="runs/old"
    )
    assert expectation.busbw_gbps == {}
    assert any(
        "baseline runs/old holds 1 repeat(s) of the pair stage; its spread needs 3" in note
        for note in expectation.notes
    )


def test_a_baseline_of_another_size_is_refused():
    with pytest.raises(SpecError) as error:
        expectation_from(
            DoctorSpec(size_bytes=64 * MIB),
            baseline_rows=baseline(16 * MIB),
            baseline_path="runs/good",
        )
    assert error.value.field == "--baseline" and error.value.value == "runs/good"
    assert "16 MiB" in str(error.value) and "--size 16M" in str(error.value)
    with pytest.raises(SpecError, match="--baseline"):  # the backend's default size: 16 MiB
        expectation_from(DoctorSpec(), baseline_rows=baseline(4 * MIB), backend="gloo")


def test_a_baseline_without_doctor_rows_is_refused():
    with pytest.raises(SpecError, match="holds no doctor rows"):
        expectation_from(DoctorSpec(), baseline_rows=[], baseline_path="runs/sweep")


def test_without_anything_the_fleet_is_its_own_reference():
    expectation = expectation_from(DoctorSpec(tolerance_pct=7.0))
    assert (expectation.source, expectation.busbw_gbps, expectation.tolerance_pct) == (
        FLEET,
        {},
        7.0,
    )


# --- the topology's bounds, by hand ------------------------------------------------------


def test_dgx_h100_bounds_as_the_size_grows(dgx_h100):
    bounds = topology_bounds(dgx_h100, nodes=2, ranks_per_node=8)
    # intra: ring over NVSwitch, busbw = the per-GPU NVLink rate
    assert bounds["intra"] == pytest.approx(450.0)
    # rail and pair: each rank its own 400 Gb/s NIC (8 NICs, 8 ranks, all at once)
    assert bounds["rail"] == pytest.approx(400 / 8)
    assert bounds["pair"] == bounds["shuffle"] == pytest.approx(50.0)
    # full, 16 ranks over 2 nodes: the tree moves 2S per GPU over NVLink (S/225e9 s) and S
    # per node over its 400 GB/s of NICs; algbw 225, busbw 225 x 2 x 15/16
    assert bounds["full"] == pytest.approx(225 * 2 * 15 / 16)


def test_dgx_h100_bounds_at_a_size_include_the_latency(dgx_h100):
    bounds = topology_bounds(dgx_h100, nodes=4, ranks_per_node=8, size_bytes=S)
    pair_time_s = 2.7e-6 + S / 50e9  # one network hop, then S over one NIC
    assert bounds["pair"] == pytest.approx(S / pair_time_s / 1e9)
    intra_time_s = 14 * 0.6e-6 + 1.75 * S / 450e9  # ring: 2(p-1) hops, 2(p-1)/p S
    assert bounds["intra"] == pytest.approx(1.75 * S / intra_time_s / 1e9)
    # rail over 4 nodes: the ring (2 x 3/4 S over one NIC) beats the tree (2S over it)
    rail_time_s = 6 * 2.7e-6 + 1.5 * S / 50e9
    assert bounds["rail"] == pytest.approx(1.5 * S / rail_time_s / 1e9)


def test_one_node_has_no_rail_or_pair_bound():
    cpu = load_topology("cpu-local")
    bounds = topology_bounds(cpu, nodes=1, ranks_per_node=2)
    assert set(bounds) == {"intra", "full"}
    assert bounds["intra"] == pytest.approx(1.3)


def test_nodes_on_a_topology_without_a_network_is_a_topology_error():
    with pytest.raises(TopologyError, match="scale_out"):
        topology_bounds(load_topology("cpu-local"), nodes=4, ranks_per_node=1)


# --- the fleet's bar ----------------------------------------------------------------------


def test_the_fleet_bar_needs_three_values_and_takes_the_lower_of_its_two_rules():
    spec = DoctorSpec(fleet_tolerance_pct=25.0)
    assert fleet_bar([1.0, 2.0], spec, spec.outlier_mads) is None
    tight = fleet_bar([1.0, 1.0, 1.0, 1.0], spec, spec.outlier_mads)
    assert tight.reference_gbps == 1.0 and tight.threshold_gbps == pytest.approx(0.75)
    assert tight.source == FLEET and tight.peers == 4
    noisy = fleet_bar([0.5, 1.0, 2.0], spec, spec.outlier_mads)  # log MAD ln 2, 3 values: x 1.483
    spread = 1.4826 * 1.483 * math.log(2)
    assert noisy.threshold_gbps == pytest.approx(math.exp(-4 * spread))
    assert noisy.threshold_gbps > 0
