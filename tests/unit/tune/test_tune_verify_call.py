"""`collbench tune verify`'s call per range (run.tune.verify.verify_call): kept, lost, no
difference or unjudged, by the one decision rule through tune's own selection (pure)."""

import pytest

from collbench.analysis.tune.select import SettingOutcome, select_best
from collbench.core.tune_grid import Setting
from collbench.run.tune.verify import verify_call
from tests.rows import make_row

MIB = 1024**2
SIZES = (32 * MIB, 64 * MIB)
NOISE = (1.01, 1.0, 0.99)  # each repeat's time off by up to 1%


def _outcome(knobs, time_us, repeats=3, iters=12):
    rows = tuple(
        make_row(
            size_bytes=size,
            time_us=time_us * NOISE[repeat % 3],
            time_us_samples=[time_us] * iters,
            repeat=repeat,
        )
        for repeat in range(repeats)
        for size in SIZES
    )
    return SettingOutcome(Setting.from_mapping(knobs), rows)


@pytest.mark.parametrize(
    ("time_us", "call"),
    [(770.0, "kept"), (1300.0, "lost"), (1000.0, "no difference")],
)
def test_the_verified_setting_is_kept_lost_or_no_different(time_us, call):
    (record,) = select_best([_outcome({}, 1000.0), _outcome({"X_A": "1"}, time_us)])
    assert verify_call(record) == call
    assert record.evidence.basis == "repeats"


def test_too_few_iterations_to_measure_the_noise_is_unjudged():
    outcomes = [_outcome({}, 1000.0, 1, iters=4), _outcome({"X_A": "1"}, 770.0, 1, iters=4)]
    (record,) = select_best(outcomes)
    assert verify_call(record) == "unjudged" and record.confidence == "unjudged"
    assert record.default_is_best and not record.confident
