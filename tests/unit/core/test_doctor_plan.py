"""The doctor's plan (pure): circle rounds, random pairings, halves, the node layout, the
spec's checks and its command line, and doctor rows through the store."""

import json

import pytest

from collbench.core.doctor_plan import CircleRounds, Layout, halves, random_rounds
from collbench.core.doctor_spec import DoctorSpec
from collbench.core.errors import SpecError
from collbench.core.spec import SweepSpec
from collbench.store.rows import DOCTOR_COLUMNS, DoctorRow, row_from_dict


@pytest.mark.parametrize("count", range(0, 12))
def test_circle_rounds_meet_every_pair_once_one_partner_at_a_time(count):
    rounds = CircleRounds(count)
    pairs = [pair for pairs in rounds for pair in pairs]
    assert sorted(pairs) == [(a, b) for a in range(count) for b in range(a + 1, count)]
    assert len(rounds) == (0 if count < 2 else count - 1 + count % 2)
    for pairs in rounds:
        members = [item for pair in pairs for item in pair]
        assert len(members) == len(set(members))
        assert len(pairs) == count // 2


def test_random_rounds_are_perfect_pairings_and_repeat_with_the_seed():
    rounds = random_rounds(7, 5, seed=3)
    assert rounds == random_rounds(7, 5, seed=3) != random_rounds(7, 5, seed=4)
    for pairs in rounds:
        members = [item for pair in pairs for item in pair]
        assert len(pairs) == 3 and len(set(members)) == 6


def test_layout_groups_ranks_by_host_in_rank_order():
    layout = Layout.from_hosts(["b", "b", "a", "a", "c"])
    assert layout.hosts == ("b", "a", "c") and layout.max_local == 2
    assert layout.rail(0) == (0, 2, 4) and layout.rail(1) == (1, 3)
    assert layout.pair_ranks("b", "c") == [(0, 4)]
    assert layout.ranks_of(["c", "b"]) == (0, 1, 4)
    assert halves(["a", "b", "c"]) == (("a", "b"), ("c",))


@pytest.mark.parametrize(
    ("fields", "flag"),
    [
        ({"expect_busbw_gbps": 10.0, "baseline": "run"}, "--expect-busbw"),
        ({"shuffle_rounds": -1}, "--shuffle-rounds"),
        ({"size_bytes": 0}, "--size"),
        ({"tolerance_pct": 100.0}, "--tolerance"),
        ({"outlier_mads": float("nan")}, "--outlier-mads"),
    ],
)
def test_doctor_spec_names_the_bad_field(fields, flag):
    with pytest.raises(SpecError) as error:
        DoctorSpec(**fields)
    assert error.value.field == flag


def test_a_doctor_spec_travels_through_job_json_and_the_ranks_command():
    doctor = DoctorSpec(size_bytes=4 << 20, shuffle_rounds=3, bisect=True, topology="cpu-box")
    spec = SweepSpec(collectives=("all_reduce", "sendrecv"), sweep_rows=False, doctor=doctor)
    assert spec.command == "doctor" and spec.steps() == []
    assert SweepSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    args = spec.to_args()
    assert args[:2] == ["--size", "4M"] and "--bisect" in args and "--collective" not in args
    assert "--noise-floor" not in args
    resolved = spec.with_backend("gloo")
    assert resolved.min_bytes == resolved.max_bytes == 4 << 20
    default = SweepSpec(sweep_rows=False, doctor=DoctorSpec(), collectives=("all_reduce",))
    assert default.with_backend("nccl").max_bytes == 256 << 20


def test_the_noise_floor_travels_through_job_json_and_the_ranks_command(monkeypatch):
    from pathlib import Path

    from typer.testing import CliRunner

    import collbench.run.doctor_job
    from collbench.cli import app
    from collbench.launchers.base import LaunchResult
    from collbench.run.doctor_job import DoctorOutcome

    doctor = DoctorSpec(baseline="runs/good", noise_floor="floors/a.json")
    spec = SweepSpec(collectives=("all_reduce", "sendrecv"), sweep_rows=False, doctor=doctor)
    assert SweepSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    args = spec.to_args()
    assert args[args.index("--noise-floor") + 1] == "floors/a.json"
    seen = []

    def fake(spec, options, line, make_sink):
        seen.append(spec)
        return DoctorOutcome(LaunchResult(0), Path("run"))

    monkeypatch.setattr(collbench.run.doctor_job, "run_doctor", fake)
    result = CliRunner().invoke(app, ["doctor", *args, "--quiet"])
    assert result.exit_code == 0, result.output
    assert seen == [spec]


def test_a_doctor_row_reads_back_typed_and_refuses_a_bad_column():
    row = {
        "kind": "doctor", "collective": "sendrecv", "size_bytes": 1024, "stage": "pair",
        "group": "a<->b", "group_hosts": ["a", "b"], "group_ranks": [0, 1],
        "rank_time_us": [1.5, 2.0], "rank_last_count": [3, 2],
    }  # fmt: skip
    typed = row_from_dict(row)
    assert isinstance(typed, DoctorRow) and typed.group_ranks == [0, 1]
    assert set(DOCTOR_COLUMNS) <= set(typed.to_dict())
    with pytest.raises(SpecError) as error:
        row_from_dict({**row, "group_ranks": [0, "1"]})
    assert error.value.field == "group_ranks"
