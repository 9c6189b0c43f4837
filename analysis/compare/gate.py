"""The CI gate of `collbench compare --fail-if-slower PCT` (pure): a size fails when its busbw
is more than PCT percent below the baseline's *and* the one rule (analysis/rules/decision.py)
calls it `slower`. A size below the threshold that the rule could not judge keeps the gate
from passing.
"""

from __future__ import annotations

from dataclasses import dataclass

from collbench.analysis.compare.comparison import Comparison, SizeComparison
from collbench.analysis.rules.bands import BAND_NAMES, band_of
from collbench.analysis.rules.decision import SLOWER, UNJUDGED
from collbench.core.errors import SpecError
from collbench.core.units import format_size, parse_size


@dataclass(frozen=True)
class SizeSelection:
    """The sizes the gate checks: every size, the sizes of some bands, or a byte range."""

    bands: tuple[str, ...] = ()
    min_bytes: int = 0
    max_bytes: int | None = None  # inclusive; None: no upper end

    def covers(self, size_bytes: int) -> bool:
        if self.bands and band_of(size_bytes) not in self.bands:
            return False
        upper = self.max_bytes if self.max_bytes is not None else size_bytes
        return self.min_bytes <= size_bytes <= upper

    def describe(self) -> str:
        if self.bands:
            return f"band {', '.join(self.bands)}"
        if self.min_bytes == 0 and self.max_bytes is None:
            return "every size"
        upper = format_size(self.max_bytes) if self.max_bytes is not None else "largest"
        return f"sizes {format_size(self.min_bytes)} .. {upper}"


def parse_bands(text: str) -> SizeSelection:
    """`--band small` or `--band medium,large`; SpecError naming the bands otherwise."""
    bands = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [band for band in bands if band not in BAND_NAMES]
    if not bands or unknown:
        raise SpecError("--band", text, f"is not a size band: use {', '.join(BAND_NAMES)}")
    return SizeSelection(bands=bands)


def parse_size_range(text: str) -> SizeSelection:
    """`--sizes 1M:1G` (inclusive; either end may be left out: `:64K`, `16M:`)."""
    if text.count(":") != 1:
        raise SpecError("--sizes", text, "is not a range: use MIN:MAX, e.g. 1M:1G, :64K or 16M:")
    low, high = (part.strip() for part in text.split(":"))
    min_bytes = parse_size(low, "--sizes") if low else 0
    max_bytes = parse_size(high, "--sizes") if high else None
    if max_bytes is not None and max_bytes < min_bytes:
        raise SpecError("--sizes", text, "ends below where it starts")
    return SizeSelection(min_bytes=min_bytes, max_bytes=max_bytes)


@dataclass(frozen=True)
class GateCheck:
    """One size the gate looked at."""

    item: SizeComparison
    failed: bool


@dataclass(frozen=True)
class GateResult:
    threshold_pct: float
    selection: SizeSelection
    checks: list[GateCheck]
    slower: list[GateCheck]  # slower than allowed by the effect alone
    alpha: float

    @property
    def failed(self) -> list[GateCheck]:
        return [check for check in self.slower if check.failed]

    @property
    def spared(self) -> list[GateCheck]:
        """Below the threshold by the effect, but the rule does not call it slower (within
        the noise floor, or not significant): not failed."""
        return [c for c in self.slower if not c.failed and c.item.verdict != UNJUDGED]

    @property
    def unjudged(self) -> list[GateCheck]:
        """Below the threshold by the effect, but the rule could not judge it (too few
        iterations to measure the noise): not failed, but the gate cannot pass it either."""
        return [c for c in self.slower if not c.failed and c.item.verdict == UNJUDGED]

    @property
    def blind(self) -> list[GateCheck]:
        """Checked sizes where the smallest slowdown the gate could have caught (its power:
        the verdict's detectable_pct) is larger than the threshold, or unknown: a slowdown
        of the threshold's size would pass there unseen."""
        return [
            check
            for check in self.checks
            if not check.failed
            and (
                check.item.decision.detectable_pct is None
                or check.item.decision.detectable_pct > self.threshold_pct
            )
        ]

    @property
    def passed(self) -> bool:
        """Nothing failed, nothing below the threshold went unjudged and no checked size was
        blind: a gate that could not see a slowdown does not call the run healthy."""
        return not self.failed and not self.unjudged and not self.blind


def check_slower(
    comparison: Comparison, threshold_pct: float, selection: SizeSelection
) -> GateResult:
    """The gate's verdict on every selected size of a comparison (made with a rule whose
    threshold is `threshold_pct`, so that sizes without samples are decided by it)."""
    checks, slower = [], []
    for item in comparison.sizes:
        if not selection.covers(item.size_bytes):
            continue
        below = item.decision.effect_pct < -threshold_pct
        check = GateCheck(item, below and item.verdict == SLOWER)
        checks.append(check)
        if below:
            slower.append(check)
    return GateResult(threshold_pct, selection, checks, slower, comparison.alpha)
