"""`collbench tune from RUN...` (analysis.tune_from): runs measured differently are refused
naming what differs, and each run's rows go to the setting its recorded knobs say, several
runs of one setting pooled as its repeats (pure)."""

import pytest

from collbench.analysis.tune.from_runs import check_tunable, outcomes_from_runs, varying_knobs
from collbench.analysis.tune.select import NO_SAMPLES, select_best
from collbench.core.errors import SpecError
from tests.rows import make_row, make_run

MIB = 1024**2


def _run(name, env, time_us=1000.0, samples=True, **columns):
    rows = [
        make_row(
            run_id=name,
            size_bytes=size,
            time_us=time_us,
            time_us_samples=[time_us + step for step in range(12)] if samples else [],
            knobs={"env": env},
            **columns,
        )
        for size in (32 * MIB, 64 * MIB)
    ]
    return make_run(name, rows, run_id=name, knobs={"env": env})


def test_runs_of_one_methodology_pass_and_other_differences_are_warnings():
    runs = [_run("a", {}), _run("b", {"NCCL_ALGO": "Ring"}, iters=50)]
    (warning,) = check_tunable(runs)
    assert warning == "a and b measured differently (iters 20 vs 50): tuned anyway"


@pytest.mark.parametrize(
    ("columns", "named"),
    [
        ({"dtype": "bfloat16"}, "dtype 'float32' vs 'bfloat16'"),
        ({"world_size": 4}, "world_size 2 vs 4"),
        ({"nodes": 2, "world_size": 2}, "nodes 1 vs 2"),
        ({"collective": "all_gather"}, "collectives 'all_reduce' vs 'all_gather'"),
    ],
)
def test_runs_measured_differently_are_refused_naming_what_differs(columns, named):
    runs = [_run("a", {}), _run("b", {"NCCL_ALGO": "Ring"}, **columns)]
    with pytest.raises(SpecError, match="measured differently") as error:
        check_tunable(runs)
    assert f"({named}); tune needs runs of one collective" in str(error.value)


def test_each_run_becomes_the_setting_its_knobs_say_baseline_first():
    shared = {"NCCL_IB_HCA": "mlx5_0", "NCCL_DEBUG": "INFO"}
    runs = [
        _run("ring", {**shared, "NCCL_ALGO": "Ring"}, time_us=500.0),
        _run("plain", {"NCCL_IB_HCA": "mlx5_0"}),  # logging knobs never make a setting
        _run("tree", {**shared, "NCCL_ALGO": "Tree"}, time_us=2000.0),
        _run("ring-again", {**shared, "NCCL_ALGO": "Ring"}, time_us=400.0),
    ]
    assert varying_knobs(runs) == ["NCCL_ALGO"]
    outcomes = outcomes_from_runs(runs)
    # a setting is the whole environment its runs had, labelled by the knobs that differ
    hca = {"NCCL_IB_HCA": "mlx5_0"}
    assert [item.setting.as_dict() for item in outcomes] == [
        hca,
        {**hca, "NCCL_ALGO": "Ring"},
        {**hca, "NCCL_ALGO": "Tree"},
    ]
    assert [item.setting.label for item in outcomes] == [
        "baseline",
        "NCCL_ALGO=Ring",
        "NCCL_ALGO=Tree",
    ]
    assert [item.is_baseline for item in outcomes] == [True, False, False]
    ring = outcomes[1]  # both Ring runs pooled, each one a repeat of the setting
    assert len(ring.rows) == 4 and ring.repeats == 2
    assert [row.repeat for row in ring.rows] == [0, 0, 1, 1]
    (record,) = select_best(outcomes)
    assert record.knobs == {**hca, "NCCL_ALGO": "Ring"}  # busbw: the geomean over its repeats
    assert record.gain == pytest.approx(1000.0 / (500.0 * 400.0) ** 0.5 - 1)
    assert record.evidence.candidate_repeats == 2 and record.evidence.basis == "noise floor"


def test_imported_logs_labelled_with_knobs_tune_without_samples():
    runs = [
        _run("ll", {"NCCL_PROTO": "LL"}, time_us=900.0, samples=False),
        _run("simple", {"NCCL_PROTO": "Simple"}, samples=False),
    ]
    outcomes = outcomes_from_runs(runs)
    # no run of the plain environment: the first RUN stands for the default
    assert outcomes[0].is_baseline and outcomes[0].setting.as_dict() == {"NCCL_PROTO": "LL"}
    (record,) = select_best(outcomes)
    assert record.default_is_best and record.knobs == {"NCCL_PROTO": "LL"}
    assert record.confidence == NO_SAMPLES and not record.confident


def test_three_runs_of_each_setting_are_its_repeats_and_decide_on_a_test():
    runs = []
    for index, (base, ring) in enumerate(((1000.0, 700.0), (1010.0, 705.0), (990.0, 695.0))):
        runs += [
            _run(f"plain-{index}", {}, base),
            _run(f"ring-{index}", {"NCCL_ALGO": "Ring"}, ring),
        ]
    outcomes = outcomes_from_runs(runs)
    assert [item.repeats for item in outcomes] == [3, 3]
    (record,) = select_best(outcomes)
    assert record.knobs == {"NCCL_ALGO": "Ring"} and record.confidence == "significant"
    assert record.evidence.basis == "repeats" and record.evidence.p_holm < 0.05
