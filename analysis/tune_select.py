"""`collbench tune`'s decision: per collective and size range, the best knob setting, its busbw
gain over the baseline and whether the samples back it (pure: outcomes in, records out).

Rules, each written once here:
- Placement: out_of_place where a collective was measured so (nccl-tests' first columns, and
  what NCCL users call), else in_place. One placement per collective, never a mix.
- Ranges (`SelectRule.granularity`): "band" uses analysis.bands (small, medium, large), the
  last band open to BYTES_MAX; "size" gives each measured size its own range, split at the
  geometric midpoint between neighbours, from 0 to BYTES_MAX, for a finer tuner config.
  `merge_adjacent` joins neighbours that chose the same knobs.
- The sizes of a range are the baseline's measured sizes in it (size 0 has no busbw and is
  left out). A setting competes in a range only if it measured all of them.
- Best: the highest geometric-mean busbw over those sizes (busbw from each row's time, as
  compare does, not an imported log's 2-decimal column).
- Confidence: per size, Mann-Whitney U of the per-iteration busbw against the baseline
  (analysis.comparison.significance); Holm over every (setting, size) test of the range,
  since the winner was picked among all settings. A winner is confident when it is faster
  at more than half of the sizes and slower at none, Holm-adjusted p below alpha. It is
  adopted when confident and gaining at least `min_gain`; without samples (imported logs)
  when it gains at least `unsampled_min_gain` (then confident is False). Otherwise the
  default is best: knobs {}, gain 0. "Default is best" is confident when the best other
  setting is significantly slower at more than half of the sizes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from collbench.analysis.bands import BANDS
from collbench.analysis.compare_gate import holm
from collbench.analysis.comparison import ALPHA, json_safe, significance
from collbench.analysis.tuner_conf_rules import SIZE_MAX as BYTES_MAX  # no upper end
from collbench.core.bandwidth import busbw_gbps
from collbench.core.units import format_size
from collbench.store.rows import ResultRow

GRANULARITIES = ("band", "size")
PLACEMENTS = ("out_of_place", "in_place")  # the first one measured is the one tuned
UNTESTED = ("no samples", "too few samples")


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
    """One setting's result: the rows it measured, or the error it failed with."""

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


@dataclass(frozen=True)
class SelectRule:
    """How a winner is called; every default of `collbench tune`'s selection lives here."""

    granularity: str = "band"  # band: small/medium/large; size: one range per measured size
    alpha: float = ALPHA
    min_gain: float = 0.02  # with samples: confident and at least this gain
    unsampled_min_gain: float = 0.05  # without samples: this gain alone decides

    def __post_init__(self) -> None:
        if self.granularity not in GRANULARITIES:
            from collbench.core.errors import SpecError

            raise SpecError(
                "--granularity", self.granularity, f"is not one of {', '.join(GRANULARITIES)}"
            )


@dataclass(frozen=True)
class SizeRange:
    """An inclusive byte range and its name."""

    name: str
    min_bytes: int
    max_bytes: int

    def covers(self, size_bytes: int) -> bool:
        return self.min_bytes <= size_bytes <= self.max_bytes


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
    # significant | not significant | no samples | too few samples | no baseline | baseline
    # only; "mixed" for ranges merge_adjacent joined with different calls
    confidence: str
    reason: str
    candidate: dict[str, Any] | None = field(default=None)  # the best other setting

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["sizes"] = list(self.sizes)
        return {key: json_safe(value) for key, value in data.items()}


@dataclass(frozen=True)
class _Score:
    """One setting over one range: geomean busbw and the per-size tests against baseline."""

    outcome: SettingOutcome
    busbw_gbps: float
    verdicts: list[str]
    p_values: list[float | None]


def select_best(
    outcomes: Sequence[SettingOutcome], rule: SelectRule | None = None
) -> list[BestRecord]:
    """Per collective and size range, the best setting (see the module's rules). Failed
    settings take no part; a collective the baseline did not measure is chosen without gains."""
    rule = rule or SelectRule()
    ran = [outcome for outcome in outcomes if outcome.status == "ok" and outcome.rows]
    baseline = next((item for item in ran if item.is_baseline), None)
    records = []
    measured = {row.collective for item in ran for row in item.rows if row.kind == "sweep"}
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
                _score(item, tables[id(item)], in_range, base_table, rule)
                for item in ran
                if all(size in tables[id(item)] for size in in_range)
            ]
            if not scores:
                continue
            context = (collective, placement, size_range, in_range)
            records.append(_decide(context, scores, baseline, rule))
    return records


def tuned_placement(collective: str, outcomes: Sequence[SettingOutcome]) -> str:
    """The placement tuned for a collective: the first of PLACEMENTS any setting measured."""
    measured = {
        row.placement
        for item in outcomes
        for row in item.rows
        if row.collective == collective and row.kind == "sweep"
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


def _table(rows: Sequence[ResultRow], collective: str, placement: str) -> dict[int, ResultRow]:
    table: dict[int, ResultRow] = {}
    for row in rows:
        if row.kind == "sweep" and row.collective == collective and row.placement == placement:
            table.setdefault(int(row.size_bytes), row)
    return table


def _union(tables: Any) -> dict[int, ResultRow]:
    merged: dict[int, ResultRow] = {}
    for table in tables:
        for size, row in table.items():
            merged.setdefault(size, row)
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


def geomean(values: Sequence[float]) -> float:
    """Geometric mean of the positive finite values; nan when there are none."""
    kept = [value for value in values if value > 0 and math.isfinite(value)]
    return math.exp(sum(map(math.log, kept)) / len(kept)) if kept else math.nan


def _score(
    outcome: SettingOutcome,
    table: Mapping[int, ResultRow],
    sizes: Sequence[int],
    base: Mapping[int, ResultRow] | None,
    rule: SelectRule,
) -> _Score:
    busbw = geomean([row_busbw(table[size]) for size in sizes])
    verdicts: list[str] = []
    p_values: list[float | None] = []
    if base is not None and not outcome.is_baseline:
        for size in sizes:
            verdict, p_value = significance(
                sample_busbw(base[size]), sample_busbw(table[size]), rule.alpha
            )
            verdicts.append(verdict)
            p_values.append(p_value)
    return _Score(outcome, busbw, verdicts, p_values)


def _decide(
    context: tuple[str, str, SizeRange, tuple[int, ...]],
    scores: list[_Score],
    baseline: SettingOutcome | None,
    rule: SelectRule,
) -> BestRecord:
    collective, placement, size_range, sizes = context
    holm_counts = _holm_counts(scores, rule.alpha)
    base = next((score for score in scores if score.outcome is baseline), None)
    others = sorted(
        (score for score in scores if score.outcome is not baseline),
        key=lambda score: -_key(score.busbw_gbps),
    )
    top = others[0] if others else None
    base_busbw = base.busbw_gbps if base is not None else None
    call = _call(top, base, holm_counts, rule)
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
    )


@dataclass(frozen=True)
class _Call:
    default_is_best: bool
    confident: bool
    confidence: str
    reason: str


def _call(
    top: _Score | None,
    base: _Score | None,
    holm_counts: Mapping[int, tuple[int, int]],
    rule: SelectRule,
) -> _Call:
    """Whether the best other setting replaces the default, and how sure that is."""
    if base is None:
        return _Call(False, False, "no baseline", "the baseline has no result here")
    if top is None:
        return _Call(True, False, "baseline only", "no other setting measured these sizes")
    gain = _gain(top.busbw_gbps, base.busbw_gbps) or 0.0
    faster, slower = holm_counts.get(id(top), (0, 0))
    majority = len(top.verdicts) / 2
    label = f"{top.outcome.setting.label} {gain * 100:+.1f}%"
    untested = all(verdict in UNTESTED for verdict in top.verdicts)
    if untested:
        confidence = "too few samples" if "too few samples" in top.verdicts else "no samples"
        adopt = gain >= rule.unsampled_min_gain
        bar = f"{rule.unsampled_min_gain * 100:g}% without samples"
        if adopt:
            return _Call(False, False, confidence, f"{label}, not confident ({confidence})")
        return _Call(True, False, confidence, f"{label} is below {bar}: default is best")
    if gain > 0 and faster > majority and not slower:
        if gain >= rule.min_gain:
            return _Call(False, True, "significant", f"{label}, significant")
        reason = f"{label} is significant but below {rule.min_gain * 100:g}%: default is best"
        return _Call(True, False, "significant", reason)
    confident = gain <= 0 and slower > majority
    confidence = "significant" if confident else "not significant"
    return _Call(True, confident, confidence, f"{label} is {confidence}: default is best")


def _holm_counts(scores: Sequence[_Score], alpha: float) -> dict[int, tuple[int, int]]:
    """Per setting, how many sizes are significantly faster / slower than the baseline after
    Holm over every test of the range."""
    tests = [
        (id(score), verdict, p_value)
        for score in scores
        for verdict, p_value in zip(score.verdicts, score.p_values, strict=True)
        if p_value is not None
    ]
    adjusted = holm([p_value for _, _, p_value in tests])
    counts: dict[int, tuple[int, int]] = {}
    for (key, verdict, _), p_value in zip(tests, adjusted, strict=True):
        faster, slower = counts.get(key, (0, 0))
        if p_value < alpha:
            faster += verdict == "faster"
            slower += verdict == "slower"
        counts[key] = (faster, slower)
    return counts


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
    }


def merge_adjacent(records: Sequence[BestRecord]) -> list[BestRecord]:
    """Neighbouring ranges of one collective that chose the same knobs, joined into one range
    (a shorter nccl_tuner.conf). The joined record's busbw is the size-weighted geomean, and
    it is confident only if every part was."""
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
    return BestRecord(
        **{
            **asdict(first),
            "max_bytes": second.max_bytes,
            "busbw_gbps": busbw,
            "baseline_busbw_gbps": base,
            "gain": _gain(busbw or math.nan, base),
            "confident": first.confident and second.confident,
            "band": f"{first.band}..{second.band}",
            "sizes": first.sizes + second.sizes,
            "confidence": first.confidence if first.confidence == second.confidence else "mixed",
            "reason": f"{first.reason}; {second.reason}",
            "candidate": None,
        }
    )
