"""`collbench tune run --search halving|coordinate` (analysis.tune_search): halving drops only
settings clearly worse at every probe size, never the baseline, keeps at least min_keep and
stops; coordinate descent walks one numeric knob at a time within each categorical
combination to a local optimum or the budget (pure)."""

import pytest

from collbench.analysis.tune.search import (
    HalvingRule,
    descent_next,
    halving_iters,
    halving_round,
    is_numeric,
    probe_sizes,
    settings_left,
)
from collbench.analysis.tune.select import SettingOutcome
from collbench.core.tune_grid import KnobAxis, Setting
from tests.rows import make_row

KIB, MIB = 1024, 1024**2
PROBES = (4 * KIB, 1 * MIB, 64 * MIB)  # one per band


def _outcome(knobs, times, error=None):
    """A setting measured at the probe sizes; `times` is one time or one per probe size."""
    times = times if isinstance(times, tuple) else (times,) * len(PROBES)
    rows = tuple(
        make_row(
            size_bytes=size,
            time_us=time_us,
            time_us_samples=[time_us + step for step in range(12)],
        )
        for size, time_us in zip(PROBES, times, strict=True)
    )
    return SettingOutcome(Setting.from_mapping(knobs), () if error else rows, error)


def _labels(items):
    return [item.setting.label for item in items]


def test_probe_sizes_take_the_middle_of_each_band():
    sizes = [0, 8, 64, 512, 64 * KIB, 1 * MIB, 4 * MIB, 16 * MIB, 256 * MIB, 1024 * MIB]
    assert probe_sizes(sizes) == [64, 1 * MIB, 256 * MIB]


def test_halving_drops_only_what_is_slower_at_every_probe_size():
    outcomes = [
        _outcome({}, 1000.0),
        _outcome({"X_A": "best"}, 500.0),
        _outcome({"X_A": "small-only"}, (100.0, 2000.0, 2000.0)),  # wins one band: stays
        _outcome({"X_A": "slow"}, 2000.0),
        _outcome({"X_A": "noise"}, (501.0, 501.0, 501.0)),  # not distinguishable from best
        _outcome({"X_A": "nosuch"}, 1.0, error="no such interface"),  # failed: rows unused
    ]
    decision = halving_round(outcomes, 0, HalvingRule(min_keep=2))
    assert _labels(decision.keep) == ["baseline", "X_A=best", "X_A=small-only", "X_A=noise"]
    assert [(item.setting.label, why) for item, why in decision.drop] == [
        ("X_A=nosuch", "failed: no such interface"),
        ("X_A=slow", "called slower than the leader at all 3 probe sizes"),
    ]
    assert not decision.done and decision.reason == "round 1 of 3"
    assert halving_round(outcomes, 2).done  # the last round
    assert halving_iters(20, 2) == 80


def test_halving_never_drops_the_baseline_and_keeps_at_least_min_keep():
    outcomes = [
        _outcome({}, 4000.0),
        _outcome({"X_A": "1"}, 500.0),
        _outcome({"X_A": "2"}, 2000.0),
        _outcome({"X_A": "3"}, 3000.0),
    ]
    decision = halving_round(outcomes, 0, HalvingRule(min_keep=3))
    assert _labels(decision.keep) == ["baseline", "X_A=1", "X_A=2"]  # X_A=2 came back
    assert _labels(item for item, _ in decision.drop) == ["X_A=3"]
    assert decision.done and decision.reason == "3 settings left"


def test_halving_without_samples_keeps_everything_and_stops():
    rows = (make_row(size_bytes=MIB, time_us=10.0),)
    outcomes = [
        SettingOutcome(Setting(), rows),
        SettingOutcome(
            Setting.from_mapping({"X_A": "1"}), (make_row(size_bytes=MIB, time_us=99.0),)
        ),
        SettingOutcome(
            Setting.from_mapping({"X_A": "2"}), (make_row(size_bytes=MIB, time_us=99.0),)
        ),
    ]
    decision = halving_round(outcomes, 0)
    assert len(decision.keep) == 3 and decision.done
    assert decision.reason == "no per-iteration samples to test"


AXES = (
    KnobAxis("NCCL_ALGO", ("Ring", "Tree")),
    KnobAxis("NCCL_MAX_NCHANNELS", ("32", "2", "8", "16", "4")),  # sorted numerically
    KnobAxis("NCCL_NTHREADS", ("128", "256", "512")),
)


def _measure(setting, optimum=(16, 256)):
    """A made-up landscape with one optimum per algorithm; Tree at 8 channels (its start) fails."""
    knobs = setting.as_dict()
    channels, threads = int(knobs["NCCL_MAX_NCHANNELS"]), int(knobs["NCCL_NTHREADS"])
    if knobs["NCCL_ALGO"] == "Tree" and channels == 8:
        return SettingOutcome(setting, (), error="no algorithm available")
    distance = abs(channels - optimum[0]) / 4 + abs(threads - optimum[1]) / 128
    return SettingOutcome(setting, (make_row(size_bytes=MIB, time_us=100.0 + 10 * distance),))


def test_numeric_axes_are_the_integer_ones():
    assert [is_numeric(axis) for axis in AXES] == [False, True, True]
    assert not is_numeric(KnobAxis("NCCL_BUFFSIZE", ("4194304",)))  # nothing to walk


def test_descent_starts_mid_axis_and_walks_one_knob_at_a_time():
    first = descent_next(AXES, [])
    assert [item.label for item in first.settings] == [
        "NCCL_ALGO=Ring NCCL_MAX_NCHANNELS=8 NCCL_NTHREADS=256",
        "NCCL_ALGO=Tree NCCL_MAX_NCHANNELS=8 NCCL_NTHREADS=256",
    ]
    assert first.numeric == ["NCCL_MAX_NCHANNELS", "NCCL_NTHREADS"] and not first.done
    outcomes = [_measure(item) for item in first.settings]
    second = descent_next(AXES, outcomes)
    # Ring: both channel neighbours of 8; Tree failed at its start and is not searched
    assert [item.as_dict()["NCCL_MAX_NCHANNELS"] for item in second.settings] == ["4", "16"]
    assert {item.as_dict()["NCCL_ALGO"] for item in second.settings} == {"Ring"}


def test_descent_reaches_the_optimum_and_stops():
    outcomes = []
    for _ in range(20):
        proposal = descent_next(AXES, outcomes)
        if proposal.done:
            break
        outcomes += [_measure(item) for item in proposal.settings]
    assert proposal.reason == "every best point's neighbours are measured"
    ok = [item for item in outcomes if item.status == "ok"]
    best = min(ok, key=lambda item: item.rows[0].time_us)
    assert best.setting.as_dict() == {
        "NCCL_ALGO": "Ring", "NCCL_MAX_NCHANNELS": "16", "NCCL_NTHREADS": "256",
    }  # fmt: skip
    assert len(outcomes) < 2 * 5 * 3  # fewer than the grid


@pytest.mark.parametrize("budget", [1, 4])
def test_descent_stops_at_its_budget(budget):
    outcomes = [_measure(item) for item in descent_next(AXES, []).settings]
    proposal = descent_next(AXES, outcomes, max_settings=len(outcomes) + budget)
    assert len(proposal.settings) == min(budget, 2) and proposal.done == (budget < 2)


def test_settings_left_in_the_budget_follow_the_mean_duration():
    assert settings_left(None, 10.0, [5.0]) is None
    assert settings_left(100.0, 0.0, []) is None  # nothing measured to judge by
    assert settings_left(100.0, 40.0, [10.0, 20.0]) == 4
    assert settings_left(100.0, 120.0, [10.0]) == 0
