"""The doctor's rule for one stage over its repeats (pure): a majority of repeats below the bar.

The method, in full: docs/doctor.md#analysis-doctor-judge-py.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from collbench.analysis.doctor.expect import Bar, Expectation, gbps, median_of
from collbench.analysis.rules.decision import SLOWER, Evidence, Question, Rule, Verdict, judge
from collbench.core.doctor_spec import MIN_DOCTOR_REPEATS

NOT_MEASURED = "not measured"


@dataclass(frozen=True)
class Judged:
    """One item of a stage over the repeats that had a bar: its value, the bar's threshold,
    and whether it was below, repeat by repeat."""

    values: tuple[float, ...]
    thresholds: tuple[float, ...]
    bar: Bar  # the bars' medians (what evidence and findings show)
    verdict: Verdict | None = None  # against a baseline: the decision rule's

    @property
    def value(self) -> float:
        """The item's figure: the median over its repeats."""
        return median_of(self.values)

    @property
    def slow_repeats(self) -> int:
        return sum(value < bar for value, bar in zip(self.values, self.thresholds, strict=True))

    @property
    def flagged(self) -> bool:
        """Below the bar in a majority of at least MIN_DOCTOR_REPEATS repeats (and, against a
        baseline, slower by the decision rule)."""
        repeats = len(self.values)
        majority = repeats >= MIN_DOCTOR_REPEATS and 2 * self.slow_repeats > repeats
        return majority and (self.verdict is None or self.verdict.call == SLOWER)

    def evidence(self, what: str = "") -> str:
        """'3 of 3 repeats below the bar: 0.21, 0.23, 0.22 GB/s vs fleet median of 4 nodes
        0.61 GB/s (-64%, repeats within 9%)' (and the decision rule's verdict)."""
        values = ", ".join(gbps(value) for value in self.values)
        low, high = min(self.values), max(self.values)
        spread = 100 * (high / low - 1) if low > 0 else float("inf")
        reference = self.bar.reference_gbps
        change = 100 * (self.value / reference - 1) if reference else 0.0
        shown = gbps(self.bar.threshold_gbps)
        # Each repeat is held against its own bar; where one of them decides otherwise than
        # the bars' median would, the median alone would contradict the count: say them all.
        pairs = zip(self.values, self.thresholds, strict=True)
        if any((value < bar) != (value < self.bar.threshold_gbps) for value, bar in pairs):
            shown += f" (per repeat {', '.join(gbps(bar) for bar in self.thresholds)})"
        text = (
            f"{self.slow_repeats} of {len(self.values)} repeats below the bar "
            f"{shown}: {values} GB/s vs {self.bar.describe(what)} "
            f"({change:+.0f}%, repeats within {spread:.0f}%)"
        )
        if self.verdict is not None:
            text += f"; decision rule: {self.verdict.describe()}"
        return text


@dataclass(frozen=True)
class StageJudgement:
    """A stage's items judged over its repeats; `reason` says why it is unjudged ("": it
    was judged)."""

    items: dict[Hashable, Judged] = field(default_factory=dict)
    bars: dict[int, Bar] = field(default_factory=dict)  # per repeat index
    reason: str = ""

    @property
    def judged(self) -> bool:
        return not self.reason

    def flagged(self) -> dict[Hashable, Judged]:
        return {item: judged for item, judged in self.items.items() if judged.flagged}


def judge_stage(
    table: Mapping[Hashable, Mapping[int, float]],
    bar_of: Callable[[list[float]], Bar | None],
    no_bar: str,
) -> StageJudgement:
    """Judge `table` (item -> repeat index -> GB/s): each repeat's items against
    bar_of(that repeat's values). `no_bar`: the reason when no repeat had a bar."""
    repeats = sorted({repeat for by_repeat in table.values() for repeat in by_repeat})
    if not repeats:
        return StageJudgement(reason=NOT_MEASURED)
    bars: dict[int, Bar] = {}
    for repeat in repeats:
        bar = bar_of([by[repeat] for by in table.values() if repeat in by])
        if bar is not None:
            bars[repeat] = bar
    if not bars:
        return StageJudgement(reason=no_bar)
    # Items measured in the same repeats share their bars' summary: worked out once each.
    shared: dict[tuple[int, ...], tuple[tuple[float, ...], Bar]] = {}
    items = {}
    for item, by_repeat in table.items():
        present = tuple(repeat for repeat in bars if repeat in by_repeat)
        if not present:
            continue
        if present not in shared:
            shared[present] = _summary([bars[repeat] for repeat in present])
        thresholds, summary = shared[present]
        values = tuple(by_repeat[repeat] for repeat in present)
        items[item] = Judged(values, thresholds, summary)
    reason = ""
    if len(bars) < MIN_DOCTOR_REPEATS:
        reason = (
            f"{len(bars)} repeat(s); a finding needs the slow result in a majority of at "
            f"least {MIN_DOCTOR_REPEATS} (--repeats {MIN_DOCTOR_REPEATS} or more)"
        )
    return StageJudgement(items, bars, reason)


def _summary(bars: Sequence[Bar]) -> tuple[tuple[float, ...], Bar]:
    """Repeats' bars: their thresholds, and the bar evidence shows (medians)."""
    thresholds = tuple(bar.threshold_gbps for bar in bars)
    summary = replace(
        bars[0],
        reference_gbps=median_of([bar.reference_gbps for bar in bars]),
        threshold_gbps=median_of(thresholds),
        peers=max(bar.peers for bar in bars),
    )
    return thresholds, summary


def against_baseline(
    judgement: StageJudgement, stage: str, expectation: Expectation, size_bytes: int
) -> StageJudgement:
    """Every item's verdict against the baseline's repeats of `stage` (decision.judge, the
    stage's items one family, held against the expectation's recorded A/A floor where it has
    one); unchanged when the expectation holds no baseline evidence."""
    base = expectation.evidence.get(stage)
    if base is None or not judgement.items:
        return judgement
    items = list(judgement.items.items())
    questions = [Question(base, Evidence.of(judged.values), size_bytes) for _, judged in items]
    verdicts = judge(questions, Rule(floor=expectation.noise_floor))
    judged_items = {
        item: replace(judged, verdict=verdict)
        for (item, judged), verdict in zip(items, verdicts, strict=True)
    }
    return replace(judgement, items=judged_items)
