"""The CI gate of `collbench compare --fail-if-slower PCT`: fails a real regression, does not
fail on noise, judges logs without samples on the threshold alone, and checks only the
sizes it is told to (pure; the command line is in tests/cli/test_compare_cli.py).

The gate reads the one rule (analysis.decision): a size fails when its effect is below -PCT
and the rule calls it `slower`."""

import math

import numpy as np
import pytest

from collbench.analysis.compare.comparison import compare
from collbench.analysis.compare.gate import (
    SizeSelection,
    check_slower,
    parse_bands,
    parse_size_range,
)
from collbench.analysis.rules.decision import FLOOR, REPEATS, THRESHOLD, Rule, aa_floor, evidence_of
from collbench.core.errors import SpecError
from tests.rows import make_row, make_run

SIZES = [8 << (2 * index) for index in range(12)]  # 8 B .. 32 MiB, every band


def _run(
    name, times, spread=0.02, seed=0, samples=True, repeats=1, run_sigma=0.0, rho=0.0, iters=20
):
    """A run in collbench's row format: per size and repeat, `iters` per-iteration times
    (AR(1) with correlation `rho`, relative spread `spread`) around `time_us` times a run-level
    offset (relative spread `run_sigma`); time_us is the repeat's mean, as a sweep's is."""
    rng = np.random.default_rng(seed)
    offset = math.exp(rng.normal(0.0, run_sigma)) if run_sigma else 1.0
    rows = []
    for size, time_us in zip(SIZES, times, strict=True):
        for repeat in range(repeats):
            series = _series(rng, time_us * offset, spread, rho, iters) if samples else []
            rows.append(
                make_row(
                    placement="in_place",
                    size_bytes=size,
                    time_us=float(np.mean(series)) if samples else time_us,
                    time_us_samples=[float(value) for value in series],
                    repeat=repeat if repeats > 1 else None,
                )
            )
    return make_run(name, rows, run_id=name, timing_method="perf_counter")


def _series(rng, time_us, spread, rho, iters):
    noise, series = 0.0, []
    for _ in range(iters):
        noise = rho * noise + math.sqrt(1 - rho**2) * rng.normal(0.0, spread)
        series.append(time_us * math.exp(noise))
    return series


def _gate(base, cand, pct, selection=None, floor=None):
    rule = Rule(threshold_pct=pct, floor=floor)
    return check_slower(compare(base, cand, rule), pct, selection or SizeSelection())


def test_a_real_regression_fails_and_only_where_it_is():
    base = _run("a", [100.0] * len(SIZES), seed=1)
    times = [100.0] * len(SIZES)
    times[-1] = times[-2] = 125.0  # 20% less busbw at 8 and 32 MiB
    result = _gate(base, _run("b", times, seed=2), 10.0)
    assert [check.item.size_bytes for check in result.failed] == SIZES[-2:]
    assert len(result.checks) == len(SIZES)
    for check in result.failed:
        verdict = check.item.decision
        assert verdict.basis == FLOOR and verdict.effect_pct < -10 < -verdict.floor_pct
        assert (
            check.item.decision.p_holm is None and check.item.p_value is None
        )  # no within-run p-value


def test_a_30_percent_slowdown_fails_the_gate():
    base = _run("a", [100.0] * len(SIZES), seed=3, rho=0.8)
    cand = _run("b", [100.0 / 0.7] * len(SIZES), seed=4, rho=0.8)
    result = _gate(base, cand, 5.0)
    assert len(result.failed) == len(SIZES)
    assert all(
        check.item.decision.effect_pct == pytest.approx(-30, abs=3) for check in result.failed
    )


def test_a_slowdown_under_the_threshold_passes():
    base = _run("a", [100.0] * len(SIZES), spread=0.005, seed=1)
    cand = _run("b", [104.0] * len(SIZES), spread=0.005, seed=2)  # ~4% less busbw
    assert {item.verdict for item in compare(base, cand).sizes} == {"slower"}
    assert not _gate(base, cand, 5.0).failed
    assert len(_gate(base, cand, 2.0).failed) == len(SIZES)


def test_a_slowdown_within_the_noise_is_spared_and_said_so():
    base = _run("a", [100.0] * len(SIZES), spread=0.1, seed=5)
    cand = _run("b", [106.0] * len(SIZES), spread=0.1, seed=6)  # ~6% less, 10% iteration noise
    result = _gate(base, cand, 1.0)
    assert result.slower and not result.failed
    assert result.spared == result.slower
    assert all(abs(c.item.decision.effect_pct) <= c.item.decision.floor_pct for c in result.spared)


def test_identical_runs_do_not_fail_the_gate():
    """A/A: reruns of one system, iterations correlated within a run (each run's mean wanders
    with its slow noise). The old gate, a Mann-Whitney U test on one run's iterations with
    Holm, failed about one such pair in six at 5%; the rule holds them against the noise
    the batches of each run show."""
    failures = 0
    for seed in range(40):
        base = _run("a", [100.0] * len(SIZES), spread=0.03, rho=0.8, seed=1000 + 2 * seed)
        cand = _run("b", [100.0] * len(SIZES), spread=0.03, rho=0.8, seed=1001 + 2 * seed)
        failures += bool(_gate(base, cand, 5.0).failed)
    assert failures <= 3


def test_a_recorded_floor_holds_run_to_run_noise():
    """A run-level offset (placement, clocks) is invisible inside one run: the floor measured
    from the data is too low for it. An A/A floor recorded from identical runs holds it, and
    still lets a 30% slowdown through."""

    def rerun(seed, time_us=100.0):
        return _run("x", [time_us] * len(SIZES), spread=0.01, run_sigma=0.05, seed=seed)

    aa_runs = [rerun(seed) for seed in range(12)]
    by_size = {
        ("all_reduce in_place", size): [
            evidence_of([row for row in run.rows if row.size_bytes == size]) for run in aa_runs
        ]
        for size in SIZES
    }
    floor = aa_floor(by_size, "12 synthetic A/A runs")
    unaware = held = 0
    for seed in range(100, 200, 2):
        base, cand = rerun(seed), rerun(seed + 1)
        unaware += bool(_gate(base, cand, 5.0).failed)
        held += bool(_gate(base, cand, 5.0, floor=floor).failed)
    assert unaware >= 8 and held <= 2  # 50 pairs: about a quarter fail without the floor
    slow = _gate(rerun(7), rerun(8, 100.0 / 0.7), 5.0, floor=floor)
    assert len(slow.failed) == len(SIZES)
    assert "A/A" in slow.failed[0].item.decision.floor_source


def test_repeats_give_a_holm_p_value_and_an_interval():
    base = _run("a", [100.0] * len(SIZES), seed=1, repeats=5)
    times = [100.0] * len(SIZES)
    times[-1] = 125.0
    result = _gate(base, _run("b", times, seed=2, repeats=5), 10.0)
    (check,) = result.failed
    verdict = check.item.decision
    assert verdict.basis == REPEATS and (verdict.base_repeats, verdict.cand_repeats) == (5, 5)
    assert check.item.decision.p_holm is not None and check.item.decision.p_holm < 0.05
    assert check.item.decision.p_holm >= check.item.p_value  # corrected over the 12 sizes
    assert verdict.low_pct < verdict.effect_pct < verdict.high_pct < 0
    assert "Holm p=" in verdict.describe() and "repeats 5 vs 5" in verdict.describe()


def test_a_slowdown_the_rule_cannot_judge_keeps_the_gate_from_passing():
    """8 iterations cannot be cut into 4 batches of 3: no noise floor, `unjudged`. The gate
    does not fail it as slower, nor does it pass it as healthy."""
    from collbench.render.compare import gate_lines, gate_summary

    times = [100.0] * len(SIZES)
    times[-1] = 130.0
    base, cand = _run("a", [100.0] * len(SIZES), iters=8), _run("b", times, iters=8, seed=1)
    result = _gate(base, cand, 10.0)
    assert not result.failed and not result.passed
    (check,) = result.unjudged
    assert check.item.size_bytes == SIZES[-1] and check.item.verdict == "unjudged"
    assert "UNJUDGED: all_reduce in_place 32 MiB" in gate_lines(result, "b")[0]
    assert "could not be judged" in gate_summary(result, "b")


def test_without_samples_the_threshold_alone_decides():
    base = _run("a", [100.0] * len(SIZES), samples=False)
    times = [100.0] * len(SIZES)
    times[3] = 111.0  # 9.9% less busbw
    result = _gate(base, _run("b", times, samples=False), 5.0)
    (check,) = result.failed
    assert check.item.size_bytes == SIZES[3] and check.item.decision.basis == THRESHOLD
    assert check.item.decision.p_holm is None and "threshold 5%" in check.item.decision.describe()
    # without a threshold there is no call on an imported log: unjudged, never `same`
    assert {item.verdict for item in compare(base, _run("b", times, samples=False)).sizes} == {
        "unjudged"
    }


def test_bands_and_ranges_pick_the_sizes_checked():
    base = _run("a", [100.0] * len(SIZES), seed=1)
    times = [100.0] * len(SIZES)
    times[0] = 150.0  # only 8 B, a small size, regressed
    cand = _run("b", times, seed=2)
    assert _gate(base, cand, 10.0, parse_bands("small")).failed
    large = _gate(base, cand, 10.0, parse_bands("medium,large"))
    assert not large.failed and min(c.item.size_bytes for c in large.checks) >= 64 * 1024
    ranged = _gate(base, cand, 10.0, parse_size_range("1M:"))
    assert not ranged.failed and [c.item.size_bytes for c in ranged.checks] == SIZES[-3:]
    assert parse_size_range(":64K") == SizeSelection(min_bytes=0, max_bytes=65536)
    assert parse_size_range("1M:1G").describe() == "sizes 1 MiB .. 1 GiB"


@pytest.mark.parametrize(
    "parse, text, needle",
    [
        (parse_bands, "huge", "is not a size band: use small, medium, large"),
        (parse_bands, "", "is not a size band"),
        (parse_size_range, "1M", "is not a range: use MIN:MAX"),
        (parse_size_range, "1G:1M", "ends below where it starts"),
        (parse_size_range, "x:1M", "is not a size"),
    ],
)
def test_bad_selections_name_the_flag(parse, text, needle):
    with pytest.raises(SpecError, match=needle):
        parse(text)


def test_the_gate_corrects_over_the_sizes_it_checks_not_every_size():
    base = _run("a", [100.0] * len(SIZES), seed=5, repeats=3)
    cand = _run("b", [105.0] * len(SIZES), seed=6, repeats=3)
    rule = Rule(threshold_pct=5.0)
    selection = parse_size_range("8M:")
    everything = compare(base, cand, rule)
    gated = compare(base, cand, rule, selection.covers)
    checked = [item for item in gated.sizes if selection.covers(item.size_bytes)]
    assert len(checked) == 2
    for item in checked:
        whole = next(one for one in everything.sizes if one.size_bytes == item.size_bytes)
        assert item.decision.basis == REPEATS
        # two sizes in the gate's family against twelve in the whole comparison's
        assert item.decision.p_holm <= 2 * item.decision.p_value + 1e-12
        assert item.decision.p_holm <= whole.decision.p_holm
