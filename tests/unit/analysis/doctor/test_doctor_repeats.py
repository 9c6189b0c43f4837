"""The doctor's repeats: a finding needs the slow result in a majority of at least 3 repeats,
a baseline is held against with its own spread (the one decision rule), a run where nothing
could be judged is `unjudged` (exit 6, healthy null), and a gloo run gets no GPU advice."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from collbench.analysis.doctor.expect import FLEET, Bar, Expectation, expectation_from
from collbench.analysis.doctor.findings import CPU_CHECKS, GPU_CHECKS
from collbench.analysis.doctor.judge import Judged
from collbench.analysis.doctor.verdicts import diagnose
from collbench.core.doctor_spec import MAX_DOCTOR_REPEATS, DoctorSpec
from collbench.core.errors import EXIT_FLAGGED, EXIT_OK, EXIT_UNJUDGED, SpecError
from collbench.core.spec import SweepSpec
from collbench.launchers.base import LaunchResult
from collbench.render.doctor_text import render_doctor
from collbench.run.doctor_job import DoctorOutcome
from collbench.store.rows import DoctorRow
from tests.unit.analysis.doctor.test_doctor_analysis import (
    all_reduce_rows,
    kinds,
    layout,
    pair_rows,
)
from tests.unit.render.test_doctor_render import doctor_json

SPEC = DoctorSpec()
FLEET_EXPECTATION = Expectation(FLEET, {}, SPEC.tolerance_pct)


def _with_slow_repeats(rows: list, host: str, repeats: set[int], busbw: float) -> list:
    """`host`'s pair rows at `busbw` in the given repeats only."""
    return [
        DoctorRow(**{**row.to_dict(), "busbw_gbps": busbw})
        if row.stage == "pair" and host in row.group_hosts and row.repeat_index in repeats
        else row
        for row in rows
    ]


def test_one_slow_repeat_out_of_three_is_not_a_finding():
    nodes = layout(4)
    rows = _with_slow_repeats(pair_rows(nodes, lambda a, b: 0.41), "h2", {1}, 0.05)
    diagnosis = diagnose(rows, SPEC, FLEET_EXPECTATION, nodes)
    assert diagnosis.healthy is True and diagnosis.findings == ()


def test_two_slow_repeats_out_of_three_are_a_finding_that_shows_each_repeat():
    nodes = layout(4)
    rows = _with_slow_repeats(pair_rows(nodes, lambda a, b: 0.41), "h2", {0, 2}, 0.05)
    diagnosis = diagnose(rows, SPEC, FLEET_EXPECTATION, nodes)
    assert kinds(diagnosis) == [("node", ("h2",))]
    evidence = diagnosis.findings[0].evidence
    assert "2 of 3 repeats below the bar" in evidence
    assert ": 0.05, 0.41, 0.05 GB/s vs fleet median of 4 nodes 0.41 GB/s" in evidence
    assert "repeats within 720%" in evidence


def test_fewer_than_three_repeats_judge_nothing_and_say_why():
    nodes = layout(4)
    rows = pair_rows(nodes, lambda a, b: 0.05 if "h2" in (a, b) else 0.41, repeats=2)
    diagnosis = diagnose(rows, SPEC, FLEET_EXPECTATION, nodes)
    assert diagnosis.findings == () and diagnosis.healthy is None
    assert "pair: 2 repeat(s); a finding needs the slow result in a majority of at least 3" in (
        diagnosis.reason
    )


def test_a_row_without_a_repeat_index_is_one_repeat():
    nodes = layout(4)
    rows = [
        DoctorRow(**{**row.to_dict(), "repeat": None})
        for row in pair_rows(nodes, lambda a, b: 0.05 if "h2" in (a, b) else 0.41, repeats=1)
    ]
    assert diagnose(rows, SPEC, FLEET_EXPECTATION, nodes).healthy is None


# --- against a baseline: its spread, and the one decision rule ------------------------------


def _baseline(nodes: dict, spread: tuple[float, ...]) -> Expectation:
    """A baseline run of the same fleet: every pair at 1.0 GB/s x spread[repeat]."""
    rows = [
        DoctorRow(**{**row.to_dict(), "busbw_gbps": spread[row.repeat_index]})
        for row in pair_rows(nodes, lambda a, b: 1.0, repeats=len(spread))
    ]
    spec = DoctorSpec(tolerance_pct=5.0)
    return expectation_from(spec, baseline_rows=rows, baseline_path="runs/good")


def test_a_drop_within_the_baselines_spread_is_not_flagged_beyond_it_is():
    nodes = layout(2)
    noisy = _baseline(nodes, (1.0, 1.2, 0.85))  # a spread of 1.5 x 41%: about 62%
    quiet = _baseline(nodes, (1.0, 1.01, 0.99))  # about 3%: the 5% tolerance rules
    rows = pair_rows(nodes, lambda a, b: 0.7)  # 30% below the baseline
    assert diagnose(rows, SPEC, noisy, nodes).healthy is True
    flagged = diagnose(rows, SPEC, quiet, nodes)
    assert kinds(flagged) == [("link", ("h0", "h1"))]
    evidence = flagged.findings[0].evidence
    assert "3 of 3 repeats below the bar" in evidence
    assert "expected 1 GB/s from baseline runs/good (its spread 3%)" in evidence
    assert "decision rule: -30.0%" in evidence and evidence.endswith(": slower")


def test_below_the_bar_but_not_slower_by_the_decision_rule_is_no_finding():
    nodes = layout(2)
    quiet = _baseline(nodes, (1.0, 1.01, 0.99))
    values = iter([0.9, 0.9, 1.3] * 1)  # two repeats 10% low, one 30% high: no real shift
    rows = pair_rows(nodes, lambda a, b: next(values))
    diagnosis = diagnose(rows, SPEC, quiet, nodes)
    assert diagnosis.findings == () and diagnosis.healthy is True


# --- unjudged: one node with only the fleet ------------------------------------------------


def test_one_node_with_only_the_fleet_is_unjudged_exit_6_and_healthy_null():
    nodes = {**layout(1, per_host=2), "skipped": {"pair": "one node: needs two or more nodes"}}
    rows = all_reduce_rows(nodes, "intra", lambda group: 1.0)
    diagnosis = diagnose(rows, SPEC, FLEET_EXPECTATION, nodes)
    assert diagnosis.healthy is None and diagnosis.verdict == "unjudged"
    assert "intra: a fleet median needs 3 nodes, this run has 1" in diagnosis.reason
    document = doctor_json(diagnosis, "doctor-1", FLEET_EXPECTATION)
    assert json.loads(json.dumps(document))["healthy"] is None
    assert document["reason"] == diagnosis.reason and document["findings"] == []
    assert render_doctor(diagnosis, FLEET_EXPECTATION).startswith(
        "unjudged (no health check): no stage could be judged"
    )
    outcome = DoctorOutcome(LaunchResult(0), Path("run"), diagnosis, FLEET_EXPECTATION)
    assert outcome.code == EXIT_UNJUDGED == 6
    judged = diagnose(rows, SPEC, Expectation("--expect-busbw", {"intra": 1.0}, 5.0), nodes)
    assert DoctorOutcome(LaunchResult(0), Path("run"), judged).code == EXIT_OK
    slow = diagnose(rows, SPEC, Expectation("--expect-busbw", {"intra": 9.0}, 5.0), nodes)
    assert DoctorOutcome(LaunchResult(0), Path("run"), slow).code == EXIT_FLAGGED


def test_exit_code_6_is_only_the_doctors():
    from collbench.core import errors

    codes = {name: value for name, value in vars(errors).items() if name.startswith("EXIT_")}
    assert list(codes.values()).count(6) == 1


# --- advice that fits the backend ----------------------------------------------------------


@pytest.mark.parametrize(("backend", "checks"), [("gloo", CPU_CHECKS), ("nccl", GPU_CHECKS)])
def test_advice_matches_the_backend(backend, checks):
    nodes = layout(4, per_host=2)
    rows = all_reduce_rows(nodes, "intra", lambda group: 0.5 if group == "node h3" else 3.0)
    rows = [DoctorRow(**{**row.to_dict(), "backend": backend}) for row in rows]
    [finding] = diagnose(rows, SPEC, FLEET_EXPECTATION, nodes).findings
    assert checks.inside in finding.action
    gpu_words = ("nvidia-smi", "dcgmi", "GPU")
    assert any(word in finding.action for word in gpu_words) is (backend == "nccl")


# --- the spec: --repeats travels to the ranks -----------------------------------------------


@pytest.mark.parametrize("repeats", [0, MAX_DOCTOR_REPEATS + 1, 2.5])
def test_repeats_out_of_range_names_the_flag(repeats):
    with pytest.raises(SpecError) as error:
        DoctorSpec(repeats=repeats)
    assert error.value.field == "--repeats"


def test_a_doctor_spec_recorded_before_repeats_ran_each_round_once():
    data = asdict(DoctorSpec())
    del data["repeats"]
    assert DoctorSpec.from_dict(data).repeats == 1
    assert DoctorSpec().repeats == 3


@pytest.mark.parametrize("repeats", [1, 3, 5])
def test_doctor_repeats_round_trip_through_the_ranks_arguments(repeats, monkeypatch):
    from typer.testing import CliRunner

    import collbench.run.doctor_job
    from collbench.cli import app

    doctor = DoctorSpec(repeats=repeats, shuffle_rounds=2)
    spec = SweepSpec(collectives=("all_reduce", "sendrecv"), sweep_rows=False, doctor=doctor)
    args = spec.to_args()
    assert args[args.index("--repeats") + 1] == str(repeats)
    assert SweepSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    seen = []

    def fake(spec, options, line, make_sink):
        seen.append(spec)
        return DoctorOutcome(LaunchResult(0), Path("run"))

    monkeypatch.setattr(collbench.run.doctor_job, "run_doctor", fake)
    result = CliRunner().invoke(app, ["doctor", *args, "--quiet"])
    assert result.exit_code == 0, result.output
    assert seen == [spec]


def test_evidence_names_each_repeats_bar_where_the_median_bar_would_contradict_the_count():
    # Seen on a loaded 4-node mesh: a second slow node in one repeat sank that repeat's fleet
    # bar under the shaped node, which then read "2 of 3 repeats below the bar 0.152: 0.00615,
    # 0.00615, 0.00615" -- three values under the bar shown, counted as two.
    bar = Bar(0.36, 0.152, FLEET, 4)
    split = Judged((0.00615,) * 3, (0.15, 0.004, 0.16), bar)
    assert split.slow_repeats == 2
    assert "below the bar 0.152 (per repeat 0.15, 0.004, 0.16): 0.00615" in split.evidence()
    agreeing = Judged((0.00615,) * 3, (0.15, 0.14, 0.16), bar)
    assert "per repeat" not in agreeing.evidence()
    assert "3 of 3 repeats below the bar 0.152: 0.00615" in agreeing.evidence()
