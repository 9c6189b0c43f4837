"""Compare runs: per size, per size band and in how they were measured (pure).

The method, in full: docs/compare.md#analysis-compare-comparison-py.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from collbench.analysis.rules.bands import BAND_NAMES, band_of
from collbench.analysis.rules.decision import (
    ALPHA,
    FLOOR,
    REPEATS,
    THRESHOLD,
    Evidence,
    Question,
    Rule,
    Verdict,
    evidence_of,
    judge,
)
from collbench.analysis.rules.methodology import COMPARE, WARN, Difference, differences
from collbench.core.convert import plain
from collbench.core.errors import EXIT_SLOWER, EXIT_UNJUDGED, CollbenchError
from collbench.core.stats import geomean
from collbench.store.load import Run
from collbench.store.rows import SWEEP, ResultRow, point_key, row_is

QUANTITY = "busbw"
QUANTITY_NOTE = (
    "ratio and verdict on busbw: candidate / baseline, > 1 is faster (each run's busbw from "
    "its own time and world size; at size 0, where busbw is 0, on time)"
)
NOTE_ONE_REPEAT = (
    "one repeat on a side: no p-value is offered (a run's iterations are not independent); "
    "decided against the noise floor measured from the data (iteration batches). Record an "
    "A/A floor with `collbench noise` (--noise-floor) or measure with --repeats 3"
)
NOTE_ONE_REPEAT_RECORDED = (
    "one repeat on a side: no p-value is offered (a run's iterations are not independent); "
    "decided against the larger of the noise floor measured from the data (iteration "
    "batches) and the recorded A/A floor"
)
NOTE_FEW_REPEATS = (
    "fewer than 3 repeats on a side: no p-value is offered; decided against the noise floor "
    "measured from the repeats' spread (or a recorded A/A floor, when larger)"
)
NOTE_REPEATS = (
    "repeats on both sides: Welch's t on the repeats, Holm over the sizes decided together, and the "
    "effect beyond the repeats' spread (or a recorded A/A floor, when larger). A run's repeats share "
    "its processes: on NCCL/RCCL what varies between processes (rings, channels, clocks) is in a "
    "floor from `collbench noise` over separate runs, not in their spread"
)
NOTE_THRESHOLD = (
    "no per-iteration samples (imported logs): decided by the threshold alone "
    "(--fail-if-slower PCT); without one, unjudged"
)

Key = tuple[str, str, int, str, str]  # store.rows.point_key


class SlowerThanAllowed(CollbenchError):
    """--fail-if-slower: a candidate is slower than the baseline by more than allowed."""

    exit_code = EXIT_SLOWER


class GateBlind(CollbenchError):
    """--fail-if-slower: nothing failed, but a checked size could not have caught a slowdown
    of the threshold's size (the gate could not tell)."""

    exit_code = EXIT_UNJUDGED


@dataclass(frozen=True)
class SizeComparison:
    """One size measured by both runs."""

    collective: str
    placement: str
    size_bytes: int
    quantity: str  # busbw; time at size 0 (busbw is 0 there)
    # each side's figure (the geometric mean over its repeats) as a time ...
    baseline_time_us: float
    candidate_time_us: float
    # ... and as busbw, from each run's time at its own world size (not an imported log's
    # 2-decimal column); None at size 0
    baseline_busbw_gbps: float | None
    candidate_busbw_gbps: float | None
    # candidate / baseline busbw (size 0: baseline / candidate time): > 1 is faster
    ratio: float
    verdict: str  # the rule's call: faster | slower | same | unjudged
    p_value: float | None  # Welch's p on the repeats (basis `repeats` only), before Holm
    decision: Verdict  # the effect, its interval, the floor held against, the basis
    dtype: str | None = None  # a run's dtypes and ops are different points, never repeats
    op: str | None = None


@dataclass(frozen=True)
class BandSummary:
    collective: str
    placement: str
    band: str
    sizes: int
    geomean_ratio: float
    counts: dict[str, int]
    dtype: str | None = None
    op: str | None = None


@dataclass(frozen=True)
class Comparison:
    baseline: str
    candidate: str
    sizes: list[SizeComparison]
    bands: list[BandSummary]
    differences: list[Difference]
    only_baseline: list[str] = field(default_factory=list)
    only_candidate: list[str] = field(default_factory=list)
    alpha: float = ALPHA
    quantity: str = QUANTITY
    threshold_pct: float | None = None  # the rule's threshold (--fail-if-slower)
    noise_floor: str | None = None  # where a recorded A/A floor came from (--noise-floor)
    quantity_note: ClassVar[str] = QUANTITY_NOTE

    @property
    def basis_notes(self) -> list[str]:
        """One line per basis the verdicts rest on (analysis.decision): what decided, and why
        there is no p-value where there is none."""
        notes = []
        floor = [item.decision for item in self.sizes if item.decision.basis == FLOOR]
        if any(min(v.base_repeats, v.cand_repeats) <= 1 for v in floor):
            recorded = self.noise_floor is not None
            notes.append(NOTE_ONE_REPEAT_RECORDED if recorded else NOTE_ONE_REPEAT)
        elif floor:
            notes.append(NOTE_FEW_REPEATS)
        if any(item.decision.basis == REPEATS for item in self.sizes):
            notes.append(NOTE_REPEATS)
        threshold = [item.decision for item in self.sizes if item.decision.basis == THRESHOLD]
        if any(math.isfinite(verdict.effect_pct) for verdict in threshold):
            notes.append(NOTE_THRESHOLD)
        return notes

    @property
    def methodology(self) -> list[Difference]:
        """The differences the methodology rule's COMPARE purpose flags."""
        return [diff for diff in self.differences if COMPARE.action(diff.field) == WARN]

    @property
    def methodology_differs(self) -> bool:
        return bool(self.methodology)

    def to_dict(self) -> dict[str, Any]:
        notes = {"quantity_note": self.quantity_note, "basis_notes": self.basis_notes}
        return plain(asdict(self) | notes | {"methodology_differs": self.methodology_differs})


def compare(
    baseline: Run,
    candidate: Run,
    rule: Rule | None = None,
    gated: Callable[[int], bool] | None = None,
) -> Comparison:
    """Compare a candidate run with the baseline (analysis.decision.judge). The sizes common
    to both are one family of `rule`; with `gated` (the sizes a CI gate checks), those sizes
    are one family and the others another, so that sizes the gate ignores do not dilute
    its Holm correction."""
    rule = rule or Rule()
    base, cand = _indices_by_key(baseline.rows), _indices_by_key(candidate.rows)
    common = sorted(set(base) & set(cand))
    questions = [
        Question(_evidence(baseline, base[key]), _evidence(candidate, cand[key]), key[2])
        for key in common
    ]
    verdicts = _judge_families(questions, rule, gated)
    sizes = [
        _compare_size(key, (_rows(baseline, base[key]), _rows(candidate, cand[key])), *judged)
        for key, *judged in zip(common, questions, verdicts, strict=True)
    ]
    return Comparison(
        baseline=baseline.run_id,
        candidate=candidate.run_id,
        sizes=sizes,
        bands=band_summaries(sizes),
        differences=differences(baseline, candidate),
        only_baseline=_labels(set(base) - set(cand)),
        only_candidate=_labels(set(cand) - set(base)),
        alpha=rule.alpha,
        threshold_pct=rule.threshold_pct,
        noise_floor=rule.floor.source if rule.floor else None,
    )


def _judge_families(
    questions: list[Question], rule: Rule, gated: Callable[[int], bool] | None
) -> list[Verdict]:
    """The verdicts in order, each family judged on its own."""
    if gated is None:
        return judge(questions, rule)
    inside = [bool(gated(question.size_bytes)) for question in questions]
    verdicts: dict[int, Verdict] = {}
    for side in (True, False):
        family = [index for index, gate in enumerate(inside) if gate is side]
        verdicts.update(zip(family, judge([questions[i] for i in family], rule), strict=True))
    return [verdicts[index] for index in range(len(questions))]


def common_keys(baseline: Run, candidate: Run) -> int:
    return len(set(_indices_by_key(baseline.rows)) & set(_indices_by_key(candidate.rows)))


def rows_by_key(rows: Sequence[ResultRow]) -> dict[Key, list[ResultRow]]:
    """A run's sweep rows per point (store.rows.point_key): every repeat of it."""
    return {key: [rows[i] for i in found] for key, found in _indices_by_key(rows).items()}


def _indices_by_key(rows: Sequence[ResultRow]) -> dict[Key, list[int]]:
    """rows_by_key as the rows' positions."""
    keyed: dict[Key, list[int]] = {}
    for index, row in enumerate(rows):
        if row_is(row, SWEEP):
            keyed.setdefault(point_key(row), []).append(index)
    return keyed


def _rows(run: Run, indices: list[int]) -> list[ResultRow]:
    return [run.rows[index] for index in indices]


def _evidence(run: Run, indices: list[int]) -> Evidence:
    """The evidence of some of a run's rows; a run loaded with its samples apart gives what
    the rule keeps of them (run/compare.py: decision.sample_summary)."""
    reduced = run.reduced
    summaries = None if reduced is None else [reduced[index] for index in indices]
    return evidence_of(_rows(run, indices), summaries)


def _labels(keys: set[Key]) -> list[str]:
    """Unmatched sizes, one entry per collective and placement: 'all_gather out_of_place:
    1024, 4096 B'."""
    grouped: dict[str, list[int]] = {}
    several = len({key[3:] for key in keys}) > 1
    for collective, placement, size, *variant in sorted(keys):
        label = " ".join([collective, placement, *(variant if several else ())])
        grouped.setdefault(label, []).append(size)
    return [f"{label}: {', '.join(map(str, sizes))} B" for label, sizes in grouped.items()]


def _compare_size(
    key: Key, rows: tuple[list[ResultRow], list[ResultRow]], question: Question, verdict: Verdict
) -> SizeComparison:
    # From the times, not the busbw columns: imported logs print busbw with two decimals
    # (0.00 at small sizes). Each side's busbw uses its own world size's bus factor.
    base_speed, cand_speed = _figure(question.baseline), _figure(question.candidate)
    busbw = key[2] > 0
    return SizeComparison(
        collective=key[0],
        placement=key[1],
        size_bytes=key[2],
        quantity=QUANTITY if busbw else "time",
        baseline_time_us=_time_us(rows[0]),
        candidate_time_us=_time_us(rows[1]),
        baseline_busbw_gbps=base_speed if busbw else None,
        candidate_busbw_gbps=cand_speed if busbw else None,
        # Verdict.ratio, from the figures themselves (no round trip through a percentage)
        ratio=cand_speed / base_speed if math.isfinite(verdict.effect_pct) else math.nan,
        verdict=verdict.call,
        p_value=verdict.p_value if verdict.basis == REPEATS else None,
        decision=verdict,
        dtype=key[3],
        op=key[4],
    )


def _figure(evidence: Evidence) -> float:
    """A side's figure as a speed: the geometric mean over its repeats, a single repeat's
    own figure unrounded; nan without one."""
    return evidence.repeats[0] if evidence.n_repeats == 1 else evidence.figure


def _time_us(rows: list[ResultRow]) -> float:
    """A side's time: the geometric mean over its repeats (the figure's time)."""
    times = [float(row.time_us) for row in rows if row.time_us and row.time_us > 0]
    return times[0] if len(times) == 1 else geomean(times)


def band_summaries(sizes: list[SizeComparison]) -> list[BandSummary]:
    """Per collective, placement, dtype, op and size band: the geometric mean ratio and the
    verdicts."""
    groups: dict[tuple, list[SizeComparison]] = {}
    for item in sizes:
        key = (item.collective, item.placement, item.dtype, item.op, band_of(item.size_bytes))
        groups.setdefault(key, []).append(item)
    summaries = []
    for (collective, placement, dtype, op, band), items in sorted(
        groups.items(), key=lambda kv: (*map(str, kv[0][:4]), BAND_NAMES.index(kv[0][4]))
    ):
        ratio = geomean(item.ratio for item in items)
        counts = dict(Counter(item.verdict for item in items))
        summaries.append(
            BandSummary(collective, placement, band, len(items), ratio, counts, dtype, op)
        )
    return summaries
