"""Is B different from A? The one rule every command that decides uses (pure).

The method, in full: docs/methodology/decisions.md#analysis-rules-decision-py.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from collbench.analysis.rules.bands import band_of
from collbench.core.errors import SpecError
from collbench.core.noise import NoiseFloor
from collbench.core.stats import geomean
from collbench.core.units import counted
from collbench.store.rows import ResultRow

ALPHA = 0.05
MIN_REPEATS = 3  # per side, for a test on repeat-level figures
BATCHES = 4  # one repeat's iterations are cut into this many consecutive batches ...
MIN_BATCH = 3  # ... of at least this many iterations each
# The measured floor is this many times the range of the batch (or repeat) figures. Chosen on
# this project's A/A measurements (benchmarks/decision_rates.py, README "How collbench
# decides"): the smallest factor whose false-alarm rate stayed within 5%.
FLOOR_FACTOR = 1.5
# A size's A/A floor covers the sizes within this factor of it (aa_floor): noise changes with
# size slowly (latency- to bandwidth-bound), so neighbours share it; 4x keeps a sweep's x2
# steps at 5 sizes a floor.
NEIGHBOURS = 4

REPEATS, FLOOR, THRESHOLD = "repeats", "noise floor", "threshold"
FASTER, SLOWER, SAME, UNJUDGED = "faster", "slower", "same", "unjudged"


@dataclass(frozen=True)
class Evidence:
    """One side's measurements of one thing (a collective, placement and size), as speeds.

    repeats: one figure per repeat (from that repeat's batch time). samples: per repeat, the
    per-iteration speeds in the order they were timed (empty: the source kept none); a
    numpy array each when given as one (evidence_of: a 10k-size run of 2,000 samples a size
    holds 20 M of them, 640 MB as Python floats). first_batches: what the rule reads of the
    samples when a reader reduced them as it read (sample_summary, compare at scale): the
    first series' batch figures (empty: too few iterations to batch); None when not reduced."""

    repeats: tuple[float, ...]
    samples: tuple[Sequence[float], ...] = ()
    first_batches: tuple[float, ...] | None = None

    @classmethod
    def of(
        cls,
        repeats: Sequence[float],
        samples: Sequence[Sequence[float]] = (),
        first_batches: tuple[float, ...] | None = None,
    ) -> Evidence:
        known = tuple(float(value) for value in repeats if _positive(value))
        series = tuple(_positive_series(one) for one in samples)
        return cls(known, tuple(one for one in series if len(one)), first_batches)

    @property
    def figure(self) -> float:
        """The side's figure: the geometric mean of its repeats (nan without one)."""
        return geomean(self.repeats)

    @property
    def n_repeats(self) -> int:
        return len(self.repeats)

    @property
    def has_samples(self) -> bool:
        return bool(self.samples) or self.first_batches is not None


@dataclass(frozen=True)
class Rule:
    """How a family of questions is decided; every default of the rule lives here.

    threshold_pct: the caller's threshold, used alone where there are no samples (None: no
    call there). floor: a recorded A/A noise floor (`--noise-floor FILE`), held against where
    larger than what the data show."""

    alpha: float = ALPHA
    threshold_pct: float | None = None
    floor: NoiseFloor | None = None

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise SpecError("--alpha", self.alpha, "must be between 0 and 1")


@dataclass(frozen=True)
class Question:
    """Is `candidate` different from `baseline` at `size_bytes`?"""

    baseline: Evidence
    candidate: Evidence
    size_bytes: int


@dataclass(frozen=True)
class Verdict:
    """One decision and its evidence: the effect, its interval, the floor it was held against.

    Percentages are of the baseline's figure: -12 is 12% slower. `p_value` and `p_holm` only
    with the repeats basis (None otherwise: no within-run p-value is offered)."""

    call: str  # faster | slower | same | unjudged
    basis: str  # repeats | noise floor | threshold
    effect_pct: float
    low_pct: float | None
    high_pct: float | None
    floor_pct: float | None
    floor_source: str
    p_value: float | None = None
    p_holm: float | None = None
    base_repeats: int = 0
    cand_repeats: int = 0
    reason: str = ""  # why unjudged, or how a threshold-only call was made
    # The smallest slowdown (percent of the baseline) this verdict could have called: beyond
    # the floor and, with repeats, outside the interval's half-width; the threshold where it
    # alone decides. None: it could call none (unjudged). The gate's power at this size.
    detectable_pct: float | None = None

    @property
    def ratio(self) -> float:
        return 1.0 + self.effect_pct / 100.0

    def describe(self) -> str:
        """One line: '-12.3% [-15.0%, -9.5%], noise floor 2.1% (repeat spread), repeats 5
        vs 5, Holm p=0.003: slower'."""
        text = f"{self.effect_pct:+.1f}%" if math.isfinite(self.effect_pct) else "no effect"
        if self.low_pct is not None and self.high_pct is not None:
            text += f" [{self.low_pct:+.1f}%, {self.high_pct:+.1f}%]"
        if self.floor_pct is not None:
            text += f", noise floor {self.floor_pct:.1f}% ({self.floor_source})"
        elif self.floor_source:
            text += f", {self.floor_source}"
        if self.basis == REPEATS:
            text += f", repeats {self.base_repeats} vs {self.cand_repeats}"
            if self.p_holm is not None:
                text += f", Holm p={self.p_holm:.3g}"
        elif self.basis == FLOOR and self.base_repeats == self.cand_repeats:
            text += f", {counted(self.base_repeats, 'repeat')} each: no p-value"
        elif self.basis == FLOOR:
            text += f", repeats {self.base_repeats} vs {self.cand_repeats}: no p-value"
        if self.reason:
            text += f"; {self.reason}"
        return f"{text}: {self.call}"


def judge(questions: Sequence[Question], rule: Rule | None = None) -> list[Verdict]:
    """The verdict on every question, in order; the repeat-based p-values are Holm-corrected
    over the whole family (the questions a caller decides together)."""
    rule = rule or Rule()
    drafts = [_draft(question, rule) for question in questions]
    tested = [index for index, draft in enumerate(drafts) if draft.p_value is not None]
    adjusted = holm([drafts[index].p_value or 0.0 for index in tested])
    corrected = dict(zip(tested, adjusted, strict=True))
    called = [_decide(draft, corrected.get(index), rule) for index, draft in enumerate(drafts)]
    return [replace(verdict, detectable_pct=_detectable(verdict, rule)) for verdict in called]


def spread_pct(evidence: Evidence) -> float | None:
    """One side's own noise as a percentage: FLOOR_FACTOR x the range of its repeat figures
    (two or more repeats) or of its iteration batches (one repeat); None when it holds too
    little to say."""
    figures = _spread_figures(evidence)
    return None if len(figures) < 2 else FLOOR_FACTOR * (max(figures) / min(figures) - 1.0) * 100.0


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the order given."""
    order = sorted(range(len(p_values)), key=lambda index: p_values[index])
    adjusted = [1.0] * len(p_values)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def aa_floor(runs_by_size: dict[tuple[str, int], Sequence[Evidence]], source: str) -> NoiseFloor:
    """The A/A noise floor of identical runs: `runs_by_size[(label, size)]` holds each run's
    evidence of that size (label: collective and placement). For every pair of runs, the
    largest change between them at a size and its neighbours (sizes within NEIGHBOURS x); the
    size's floor is the 1 - ALPHA / bands quantile of those maxima over pairs (the largest one
    for a few runs). Per size, not per band: a band spans latency- and bandwidth-bound sizes,
    and one noisy size would set the floor of all of them; the neighbours keep a size that
    happened to land close from a floor of about 0. A band's figure is its sizes' largest."""
    import numpy as np

    changes: dict[int, dict[tuple[int, int], float]] = {}
    runs = 0
    for (_label, size_bytes), sides in runs_by_size.items():
        figures = [side.figure for side in sides]
        runs = max(runs, len(figures))
        at_size = changes.setdefault(size_bytes, {})
        for (first, a), (second, b) in itertools.combinations(enumerate(figures), 2):
            if _positive(a) and _positive(b):
                change = (math.exp(abs(math.log(b / a))) - 1.0) * 100.0
                at_size[(first, second)] = max(at_size.get((first, second), 0.0), change)
    changes = {size: pairs for size, pairs in sorted(changes.items()) if pairs}
    quantile = 1.0 - ALPHA / max(1, len({band_of(size) for size in changes}))
    by_size, by_band = {}, {}
    for size in changes:
        near = [
            one
            for other, one in changes.items()
            if max(size, other) <= NEIGHBOURS * min(size, other)
        ]
        maxima = [max(one.get(pair, 0.0) for one in near) for pair in set().union(*near)]
        by_size[size] = float(np.quantile(maxima, quantile))
        by_band[band_of(size)] = max(by_band.get(band_of(size), 0.0), by_size[size])
    largest = {str(size): max(pairs.values()) for size, pairs in changes.items()}
    pairs = max((len(one) for one in changes.values()), default=0)
    detail = {"pairs": pairs, "quantile": quantile, "largest_pct": largest}
    return NoiseFloor(by_band, source, runs, detail, by_size)


def speed_scale(row: ResultRow) -> float:
    """busbw in GB/s = scale / time in us (each row's busbw from its own time and world size,
    not an imported log's 2-decimal column); at size 0, where busbw is 0, speed = 1 / time."""
    from collbench.core.bandwidth import bus_factor

    if not row.size_bytes:
        return 1.0
    try:
        factor = bus_factor(str(row.collective), int(row.world_size or 1))
    except (KeyError, ValueError, ZeroDivisionError):
        factor = 1.0
    return int(row.size_bytes) * factor / 1e3


def evidence_of(rows: Sequence[ResultRow], summaries: Sequence[Any] | None = None) -> Evidence:
    """The evidence of one thing's rows (one row per repeat): each repeat's speed from its
    batch time, and its per-iteration speeds; with `summaries` (one per row, sample_summary's
    of rows read with their samples apart), what the rule reads of those instead."""
    order = sorted(range(len(rows)), key=lambda index: rows[index].repeat_index)
    repeats, samples = [], []
    for index in order:
        row = rows[index]
        if row.time_us and row.time_us > 0:
            repeats.append(speed_scale(row) / row.time_us)
        if summaries is None:
            samples.append(_speeds(row, row.time_us_samples))  # numpy arrays: see Evidence
    if summaries is None:
        return Evidence.of(repeats, samples)
    reduced = [summaries[index] for index in order if summaries[index] is not None]
    return Evidence.of(repeats, first_batches=reduced[0] if reduced else None)


def sample_summary(row: ResultRow, times: Sequence[float]) -> tuple[float, ...] | None:
    """What the rule reads of one row's per-iteration times, given apart from the row (store:
    a run read with its samples apart never holds them all): the batch figures of its speeds
    (empty: too few iterations to batch); None when it holds no usable sample."""
    series = _positive_series(_speeds(row, times))
    return tuple(batch_figures(series)) if len(series) else None


def _speeds(row: ResultRow, times: Sequence[float] | None) -> Any:
    """A row's per-iteration times above 0 as speeds (a numpy array), in order."""
    import numpy as np

    values = np.asarray(times if times is not None else [], dtype=np.float64)
    return speed_scale(row) / values[values > 0]


# --- the rule itself -------------------------------------------------------------------------


def _draft(question: Question, rule: Rule) -> Verdict:
    base, cand = question.baseline, question.candidate
    effect = _pct(cand.figure / base.figure) if base.repeats and cand.repeats else math.nan
    counts = {"base_repeats": base.n_repeats, "cand_repeats": cand.n_repeats}
    if not math.isfinite(effect):
        why = "a side has no figure"
        return Verdict(UNJUDGED, THRESHOLD, effect, None, None, None, "", reason=why, **counts)
    if base.n_repeats >= MIN_REPEATS and cand.n_repeats >= MIN_REPEATS:
        return _repeats_draft(question, rule, effect, counts)
    # Samples on both sides (too few to batch: unjudged), or a spread on both (2+ repeats of
    # figures without samples): the floor basis. Otherwise only a threshold can decide.
    spreads = bool(_spread_figures(base)) and bool(_spread_figures(cand))
    if (base.has_samples and cand.has_samples) or spreads:
        return _floor_draft(question, rule, effect, counts)
    reason = "no per-iteration samples (an imported log): decided by the threshold alone"
    source = f"threshold {rule.threshold_pct:g}%" if rule.threshold_pct is not None else ""
    return Verdict(SAME, THRESHOLD, effect, None, None, None, source, reason=reason, **counts)


def _repeats_draft(question: Question, rule: Rule, effect: float, counts: dict) -> Verdict:
    from scipy import stats

    base_logs = [math.log(value) for value in question.baseline.repeats]
    cand_logs = [math.log(value) for value in question.candidate.repeats]
    spread = max(statistics.stdev(base_logs), statistics.stdev(cand_logs))  # MIN_REPEATS+ each
    floor, source = _floor(rule, question.size_bytes, (math.exp(spread) - 1.0) * 100.0, "repeat")
    if spread == 0.0:
        p_value, low, high = (0.0 if base_logs[0] != cand_logs[0] else 1.0), effect, effect
    else:
        test = stats.ttest_ind(cand_logs, base_logs, equal_var=False)
        p_value = float(test.pvalue)
        interval = test.confidence_interval(1 - rule.alpha)
        low, high = _pct(math.exp(interval.low)), _pct(math.exp(interval.high))
    return Verdict(SAME, REPEATS, effect, low, high, floor, source, p_value, **counts)


def _floor_draft(question: Question, rule: Rule, effect: float, counts: dict) -> Verdict:
    spreads = [spread_pct(question.baseline), spread_pct(question.candidate)]
    if any(spread is None for spread in spreads):
        reason = (
            f"too few iterations to measure the noise (fewer than {BATCHES} batches of {MIN_BATCH})"
        )
        return Verdict(UNJUDGED, FLOOR, effect, None, None, None, "", reason=reason, **counts)
    what = "repeat" if min(counts.values()) >= 2 else "iteration-batch"
    floor, source = _floor(rule, question.size_bytes, max(s or 0.0 for s in spreads), what)
    # The interval is multiplicative, like the noise: the ratio divided and multiplied by
    # (1 + floor), so a slowdown's interval never passes -100%.
    ratio, scale = 1.0 + effect / 100.0, 1.0 + floor / 100.0
    low, high = _pct(ratio / scale), _pct(ratio * scale)
    return Verdict(SAME, FLOOR, effect, low, high, floor, source, **counts)


def _floor(rule: Rule, size_bytes: int, measured_pct: float, what: str) -> tuple[float, str]:
    """The floor a verdict is held against: what the data show, or the recorded one when
    larger; and where it came from."""
    recorded, where = (
        rule.floor.pct_at(size_bytes, band_of(size_bytes)) if rule.floor else (None, "")
    )
    if recorded is not None and recorded > measured_pct:
        return recorded, f"A/A {where}, {rule.floor.source}"
    return measured_pct, f"{what} spread"


def _detectable(verdict: Verdict, rule: Rule) -> float | None:
    """Verdict.detectable_pct: a slowdown s is called when 1 - s/100 < 1 / (1 + floor/100),
    and with repeats only when the interval (as wide as this one) excludes no change."""
    if verdict.call == UNJUDGED:
        return None
    if verdict.basis == THRESHOLD:
        return rule.threshold_pct
    floor = verdict.floor_pct or 0.0
    detectable = 100.0 * floor / (100.0 + floor)
    if verdict.basis == REPEATS and verdict.low_pct is not None and verdict.high_pct is not None:
        half_width = (math.log1p(verdict.high_pct / 100) - math.log1p(verdict.low_pct / 100)) / 2
        detectable = max(detectable, 100.0 * -math.expm1(-half_width))
    return detectable


def _decide(verdict: Verdict, p_holm: float | None, rule: Rule) -> Verdict:
    effect, floor = verdict.effect_pct, verdict.floor_pct
    if verdict.call == UNJUDGED:
        return verdict
    if verdict.basis == THRESHOLD:
        if rule.threshold_pct is None:
            why = "no per-iteration samples (an imported log) and no threshold to decide by"
            return replace(verdict, call=UNJUDGED, reason=why)
        beyond = abs(effect) > rule.threshold_pct
        return replace(verdict, call=_direction(effect) if beyond else SAME)
    # Beyond the floor in either direction alike: |log ratio| > log(1 + floor).
    beyond_floor = floor is not None and abs(math.log1p(effect / 100.0)) > math.log1p(floor / 100.0)
    if verdict.basis == REPEATS:
        significant = p_holm is not None and p_holm < rule.alpha
        call = _direction(effect) if significant and beyond_floor else SAME
        return replace(verdict, call=call, p_holm=p_holm)
    return replace(verdict, call=_direction(effect) if beyond_floor else SAME)


def _direction(effect_pct: float) -> str:
    return FASTER if effect_pct > 0 else SLOWER


def _spread_figures(evidence: Evidence) -> list[float]:
    """The figures a side's own spread is taken over: its repeats, or with one repeat its
    iteration batches (each batch's figure: the mean time of its iterations as a speed)."""
    if evidence.n_repeats >= 2:
        return list(evidence.repeats)
    if evidence.first_batches is not None:
        return list(evidence.first_batches)
    return batch_figures(evidence.samples[0]) if evidence.samples else []


def batch_figures(series: Sequence[float]) -> list[float]:
    """A series of speeds cut into BATCHES consecutive batches, each batch's figure (its mean
    time as a speed); none when a batch would hold fewer than MIN_BATCH."""
    per_batch = len(series) // BATCHES
    if per_batch < MIN_BATCH:
        return []
    batches = (series[index * per_batch : (index + 1) * per_batch] for index in range(BATCHES))
    # Each batch's speed from its mean time (speeds are 1 / time up to a scale), summed in
    # order as Python sums (the same figure whether the series is an array or not).
    return [len(batch) / sum(_inverses(batch)) for batch in batches]


def _positive_series(values: Sequence[float]) -> Sequence[float]:
    """The finite values above 0, in order: a numpy array stays one, else a tuple."""
    import numpy as np

    if isinstance(values, np.ndarray):
        values = values.astype(np.float64, copy=False)
        return values[np.isfinite(values) & (values > 0)]
    return tuple(float(value) for value in values if _positive(value))


def _inverses(values: Sequence[float]) -> list[float]:
    import numpy as np

    if isinstance(values, np.ndarray):
        return (1.0 / values).tolist()
    return [1.0 / value for value in values]


def _pct(ratio: float) -> float:
    return (ratio - 1.0) * 100.0


def _positive(value: object) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0
