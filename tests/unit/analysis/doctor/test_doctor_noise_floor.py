"""doctor --noise-floor: a recorded A/A floor widens the bar of a check against an
expectation (bar factor 1 / (1 + floor)) and holds the decision rule against a baseline; the
fleet is its own reference and takes none."""

from __future__ import annotations

import pytest

from collbench.analysis.doctor.expect import Expectation, bar_for, expectation_from
from collbench.analysis.doctor.verdicts import diagnose
from collbench.core.doctor_spec import DoctorSpec
from collbench.core.noise import NoiseFloor
from collbench.store.rows import DoctorRow
from tests.unit.analysis.doctor.test_doctor_analysis import kinds, layout, pair_rows

SPEC = DoctorSpec()  # tolerance 5%
FILE = "floors/cluster-a.json"


def _floor(large_pct: float) -> NoiseFloor:
    return NoiseFloor({"small": 50.0, "large": large_pct}, FILE, runs=3)


def _baseline(nodes: dict, floor: NoiseFloor | None = None) -> Expectation:
    """A quiet baseline run of the same fleet (16 MiB: the large band): every pair at 1.0
    GB/s x 1.0, 1.01, 0.99 over three repeats (a spread of about 3%)."""
    spread = (1.0, 1.01, 0.99)
    rows = [
        DoctorRow(**{**row.to_dict(), "busbw_gbps": spread[row.repeat_index]})
        for row in pair_rows(nodes, lambda a, b: 1.0, repeats=len(spread))
    ]
    return expectation_from(
        SPEC, baseline_rows=rows, baseline_path="runs/good", backend="gloo", noise_floor=floor
    )


def test_a_15pct_drop_is_flagged_without_a_floor_and_not_within_a_20pct_floor():
    nodes = layout(2)
    rows = pair_rows(nodes, lambda a, b: 0.85)  # 15% below the baseline, every repeat
    flagged = diagnose(rows, SPEC, _baseline(nodes), nodes)
    assert kinds(flagged) == [("link", ("h0", "h1"))]
    assert flagged.findings[0].evidence.endswith(": slower")
    held = diagnose(rows, SPEC, _baseline(nodes, _floor(20.0)), nodes)
    assert held.healthy is True and held.findings == ()


def test_beyond_the_floor_is_still_flagged_and_the_evidence_names_the_floor():
    nodes = layout(2)
    rows = pair_rows(nodes, lambda a, b: 0.7)  # 30% below: beyond a 20% floor
    diagnosis = diagnose(rows, SPEC, _baseline(nodes, _floor(20.0)), nodes)
    assert kinds(diagnosis) == [("link", ("h0", "h1"))]
    evidence = diagnosis.findings[0].evidence
    assert f"A/A floor 20% from {FILE}" in evidence
    # the decision rule held its verdict against the recorded floor too
    assert f"noise floor 20.0% (A/A large band, {FILE})" in evidence
    assert evidence.endswith(": slower")


@pytest.mark.parametrize(
    ("floor_pct", "factor"),
    [(None, 0.95), (3.0, 0.95), (20.0, 1 / 1.2), (7.0, 1 / 1.07)],
)
def test_the_bar_is_the_lowest_of_tolerance_spread_and_floor(floor_pct, factor):
    floor = None if floor_pct is None else _floor(floor_pct)
    spec = DoctorSpec(expect_busbw_gbps=10.0)
    expectation = expectation_from(spec, backend="gloo", noise_floor=floor)
    bar = bar_for("pair", [], expectation, spec)
    assert bar.threshold_gbps == pytest.approx(10.0 * factor)
    if floor_pct is not None:
        assert f"(A/A floor {floor_pct:g}% from {FILE})" in bar.describe()


def test_the_floor_is_the_one_at_the_doctors_size_else_its_bands():
    spec = DoctorSpec(expect_busbw_gbps=10.0, size_bytes=1024)  # the small band: 50%
    expectation = expectation_from(spec, noise_floor=_floor(20.0))
    assert expectation.floor_pct == 50.0
    per_size = NoiseFloor({"small": 50.0}, FILE, 3, pct_by_size={1024: 4.0, 4096: 50.0})
    assert expectation_from(spec, noise_floor=per_size).floor_pct == 4.0  # not its band's 50%
    assert bar_for("pair", [], expectation, spec).threshold_gbps == pytest.approx(10.0 / 1.5)


def test_a_band_without_a_floor_and_the_fleet_keep_their_bar_and_say_so():
    medium = NoiseFloor({"small": 50.0}, FILE)
    spec = DoctorSpec(expect_busbw_gbps=10.0)
    expectation = expectation_from(spec, backend="gloo", noise_floor=medium)
    assert bar_for("pair", [], expectation, spec).threshold_gbps == pytest.approx(9.5)
    assert any("holds no floor for the large band" in note for note in expectation.notes)
    fleet = expectation_from(DoctorSpec(), backend="gloo", noise_floor=_floor(20.0))
    assert fleet.floor_pct is None
    assert any("the fleet is its own reference" in note for note in fleet.notes)
    bar = bar_for("pair", [1.0, 1.0, 1.0, 0.1], fleet, DoctorSpec())
    assert bar is not None and bar.floor_pct is None
