"""The one rule for "is B different from A" (analysis.decision), on synthetic runs whose truth
is known: A/A, 5%, 10% and 30% differences, iterations correlated within a run."""

from __future__ import annotations

import math
import random

import pytest

from collbench.analysis.rules import decision
from collbench.analysis.rules.decision import (
    FASTER,
    FLOOR,
    REPEATS,
    SAME,
    SLOWER,
    THRESHOLD,
    UNJUDGED,
    Evidence,
    Question,
    Rule,
    aa_floor,
    holm,
    judge,
    spread_pct,
)
from collbench.core.errors import SpecError
from collbench.core.noise import NoiseFloor


def judge_one(question: Question, rule: Rule | None = None):
    return judge([question], rule)[0]


MIB = 1024**2


def synthetic_run(
    rng: random.Random,
    speed: float,
    repeats: int,
    iters: int = 20,
    run_sigma: float = 0.03,
    repeat_sigma: float = 0.02,
    iter_sigma: float = 0.02,
    rho: float = 0.8,
) -> Evidence:
    """One run of a system whose true speed is `speed`: a run-level offset (placement,
    clocks), a repeat-level offset, and AR(1) iterations (correlated, as real ones are)."""
    run_offset = rng.gauss(0.0, run_sigma)
    figures, samples = [], []
    for _ in range(repeats):
        level = speed * math.exp(run_offset + rng.gauss(0.0, repeat_sigma))
        noise, series = 0.0, []
        for _ in range(iters):
            noise = rho * noise + math.sqrt(1 - rho**2) * rng.gauss(0.0, iter_sigma)
            series.append(level * math.exp(noise))
        samples.append(series)
        figures.append(len(series) / sum(1 / value for value in series))
    return Evidence.of(figures, samples)


def call_rate(
    truth: float, repeats: int, trials: int = 300, seed: int = 1, rule: Rule | None = None, **noise
) -> dict:
    rng = random.Random(seed)
    counts: dict[str, int] = {}
    for _ in range(trials):
        base = synthetic_run(rng, 1.0, repeats, **noise)
        cand = synthetic_run(rng, truth, repeats, **noise)
        verdict = judge_one(Question(base, cand, 64 * MIB), rule)
        counts[verdict.call] = counts.get(verdict.call, 0) + 1
    return {call: count / trials for call, count in counts.items()}


@pytest.mark.parametrize("repeats", [1, 5])
def test_identical_systems_rarely_differ_when_the_noise_is_in_time(repeats):
    # Noise that varies over time (a shared machine's neighbours) shows inside a run too.
    # With one repeat, noise on the repeat's level is a run-level offset: none here.
    repeat_sigma = 0.02 if repeats > 1 else 0.0
    rates = call_rate(1.0, repeats, run_sigma=0.0, repeat_sigma=repeat_sigma)
    assert rates.get(FASTER, 0) + rates.get(SLOWER, 0) <= 0.08


@pytest.mark.slow
@pytest.mark.parametrize("repeats", [1, 5])
def test_process_level_noise_needs_a_recorded_floor(repeats):
    # A run-level offset (placement, clocks) is invisible from inside one run: the data's own
    # floor calls identical systems different too often; an A/A floor recorded from identical
    # runs of the same kind holds.
    unaware = call_rate(1.0, repeats, run_sigma=0.05)
    assert unaware.get(FASTER, 0) + unaware.get(SLOWER, 0) > 0.10
    rng = random.Random(99)
    aa_runs = [synthetic_run(rng, 1.0, repeats, run_sigma=0.05) for _ in range(20)]
    floor = aa_floor({("all_reduce", 64 * MIB): aa_runs}, "20 synthetic A/A runs")
    held = call_rate(1.0, repeats, run_sigma=0.05, rule=Rule(floor=floor))
    assert held.get(FASTER, 0) + held.get(SLOWER, 0) <= 0.08
    caught = call_rate(0.6, repeats, run_sigma=0.05, rule=Rule(floor=floor))
    assert caught.get(SLOWER, 0) >= 0.9


@pytest.mark.parametrize("repeats", [1, 5])
def test_a_30_percent_slowdown_is_caught(repeats):
    assert call_rate(0.7, repeats).get(SLOWER, 0) >= 0.95


def test_a_10_percent_slowdown_is_caught_with_repeats():
    assert call_rate(0.9, 5, run_sigma=0.0).get(SLOWER, 0) >= 0.9


def test_a_5_percent_change_within_the_noise_is_not_called_from_one_repeat():
    # One repeat each: the floor is the within-run spread; 5% with 3% run noise is not
    # beyond it most of the time, and never called the wrong way.
    rates = call_rate(1.05, 1, run_sigma=0.0)
    assert rates.get(SLOWER, 0) <= 0.02


def test_within_run_p_values_are_not_offered_for_a_single_repeat():
    rng = random.Random(3)
    verdict = judge_one(Question(synthetic_run(rng, 1.0, 1), synthetic_run(rng, 0.5, 1), 64 * MIB))
    assert verdict.basis == FLOOR
    assert verdict.p_value is None and verdict.p_holm is None
    assert "no p-value" in verdict.describe()
    assert verdict.call == SLOWER
    ratio, scale = verdict.ratio, 1 + verdict.floor_pct / 100
    assert verdict.low_pct == pytest.approx((ratio / scale - 1) * 100)
    assert verdict.high_pct == pytest.approx((ratio * scale - 1) * 100)
    assert verdict.low_pct > -100


def test_correlated_iterations_do_not_make_a_run_offset_significant():
    # Iterations within a run are strongly correlated (truth: the same system): each run's
    # mean wanders with its slow noise. A Mann-Whitney U test on the iterations treats them
    # as independent and calls most pairs different; the rule must not.
    from scipy.stats import mannwhitneyu

    rng = random.Random(7)
    naive = rule = 0
    for _ in range(100):
        quiet = {"run_sigma": 0.0, "repeat_sigma": 0.0, "iter_sigma": 0.03, "rho": 0.95}
        base = synthetic_run(rng, 1.0, 1, **quiet)
        cand = synthetic_run(rng, 1.0, 1, **quiet)
        naive += mannwhitneyu(base.samples[0], cand.samples[0]).pvalue < 0.05
        rule += judge_one(Question(base, cand, 64 * MIB)).call in (FASTER, SLOWER)
    assert naive > 50  # the trap is real
    assert rule <= 8


def test_a_recorded_floor_raises_the_bar():
    rng = random.Random(11)
    base, cand = synthetic_run(rng, 1.0, 1), synthetic_run(rng, 0.85, 1)
    floor = NoiseFloor({"large": 25.0}, "aa.json")
    without = judge_one(Question(base, cand, 64 * MIB))
    held = judge_one(Question(base, cand, 64 * MIB), Rule(floor=floor))
    assert without.call == SLOWER
    assert held.call == SAME and held.floor_pct == 25.0
    assert "aa.json" in held.floor_source
    # another band has no recorded floor: the measured one stands
    other = judge_one(Question(base, cand, 1024), Rule(floor=floor))
    assert other.floor_pct == without.floor_pct


def test_repeats_basis_shows_interval_and_holm():
    rng = random.Random(5)
    questions = [
        Question(synthetic_run(rng, 1.0, 5), synthetic_run(rng, 0.7, 5), size)
        for size in (MIB, 2 * MIB, 4 * MIB)
    ]
    verdicts = judge(questions)
    for verdict in verdicts:
        assert verdict.basis == REPEATS
        assert verdict.low_pct < verdict.effect_pct < verdict.high_pct
        assert verdict.p_holm >= verdict.p_value
        assert verdict.call == SLOWER
        assert "Holm p=" in verdict.describe() and "noise floor" in verdict.describe()


def test_imported_logs_are_decided_by_the_threshold_alone():
    base, cand = Evidence.of([10.0]), Evidence.of([9.0])
    verdict = judge_one(Question(base, cand, MIB), Rule(threshold_pct=5))
    assert verdict.basis == THRESHOLD and verdict.call == SLOWER
    assert "threshold alone" in verdict.describe()
    assert judge_one(Question(base, cand, MIB), Rule(threshold_pct=20)).call == SAME
    assert judge_one(Question(base, cand, MIB)).call == UNJUDGED


def test_too_few_iterations_are_unjudged_not_same():
    base = Evidence.of([1.0], [[1.0, 1.0, 1.0]])
    cand = Evidence.of([0.5], [[0.5, 0.5, 0.5]])
    verdict = judge_one(Question(base, cand, MIB))
    assert verdict.call == UNJUDGED and "too few iterations" in verdict.reason


def test_spread_of_batches_and_repeats():
    flat = Evidence.of([1.0], [[1.0] * 12])
    assert spread_pct(flat) == pytest.approx(0.0)
    stepped = Evidence.of([1.0], [[1.0] * 9 + [0.5] * 3])
    assert spread_pct(stepped) == pytest.approx(100.0 * decision.FLOOR_FACTOR)
    assert spread_pct(Evidence.of([1.0, 1.1, 1.21])) == pytest.approx(21.0 * decision.FLOOR_FACTOR)
    assert spread_pct(Evidence.of([1.0])) is None


def test_aa_floor_takes_the_largest_change_per_pair_at_a_size_and_its_neighbours():
    runs = {
        ("all_reduce in_place", 1024): [Evidence.of([1.0]), Evidence.of([1.2]), Evidence.of([1.1])],
        ("all_reduce in_place", 64 * MIB): [
            Evidence.of([10.0]),
            Evidence.of([10.3]),
            Evidence.of([10.1]),
        ],
    }
    floor = aa_floor(runs, "three runs")
    assert floor.runs == 3
    assert floor.pct_by_band["small"] == pytest.approx(20.0, rel=0.05)
    assert floor.pct_by_band["large"] == pytest.approx(3.0, rel=0.05)
    assert floor.pct_by_size[1024] == floor.pct_by_band["small"]
    again = NoiseFloor.from_dict(floor.to_dict(), "x")
    assert (again.pct_by_band, again.pct_by_size) == (floor.pct_by_band, floor.pct_by_size)


def test_one_noisy_size_does_not_blind_the_quiet_sizes_of_its_band():
    # two identical runs over a shaped link: 64 KiB landed 56% apart, every other size of the
    # medium band (64 KiB .. 8 MiB) within 2%; the old per-band floor was 56% at all of them
    sizes = [64 * 1024 << step for step in range(8)]
    runs = {
        ("all_reduce in_place", size): [Evidence.of([1.0]), Evidence.of([1.56 if i == 0 else 1.02])]
        for i, size in enumerate(sizes)
    }
    floor = aa_floor(runs, "two runs")
    assert floor.pct_by_size[64 * 1024] == pytest.approx(56.0)
    # the noisy size's neighbours (within 4x) share its floor; further ones keep their own
    assert floor.pct_by_size[256 * 1024] == pytest.approx(56.0)
    assert all(floor.pct_by_size[size] == pytest.approx(2.0) for size in sizes[3:])
    assert floor.pct_by_band["medium"] == pytest.approx(56.0)  # the band's largest
    base, cand = Evidence.of([1.0], [[1.0] * 12]), Evidence.of([0.9], [[0.9] * 12])  # 10% slower
    held = judge_one(Question(base, cand, 4 * MIB), Rule(floor=floor, threshold_pct=5))
    assert held.call == SLOWER and held.detectable_pct < 5
    assert held.floor_pct == pytest.approx(2.0) and held.floor_source == "A/A at 4 MiB, two runs"


def test_a_version_1_floor_file_still_reads_and_holds_its_band_at_every_size():
    old = {"version": 1, "runs": 3, "pct_by_band": {"medium": 20.0}, "detail": {"medium": {}}}
    floor = NoiseFloor.from_dict(old, "old.json")
    assert floor.pct_at(4 * MIB, "medium") == (20.0, "medium band")
    assert floor.pct_at(64 * MIB, "large") == (None, "large band")
    with pytest.raises(SpecError, match="versions 1 to 2"):
        NoiseFloor.from_dict({**old, "version": 3}, "new.json")


def test_holm_matches_hand_computed_values():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([]) == []


def test_repeats_without_samples_are_held_against_their_spread_not_a_threshold():
    # two imported-style repeats a side (no per-iteration samples): their range is a floor
    base, cand = Evidence.of([10.0, 10.2]), Evidence.of([7.0, 7.1])
    verdict = judge_one(Question(base, cand, MIB), Rule(threshold_pct=5))
    assert verdict.basis == FLOOR and verdict.call == SLOWER
    assert verdict.floor_pct == pytest.approx(2.0 * decision.FLOOR_FACTOR, rel=0.01)  # 10.2/10


def test_a_side_without_a_figure_is_unjudged_and_prints_no_nan():
    verdict = judge_one(Question(Evidence.of([]), Evidence.of([1.0]), MIB))
    assert verdict.call == UNJUDGED and "nan" not in verdict.describe()
