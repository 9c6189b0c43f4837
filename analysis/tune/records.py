"""`collbench tune`'s records: what selection reads (a setting's outcome, the rule) and what it
writes (a size range, its best record and evidence), with the busbw figures they rest on
(pure). The rules that fill them are analysis/tune/select.py's."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from collbench.analysis.rules.decision import ALPHA, FASTER, SLOWER, Rule
from collbench.core.bandwidth import busbw_gbps
from collbench.core.errors import SpecError
from collbench.core.stats import geomean
from collbench.core.units import format_size
from collbench.store.rows import ResultRow
from collbench.store.tune_result import TuneEvidence

GRANULARITIES = ("crossover", "band", "size")
PLACEMENTS = ("out_of_place", "in_place")  # the first one measured is the one tuned


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
    # (tune from without a run of the plain environment: the first RUN)
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

    # crossover: ranges end where the winner changes; band: small/medium/large; size: one
    # range per measured size
    granularity: str = "crossover"
    alpha: float = ALPHA
    min_gain: float = 0.02  # a called winner must gain at least this much
    unsampled_min_gain: float = 0.05  # without samples: the rule's threshold, per size

    def __post_init__(self) -> None:
        if self.granularity not in GRANULARITIES:
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


def describe_evidence(evidence: TuneEvidence | None) -> str:
    """'+30.1% [+25.3%, +35.2%], floor 2.0%, 3v3 repeats, significant at 2/2 sizes'; '-' for
    none."""
    if evidence is None:
        return "-"
    effect = evidence.effect_pct
    if effect is None or not math.isfinite(effect):
        return f"no effect measured ({evidence.basis})"
    text = f"{effect:+.1f}%"
    low, high = evidence.low_pct, evidence.high_pct
    if low is not None and high is not None:
        text += f" [{low:+.1f}%, {high:+.1f}%]"
    if evidence.floor_pct is not None:
        text += f", floor {evidence.floor_pct:.1f}%"
    base, cand = evidence.baseline_repeats, evidence.candidate_repeats
    text += f", {base}v{cand} repeat{'s' if max(base, cand) != 1 else ''}"
    calls = evidence.calls
    called = [f"{calls[name]} {name}" for name in (FASTER, SLOWER) if calls.get(name)]
    text += f", {evidence.basis}: {', '.join(called) or 'none called'} of {sum(calls.values())}"
    return text


def sizes_text(first: int, last: int) -> str:
    """A range by the measured sizes it holds, as a person writes it: `1 GiB .. 8 GiB`."""
    return format_size(first) if first == last else f"{format_size(first)} .. {format_size(last)}"


def range_label(band: str, sizes: Sequence[int]) -> str:
    """A range by the measured sizes it holds (`1 GiB .. 8 GiB`), after its band's name
    where it has one (`large: 16 MiB .. 8 GiB`): the table, the report and best.env say it
    so."""
    held = sizes_text(min(sizes), max(sizes)) if sizes else ""
    return (band or held) if not held or band == held else f"{band}: {held}"


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


def gain_over(busbw: float, base_busbw: float | None) -> float | None:
    """busbw over the baseline's, minus 1 (None: no baseline figure)."""
    if base_busbw is None or not base_busbw > 0 or not math.isfinite(busbw):
        return None
    return busbw / base_busbw - 1.0
