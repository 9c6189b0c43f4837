"""Regime detection: where a size sweep stops being one alpha-beta line.

The method, in full: docs/fit.md#analysis-fit-regimes-py.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.optimize import least_squares, nnls
from scipy.stats import norm
from scipy.stats import t as student_t

from collbench.analysis.fit.segments import (
    Points,
    SearchOptions,
    best_segmentations,
    candidate_search,
    robust_costs_from,
)

# ln(us per byte) >= this: a latency-bound regime (flat time) gets a huge but finite busbw.
MIN_LOG_US_PER_BYTE = math.log(1e-12)
# Up to this many distinct sizes the search weighs every segmentation (cubic in the sizes,
# 0.1 s at 128); longer sweeps search candidate starts (analysis/fit/segments.py).
MAX_EXACT_SIZES = 128


def linear_fit_rel(
    sizes_bytes: np.ndarray, times_us: np.ndarray, weights: np.ndarray
) -> tuple[float, float, float]:
    """(alpha_us, us_per_byte, weighted sum of squared relative errors), both >= 0."""
    design = np.column_stack((weights / times_us, weights * sizes_bytes / times_us))
    norms = np.linalg.norm(design, axis=0)
    norms[norms == 0] = 1.0  # an all-outlier column: any scale works, nnls returns 0
    coef, residual_norm = nnls(design / norms, weights.astype(float))
    alpha_us, us_per_byte = coef / norms
    return float(alpha_us), float(us_per_byte), float(residual_norm) ** 2


def segment_costs(
    points: Points, weights: np.ndarray, options: SearchOptions, min_sizes: int
) -> np.ndarray:
    """cost[i, j]: robust misfit of one line over distinct sizes i..j (inf if too short)."""
    count = len(points.unique_sizes_bytes)
    return np.array(
        [robust_costs_from(points, weights, options, start, min_sizes) for start in range(count)]
    ).reshape(count, count)


def choose_regimes(
    points: Points, weights: np.ndarray, options: SearchOptions
) -> list[tuple[int, int]]:
    """Regimes as (first, last) distinct-size index pairs, chosen by the criterion.

    `weights` is 1 for a point to fit and 0 for a flagged outlier (ignored by the cost).
    """
    count = len(points.unique_sizes_bytes)
    min_sizes = min(options.min_sizes_per_regime, count)
    max_regimes = max(1, min(options.max_regimes, count // min_sizes))
    if count <= MAX_EXACT_SIZES:
        found = best_segmentations(segment_costs(points, weights, options, min_sizes), max_regimes)
    else:
        found = candidate_search(points, weights, options, min_sizes, max_regimes)
    if not found:  # too few usable points for the minimum: one line over everything
        return [(0, count - 1)]
    # BIC, the robust misfit standing in for -2 log-likelihood (it is chi-square for small
    # residuals); a regime costs alpha, B and where it starts (the first starts at the
    # smallest size): 3 k - 1 parameters.
    log_points = math.log(max(int(weights.sum()), 2))
    scores = {k: cost + (3 * k - 1) * log_points for k, (cost, _) in found.items()}
    regimes = min(scores, key=lambda k: (scores[k], k))
    starts = found[regimes][1]
    ends = [s - 1 for s in starts[1:]] + [count - 1]
    return list(zip(starts, ends, strict=True))


def noise_readings(residuals: np.ndarray, n_parameters: int) -> tuple[float, float]:
    """Two readings of the timing noise (of ln t) in a fit's residuals: (low, scale).

    low, to decide whether the data are noisier than assumed: a line through a noisy band
    passes through about two of its points exactly, so the smallest |residuals|, as many as
    the fit has parameters, are left out, and the median of the rest is read as the
    quantile it would be of all residuals of a least-squares fit (so clean data are never
    taken for noisy ones). scale, to search at: the rms of the residuals, each capped at 3
    times low (a spike counts as noise, not as its size), per degree of freedom.
    """
    misfits = np.sort(np.abs(residuals))
    count = len(misfits)
    if count <= n_parameters:
        return 0.0, 0.0
    quantile = (count + n_parameters) / (2 * count)  # of |residual|, half-normal
    low = float(np.median(misfits[n_parameters:])) / float(norm.ppf((1 + quantile) / 2))
    capped = np.minimum(misfits, 3 * low)
    return low, math.sqrt(float(np.sum(capped**2)) / (count - n_parameters))


def robust_line(sizes: np.ndarray, times: np.ndarray, noise_rel: float) -> Any:
    """least_squares of ln(alpha + S e^q) - ln(t), soft_l1 loss; x = (alpha_us >= 0, q)."""
    alpha0, slope0, _ = linear_fit_rel(sizes, times, np.ones(len(sizes)))
    slope0 = max(slope0, float(np.min(times / sizes)) * 1e-3, 1e-11)
    start = np.array([max(alpha0, 1e-9), math.log(slope0)])

    log_sizes, log_times = np.log(sizes), np.log(times)

    # ln(alpha + S e^q) as logaddexp(ln alpha, ln S + q): a trial step to a large q would
    # overflow e^q (inf, and a RuntimeWarning) where ln S + q itself stays finite.
    def log_model(params: np.ndarray) -> np.ndarray:
        log_alpha = math.log(params[0]) if params[0] > 0 else -math.inf
        return np.logaddexp(log_alpha, log_sizes + params[1])

    def residuals(params: np.ndarray) -> np.ndarray:
        return log_model(params) - log_times

    def jacobian(params: np.ndarray) -> np.ndarray:
        log_fitted = log_model(params)  # >= ln(1e-12) + ln S: the exps stay finite
        return np.column_stack((np.exp(-log_fitted), np.exp(log_sizes + params[1] - log_fitted)))

    return least_squares(
        residuals,
        start,
        jac=jacobian,
        bounds=([0, MIN_LOG_US_PER_BYTE], np.inf),
        loss="soft_l1",
        f_scale=noise_rel,
        x_scale="jac",
        method="trf",
    )


def half_widths(result: Any, n_points: int) -> np.ndarray:
    """95% half-widths of the parameters (inf when the points cannot pin them down)."""
    dof = n_points - len(result.x)
    if dof <= 0:
        return np.full(len(result.x), np.inf)
    covariance = np.linalg.pinv(result.jac.T @ result.jac) * (2 * result.cost / dof)
    spread = np.sqrt(np.clip(np.diag(covariance), 0, None))
    return spread * float(student_t.ppf(0.975, dof))
