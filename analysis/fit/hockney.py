"""Robust piecewise alpha-beta (Hockney) fits of a size sweep: t(S) = alpha + S / B.

The method, in full: docs/fit.md#analysis-fit-hockney-py.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from itertools import pairwise
from typing import Any

import numpy as np

from collbench.analysis.fit.quality import (
    CurveFit,
    Outlier,
    Regime,
    busbw_gbps,
    clock_resolution_us,
    goodness,
)
from collbench.analysis.fit.regimes import (
    Points,
    SearchOptions,
    choose_regimes,
    half_widths,
    noise_readings,
    robust_line,
)
from collbench.core.bandwidth import bus_factor
from collbench.store.rows import SWEEP, ResultRow, median_over_repeats, row_is

# op: a sweep of several reductions (`-o all`) times each apart; one curve per reduction
GROUP_KEYS = ("collective", "backend", "world_size", "topology", "placement", "dtype", "op")
# Measured noise beyond this multiple of SearchOptions.noise_rel redoes the regime search at
# it; closer to it, the assumed scale stands (and the search is not paid twice).
NOISIER = 2.0
MAX_NOISE_ROUNDS = 4  # searches at a measured noise (they agree after one or two)


@dataclass(frozen=True)
class FitOptions:
    """Knobs of the fit; the defaults suit nccl-tests-like sweeps (factor-2 sizes)."""

    search: SearchOptions = field(default_factory=SearchOptions)
    # A point is an outlier when |ln(t / t_fit)| exceeds both of these.
    outlier_sigmas: float = 5.0
    outlier_min_rel: float = 0.05
    # The finest time step the data can show; None: read off the times (fit_quality.py).
    clock_resolution_us: float | None = None


@np.errstate(over="ignore", invalid="ignore", divide="ignore")  # absurd times: a poor fit
def fit_curve(
    sizes_bytes: Sequence[float],
    times_us: Sequence[float],
    bus_factor: float,
    options: FitOptions = FitOptions(),
) -> CurveFit:
    """Fit t(S) = alpha + S/B piecewise and robustly. Sizes <= 0 and times <= 0 are dropped.

    Raises ValueError when fewer than two distinct sizes remain or bus_factor is not > 0.
    """
    if not bus_factor > 0:
        raise ValueError(f"bus_factor {bus_factor} is not positive (busbw is 0 on one rank)")
    sizes, times = np.asarray(sizes_bytes, float), np.asarray(times_us, float)
    keep = np.isfinite(sizes) & np.isfinite(times) & (sizes > 0) & (times > 0)
    points = Points.from_arrays(sizes[keep], times[keep])
    if len(points.unique_sizes_bytes) < 2:
        raise ValueError("a fit needs at least two distinct positive sizes with a time")
    if options.clock_resolution_us is None:
        options = replace(options, clock_resolution_us=clock_resolution_us(points.times_us))
    everything = np.ones(len(points.sizes_bytes), dtype=bool)
    options, spans = _regimes_at_measured_noise(points, bus_factor, options)
    regimes = [_fit_regime(points, span, everything, bus_factor, options) for span in spans]
    residuals = _residuals(points, regimes, bus_factor)
    limits = _outlier_limits(points, spans, residuals, options)
    # The loss caps an outlier's pull, but one at a regime's end can still tilt the line.
    suspects = np.abs(residuals) > limits
    regimes = [_fit_regime(points, span, ~suspects, bus_factor, options) for span in spans]
    residuals = _residuals(points, regimes, bus_factor)
    return _assemble(points, regimes, bus_factor, residuals, np.abs(residuals) > limits, options)


def _regimes_at_measured_noise(
    points: Points, bus_factor: float, options: FitOptions
) -> tuple[FitOptions, list[tuple[int, int]]]:
    """Regimes chosen at the assumed noise, or, when the data are clearly noisier (the low
    reading of `_noise` over NOISIER times the assumed), at the noise their own regimes
    leave: searched again at the scale reading until the choice stops changing."""
    weights = np.ones(len(points.sizes_bytes))
    spans = choose_regimes(points, weights, options.search)
    floor = options.search.noise_rel
    if not _noise(points, spans, bus_factor, options)[0] > NOISIER * floor:
        return options, spans
    for _ in range(MAX_NOISE_ROUNDS):
        noise = max(_noise(points, spans, bus_factor, options)[1], floor)
        options = replace(options, search=replace(options.search, noise_rel=noise))
        chosen = choose_regimes(points, weights, options.search)
        if chosen == spans:
            break
        spans = chosen
    return options, spans


def _noise(
    points: Points, spans: list[tuple[int, int]], bus_factor: float, options: FitOptions
) -> tuple[float, float]:
    """`regimes.noise_readings` of the residuals around these regimes' robust lines."""
    everything = np.ones(len(points.sizes_bytes), dtype=bool)
    regimes = [_fit_regime(points, span, everything, bus_factor, options) for span in spans]
    return noise_readings(_residuals(points, regimes, bus_factor), 3 * len(spans) - 1)


def _fit_regime(
    points: Points, span: tuple[int, int], keep: np.ndarray, bus_factor: float, options: FitOptions
) -> Regime:
    """Robust fit of one regime over its `keep` points (over all if too few are kept)."""
    whole = points.span(*span)
    index = np.arange(whole.start, whole.stop)
    kept = index[keep[index]]
    if len(np.unique(points.sizes_bytes[kept])) >= 3 and 2 * len(kept) >= len(index):
        index = kept
    result = robust_line(
        points.sizes_bytes[index], points.times_us[index], options.search.noise_rel
    )
    alpha_us, log_slope = (float(value) for value in result.x)
    alpha_half, slope_half = (float(value) for value in half_widths(result, len(index)))

    def to_busbw(log_us_per_byte: float) -> float:
        return bus_factor / (math.exp(log_us_per_byte) * 1e3)

    busbw_ci = (
        (to_busbw(log_slope + slope_half), to_busbw(log_slope - slope_half))
        if slope_half < 50
        else (0.0, math.inf)
    )  # 50: e^50, nothing pinned down
    return Regime(
        min_bytes=int(points.unique_sizes_bytes[span[0]]),
        max_bytes=int(points.unique_sizes_bytes[span[1]]),
        alpha_us=alpha_us,
        busbw_gbps=to_busbw(log_slope),
        alpha_us_ci=(max(0.0, alpha_us - alpha_half), alpha_us + alpha_half),
        busbw_gbps_ci=busbw_ci,
        n_points=whole.stop - whole.start,
    )


def _residuals(points: Points, regimes: list[Regime], bus_factor: float) -> np.ndarray:
    """ln(t_measured / t_fit) for every point, each judged by its own regime."""
    fitted = np.empty(len(points.sizes_bytes))
    for regime in regimes:
        inside = (points.sizes_bytes >= regime.min_bytes) & (points.sizes_bytes <= regime.max_bytes)
        fitted[inside] = regime.time_us(points.sizes_bytes[inside], bus_factor)
    return np.log(points.times_us / fitted)


def _outlier_limits(
    points: Points, spans: list[tuple[int, int]], residuals: np.ndarray, options: FitOptions
) -> np.ndarray:
    """Per point: how far |ln(t / t_fit)| may go before the point counts as an outlier.

    The noise scale is the larger of the whole curve's and the point's own regime's robust
    spread (MAD), so a regime that is noisy throughout has no outliers, only noise.
    """
    curve_spread = 1.4826 * float(np.median(np.abs(residuals)))
    limits = np.empty(len(residuals))
    for first, last in spans:
        inside = points.span(first, last)
        spread = max(curve_spread, 1.4826 * float(np.median(np.abs(residuals[inside]))))
        limits[inside] = max(options.outlier_sigmas * spread, options.outlier_min_rel)
    return limits


def _assemble(
    points: Points,
    regimes: list[Regime],
    bus_factor: float,
    residuals: np.ndarray,
    outliers: np.ndarray,
    options: FitOptions,
) -> CurveFit:
    breakpoints = tuple(  # the geometric middle of the gap between two regimes' sizes
        max(before.max_bytes + 1, math.ceil(math.sqrt(before.max_bytes * after.min_bytes)))
        for before, after in pairwise(regimes)
    )
    kept = ~outliers
    r2_kept, rmse_kept = goodness(points.times_us[kept], residuals[kept])
    r2_all, rmse_all = goodness(points.times_us, residuals)
    measured = points.sizes_bytes * bus_factor / (points.times_us * 1e3)
    flagged = tuple(
        Outlier(
            int(size),
            float(time_us),
            busbw_gbps(size, time_us, bus_factor),
            busbw_gbps(size, time_us / math.exp(residual), bus_factor),
        )
        for size, time_us, residual in zip(
            points.sizes_bytes[outliers],
            points.times_us[outliers],
            residuals[outliers],
            strict=True,
        )
    )
    fit = CurveFit(
        bus_factor=bus_factor,
        regimes=tuple(regimes),
        breakpoints=breakpoints,
        n_half_bytes=0,
        r2_log_time=r2_kept,
        rmse_log_time=rmse_kept,
        n_points=len(points.sizes_bytes),
        outliers=flagged,
        r2_log_time_all=r2_all,
        rmse_log_time_all=rmse_all,
        busbw_measured_max_gbps=float(measured.max()),
        busbw_measured_max_bytes=int(points.sizes_bytes[int(np.argmax(measured))]),
        clock_resolution_us=float(options.clock_resolution_us or 0.0),
        noise_rel=options.search.noise_rel,
    )
    return replace(fit, n_half_bytes=n_half_bytes(fit))


def n_half_bytes(fit: CurveFit) -> int:
    """Smallest size whose fitted busbw reaches half of busbw_peak_gbps.

    One regime t = alpha + S/B gives alpha * B, i.e. alpha_us * busbw_gbps * 1e3 / factor.
    """
    half_busbw = fit.busbw_peak_gbps / 2
    lows, highs = (0, *fit.breakpoints), (*fit.breakpoints, math.inf)
    for regime, low, high in zip(fit.regimes, lows, highs, strict=True):
        if regime.busbw_gbps <= half_busbw:
            continue  # busbw(S) stays below this regime's asymptote, so below half the peak
        # factor * S / t(S) >= h  <=>  S >= alpha * h * B / (B - h), in bytes per us units
        alpha_scaled = regime.alpha_us * 1e3 / fit.bus_factor
        size = alpha_scaled * half_busbw * regime.busbw_gbps / (regime.busbw_gbps - half_busbw)
        if max(size, low) < high:
            return math.ceil(max(size, low))
    raise AssertionError("unreachable: the last regime's asymptote is the peak")


@dataclass(frozen=True)
class GroupFit:
    """The fit of one group of rows (same collective, backend, world size, ..., knobs).

    knobs_digest is the knob set's machine key (fit --json); people read `knobs` by name."""

    key: dict[str, Any]
    knobs_digest: str
    runs: tuple[str, ...]
    n_points: int
    curve: CurveFit | None
    skipped: str | None = None
    knobs: dict[str, Any] = field(default_factory=dict)  # the rows' knobs (env and settings)

    def to_dict(self) -> dict[str, Any]:
        head = {
            **self.key,
            "knobs_digest": self.knobs_digest,
            "n_points": self.n_points,
            "runs": list(self.runs),
        }
        if self.curve is None:
            return {**head, "skipped": self.skipped}
        return {**head, **self.curve.to_dict()}


def knobs_digest(knobs: Any) -> str:
    """Short stable id of a knob set (sha256 of its sorted JSON)."""
    text = json.dumps(knobs, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def group_rows(rows: Iterable[ResultRow]) -> dict[tuple, list[ResultRow]]:
    """Sweep rows by (collective, backend, world_size, topology, placement, dtype, knobs)."""
    groups: dict[tuple, list[ResultRow]] = {}
    digests: dict[str, str] = {}  # repr of a knob set -> its digest: one sha256 per knob set
    for row in rows:
        if not row_is(row, SWEEP):
            continue
        shown = repr(row.knobs)
        if shown not in digests:
            digests[shown] = knobs_digest(row.knobs)
        key = (*(getattr(row, column) for column in GROUP_KEYS), digests[shown])
        groups.setdefault(key, []).append(row)
    return dict(
        sorted(groups.items(), key=lambda item: tuple("" if v is None else str(v) for v in item[0]))
    )


def fit_rows(rows: Iterable[ResultRow]) -> list[GroupFit]:
    """Fit every group of sweep rows; rows of several runs in one group are pooled.

    A run measured with --repeats gives one point per size: the median time over its
    repeats (store.rows.median_over_repeats), so repeats steady a point instead of
    counting as independent points that would narrow the intervals. A group that cannot
    be fitted (one size, one rank, unknown collective) comes back with `curve=None` and
    the reason in `skipped`.
    """
    fits = []
    for key, grouped in group_rows(rows).items():
        members = median_over_repeats(grouped)
        group = GroupFit(
            key=dict(zip(GROUP_KEYS, key[:-1], strict=True)),
            knobs_digest=key[-1],
            runs=tuple(sorted({str(row.run_id) for row in members})),
            n_points=sum((row.size_bytes or 0) > 0 for row in members),
            curve=None,
            knobs=dict(members[0].knobs or {}),
        )
        try:
            factor = bus_factor(str(group.key["collective"]), int(group.key["world_size"]))
            curve = fit_curve(
                [row.size_bytes or 0 for row in members],
                [row.time_us or 0 for row in members],
                factor,
            )
        except KeyError:
            fits.append(replace(group, skipped=f"unknown collective {key[0]!r}"))
        except (TypeError, ValueError) as error:
            fits.append(replace(group, skipped=str(error)))
        else:
            fits.append(replace(group, curve=curve))
    return fits
