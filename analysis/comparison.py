"""Compare runs: busbw ratios per size with a significance call, per size band, and every
difference in how the runs were measured (pure: rows and meta in, dataclasses out).

The first run is the baseline. Rows match on (collective, placement, size_bytes); a size
measured by one run only is listed, never dropped silently. Differences in methodology
(dtype, iterations, timing method, world size...) make a comparison unlike-for-like: they
are flagged loudly. Differences in environment (versions, knobs, hosts) are what people
usually compare on purpose: they are listed, not flagged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from collbench.analysis.bands import BAND_NAMES, band_of
from collbench.analysis.methodology import Difference, differences
from collbench.core.stats import median
from collbench.store.load import Run
from collbench.store.rows import ResultRow

ALPHA = 0.05
MIN_SAMPLES = 5  # per side, for a Mann-Whitney U call


@dataclass(frozen=True)
class SizeComparison:
    collective: str
    placement: str
    size_bytes: int
    baseline_busbw_gbps: float
    candidate_busbw_gbps: float
    # candidate / baseline busbw, from the times (size 0: baseline / candidate time): > 1 is
    # faster
    ratio: float
    verdict: str  # faster, slower, same, no samples, too few samples
    p_value: float | None


@dataclass(frozen=True)
class BandSummary:
    collective: str
    placement: str
    band: str
    sizes: int
    geomean_ratio: float
    counts: dict[str, int]


@dataclass(frozen=True)
class Comparison:
    baseline: str
    candidate: str
    sizes: list[SizeComparison]
    bands: list[BandSummary]
    differences: list[Difference]
    only_baseline: list[str] = field(default_factory=list)
    only_candidate: list[str] = field(default_factory=list)

    @property
    def methodology_differs(self) -> bool:
        return any(diff.kind == "methodology" for diff in self.differences)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["methodology_differs"] = self.methodology_differs
        return _finite(data)


def compare(baseline: Run, candidate: Run, alpha: float = ALPHA) -> Comparison:
    """Compare a candidate run with the baseline."""
    base, cand = _by_key(baseline.rows), _by_key(candidate.rows)
    common = sorted(set(base) & set(cand))
    sizes = [_compare_size(base[key], cand[key], alpha) for key in common]
    return Comparison(
        baseline=baseline.run_id,
        candidate=candidate.run_id,
        sizes=sizes,
        bands=band_summaries(sizes),
        differences=differences(baseline, candidate),
        only_baseline=_labels(set(base) - set(cand)),
        only_candidate=_labels(set(cand) - set(base)),
    )


def common_keys(baseline: Run, candidate: Run) -> int:
    return len(set(_by_key(baseline.rows)) & set(_by_key(candidate.rows)))


def _by_key(rows: Sequence[ResultRow]) -> dict[tuple[str, str, int], ResultRow]:
    keyed: dict[tuple[str, str, int], ResultRow] = {}
    for row in rows:
        if row.kind == "sweep":
            key = (str(row.collective), str(row.placement), int(row.size_bytes))
            keyed.setdefault(key, row)
    return keyed


def _labels(keys: set[tuple[str, str, int]]) -> list[str]:
    """Unmatched sizes, one entry per collective and placement: 'all_gather out_of_place:
    1024, 4096 B'."""
    grouped: dict[tuple[str, str], list[int]] = {}
    for collective, placement, size in sorted(keys):
        grouped.setdefault((collective, placement), []).append(size)
    return [
        f"{collective} {placement}: {', '.join(map(str, sizes))} B"
        for (collective, placement), sizes in grouped.items()
    ]


def _compare_size(base: ResultRow, cand: ResultRow, alpha: float) -> SizeComparison:
    # From the times, not the busbw columns: imported logs print busbw with two decimals
    # (0.00 at small sizes). Same size, so busbw ratio = time ratio x bus-factor ratio.
    ratio = base.time_us / cand.time_us if cand.time_us else math.nan
    if base.size_bytes:
        ratio *= _factor(cand) / _factor(base)
    verdict, p_value = significance(base.time_us_samples or [], cand.time_us_samples or [], alpha)
    return SizeComparison(
        str(base.collective),
        str(base.placement),
        int(base.size_bytes),
        float(base.busbw_gbps),
        float(cand.busbw_gbps),
        float(ratio),
        verdict,
        p_value,
    )


def _factor(row: ResultRow) -> float:
    from collbench.core.bandwidth import bus_factor

    try:
        return bus_factor(str(row.collective), int(row.world_size or 1))
    except (KeyError, ValueError, ZeroDivisionError):
        return 1.0


def significance(
    base_us: list[float], cand_us: list[float], alpha: float = ALPHA
) -> tuple[str, float | None]:
    """Mann-Whitney U (two-sided) on per-iteration times: faster / slower / same."""
    from scipy.stats import mannwhitneyu

    if not base_us or not cand_us:
        return "no samples", None
    if min(len(base_us), len(cand_us)) < MIN_SAMPLES:
        return "too few samples", None
    p_value = float(mannwhitneyu(base_us, cand_us, alternative="two-sided").pvalue)
    if p_value >= alpha:
        return "same", p_value
    faster = median(cand_us) < median(base_us)
    return ("faster" if faster else "slower"), p_value


def _geomean(values: list[float]) -> float:
    import numpy as np  # here, not at import: the CLI reads ALPHA without loading numpy

    return float(np.exp(np.mean(np.log(values)))) if values else math.nan


def band_summaries(sizes: list[SizeComparison]) -> list[BandSummary]:
    """Per collective, placement and size band: the geometric mean ratio and the verdicts."""
    groups: dict[tuple[str, str, str], list[SizeComparison]] = {}
    for item in sizes:
        groups.setdefault((item.collective, item.placement, band_of(item.size_bytes)), []).append(
            item
        )
    order = {name: index for index, name in enumerate(BAND_NAMES)}
    summaries = []
    for (collective, placement, band), items in sorted(
        groups.items(), key=lambda kv: (kv[0][0], kv[0][1], order[kv[0][2]])
    ):
        ratios = [item.ratio for item in items if item.ratio > 0 and math.isfinite(item.ratio)]
        geomean = _geomean(ratios)
        counts: dict[str, int] = {}
        for item in items:
            counts[item.verdict] = counts.get(item.verdict, 0) + 1
        summaries.append(BandSummary(collective, placement, band, len(items), geomean, counts))
    return summaries


def _finite(value: Any) -> Any:
    """JSON has no NaN/inf: such floats become None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value
