"""`collbench tune`'s default ranges follow the data (analysis/tune/select.py, granularity
"crossover"): a range ends where the winner changes, so a crossover inside a fixed band is
never averaged away; every call rests on one family per collective; an A/A tune still picks
the default (pure)."""

import math
import random

import pytest

from collbench.analysis.tune.outputs import env_choice, render_best_env
from collbench.analysis.tune.select import (
    BYTES_MAX,
    NO_SAMPLES,
    SelectRule,
    SettingOutcome,
    select_best,
)
from collbench.core.tune_grid import Setting
from tests.rows import make_row

KIB, MIB, GIB = 1024, 1024**2, 1024**3
SIZES = tuple(2**power for power in range(10, 34))  # 1 KiB .. 8 GiB


def _outcome(knobs, factor, sizes=SIZES, samples=False, world_size=64, nodes=8, baseline=None):
    """A setting whose time at each size is the baseline's (`size / 1 GB/s`-ish, a fixed
    latency and bandwidth) divided by `factor(size)`: factor 1.25 is 25% faster."""
    rows = []
    for size in sizes:
        time_us = (20.0 + size / 2.0e4) / factor(size)
        series = [time_us * (1 + step / 1000) for step in range(12)] if samples else []
        rows.append(
            make_row(
                size_bytes=size,
                time_us=time_us,
                time_us_samples=series,
                world_size=world_size,
                nodes=nodes,
            )
        )
    return SettingOutcome(Setting.from_mapping(knobs), tuple(rows), baseline=baseline)


def _winner_at(records, size):
    (record,) = [item for item in records if item.min_bytes <= size <= item.max_bytes]
    return record


def _ctas(size):
    """The issue's shape: +20..30% from 1 GiB up, 10..25% slower from 16 MiB to 512 MiB."""
    if size >= GIB:
        return 1.2 + 0.1 * (math.log2(size / GIB) / 3)
    if 16 * MIB <= size <= 512 * MIB:
        return 1 / (1.1 + 0.15 * math.log2(size / (16 * MIB)) / 5)
    return 1.0


def test_a_crossover_inside_the_large_band_gets_a_range_on_each_side():
    tuned = {"NCCL_MIN_CTAS": "24", "NCCL_IB_QPS_PER_CONNECTION": "2"}
    records = select_best([_outcome({}, lambda size: 1.0), _outcome(tuned, _ctas)])
    for size in SIZES:
        record = _winner_at(records, size)
        if size >= GIB:
            assert record.knobs == tuned and not record.default_is_best, size
        elif size >= 16 * MIB:
            assert record.default_is_best, size
    ranges = [(record.band, record.default_is_best) for record in records]
    assert ranges == [("1 KiB .. 512 MiB", True), ("1 GiB .. 8 GiB", False)]
    large = records[-1]
    assert large.max_bytes == BYTES_MAX and large.min_bytes == math.isqrt(512 * MIB * GIB) + 1
    assert large.evidence.calls["faster"] == 4 and large.confidence == NO_SAMPLES
    # best.env exports the setting of the largest range and names the range it does not follow
    choice = env_choice(records)
    assert choice.knobs == tuned
    (conflict,) = choice.conflicts
    assert conflict.startswith("all_reduce 1 KiB .. 512 MiB:") and "best is the default" in conflict
    assert "1 KiB .. 512 MiB" in render_best_env(choice)


def test_fixed_bands_average_the_same_crossover_away():
    """What the default replaced: the large band [16 MiB, end] mixes both sides."""
    tuned = {"NCCL_MIN_CTAS": "24"}
    outcomes = [_outcome({}, lambda size: 1.0), _outcome(tuned, _ctas)]
    bands = select_best(outcomes, SelectRule(granularity="band"))
    large = next(item for item in bands if item.band == "large")
    assert large.default_is_best  # 1 GiB .. 8 GiB, where tuned wins by 20-30%, is lost


def test_tree_faster_small_and_ring_faster_large_split_at_the_crossover():
    tree = {"NCCL_ALGO": "Tree", "NCCL_PROTO": "Simple"}
    ring = {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"}

    def tree_speed(size):
        return 1.3 if size <= MIB else 1 / 1.3

    # ring stands for the default here (the first RUN, in tune from)
    outcomes = [_outcome(ring, lambda size: 1.0, baseline=True), _outcome(tree, tree_speed)]
    records = select_best(outcomes)
    assert [(item.band, item.knobs) for item in records] == [
        ("1 KiB .. 1 MiB", tree),
        ("2 MiB .. 8 GiB", ring),
    ]
    assert records[0].max_bytes + 1 == records[1].min_bytes
    assert records[0].min_bytes == 0


def test_one_size_where_the_winner_only_ties_does_not_split_its_range():
    """A size where the winner is not called faster (within the threshold) between sizes
    where it is, joins them when the whole range is still that winner's."""

    def almost(size):
        return 1.02 if size == 2 * GIB else (1.25 if size >= GIB else 1.0)

    records = select_best([_outcome({}, lambda size: 1.0), _outcome({"X_A": "1"}, almost)])
    assert [(item.band, item.default_is_best) for item in records] == [
        ("1 KiB .. 512 MiB", True),
        ("1 GiB .. 8 GiB", False),
    ]
    assert records[-1].evidence.calls == {"faster": 3, "slower": 0, "same": 1, "unjudged": 0}


def test_one_size_where_the_winner_loses_splits_its_range():
    def loses(size):
        return 0.8 if size == 2 * GIB else (1.25 if size >= GIB else 1.0)

    records = select_best([_outcome({}, lambda size: 1.0), _outcome({"X_A": "1"}, loses)])
    assert [(item.band, item.default_is_best) for item in records] == [
        ("1 KiB .. 512 MiB", True),
        ("1 GiB", False),
        ("2 GiB", True),
        ("4 GiB .. 8 GiB", False),
    ]


@pytest.mark.slow
def test_an_aa_tune_over_many_sizes_rarely_finds_a_winner():
    """One family per collective: over 100 A/A tunes (3 repeats a side, 3 other settings,
    12 sizes), a false winner anywhere stays within the rule's alpha."""

    def aa(rng):
        outcomes = []
        for index in range(4):
            rows = []
            for repeat in range(3):
                for size in SIZES[:12]:
                    time_us = 1000.0 * math.exp(rng.gauss(0.0, 0.03))
                    series = [time_us * math.exp(rng.gauss(0.0, 0.01)) for _ in range(12)]
                    rows.append(
                        make_row(
                            size_bytes=size,
                            time_us=time_us,
                            time_us_samples=series,
                            repeat=repeat,
                        )
                    )
            knobs = {} if index == 0 else {"X_A": str(index)}
            outcomes.append(SettingOutcome(Setting.from_mapping(knobs), tuple(rows)))
        return outcomes

    false = sum(
        any(not record.default_is_best for record in select_best(aa(random.Random(seed))))
        for seed in range(100)
    )
    assert false <= 5


def test_a_setting_missing_some_sizes_wins_only_where_it_measured():
    half = SIZES[len(SIZES) // 2 :]
    records = select_best(
        [_outcome({}, lambda size: 1.0), _outcome({"X_A": "1"}, lambda size: 1.5, sizes=half)]
    )
    assert [(item.band, item.default_is_best) for item in records] == [
        ("1 KiB .. 2 MiB", True),
        ("4 MiB .. 8 GiB", False),
    ]
    assert records[0].confidence == "baseline only"


@pytest.mark.parametrize("granularity", ["crossover", "band", "size"])
def test_every_granularity_covers_zero_to_the_end_without_gaps(granularity):
    outcomes = [_outcome({}, lambda size: 1.0), _outcome({"X_A": "1"}, _ctas)]
    records = select_best(outcomes, SelectRule(granularity=granularity))
    assert records[0].min_bytes == 0 and records[-1].max_bytes == BYTES_MAX
    for low, high in zip(records, records[1:], strict=False):
        assert low.max_bytes + 1 == high.min_bytes
