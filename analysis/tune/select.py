"""`collbench tune`'s decision: per collective and size range, the best knob setting, its busbw
gain over the baseline and the evidence it rests on (pure: outcomes in, records out).

Rules, each written once here:
- Placement: out_of_place where a collective was measured so (nccl-tests' first columns, and
  what NCCL users call), else in_place. One placement per collective, never a mix.
- Ranges (`SelectRule.granularity`): "band" uses analysis.bands (small, medium, large), the
  last band open to BYTES_MAX; "size" gives each measured size its own range, split at the
  geometric midpoint between neighbours, from 0 to BYTES_MAX, for a finer tuner config.
  `merge_adjacent` joins neighbours that chose the same knobs.
- The sizes of a range are the baseline's measured sizes in it (size 0 has no busbw and is
  left out). A setting competes in a range only if it measured all of them.
- A setting's rows of one size are its repeats (`tune --repeats`: each repeat a run of its
  own, in fresh processes; rows carry their repeat). Its busbw there is the geometric mean
  over the repeats (busbw from each row's time, as compare does, not an imported log's
  2-decimal column); best is the highest geometric mean over the range's sizes.
- Confidence: the one decision rule (analysis.decision, DESIGN.md "Decisions"). Per size a
  Question (the baseline's repeats against the setting's), one `judge` family per range over
  every (setting, size), since the winner was picked among all settings: with 3 or more
  repeats a side, Welch's test on the repeat figures with Holm's correction plus the noise
  floor ("significant"); with fewer, the effect against the measured noise floor ("beyond
  noise floor", no p-value); imported logs without samples against `unsampled_min_gain` as
  the threshold ("threshold only"). The best other setting replaces the default when the
  rule calls it faster at more than half of the range's sizes and slower at none, and it
  gains at least `min_gain`; confident then, unless only the threshold decided. Otherwise
  the default is best: knobs {}, gain 0, confident when the best other setting is called
  slower at more than half of the sizes. The record keeps the evidence (`TuneEvidence`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Protocol

from collbench.analysis.compare.comparison import json_safe
from collbench.analysis.rules.bands import BANDS
from collbench.analysis.rules.decision import (
    ALPHA,
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
    Verdict,
    evidence_of,
    judge,
)
from collbench.analysis.tune.tuner_conf_rules import SIZE_MAX as BYTES_MAX  # no upper end
from collbench.core.bandwidth import busbw_gbps
from collbench.core.stats import geomean
from collbench.core.units import format_size
from collbench.store.rows import SWEEP, ResultRow, row_is, rows_of

GRANULARITIES = ("band", "size")
PLACEMENTS = ("out_of_place", "in_place")  # the first one measured is the one tuned
# What `confidence` says, by the basis the rule decided on: (called, not called)
CONFIDENCE = {
    REPEATS: ("significant", "not significant"),
    FLOOR: ("beyond noise floor", "within noise floor"),
    THRESHOLD: ("threshold only", "threshold only"),
}
_WEAKEST_FIRST = (UNJUDGED, THRESHOLD, FLOOR, REPEATS)


class SettingLike(Protocol):
    """What selection reads of a setting (core.tune_grid.Setting)."""

    @property
    def id(self) -> str: ...

    @property
    def label(self) -> str: ...

    @property
    def is_baseline(self) -> bool: ...

    def as_dict(self) -> dict[str, str]: ...


@dataclass(frozen=True)
class SettingOutcome:
    """One setting's result: the rows it measured (every repeat's, each row carrying its
    repeat), or the error it failed with."""

    setting: SettingLike
    rows: tuple[ResultRow, ...] = ()
    error: str | None = None  # None: the setting ran
    # None: the setting's own `is_baseline`; True: this outcome stands for the default
    # (tune --from without a run of the plain environment: the first RUN)
    baseline: bool | None = None

    @property
    def status(self) -> str:
        return "failed" if self.error is not None else "ok"

    @property
    def is_baseline(self) -> bool:
        return self.setting.is_baseline if self.baseline is None else self.baseline

    @property
    def repeats(self) -> int:
        """How many repeats its rows hold (0: none)."""
        return len({row.repeat_index for row in self.rows})


@dataclass(frozen=True)
class SelectRule:
    """How a winner is called; every default of `collbench tune`'s selection lives here."""

    granularity: str = "band"  # band: small/medium/large; size: one range per measured size
    alpha: float = ALPHA
    min_gain: float = 0.02  # a called winner must gain at least this much
    unsampled_min_gain: float = 0.05  # without samples: the rule's threshold, per size

    def __post_init__(self) -> None:
        if self.granularity not in GRANULARITIES:
            from collbench.core.errors import SpecError

            raise SpecError(
                "--granularity", self.granularity, f"is not one of {', '.join(GRANULARITIES)}"
            )

    @property
    def decision_rule(self) -> Rule:
        """analysis.decision's Rule: imported logs are decided by unsampled_min_gain."""
        return Rule(alpha=self.alpha, threshold_pct=self.unsampled_min_gain * 100.0)


@dataclass(frozen=True)
class SizeRange:
    """An inclusive byte range and its name."""

    name: str
    min_bytes: int
    max_bytes: int

    def covers(self, size_bytes: int) -> bool:
        return self.min_bytes <= size_bytes <= self.max_bytes


@dataclass(frozen=True)
class TuneEvidence:
    """What a range's call rests on: the best other setting against the default, over the
    range's sizes. `basis` is the weakest basis among the sizes (repeats | noise floor |
    threshold | unjudged); `calls` counts the rule's call per size; the effect, interval,
    floor and Holm p are the verdict at the median effect (percent of the default's busbw)."""

    basis: str
    baseline_repeats: int
    candidate_repeats: int
    calls: dict[str, int]
    effect_pct: float
    low_pct: float | None
    high_pct: float | None
    floor_pct: float | None
    floor_source: str
    p_holm: float | None
    verdict: str  # Verdict.describe() of that median size

    def describe(self) -> str:
        """'+30.1% [+25.3%, +35.2%], floor 2.0%, 3v3 repeats, significant at 2/2 sizes'."""
        return describe_evidence(asdict(self))


def describe_evidence(evidence: Mapping[str, Any] | None) -> str:
    """A TuneEvidence (or tune.json's "evidence" entry) in one short line; '-' for none."""
    if not evidence:
        return "-"
    effect = evidence.get("effect_pct")
    if effect is None or not math.isfinite(effect):
        return f"no effect measured ({evidence.get('basis')})"
    text = f"{effect:+.1f}%"
    low, high = evidence.get("low_pct"), evidence.get("high_pct")
    if low is not None and high is not None:
        text += f" [{low:+.1f}%, {high:+.1f}%]"
    if evidence.get("floor_pct") is not None:
        text += f", floor {evidence['floor_pct']:.1f}%"
    base, cand = evidence.get("baseline_repeats"), evidence.get("candidate_repeats")
    text += f", {base}v{cand} repeat{'s' if max(base or 0, cand or 0) != 1 else ''}"
    calls = evidence.get("calls") or {}
    sizes = sum(calls.values())
    called = [f"{calls[name]} {name}" for name in (FASTER, SLOWER) if calls.get(name)]
    text += f", {evidence.get('basis')}: {', '.join(called) or 'none called'} of {sizes}"
    return text


@dataclass(frozen=True)
class BestRecord:
    """One collective x size range: what to deploy there. `to_dict` is a tune.json "best"
    entry (the issue's keys first)."""

    collective: str
    min_bytes: int
    max_bytes: int
    # the chosen setting's knobs: {} when the default is best (tune --from where every run
    # set a knob: the knobs of the first RUN, which stands for the default)
    knobs: dict[str, str]
    busbw_gbps: float
    baseline_busbw_gbps: float | None
    gain: float | None  # busbw_gbps / baseline_busbw_gbps - 1
    confident: bool
    band: str
    placement: str
    sizes: tuple[int, ...]
    setting: str  # the chosen setting's label
    setting_id: str
    default_is_best: bool
    # significant | not significant (repeats) | beyond noise floor | within noise floor
    # (noise floor) | threshold only (no samples) | unjudged | no baseline | baseline only;
    # "mixed" for ranges merge_adjacent joined with different calls
    confidence: str
    reason: str
    candidate: dict[str, Any] | None = field(default=None)  # the best other setting
    evidence: TuneEvidence | None = None  # the best other setting against the default

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["sizes"] = list(self.sizes)
        return {key: json_safe(value) for key, value in data.items()}


@dataclass
class _Score:
    """One setting over one range: geomean busbw, its evidence per size and (once judged)
    the verdict per size against the baseline."""

    outcome: SettingOutcome
    busbw_gbps: float
    evidence: dict[int, Evidence]
    verdicts: list[Verdict] = field(default_factory=list)


def select_best(
    outcomes: Sequence[SettingOutcome], rule: SelectRule | None = None
) -> list[BestRecord]:
    """Per collective and size range, the best setting (see the module's rules). Failed
    settings take no part; a collective the baseline did not measure is chosen without gains."""
    rule = rule or SelectRule()
    ran = [outcome for outcome in outcomes if outcome.status == "ok" and outcome.rows]
    baseline = next((item for item in ran if item.is_baseline), None)
    records = []
    measured = {row.collective for item in ran for row in rows_of(item.rows, SWEEP)}
    for collective in sorted(measured):
        placement = tuned_placement(collective, ran)
        tables = {id(item): _table(item.rows, collective, placement) for item in ran}
        base_table = tables.get(id(baseline)) or None
        sizes = sorted(size for size in base_table or _union(tables.values()) if size > 0)
        for size_range in size_ranges(sizes, rule.granularity):
            in_range = tuple(size for size in sizes if size_range.covers(size))
            if not in_range:
                continue
            scores = [
                _score(item, tables[id(item)], in_range)
                for item in ran
                if all(size in tables[id(item)] for size in in_range)
            ]
            if not scores:
                continue
            base = next((score for score in scores if score.outcome is baseline), None)
            _judge_range(scores, base, in_range, rule)
            context = (collective, placement, size_range, in_range)
            records.append(_decide(context, scores, base, rule))
    return records


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


def _table(
    rows: Sequence[ResultRow], collective: str, placement: str
) -> dict[int, tuple[ResultRow, ...]]:
    """Per size, the setting's rows there: one per repeat (a second row of one repeat and
    size, which no tune writes, is left out)."""
    table: dict[int, dict[int, ResultRow]] = {}
    for row in rows:
        if row_is(row, SWEEP) and row.collective == collective and row.placement == placement:
            table.setdefault(int(row.size_bytes), {}).setdefault(row.repeat_index, row)
    return {size: tuple(by_repeat.values()) for size, by_repeat in table.items()}


def _union(tables: Any) -> dict[int, Any]:
    merged: dict[int, Any] = {}
    for table in tables:
        for size, rows in table.items():
            merged.setdefault(size, rows)
    return merged


def row_busbw(row: ResultRow, time_us: float | None = None) -> float:
    """busbw in GB/s from a row's time (or one sample of it) at the row's world size."""
    time_us = row.time_us if time_us is None else time_us
    if not time_us or time_us <= 0:
        return math.nan
    try:
        return busbw_gbps(str(row.collective), int(row.world_size or 1), row.size_bytes, time_us)
    except (KeyError, ValueError, ZeroDivisionError):
        return math.nan


def sample_busbw(row: ResultRow) -> list[float]:
    """The per-iteration busbw of a row (empty: the source kept no samples)."""
    return [row_busbw(row, sample) for sample in row.time_us_samples or [] if sample > 0]


def repeats_busbw(rows: Sequence[ResultRow]) -> float:
    """One size's busbw over its repeats: the geometric mean of each repeat's busbw."""
    return geomean([row_busbw(row) for row in rows])


def _score(
    outcome: SettingOutcome, table: Mapping[int, Sequence[ResultRow]], sizes: Sequence[int]
) -> _Score:
    busbw = geomean([repeats_busbw(table[size]) for size in sizes])
    return _Score(outcome, busbw, {size: evidence_of(table[size]) for size in sizes})


def _judge_range(
    scores: Sequence[_Score], base: _Score | None, sizes: Sequence[int], rule: SelectRule
) -> None:
    """One family: every other setting against the baseline at every size of the range."""
    if base is None:
        return
    others = [score for score in scores if score is not base]
    questions = [
        Question(base.evidence[size], score.evidence[size], size)
        for score in others
        for size in sizes
    ]
    verdicts = iter(judge(questions, rule.decision_rule))
    for score in others:
        score.verdicts = [next(verdicts) for _ in sizes]


def _decide(
    context: tuple[str, str, SizeRange, tuple[int, ...]],
    scores: list[_Score],
    base: _Score | None,
    rule: SelectRule,
) -> BestRecord:
    collective, placement, size_range, sizes = context
    others = sorted(
        (score for score in scores if score is not base),
        key=lambda score: -_key(score.busbw_gbps),
    )
    top = others[0] if others else None
    base_busbw = base.busbw_gbps if base is not None else None
    call = _call(top, base, rule)
    chosen = base if call.default_is_best else top
    assert chosen is not None  # a range has a baseline or some other setting
    return BestRecord(
        collective=collective,
        min_bytes=size_range.min_bytes,
        max_bytes=size_range.max_bytes,
        knobs=chosen.outcome.setting.as_dict(),
        busbw_gbps=chosen.busbw_gbps,
        baseline_busbw_gbps=base_busbw,
        gain=_gain(chosen.busbw_gbps, base_busbw),
        confident=call.confident,
        band=size_range.name,
        placement=placement,
        sizes=sizes,
        setting=chosen.outcome.setting.label,
        setting_id=chosen.outcome.setting.id,
        default_is_best=call.default_is_best,
        confidence=call.confidence,
        reason=call.reason,
        candidate=_candidate(top, base_busbw),
        evidence=_evidence(top.verdicts) if top is not None and top.verdicts else None,
    )


@dataclass(frozen=True)
class _Call:
    default_is_best: bool
    confident: bool
    confidence: str
    reason: str


def _call(top: _Score | None, base: _Score | None, rule: SelectRule) -> _Call:
    """Whether the best other setting replaces the default, and how sure that is."""
    if base is None:
        return _Call(False, False, "no baseline", "the baseline has no result here")
    if top is None:
        return _Call(True, False, "baseline only", "no other setting measured these sizes")
    gain = _gain(top.busbw_gbps, base.busbw_gbps) or 0.0
    calls = [verdict.call for verdict in top.verdicts]
    faster, slower = calls.count(FASTER), calls.count(SLOWER)
    majority = len(calls) / 2
    label = f"{top.outcome.setting.label} {gain * 100:+.1f}%"
    basis = _weakest(top.verdicts)
    if basis == UNJUDGED:
        why = next((v.reason for v in top.verdicts if v.call == UNJUDGED), "")
        return _Call(True, False, UNJUDGED, f"{label} is unjudged ({why}): default is best")
    called, not_called = CONFIDENCE[basis]
    by_threshold = basis == THRESHOLD
    if gain > 0 and faster > majority and not slower:
        if gain >= rule.min_gain:
            how = f"not confident ({called})" if by_threshold else called
            return _Call(False, not by_threshold, called, f"{label}, {how}")
        reason = f"{label} is {called} but below {rule.min_gain * 100:g}%: default is best"
        return _Call(True, False, called, reason)
    if by_threshold:
        bar = f"{rule.unsampled_min_gain * 100:g}% at most sizes without samples"
        return _Call(True, False, called, f"{label} is below {bar}: default is best")
    confident = gain <= 0 and slower > majority
    confidence = called if confident else not_called
    return _Call(True, confident, confidence, f"{label} is {confidence}: default is best")


def _weakest(verdicts: Sequence[Verdict]) -> str:
    """The weakest basis among a setting's verdicts (unjudged weakest of all)."""
    bases = {UNJUDGED if verdict.call == UNJUDGED else verdict.basis for verdict in verdicts}
    return next(name for name in _WEAKEST_FIRST if name in bases)


def _evidence(verdicts: Sequence[Verdict]) -> TuneEvidence:
    """The range's evidence: the calls counted, the verdict at the median effect."""
    calls = {name: 0 for name in (FASTER, SLOWER, SAME, UNJUDGED)}
    for verdict in verdicts:
        calls[verdict.call] += 1
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
        effect_pct=middle.effect_pct,
        low_pct=middle.low_pct,
        high_pct=middle.high_pct,
        floor_pct=middle.floor_pct,
        floor_source=middle.floor_source,
        p_holm=middle.p_holm,
        verdict=middle.describe(),
    )


def _gain(busbw: float, base_busbw: float | None) -> float | None:
    if base_busbw is None or not base_busbw > 0 or not math.isfinite(busbw):
        return None
    return busbw / base_busbw - 1.0


def _key(value: float) -> float:
    return value if math.isfinite(value) else -math.inf


def _candidate(top: _Score | None, base_busbw: float | None) -> dict[str, Any] | None:
    if top is None:
        return None
    setting = top.outcome.setting
    return {
        "setting": setting.label,
        "knobs": setting.as_dict(),
        "busbw_gbps": top.busbw_gbps,
        "gain": _gain(top.busbw_gbps, base_busbw),
        "repeats": top.outcome.repeats,
    }


def merge_adjacent(records: Sequence[BestRecord]) -> list[BestRecord]:
    """Neighbouring ranges of one collective that chose the same knobs, joined into one range
    (a shorter nccl_tuner.conf). The joined record's busbw is the size-weighted geomean, it
    is confident only if every part was, and its evidence is the weaker part's (the smaller
    effect)."""
    merged: list[BestRecord] = []
    for record in sorted(records, key=lambda item: (item.collective, item.min_bytes)):
        last = merged[-1] if merged else None
        if (
            last is not None
            and last.collective == record.collective
            and last.knobs == record.knobs
            and last.max_bytes + 1 == record.min_bytes
        ):
            merged[-1] = _join(last, record)
        else:
            merged.append(record)
    return merged


def _join(first: BestRecord, second: BestRecord) -> BestRecord:
    def weighted(a: float | None, b: float | None) -> float | None:
        if a is None or b is None:
            return None
        return geomean([a] * len(first.sizes) + [b] * len(second.sizes))

    busbw = weighted(first.busbw_gbps, second.busbw_gbps)
    base = weighted(first.baseline_busbw_gbps, second.baseline_busbw_gbps)
    parts = [item.evidence for item in (first, second) if item.evidence is not None]
    weaker = min(parts, key=lambda item: abs(item.effect_pct), default=None)
    return replace(
        first,
        max_bytes=second.max_bytes,
        busbw_gbps=busbw,
        baseline_busbw_gbps=base,
        gain=_gain(busbw or math.nan, base),
        confident=first.confident and second.confident,
        band=f"{first.band}..{second.band}",
        sizes=first.sizes + second.sizes,
        confidence=first.confidence if first.confidence == second.confidence else "mixed",
        reason=f"{first.reason}; {second.reason}",
        candidate=None,
        evidence=weaker,
    )
