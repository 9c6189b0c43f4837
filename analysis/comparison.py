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
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

ALPHA = 0.05
MIN_SAMPLES = 5  # per side, for a Mann-Whitney U call
KIB, MIB = 1024, 1024**2
# (name, first size in the band): small is latency-bound, large bandwidth-bound.
BANDS = (("small", 0), ("medium", 64 * KIB), ("large", 16 * MIB))
METHODOLOGY = (
    "source",
    "timing_method",
    "dtype",
    "op",
    "iters",
    "warmup",
    "rank_stat",
    "world_size",
    "nodes",
    "ranks_per_node",
)


@dataclass(frozen=True)
class RunData:
    """One run as loaded from its directory."""

    path: str
    meta: dict[str, Any]
    rows: list[dict[str, Any]]

    @property
    def run_id(self) -> str:
        return str(self.meta.get("run_id") or self.path)


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
class Difference:
    field: str
    baseline: Any
    candidate: Any
    kind: str  # methodology | environment


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


def compare(baseline: RunData, candidate: RunData, alpha: float = ALPHA) -> Comparison:
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


def common_keys(baseline: RunData, candidate: RunData) -> int:
    return len(set(_by_key(baseline.rows)) & set(_by_key(candidate.rows)))


def _by_key(rows: list[dict[str, Any]]) -> dict[tuple[str, str, int], dict[str, Any]]:
    keyed: dict[tuple[str, str, int], dict[str, Any]] = {}
    for row in rows:
        if row.get("kind", "sweep") == "sweep":
            key = (str(row["collective"]), str(row["placement"]), int(row["size_bytes"]))
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


def _compare_size(base: dict[str, Any], cand: dict[str, Any], alpha: float) -> SizeComparison:
    # From the times, not the busbw columns: imported logs print busbw with two decimals
    # (0.00 at small sizes). Same size, so busbw ratio = time ratio x bus-factor ratio.
    ratio = base["time_us"] / cand["time_us"] if cand["time_us"] else math.nan
    if base["size_bytes"]:
        ratio *= _factor(cand) / _factor(base)
    verdict, p_value = significance(
        base.get("time_us_samples") or [], cand.get("time_us_samples") or [], alpha
    )
    return SizeComparison(
        str(base["collective"]),
        str(base["placement"]),
        int(base["size_bytes"]),
        float(base["busbw_gbps"]),
        float(cand["busbw_gbps"]),
        float(ratio),
        verdict,
        p_value,
    )


def _factor(row: dict[str, Any]) -> float:
    from collbench.core.bandwidth import bus_factor

    try:
        return bus_factor(str(row["collective"]), int(row.get("world_size") or 1))
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
    faster = float(np.median(cand_us)) < float(np.median(base_us))
    return ("faster" if faster else "slower"), p_value


def band_of(size_bytes: int) -> str:
    name = BANDS[0][0]
    for band, start in BANDS:
        if size_bytes >= start:
            name = band
    return name


def band_summaries(sizes: list[SizeComparison]) -> list[BandSummary]:
    """Per collective, placement and size band: the geometric mean ratio and the verdicts."""
    groups: dict[tuple[str, str, str], list[SizeComparison]] = {}
    for item in sizes:
        groups.setdefault((item.collective, item.placement, band_of(item.size_bytes)), []).append(
            item
        )
    order = {name: index for index, (name, _) in enumerate(BANDS)}
    summaries = []
    for (collective, placement, band), items in sorted(
        groups.items(), key=lambda kv: (kv[0][0], kv[0][1], order[kv[0][2]])
    ):
        ratios = [item.ratio for item in items if item.ratio > 0 and math.isfinite(item.ratio)]
        geomean = float(np.exp(np.mean(np.log(ratios)))) if ratios else math.nan
        counts: dict[str, int] = {}
        for item in items:
            counts[item.verdict] = counts.get(item.verdict, 0) + 1
        summaries.append(BandSummary(collective, placement, band, len(items), geomean, counts))
    return summaries


def describe_method(run: RunData) -> dict[str, Any]:
    """What a run's numbers depend on, flattened to comparable fields."""
    meta, rows = run.meta, [row for row in run.rows if row.get("kind", "sweep") == "sweep"]
    spec = meta.get("spec") or {}
    facts: dict[str, Any] = {
        "source": meta.get("source") or "collbench",
        "timing_method": meta.get("timing_method"),
        # nccl-tests averages the ranks' times unless told otherwise (-a 1 is its default)
        "rank_stat": spec.get("rank_stat") or ("avg" if meta.get("source") else None),
        "launcher": meta.get("launcher"),
        "backend": _one(rows, "backend") or meta.get("backend"),
        "hosts": ", ".join(meta.get("hosts") or []) or None,
        "devices": ", ".join(
            sorted(
                {
                    str(rank.get("device_name"))
                    for rank in meta.get("ranks") or []
                    if rank.get("device_name")
                }
            )
        )
        or None,
    }
    for name in ("dtype", "op", "iters", "warmup", "world_size", "nodes", "ranks_per_node"):
        facts[name] = _one(rows, name)
    for name, value in (meta.get("versions") or {}).items():
        if name != "collbench":
            facts[f"versions.{name}"] = value
    for name, value in _knob_env(meta, rows).items():
        facts[f"env.{name}"] = value
    return facts


def _one(rows: list[dict[str, Any]], name: str) -> Any:
    """The value every row has; several values are listed."""
    values = sorted({str(row.get(name)) for row in rows if row.get(name) is not None})
    if not values:
        return None
    if len(values) == 1:
        return next(row.get(name) for row in rows if row.get(name) is not None)
    return ", ".join(values)


def _knob_env(meta: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    knobs = meta.get("knobs") or {}
    if isinstance(knobs, dict) and isinstance(knobs.get("env"), dict):
        return knobs["env"]
    if isinstance(knobs, dict) and knobs:
        return knobs
    for row in rows:
        env = (row.get("knobs") or {}).get("env")
        if isinstance(env, dict):
            return env
    return {}


def differences(baseline: RunData, candidate: RunData) -> list[Difference]:
    """Every field in which the two runs' methods or environments differ."""
    base, cand = describe_method(baseline), describe_method(candidate)
    found = []
    for name in sorted(set(base) | set(cand), key=lambda n: (n not in METHODOLOGY, n)):
        if base.get(name) != cand.get(name):
            kind = "methodology" if name in METHODOLOGY else "environment"
            found.append(Difference(name, base.get(name), cand.get(name), kind))
    return found


def _finite(value: Any) -> Any:
    """JSON has no NaN/inf: such floats become None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value
