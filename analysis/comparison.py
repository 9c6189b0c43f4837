"""Compare runs: per size, one quantity (busbw) for both the ratio and the significance
call, a summary per size band, every difference in how the runs were measured, and the CI
gate `--fail-if-slower` (pure: rows and meta in, dataclasses out).

The first run is the baseline. Rows match on (collective, placement, size_bytes); a size
measured by one run only is listed, never dropped silently. Differences in methodology
(dtype, iterations, timing method, world size, nodes...) make a comparison unlike-for-like:
they are flagged loudly. Differences in environment (versions, knobs, hosts) are what people
usually compare on purpose: they are listed, not flagged.

Why busbw: it normalises the world size (nccl-tests' bus factor), so a 2-rank and a 4-rank run
compare on what the fabric delivers. The ratio and the Mann-Whitney U test are both on busbw
(each run's busbw from its own time and world size), so they cannot point opposite ways. At
size 0 busbw is 0 for every run: there both are on time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from collbench.analysis.bands import BAND_NAMES, band_of
from collbench.analysis.methodology import Difference, differences
from collbench.core.errors import EXIT_SLOWER, CollbenchError
from collbench.core.stats import median
from collbench.store.load import Run
from collbench.store.rows import ResultRow

ALPHA = 0.05
MIN_SAMPLES = 5  # per side, for a Mann-Whitney U call
QUANTITY = "busbw"
QUANTITY_NOTE = (
    "ratio and verdict on busbw: candidate / baseline, > 1 is faster (each run's busbw from "
    "its own time and world size; at size 0, where busbw is 0, on time)"
)
VERDICTS = ("faster", "slower", "same", "mixed", "no samples", "too few samples")


class SlowerThanAllowed(CollbenchError):
    """--fail-if-slower: a candidate is slower than the baseline by more than allowed."""

    exit_code = EXIT_SLOWER


@dataclass(frozen=True)
class SizeComparison:
    """One size measured by both runs."""

    collective: str
    placement: str
    size_bytes: int
    quantity: str  # busbw; time at size 0 (busbw is 0 there)
    baseline_time_us: float
    candidate_time_us: float
    # from each run's time at its own world size (not an imported log's 2-decimal column)
    baseline_busbw_gbps: float | None
    candidate_busbw_gbps: float | None
    # candidate / baseline busbw (size 0: baseline / candidate time): > 1 is faster
    ratio: float
    # faster / slower: Mann-Whitney U on per-iteration busbw significant at alpha, its median
    # moving the way the ratio does; mixed: significant, but the median moves against the
    # ratio; same; no samples; too few samples
    verdict: str
    p_value: float | None

    @property
    def change_pct(self) -> float:
        """(ratio - 1) in percent: negative is slower."""
        return (self.ratio - 1.0) * 100.0


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
    alpha: float = ALPHA
    quantity: str = QUANTITY

    @property
    def quantity_note(self) -> str:
        return QUANTITY_NOTE

    @property
    def methodology(self) -> list[Difference]:
        return [diff for diff in self.differences if diff.kind == "methodology"]

    @property
    def methodology_differs(self) -> bool:
        return bool(self.methodology)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["quantity_note"] = self.quantity_note
        data["methodology_differs"] = self.methodology_differs
        return json_safe(data)


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
        alpha=alpha,
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
    # (0.00 at small sizes). Each side's busbw uses its own world size's bus factor.
    base_scale, cand_scale = _speed_scale(base), _speed_scale(cand)
    base_speed, cand_speed = _speed(base_scale, base.time_us), _speed(cand_scale, cand.time_us)
    ratio = cand_speed / base_speed if base_speed > 0 else math.nan
    verdict, p_value = significance(
        _speeds(base_scale, base.time_us_samples), _speeds(cand_scale, cand.time_us_samples), alpha
    )
    if verdict in ("faster", "slower") and (verdict == "faster") != (ratio > 1):
        verdict = "mixed"  # the samples' median moves against the table figures
    busbw = int(base.size_bytes) > 0
    return SizeComparison(
        collective=str(base.collective),
        placement=str(base.placement),
        size_bytes=int(base.size_bytes),
        quantity=QUANTITY if busbw else "time",
        baseline_time_us=float(base.time_us),
        candidate_time_us=float(cand.time_us),
        baseline_busbw_gbps=base_speed if busbw else None,
        candidate_busbw_gbps=cand_speed if busbw else None,
        ratio=float(ratio),
        verdict=verdict,
        p_value=p_value,
    )


def _speed_scale(row: ResultRow) -> float:
    """busbw in GB/s = scale / time in us; at size 0 the speed is 1 / time."""
    from collbench.core.bandwidth import bus_factor

    if not row.size_bytes:
        return 1.0
    try:
        factor = bus_factor(str(row.collective), int(row.world_size or 1))
    except (KeyError, ValueError, ZeroDivisionError):
        factor = 1.0
    return int(row.size_bytes) * factor / 1e3


def _speed(scale: float, time_us: float | None) -> float:
    return scale / time_us if time_us and time_us > 0 else math.nan


def _speeds(scale: float, samples_us: Sequence[float] | None) -> list[float]:
    return [scale / sample for sample in samples_us or [] if sample > 0]


def significance(
    base_speed: list[float], cand_speed: list[float], alpha: float = ALPHA
) -> tuple[str, float | None]:
    """Mann-Whitney U (two-sided) on per-iteration speeds (busbw; higher is faster):
    faster / slower (by the medians) / same, or why there is no call."""
    from scipy.stats import mannwhitneyu

    if not base_speed or not cand_speed:
        return "no samples", None
    if min(len(base_speed), len(cand_speed)) < MIN_SAMPLES:
        return "too few samples", None
    p_value = float(mannwhitneyu(base_speed, cand_speed, alternative="two-sided").pvalue)
    if p_value >= alpha:
        return "same", p_value
    faster = (median(cand_speed) or 0.0) > (median(base_speed) or 0.0)
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


def json_safe(value: Any) -> Any:
    """JSON has no NaN/inf: such floats become None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, list):
        return [json_safe(item) for item in value]
    return value
