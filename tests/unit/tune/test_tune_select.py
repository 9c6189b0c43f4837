"""`collbench tune`'s decision (analysis.tune_select, analysis.tune_result): the best setting
per collective and size range, its gain and confidence called by the one decision rule
(analysis.decision: repeats with Holm over every setting, else the noise floor), "default is
best" when nothing wins clearly, imported logs judged on a threshold, and tune.json /
best.env built from the records (pure)."""

import math
import random
from dataclasses import replace

import pytest

from collbench.analysis.rules.bands import BANDS
from collbench.analysis.tune.outputs import deployable, env_choice, render_best_env, tune_document
from collbench.analysis.tune.select import (
    BYTES_MAX,
    NO_SAMPLES,
    SelectRule,
    SettingOutcome,
    describe_evidence,
    select_best,
    size_ranges,
)
from collbench.core.convert import plain
from collbench.core.errors import SpecError
from collbench.core.tune_grid import Setting
from tests.rows import make_row

KIB, MIB = 1024, 1024**2


def setting(**knobs):
    """A grid point with these knobs; none: the baseline."""
    return Setting.from_mapping(knobs)


SMALL, LARGE = (4 * KIB, 16 * KIB), (32 * MIB, 64 * MIB)
BANDS_RULE = SelectRule(granularity="band")  # the fixed bands (tune --ranges bands)


def _rows(times, sizes=SMALL + LARGE, samples=True, **columns):
    """One row per size; `times` is one time for all sizes or a {size: time} map. Samples:
    12 evenly spread values starting at the time (a fixed, noise-free spread: 4 batches of 3
    for the noise floor of one repeat)."""
    rows = []
    for size in sizes:
        time_us = times[size] if isinstance(times, dict) else times
        series = [time_us + step for step in range(12)] if samples else []
        rows.append(make_row(size_bytes=size, time_us=time_us, time_us_samples=series, **columns))
    return tuple(rows)


def _outcome(knobs, times, **kwargs):
    return SettingOutcome(setting(**knobs), _rows(times, **kwargs))


def _repeated(knobs, repeat_times, sizes=(LARGE[0],)):
    """A setting measured once per entry of `repeat_times` (one time for every size), each
    repeat's rows carrying its repeat index (as tune pools its runs)."""
    rows = [
        row
        for repeat, time_us in enumerate(repeat_times)
        for row in _rows(time_us, sizes=sizes, repeat=repeat)
    ]
    return SettingOutcome(setting(**knobs), tuple(rows))


def _record(records, collective="all_reduce", band="large"):
    return next(item for item in records if item.collective == collective and item.band == band)


def test_a_clear_winner_is_chosen_with_its_gain_and_confidence():
    records = select_best(
        [
            _outcome({}, {**dict.fromkeys(SMALL, 100.0), **dict.fromkeys(LARGE, 1000.0)}),
            _outcome(
                {"GLOO_SOCKET_IFNAME": "fast"},
                {**dict.fromkeys(SMALL, 100.0), **dict.fromkeys(LARGE, 500.0)},
            ),
            _outcome({"GLOO_SOCKET_IFNAME": "slow"}, 2000.0),
        ],
        BANDS_RULE,
    )
    assert [(item.band, item.min_bytes) for item in records] == [("small", 0), ("large", 16 * MIB)]
    large = _record(records)
    assert large.knobs == {"GLOO_SOCKET_IFNAME": "fast"} and not large.default_is_best
    # one repeat each: decided on the noise floor of the iteration batches, no p-value
    assert large.confident and large.confidence == "beyond noise floor"
    assert large.evidence.basis == "noise floor" and large.evidence.p_holm is None
    assert large.evidence.calls["faster"] == 2 and large.evidence.effect_pct == pytest.approx(100)
    assert large.gain == pytest.approx(1000.0 / 500.0 - 1)  # busbw ratio - 1
    assert large.max_bytes == BYTES_MAX and large.sizes == LARGE
    assert large.baseline_busbw_gbps < large.busbw_gbps
    small = _record(records, band="small")  # fast ties the default there: no call
    assert small.default_is_best and small.knobs == {} and small.gain == 0.0
    assert not small.confident and small.confidence == "within noise floor"
    assert small.candidate["setting"] == "GLOO_SOCKET_IFNAME=fast"


def test_a_significant_win_over_one_setting_is_not_one_over_many():
    # 3 repeats each, 4% faster: Welch p = 0.031 alone, 0.124 after Holm over 4 settings
    one = [_repeated({}, (105.5, 104.0, 102.5)), _repeated({"X_A": "1"}, (101.5, 100.0, 98.5))]
    (alone,) = select_best(one, BANDS_RULE)
    assert alone.confident and alone.knobs == {"X_A": "1"}
    assert alone.evidence.p_holm == pytest.approx(0.031, abs=1e-3)
    same = [_repeated({"X_B": str(n)}, (105.5, 104.0, 102.5)) for n in range(3)]
    (among_many,) = select_best(one + same, BANDS_RULE)
    assert among_many.default_is_best and not among_many.confident
    assert among_many.confidence == "not significant"
    assert among_many.candidate["knobs"] == {"X_A": "1"}


def test_a_significant_but_tiny_gain_keeps_the_default():
    outcomes = [  # 1% faster, repeats 0.01% apart
        _repeated({}, (1000.0, 1000.1, 1000.2)),
        _repeated({"X_A": "1"}, (990.0, 990.1, 990.2)),
    ]
    record = _record(select_best(outcomes, BANDS_RULE))
    assert record.default_is_best and record.confidence == "significant"
    assert "below 2%" in record.reason


def test_a_30_percent_faster_setting_with_3_repeats_wins_on_the_repeats():
    rng = random.Random(7)

    def noisy(time_us):  # each repeat its own +-2% (a fresh process each time)
        return tuple(time_us * rng.uniform(0.98, 1.02) for _ in range(3))

    outcomes = [_repeated({}, noisy(1000.0), LARGE), _repeated({"X_A": "1"}, noisy(770.0), LARGE)]
    record = _record(select_best(outcomes, BANDS_RULE))
    assert record.knobs == {"X_A": "1"} and record.confident
    assert record.confidence == "significant"
    evidence = record.evidence
    assert evidence.basis == "repeats"
    assert (evidence.baseline_repeats, evidence.candidate_repeats) == (3, 3)
    assert evidence.calls["faster"] == 2 and evidence.p_holm < 0.05
    assert evidence.low_pct < evidence.effect_pct < evidence.high_pct
    assert evidence.effect_pct == pytest.approx(30, abs=5) and evidence.floor_pct < 5
    text = describe_evidence(evidence)
    assert "3v3 repeats" in text and "repeats: 2 faster of 2" in text
    assert plain(record)["evidence"]["basis"] == "repeats"


def _aa_outcomes(rng, settings=4, repeats=3, spread=0.03):
    """An A/A tune: every setting drawn from one distribution (each repeat's time off by a
    lognormal factor, as fresh processes land; 12 samples around it)."""
    outcomes = []
    for index in range(settings):
        rows = []
        for repeat in range(repeats):
            for size in LARGE:
                time_us = 1000.0 * math.exp(rng.gauss(0.0, spread))
                series = [time_us * math.exp(rng.gauss(0.0, spread / 3)) for _ in range(12)]
                columns = {"time_us_samples": series, "repeat": repeat}
                rows.append(make_row(size_bytes=size, time_us=time_us, **columns))
        knobs = {} if index == 0 else {"X_A": str(index)}
        outcomes.append(SettingOutcome(setting(**knobs), tuple(rows)))
    return outcomes


@pytest.mark.slow
def test_an_aa_tune_with_3_repeats_picks_the_default():
    record = _record(select_best(_aa_outcomes(random.Random(1)), BANDS_RULE))
    assert record.default_is_best and record.knobs == {}
    assert record.evidence.basis == "repeats" and record.confidence == "not significant"
    # and rarely otherwise: over 200 A/A tunes (3 settings against the default), false
    # winners stay within the rule's alpha
    winners = sum(
        not _record(select_best(_aa_outcomes(random.Random(seed)), BANDS_RULE)).default_is_best
        for seed in range(200)
    )
    assert winners <= 10


def test_imported_logs_without_samples_are_judged_on_the_threshold():
    outcomes = [
        _outcome({}, 1000.0, samples=False),
        _outcome({"NCCL_ALGO": "Ring"}, 900.0, samples=False),  # +11%
    ]
    record = _record(select_best(outcomes, BANDS_RULE))
    assert record.knobs == {"NCCL_ALGO": "Ring"}
    assert not record.confident and record.confidence == NO_SAMPLES
    assert record.evidence.basis == "threshold" and record.evidence.floor_pct is None
    assert record.reason.endswith(f"{NO_SAMPLES}: not confident")
    strict = select_best(outcomes, SelectRule(granularity="band", unsampled_min_gain=0.2))
    assert _record(strict).default_is_best and "below the 20% threshold" in _record(strict).reason


def test_default_is_best_is_confident_when_the_rest_is_clearly_slower():
    record = _record(select_best([_outcome({}, 500.0), _outcome({"X_A": "1"}, 1000.0)], BANDS_RULE))
    assert record.default_is_best and record.confident and record.knobs == {}
    assert record.confidence == "beyond noise floor"
    assert record.candidate["gain"] == pytest.approx(-0.5)


def test_a_failed_setting_keeps_what_it_finished_and_partial_ranges_decide_on_common_sizes():
    outcomes = [
        _outcome({}, 1000.0),
        SettingOutcome(setting(GLOO_SOCKET_IFNAME="nosuch"), (), error="no such interface"),
        # failed part-way: its small sizes were finished, and take part
        SettingOutcome(
            setting(X_B="1"), _rows(500.0, sizes=SMALL), error="no algorithm/protocol available"
        ),
        # measured one of the two large sizes: it competes there, decided on that size
        _outcome({"X_A": "1"}, 100.0, sizes=(LARGE[0],)),
    ]
    records = select_best(outcomes, BANDS_RULE)
    small, large = _record(records, band="small"), _record(records)
    assert small.knobs == {"X_B": "1"} and small.gain == pytest.approx(1.0)
    assert large.knobs == {"X_A": "1"} and large.sizes == LARGE
    assert "(measured 1 of 2 sizes; decided on those)" in large.reason
    assert large.candidate["sizes_measured"] == 1 and large.candidate["sizes_in_range"] == 2
    # the gain is on the common size: 1000 us against 100 us there
    assert large.gain == pytest.approx(9.0)
    settings = tune_document(outcomes, records).to_dict()["settings"]
    assert [entry["status"] for entry in settings] == ["ok", "failed", "failed", "ok"]
    assert settings[1]["error"] == "no such interface"
    assert settings[0]["knobs"] == {} and settings[0]["baseline"]
    assert list(settings[0])[:3] == ["knobs", "status", "error"]  # the keys first


def test_placement_rule_and_collectives_the_baseline_lacks():
    """out_of_place where measured, else in_place; a collective only another setting
    measured is chosen without a gain; overlap probe rows are not tuned."""
    base = _rows(1000.0, placement="out_of_place") + _rows(
        1000.0, placement="in_place", collective="broadcast", root=0
    )
    fast_in_place = _rows(100.0, placement="in_place")  # ignored: out_of_place is tuned
    probe = make_row(kind="overlap", collective="all_gather")  # an overlap probe: not tuned
    broadcast = _rows(500.0, placement="in_place", collective="broadcast", root=0)
    gather = _rows(500.0, collective="all_gather")
    outcomes = [
        SettingOutcome(setting(), (*base, probe)),
        SettingOutcome(setting(X_A="1"), _rows(1000.0) + fast_in_place + broadcast + gather),
    ]
    records = select_best(outcomes, BANDS_RULE)
    assert {item.collective for item in records} == {"all_reduce", "broadcast", "all_gather"}
    assert _record(records).placement == "out_of_place" and _record(records).default_is_best
    assert _record(records, "broadcast").placement == "in_place"
    assert _record(records, "broadcast").knobs == {"X_A": "1"}
    gather = _record(records, "all_gather")  # the baseline did not measure it: no gain
    assert gather.knobs == {"X_A": "1"} and gather.gain is None
    assert gather.confidence == "no baseline" and not gather.confident


@pytest.mark.parametrize("granularity", ["band", "size"])
def test_ranges_cover_every_size_without_gaps(granularity):
    sizes = [8, 1024, 4096, 1 << 20, 1 << 30]
    ranges = size_ranges(sizes, granularity)
    assert ranges[0].min_bytes == 0 and ranges[-1].max_bytes == BYTES_MAX
    for before, after in zip(ranges, ranges[1:], strict=False):
        assert after.min_bytes == before.max_bytes + 1
    for size in sizes:
        assert sum(item.covers(size) for item in ranges) == 1
    if granularity == "band":
        assert [item.name for item in ranges] == [name for name, _ in BANDS]
    else:  # split at the geometric midpoint: 1024..4096 at 2048
        assert ranges[1].max_bytes == 2048 and ranges[2].name == "4 KiB"


def test_size_granularity_calls_each_size():
    sizes = (1 * MIB, 4 * MIB, 16 * MIB, 64 * MIB)
    times = dict(zip(sizes, (100.0, 400.0, 1600.0, 6400.0), strict=True))
    faster = {size: time * (0.5 if size >= 16 * MIB else 1.0) for size, time in times.items()}
    outcomes = [
        _outcome({}, times, sizes=sizes),
        _outcome({"X_A": "1"}, faster, sizes=sizes),
    ]
    records = select_best(outcomes, SelectRule(granularity="size"))
    assert [item.sizes for item in records] == [(size,) for size in sizes]
    assert [item.knobs for item in records] == [{}, {}, {"X_A": "1"}, {"X_A": "1"}]


def test_an_unknown_granularity_is_a_spec_error():
    with pytest.raises(SpecError, match="granularity"):
        SelectRule(granularity="pow4")


def test_best_env_exports_one_measured_setting_and_names_each_conflict():
    times = {**dict.fromkeys(SMALL, 100.0), **dict.fromkeys(LARGE, 1000.0)}
    outcomes = [
        _outcome({}, times),
        _outcome({"NCCL_PROTO": "LL"}, {**times, **dict.fromkeys(SMALL, 50.0)}),
        _outcome({"NCCL_PROTO": "Simple"}, {**times, **dict.fromkeys(LARGE, 500.0)}),
    ]
    records = select_best(outcomes, BANDS_RULE)
    choice = env_choice(records)
    assert choice.knobs == {"NCCL_PROTO": "Simple"}  # the large range's winner
    assert len(choice.conflicts) == 1
    assert choice.conflicts[0].startswith("all_reduce small: 4 KiB .. 16 KiB: ")
    assert (
        "best is NCCL_PROTO=LL +100.0%, best.env exports NCCL_PROTO=Simple" in (choice.conflicts[0])
    )
    text = render_best_env(choice)
    assert "export NCCL_PROTO=Simple\n" in text
    assert "one environment cannot" in text and text.count("\n# all_reduce small") == 1
    document = tune_document(outcomes, records).to_dict()
    assert tuple(document["env"]["conflicts"]) == choice.conflicts
    best = document["best"]
    keys = ["collective", "min_bytes", "max_bytes", "knobs", "busbw_gbps",
            "baseline_busbw_gbps", "gain", "confident"]  # fmt: skip
    assert list(best[0])[: len(keys)] == keys
    assert best[1]["max_bytes"] == BYTES_MAX and math.isfinite(best[1]["busbw_gbps"])


def test_best_env_is_empty_when_the_default_wins_everywhere():
    records = select_best([_outcome({}, 100.0), _outcome({"X_A": "1"}, 100.0)], BANDS_RULE)
    choice = env_choice(records)
    assert choice.knobs == {} and not choice.conflicts
    assert "\nexport " not in render_best_env(choice)


def test_best_env_never_exports_a_setting_that_loses_a_measured_range():
    """Simple wins the large range but is 20% slower than the default in the small one:
    without a workload nothing is exported, and best.env says which range it would cost."""
    times = {**dict.fromkeys(SMALL, 100.0), **dict.fromkeys(LARGE, 1000.0)}
    outcomes = [
        _outcome({}, times),
        _outcome({"NCCL_PROTO": "LL"}, {**times, **dict.fromkeys(SMALL, 50.0)}),
        _outcome(
            {"NCCL_PROTO": "Simple"},
            {**dict.fromkeys(SMALL, 125.0), **dict.fromkeys(LARGE, 500.0)},
        ),
    ]
    records = select_best(outcomes, BANDS_RULE)
    document = tune_document(outcomes, records)
    assert document.env.knobs == {}
    assert (
        "NCCL_PROTO=Simple is best where it was chosen but is 20.0% slower than the default in all_reduce small"
        in document.env.why
    )
    assert "--workload" in document.env.why and "nccl_tuner.conf" in document.env.why
    assert "noise floor" in document.env.why  # the evidence: a size's verdict and its floor
    text = render_best_env(document.env)
    assert "\nexport " not in text and "nothing to export" in text
    # exporting nothing follows the default everywhere: no range is "not followed"
    lost = replace(
        document.env, conflicts=("all_reduce 4 KiB: best is the default, best.env exports X",)
    )
    assert "best.env exports" not in render_best_env(lost)


@pytest.mark.parametrize(
    "library, exported, said",
    [
        (("NCCL", "2.21.5"), None, "NCCL 2.21.5 reads no per-collective NCCL_ALGO (2.24+)"),
        (("RCCL", "2.20.5"), None, "RCCL 2.20.5 reads no per-collective"),
        (("NCCL", "2.26.2"), "allreduce:nvls", "(NCCL 2.26.2 reads it;"),
        (None, "allreduce:nvls", "(NCCL 2.24+ only: no version recorded;"),
    ],
)
def test_best_env_sets_nccl_algo_for_what_was_measured_in_a_form_the_library_reads(
    library, exported, said
):
    """NCCL_ALGO=NVLS won on all-reduce, measured on one node (issue 40 item 1): it is set
    for all-reduce alone (never forced on all-gather and reduce-scatter, never measured), in
    the per-collective form, which NCCL and RCCL before 2.24 do not read: there it is not
    exported at all, and the note says so and where it was measured."""
    knobs, note = deployable(
        {"NCCL_ALGO": "NVLS", "NCCL_PROTO": "Simple"}, ["all_reduce"], library, [1]
    )
    assert knobs.get("NCCL_ALGO") == exported and knobs["NCCL_PROTO"] == "Simple"
    assert (
        note.startswith("NCCL_ALGO=NVLS was measured for all_reduce on 1 node(s)") and said in note
    )
    assert deployable({"NCCL_ALGO": "Ring"}, ["all_reduce", "all_gather"], None)[0] == {
        "NCCL_ALGO": "allgather:ring;allreduce:ring"
    }
