"""Cross-rank and per-iteration statistics, and the one median every summary uses (pure).

numpy is imported where ranks combine their times, so renderers that only need `median`
stay light.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

# How --rank-stat combines the ranks' times (nccl-tests -a: 0 rank0, 1 avg, 2 min, 3 max).
RANK_COMBINERS = {
    "avg": lambda per_rank: per_rank.mean(axis=0),
    "max": lambda per_rank: per_rank.max(axis=0),
    "min": lambda per_rank: per_rank.min(axis=0),
    "rank0": lambda per_rank: per_rank[0],
}


@dataclass(frozen=True)
class TimeStats:
    """Times in microseconds for one measurement, combined across ranks."""

    time_us: float  # batch time / iters (nccl-tests' figure)
    time_us_p50: float
    time_us_p95: float
    time_us_min: float
    time_us_max: float
    time_cv: float  # std / mean of the per-iteration samples
    samples_us: tuple[float, ...] = ()  # the combined per-iteration series itself


def combine_ranks(batch_s: np.ndarray, samples_s: np.ndarray, rank_stat: str) -> TimeStats:
    """Combine per-rank figures.

    batch_s: shape (ranks,), each rank's batch time per iteration in seconds.
    samples_s: shape (ranks, iters), each rank's per-iteration times in seconds. Iteration
    i of the combined series is the rank statistic of every rank's iteration i.
    """
    import numpy as np

    combine = RANK_COMBINERS[rank_stat]
    time_s = float(combine(np.asarray(batch_s, dtype=float)[:, None])[0])
    series = np.asarray(combine(np.asarray(samples_s, dtype=float)), dtype=float) * 1e6
    mean = float(series.mean())
    return TimeStats(
        time_us=time_s * 1e6,
        time_us_p50=float(np.percentile(series, 50)),
        time_us_p95=float(np.percentile(series, 95)),
        time_us_min=float(series.min()),
        time_us_max=float(series.max()),
        time_cv=float(series.std() / mean) if mean > 0 else 0.0,
        samples_us=tuple(float(sample) for sample in series),
    )


def median(values: Iterable[float | None]) -> float | None:
    """The median of the known values (the mean of the middle two for an even count), or
    None when there are none. Sweep summaries, reports and mfu --overlap all use this one."""
    known = [float(value) for value in values if value is not None]
    return statistics.median(known) if known else None


def geomean(values: Iterable[float]) -> float:
    """The geometric mean of the positive finite values, or nan when there are none. Ratios
    and bandwidths (compare's band summaries, a tune setting's busbw, a side's repeats) all
    use this one."""
    kept = [float(value) for value in values if value > 0 and math.isfinite(value)]
    return math.exp(sum(map(math.log, kept)) / len(kept)) if kept else math.nan
