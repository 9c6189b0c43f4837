"""The CI gate of `collbench compare --fail-if-slower PCT`: which sizes of a comparison are
slower than the baseline by more than PCT percent, in a way the data can back (pure).

A size fails when its busbw ratio is below 1 - PCT/100 and, where the runs have per-iteration
samples, the slowdown is significant: the Mann-Whitney U call is `slower` and its p-value,
Holm-corrected over every size the gate checks, stays below alpha. Checking 20 sizes at
alpha 0.05 each would fail a run against itself most of the time; Holm keeps the chance of
any false failure at alpha. A size without samples (imported nccl-tests logs) or with too
few is judged on the threshold alone, and the gate says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from collbench.analysis.bands import BAND_NAMES, band_of
from collbench.analysis.comparison import Comparison, SizeComparison
from collbench.core.errors import SpecError
from collbench.core.units import format_size, parse_size

UNTESTED = ("no samples", "too few samples")


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
    holm_p: float | None  # None: no samples to test
    failed: bool


@dataclass(frozen=True)
class GateResult:
    threshold_pct: float
    selection: SizeSelection
    checks: list[GateCheck]
    slower: list[GateCheck]  # slower than allowed by the ratio alone
    alpha: float

    @property
    def failed(self) -> list[GateCheck]:
        return [check for check in self.slower if check.failed]

    @property
    def spared(self) -> list[GateCheck]:
        """Below the threshold by the ratio, but not significantly: not failed."""
        return [check for check in self.slower if not check.failed]


def check_slower(
    comparison: Comparison, threshold_pct: float, selection: SizeSelection
) -> GateResult:
    """The gate's verdict on every selected size of a comparison."""
    items = [item for item in comparison.sizes if selection.covers(item.size_bytes)]
    tested = [item for item in items if item.p_value is not None]
    adjusted = dict(
        zip(map(id, tested), holm([item.p_value or 0.0 for item in tested]), strict=True)
    )
    checks, slower = [], []
    for item in items:
        holm_p = adjusted.get(id(item))
        below = item.ratio < 1.0 - threshold_pct / 100.0
        if item.verdict in UNTESTED:
            failed = below
        else:
            failed = below and item.verdict == "slower" and (holm_p or 1.0) < comparison.alpha
        check = GateCheck(item, holm_p, failed)
        checks.append(check)
        if below:
            slower.append(check)
    return GateResult(threshold_pct, selection, checks, slower, comparison.alpha)


def holm(p_values: list[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the order given."""
    order = sorted(range(len(p_values)), key=lambda index: p_values[index])
    adjusted = [1.0] * len(p_values)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted
