"""`collbench tune`'s decision: per collective and size range, the best knob setting, its busbw
gain over the baseline and the evidence it rests on (pure: outcomes in, records out).

The method, in full: docs/tune.md#analysis-tune-select-py.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import groupby

from collbench.analysis.rules.bands import BANDS
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
    Verdict,
    evidence_of,
    judge,
)
from collbench.analysis.tune.records import (
    PLACEMENTS,
    SelectRule,
    SettingOutcome,
    SizeRange,
    TuneEvidence,
    gain_over,
    repeats_busbw,
    sizes_text,
)

# re-exported (`X as X`) beside the records select uses: one import for tune's callers
from collbench.analysis.tune.records import describe_evidence as describe_evidence
from collbench.analysis.tune.records import range_label as range_label
from collbench.analysis.tune.tuner_conf_rules import SIZE_MAX as BYTES_MAX  # no upper end
from collbench.core.stats import geomean
from collbench.core.units import format_size
from collbench.store.rows import SWEEP, ResultRow, row_is, rows_of
from collbench.store.tune_result import BestRecord

NO_SAMPLES = "decided by threshold, no samples"  # imported logs' basis, in every text
# What `confidence` says, by the basis the rule decided on: (called, not called)
CONFIDENCE = {
    REPEATS: ("significant", "not significant"),
    FLOOR: ("beyond noise floor", "within noise floor"),
    THRESHOLD: (NO_SAMPLES, NO_SAMPLES),
}
_WEAKEST_FIRST = (UNJUDGED, THRESHOLD, FLOOR, REPEATS)


@dataclass
class _Score:
    """One setting over the sizes of one range it measured: geomean busbw there, the
    baseline's over the same sizes, its evidence per size and (once judged) the verdict per
    size against the baseline."""

    outcome: SettingOutcome
    sizes: tuple[int, ...]
    busbw_gbps: float
    base_gbps: float | None  # the baseline's geomean over `sizes` (None: no baseline)
    evidence: dict[int, Evidence]
    verdicts: list[Verdict] = field(default_factory=list)

    @property
    def gain(self) -> float | None:
        """busbw over the baseline's on the same sizes, minus 1."""
        return gain_over(self.busbw_gbps, self.base_gbps)


def select_best(
    outcomes: Sequence[SettingOutcome],
    rule: SelectRule | None = None,
    ranges: Mapping[str, Sequence[SizeRange]] | None = None,
) -> list[BestRecord]:
    """Per collective and size range, the best setting (see the module's rules). A setting
    takes part with whatever rows it has (one that failed part-way keeps the collectives and
    sizes it finished); a collective the baseline did not measure is chosen without gains.
    `ranges`: per collective, ranges already drawn (tune verify judges a tune's own
    ranges again), in place of the rule's granularity."""
    rule = rule or SelectRule()
    ran = [outcome for outcome in outcomes if outcome.rows]
    baseline = next((item for item in ran if item.is_baseline), None)
    records: list[BestRecord] = []
    measured = {row.collective for item in ran for row in rows_of(item.rows, SWEEP)}
    for collective in sorted(measured):
        placement = tuned_placement(collective, ran)
        tables = {id(item): setting_table(item.rows, collective, placement) for item in ran}
        base_table = tables.get(id(baseline)) or None
        measured_sizes = base_table or set().union(*tables.values())
        sizes = sorted(size for size in measured_sizes if size > 0)
        field = _Field(collective, placement, tuple(sizes), ran, tables, baseline, rule)
        drawn = (ranges or {}).get(collective)
        if drawn is None and rule.granularity == "crossover":
            records += _crossover(field)
            continue
        in_ranges = map(field.record, drawn or size_ranges(sizes, rule.granularity))
        records += [record for record in in_ranges if record is not None]
    return records


@dataclass(frozen=True)
class _Field:
    """One collective's measurements: every setting's rows by size, the baseline's sizes."""

    collective: str
    placement: str
    sizes: tuple[int, ...]  # the baseline's measured sizes (all settings' without one)
    ran: Sequence[SettingOutcome]
    tables: Mapping[int, Mapping[int, tuple[ResultRow, ...]]]
    baseline: SettingOutcome | None
    rule: SelectRule
    # crossover: every (setting, size) judged in one family up front, since the ranges
    # themselves are chosen from those calls: {(id(outcome), size): verdict}
    verdicts: Mapping[tuple[int, int], Verdict] | None = None

    def judged_together(self) -> _Field:
        """This field with every other setting judged against the baseline at every size
        both measured, as one family (Holm over all of them)."""
        base_table = self.tables.get(id(self.baseline)) if self.baseline is not None else None
        if base_table is None:
            return self
        keys, questions = [], []
        for item in self.ran:
            if item is self.baseline:
                continue
            table = self.tables[id(item)]
            for size in self.sizes:
                if size in table and size in base_table:
                    keys.append((id(item), size))
                    questions.append(
                        Question(evidence_of(base_table[size]), evidence_of(table[size]), size)
                    )
        verdicts = judge(questions, self.rule.decision_rule)
        return replace(self, verdicts=dict(zip(keys, verdicts, strict=True)))

    def record(self, size_range: SizeRange) -> BestRecord | None:
        """The range's call over its sizes: each setting scored on the sizes it measured
        there (None: no size of the range was measured)."""
        in_range = tuple(size for size in self.sizes if size_range.covers(size))
        if not in_range:
            return None
        base_table = self.tables.get(id(self.baseline)) if self.baseline is not None else None
        scores = []
        for item in self.ran:
            table = self.tables[id(item)]
            common = tuple(size for size in in_range if size in table)
            if common:
                scores.append(_score(item, table, common, base_table))
        if not scores:
            return None
        base = next((score for score in scores if score.outcome is self.baseline), None)
        _judge_range(scores, base, self.rule, self.verdicts)
        context = (self.collective, self.placement, size_range, in_range)
        return _decide(context, scores, base, self.rule)


def _crossover(field: _Field) -> list[BestRecord]:
    """Ranges that follow the data: each measured size called on its own, neighbours with
    the same winner joined, and the joined range called again as a whole. Every call rests
    on one family judged up front (every setting at every size), since the ranges are
    chosen from those very calls: a range never earns a smaller family after the fact. A
    run of sizes where the default stays best between two runs of one winner joins them
    when the whole is still that winner's (the rule calls it faster at most sizes and slower
    at none); a joined range the rule calls differently stays split per size."""
    field = field.judged_together()
    per_size = [field.record(item) for item in size_ranges(field.sizes, "size")]
    measured = [record for record in per_size if record is not None]
    segments = [list(run) for _, run in groupby(measured, key=lambda record: record.setting_id)]
    records: list[BestRecord] = []
    index = 0
    while index < len(segments):
        segment = segments[index]
        if index + 2 < len(segments) and segment[0].default_is_best is False:
            gap, after = segments[index + 1], segments[index + 2]
            if gap[0].default_is_best and after[0].setting_id == segment[0].setting_id:
                bridged = _joined(field, [*segment, *gap, *after])
                if bridged is not None:
                    segments[index + 2] = [*segment, *gap, *after]
                    index += 2
                    continue
        whole = _joined(field, segment)
        records += [whole] if whole is not None else segment
        index += 1
    return records


def _joined(field: _Field, segment: Sequence[BestRecord]) -> BestRecord | None:
    """The segment's sizes called as one range; None where the whole is not the winner its
    sizes share."""
    if len(segment) == 1:
        return segment[0]
    span = SizeRange(
        sizes_text(segment[0].sizes[0], segment[-1].sizes[-1]),
        segment[0].min_bytes,
        segment[-1].max_bytes,
    )
    whole = field.record(span)
    return None if whole is None or whole.setting_id != segment[-1].setting_id else whole


def tuned_placement(collective: str, outcomes: Sequence[SettingOutcome]) -> str:
    """The placement tuned for a collective: the first of PLACEMENTS any setting measured."""
    measured = {
        row.placement
        for item in outcomes
        for row in item.rows
        if row.collective == collective and row_is(row, SWEEP)
    }
    return next((name for name in PLACEMENTS if name in measured), sorted(measured)[0])


def size_ranges(sizes: Sequence[int], granularity: str) -> list[SizeRange]:
    """The byte ranges a tuned collective is split into, covering 0 .. BYTES_MAX."""
    if granularity == "band":
        starts = [start for _, start in BANDS] + [BYTES_MAX + 1]
        return [
            SizeRange(name, start, starts[index + 1] - 1)
            for index, (name, start) in enumerate(BANDS)
        ]
    ordered = sorted(set(sizes))
    ranges = []
    for index, size in enumerate(ordered):
        low = 0 if index == 0 else math.isqrt(ordered[index - 1] * size) + 1
        high = BYTES_MAX if index == len(ordered) - 1 else math.isqrt(size * ordered[index + 1])
        ranges.append(SizeRange(format_size(size), low, high))
    return ranges


def setting_table(
    rows: Sequence[ResultRow], collective: str, placement: str
) -> dict[int, tuple[ResultRow, ...]]:
    """Per size, the setting's rows there: one per repeat (a second row of one repeat and
    size, which no tune writes, is left out)."""
    table: dict[int, dict[int, ResultRow]] = {}
    for row in rows:
        if row_is(row, SWEEP) and row.collective == collective and row.placement == placement:
            table.setdefault(int(row.size_bytes), {}).setdefault(row.repeat_index, row)
    return {size: tuple(by_repeat.values()) for size, by_repeat in table.items()}


def _score(
    outcome: SettingOutcome,
    table: Mapping[int, Sequence[ResultRow]],
    sizes: Sequence[int],
    base_table: Mapping[int, Sequence[ResultRow]] | None,
) -> _Score:
    """A setting over the sizes of a range it measured, and the baseline over the same."""
    busbw = geomean([repeats_busbw(table[size]) for size in sizes])
    base = None
    if base_table is not None and all(size in base_table for size in sizes):
        base = geomean([repeats_busbw(base_table[size]) for size in sizes])
    evidence = {size: evidence_of(table[size]) for size in sizes}
    return _Score(outcome, tuple(sizes), busbw, base, evidence)


def _judge_range(
    scores: Sequence[_Score],
    base: _Score | None,
    rule: SelectRule,
    known: Mapping[tuple[int, int], Verdict] | None = None,
) -> None:
    """One family: every other setting against the baseline at every size of the range it
    measured (`known`: the verdicts of a larger family already judged)."""
    if base is None:
        return
    others = [score for score in scores if score is not base]
    if known is not None:
        for score in others:
            score.verdicts = [known[(id(score.outcome), size)] for size in score.sizes]
        return
    questions = [
        Question(base.evidence[size], score.evidence[size], size)
        for score in others
        for size in score.sizes
    ]
    verdicts = iter(judge(questions, rule.decision_rule))
    for score in others:
        score.verdicts = [next(verdicts) for _ in score.sizes]


def _decide(
    context: tuple[str, str, SizeRange, tuple[int, ...]],
    scores: list[_Score],
    base: _Score | None,
    rule: SelectRule,
) -> BestRecord:
    """The range's record. Settings are ranked by their gain over the default on the sizes
    each measured (busbw where there is no default): geomeans over different sizes are not
    comparable, ratios on common sizes are."""
    collective, placement, size_range, sizes = context
    others = sorted(
        (score for score in scores if score is not base),
        key=lambda score: -sort_key(score.gain if base is not None else score.busbw_gbps),
    )
    top = others[0] if others else None
    call = _call(top, base, rule, len(sizes))
    chosen = base if call.default_is_best else top
    assert chosen is not None  # a range has a baseline or some other setting
    base_busbw = base.busbw_gbps if chosen is base and base is not None else chosen.base_gbps
    return BestRecord(
        collective=collective,
        min_bytes=size_range.min_bytes,
        max_bytes=size_range.max_bytes,
        knobs=chosen.outcome.setting.as_dict(),
        busbw_gbps=chosen.busbw_gbps,
        baseline_busbw_gbps=base_busbw if base is not None else None,
        gain=gain_over(chosen.busbw_gbps, base_busbw) if base is not None else None,
        confident=call.confident,
        band=size_range.name,
        placement=placement,
        sizes=sizes,
        setting=chosen.outcome.setting.label,
        setting_id=chosen.outcome.setting.id,
        default_is_best=call.default_is_best,
        confidence=call.confidence,
        reason=call.reason,
        candidate=None
        if top is None
        else {
            "setting": top.outcome.setting.label,
            "knobs": top.outcome.setting.as_dict(),
            "busbw_gbps": top.busbw_gbps,
            "gain": top.gain,
            "repeats": top.outcome.repeats,
            "sizes_measured": len(top.sizes),
            "sizes_in_range": len(sizes),
        },
        evidence=_evidence(top.verdicts) if top is not None and top.verdicts else None,
    )


@dataclass(frozen=True)
class _Call:
    default_is_best: bool
    confident: bool
    confidence: str
    reason: str


def _call(top: _Score | None, base: _Score | None, rule: SelectRule, sizes: int) -> _Call:
    """Whether the best other setting replaces the default, and how sure that is (decided
    on the sizes it measured; the reason says so when that is fewer than the range's)."""
    if base is None:
        return _Call(False, False, "no baseline", "the baseline has no result here")
    if top is None:
        return _Call(True, False, "baseline only", "no other setting measured these sizes")
    gain = top.gain or 0.0
    calls = [verdict.call for verdict in top.verdicts]
    faster, slower = calls.count(FASTER), calls.count(SLOWER)
    majority = len(calls) / 2
    label = f"{top.outcome.setting.label} {gain * 100:+.1f}%"
    if len(top.sizes) < sizes:
        label += f" (measured {len(top.sizes)} of {sizes} sizes; decided on those)"
    basis = _weakest(top.verdicts)
    if basis == UNJUDGED:
        why = next((v.reason for v in top.verdicts if v.call == UNJUDGED), "")
        return _Call(True, False, UNJUDGED, f"{label} is unjudged ({why}): default is best")
    called, not_called = CONFIDENCE[basis]
    by_threshold = basis == THRESHOLD
    if gain > 0 and faster > majority and not slower:
        if gain >= rule.min_gain:
            how = f"{called}: not confident" if by_threshold else called
            return _Call(False, not by_threshold, called, f"{label}, {how}")
        reason = f"{label} is {called} but below {rule.min_gain * 100:g}%: default is best"
        return _Call(True, False, called, reason)
    if by_threshold:
        bar = f"the {rule.unsampled_min_gain * 100:g}% threshold at most sizes ({called})"
        return _Call(True, False, called, f"{label} is below {bar}: default is best")
    confident = gain <= 0 and slower > majority
    confidence = called if confident else not_called
    return _Call(True, confident, confidence, f"{label} is {confidence}: default is best")


def _weakest(verdicts: Sequence[Verdict]) -> str:
    """The weakest basis among a setting's verdicts (unjudged weakest of all)."""
    bases = {UNJUDGED if verdict.call == UNJUDGED else verdict.basis for verdict in verdicts}
    return next(name for name in _WEAKEST_FIRST if name in bases)


# The median verdict's figures a range's evidence states as they are.
_MIDDLE_FIGURES = ("effect_pct", "low_pct", "high_pct", "floor_pct", "floor_source", "p_holm")


def _evidence(verdicts: Sequence[Verdict]) -> TuneEvidence:
    """The range's evidence: the calls counted, the verdict at the median effect."""
    calls = {name: 0 for name in (FASTER, SLOWER, SAME, UNJUDGED)}
    calls.update(Counter(verdict.call for verdict in verdicts))
    finite = sorted(
        (verdict for verdict in verdicts if math.isfinite(verdict.effect_pct)),
        key=lambda verdict: verdict.effect_pct,
    )
    middle = finite[(len(finite) - 1) // 2] if finite else verdicts[0]
    return TuneEvidence(
        basis=_weakest(verdicts),
        baseline_repeats=min(verdict.base_repeats for verdict in verdicts),
        candidate_repeats=min(verdict.cand_repeats for verdict in verdicts),
        calls=calls,
        **{name: getattr(middle, name) for name in _MIDDLE_FIGURES},
        verdict=middle.describe(),
    )


def sort_key(value: float) -> float:
    """`value` for ranking: a NaN or infinite one ranks lowest."""
    return value if math.isfinite(value) else -math.inf
