"""Segment costs for the regime search (analysis/fit/regimes.py), in time linear in the rows.

The method, in full: docs/fit.md#analysis-fit-segments-py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

# Coarse grid: about sqrt(GRID_FACTOR * sizes) blocks, so the coarse grid and the refined
# windows (2 blocks around each of at most 10 breakpoints) hold about as many candidates.
GRID_FACTOR = 20
MEDIAN_HALF_WINDOW = 2  # neighbours on each side of a point in its running median
REFINE_WINDOW = 3  # sizes a regime start may move either way on the exact robust costs
MAX_REFINE_ROUNDS = 4


@dataclass(frozen=True)
class SearchOptions:
    """How eagerly the search splits a curve into regimes."""

    max_regimes: int = 5
    # Fewest distinct sizes in one regime: 2 parameters need 3 to leave any check, and a
    # protocol band of a factor-2 sweep is often only 3-5 sizes wide.
    min_sizes_per_regime: int = 3
    # Scale of the relative timing noise (run-to-run jitter of a collective is 1-2%):
    # residuals beyond it are discounted by the robust losses, and a split must buy more
    # than noise.
    noise_rel: float = 0.02
    # A point's misfit stops growing at this many noise scales (an outlier's worth).
    cap_sigmas: float = 5.0


@dataclass(frozen=True)
class Points:
    """Measurements sorted by size; `first[k]:first[k + 1]` are the points of size k."""

    sizes_bytes: np.ndarray
    times_us: np.ndarray
    unique_sizes_bytes: np.ndarray
    first: np.ndarray

    @classmethod
    def from_arrays(cls, sizes_bytes: np.ndarray, times_us: np.ndarray) -> Points:
        order = np.lexsort((times_us, sizes_bytes))
        sizes, times = sizes_bytes[order], times_us[order]
        unique, first = np.unique(sizes, return_index=True)
        return cls(sizes, times, unique, np.append(first, len(sizes)))

    def span(self, first_size: int, last_size: int) -> slice:
        """Point indices of distinct sizes first_size..last_size (inclusive)."""
        return slice(int(self.first[first_size]), int(self.first[last_size + 1]))


def nnls_two(sums: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Non-negative least squares of y ~ x1 a + x2 b from its sums, vectorised.

    sums = (a.a, a.b, b.b, a.y, b.y). The optimum of a convex quadratic on the quadrant is
    the unconstrained one if it lies inside, else the better of the two one-column fits
    (each >= 0 here, since a.y and b.y are). Columns are scaled to unit norm first, as
    scipy's nnls is given them, so the 2x2 solve is as well conditioned as it can be.
    """
    saa, sab, sbb, say, sby = sums
    norm_a = np.sqrt(np.where(saa > 0, saa, 1.0))
    norm_b = np.sqrt(np.where(sbb > 0, sbb, 1.0))
    rho = sab / (norm_a * norm_b)
    along_a, along_b = say / norm_a, sby / norm_b
    det = 1 - rho**2
    safe = np.where(det > 0, det, 1.0)
    first = (along_a - rho * along_b) / safe
    second = (along_b - rho * along_a) / safe
    inside = (det > 0) & (first >= 0) & (second >= 0)
    only_a = along_a >= along_b  # the larger gain, along_a^2 or along_b^2 (both >= 0)
    first = np.where(inside, first, np.where(only_a, np.maximum(along_a, 0), 0.0))
    second = np.where(inside, second, np.where(only_a, 0.0, np.maximum(along_b, 0)))
    return first / norm_a, second / norm_b


def _design(sizes: np.ndarray, times: np.ndarray) -> tuple[np.ndarray, ...]:
    """The terms of nnls_two's sums for the relative-error design a = 1/t, b = S/t against
    y = 1, per point: a.a, a.b, b.b, a.y, b.y."""
    inv_t = 1 / times
    return (inv_t**2, sizes * inv_t**2, (sizes * inv_t) ** 2, inv_t, sizes * inv_t)


def capped_loss(residuals: np.ndarray, scale: float, cap_sigmas: float) -> np.ndarray:
    """scipy's soft_l1 loss of residual/scale, capped at its value for cap_sigmas."""
    loss = 2 * (np.sqrt(1 + (residuals / scale) ** 2) - 1)
    return np.minimum(loss, 2 * (math.sqrt(1 + cap_sigmas**2) - 1))


def robust_costs_from(
    points: Points, weights: np.ndarray, options: SearchOptions, start: int, min_sizes: int
) -> np.ndarray:
    """Exact robust cost of sizes start..end for every end (inf where too short or where
    outliers left fewer than two points to place a line)."""
    costs = np.full(len(points.unique_sizes_bytes), np.inf)
    ends = range(start + min_sizes - 1, len(costs))
    if ends:
        costs[ends] = _span_costs(points, weights, options, [(start, end) for end in ends])
    return costs


def _robust_rows(
    points: Points, first: int, base: np.ndarray, options: SearchOptions
) -> np.ndarray:
    """Robust misfit of one line per row of `base` (weights of the points from `first` on):
    three reweighted non-negative least squares solves with cauchy weights (outliers fade
    out), then the capped soft_l1 of ln(t / t_fit) over the weighted points. A cheap
    stand-in for the full robust fit (regimes.robust_line), since the search needs a line
    for every candidate segment."""
    sizes = points.sizes_bytes[first : first + base.shape[1]]
    times = points.times_us[first : first + base.shape[1]]
    row_weights = base
    design = _design(sizes, times)
    for _ in range(3):
        alpha, slope = nnls_two(tuple(row_weights**2 @ column for column in design))
        fitted = np.maximum(alpha[:, None] + slope[:, None] * sizes[None, :], 1e-300)
        residuals = np.log(times[None, :] / fitted)
        row_weights = base / np.sqrt(1 + (residuals / options.noise_rel) ** 2)
    losses = capped_loss(residuals, options.noise_rel, options.cap_sigmas)
    return np.sum(base * losses, axis=1)


def _median_weights(points: Points, weights: np.ndarray, noise_rel: float) -> np.ndarray:
    """Each point's weight, down by its distance (in ln t) from the running median of its
    neighbours: a stand-in for the robust reweighting that block sums cannot redo."""
    log_times = np.log(points.times_us)
    half = MEDIAN_HALF_WINDOW
    padded = np.pad(log_times, half, mode="edge")
    windows = np.lib.stride_tricks.sliding_window_view(padded, 2 * half + 1)
    spread = log_times - np.median(windows, axis=1)
    return weights / (1 + (spread / noise_rel) ** 2)


def _block_costs(
    points: Points, weights_sq: np.ndarray, starts: np.ndarray, min_sizes: int
) -> np.ndarray:
    """cost[a, b]: weighted squared relative misfit of one line over blocks a..b, where
    block a holds distinct sizes starts[a] .. starts[a + 1] - 1 (inf if too short)."""
    count = len(points.unique_sizes_bytes)
    bounds = points.first[starts]
    columns = (*_design(points.sizes_bytes, points.times_us), 1.0)
    # Sums of positive terms from each start on (no differences of prefix sums, which
    # would cancel: 1/t^2 spans twelve orders of magnitude over a sweep).
    blocks = len(starts)
    upper = np.triu(np.ones((blocks, blocks)))
    sums = []
    for column in columns:
        per_block = np.add.reduceat(weights_sq * column, bounds)
        sums.append(np.cumsum(upper * per_block[None, :], axis=1))
    alpha, slope = nnls_two(tuple(sums[:5]))
    saa, sab, sbb, say, sby, syy = sums
    misfit = (
        syy
        - 2 * (alpha * say + slope * sby)
        + alpha**2 * saa
        + 2 * alpha * slope * sab
        + slope**2 * sbb
    )
    ends = np.append(starts[1:], count)
    too_short = ends[None, :] - starts[:, None] < min_sizes
    usable = np.cumsum(upper * np.add.reduceat(weights_sq > 0, bounds)[None, :], axis=1) >= 2
    return np.where(np.triu(~too_short & usable), np.maximum(misfit, 0.0), np.inf)


def best_segmentations(cost: np.ndarray, max_regimes: int) -> dict[int, tuple[float, list[int]]]:
    """For each regime count k: (total cost, start index of each regime) minimizing cost,
    where cost[i, j] is that of one regime over units i..j (exact dynamic programming)."""
    count = cost.shape[0]
    # total[k][j]: best cost of units 0..j in k+1 regimes; start[k][j]: where the last begins
    total = np.full((max_regimes, count), np.inf)
    start = np.zeros((max_regimes, count), dtype=int)
    total[0] = cost[0]
    for k in range(1, max_regimes):
        for end in range(count):
            candidates = total[k - 1, :end] + cost[1 : end + 1, end]
            if len(candidates) and np.isfinite(candidates.min()):
                best = int(np.argmin(candidates))  # first minimum: deterministic ties
                total[k, end], start[k, end] = candidates[best], best + 1
    found = {}
    for k in range(max_regimes):
        if not np.isfinite(total[k, -1]):
            continue
        starts, end = [], count - 1
        for level in range(k, 0, -1):
            starts.append(int(start[level, end]))
            end = starts[-1] - 1
        found[k + 1] = (float(total[k, -1]), [0, *reversed(starts)])
    return found


def candidate_search(
    points: Points, weights: np.ndarray, options: SearchOptions, min_sizes: int, max_regimes: int
) -> dict[int, tuple[float, list[int]]]:
    """`best_segmentations` for a long sweep, over candidate starts (module docstring):
    for each regime count, (exact robust cost of its segments, start of each regime)."""
    count = len(points.unique_sizes_bytes)
    weights_sq = _median_weights(points, weights, options.noise_rel) ** 2
    step = max(1, math.ceil(count / math.ceil(math.sqrt(GRID_FACTOR * count))))
    grid = np.arange(0, count, step)
    coarse = _search(points, weights_sq, grid, min_sizes, max_regimes)
    near = [
        np.arange(max(0, start - step), min(count, start + step + 1))
        for _, starts in coarse.values()
        for start in starts[1:]
    ]
    refined = _search(
        points, weights_sq, np.unique(np.concatenate([grid, *near])), min_sizes, max_regimes
    )
    found = {}
    for regimes, (_, starts) in refined.items():
        found[regimes] = _refine(points, weights, options, starts, min_sizes)
    return {k: value for k, value in found.items() if math.isfinite(value[0])}


def _refine(
    points: Points, weights: np.ndarray, options: SearchOptions, starts: list[int], min_sizes: int
) -> tuple[float, list[int]]:
    """Move each regime start within REFINE_WINDOW sizes to where the exact robust costs of
    the two regimes beside it are lowest (the least-squares search placed it), until none
    moves: (total robust cost, starts)."""
    count = len(points.unique_sizes_bytes)
    bounds = [*starts, count]
    for _ in range(MAX_REFINE_ROUNDS):
        moved = False
        for index in range(1, len(bounds) - 1):
            low, high = bounds[index - 1] + min_sizes, bounds[index + 1] - min_sizes
            choices = np.arange(
                max(low, bounds[index] - REFINE_WINDOW),
                min(high, bounds[index] + REFINE_WINDOW) + 1,
            )
            if len(choices) < 2:
                continue
            left = _span_costs(
                points, weights, options, [(bounds[index - 1], c - 1) for c in choices]
            )
            right = _span_costs(
                points, weights, options, [(c, bounds[index + 1] - 1) for c in choices]
            )
            best = int(choices[int(np.argmin(left + right))])
            moved |= best != bounds[index]
            bounds[index] = best
        if not moved:
            break
    spans = [(start, end - 1) for start, end in pairwise(bounds)]
    return float(np.sum(_span_costs(points, weights, options, spans))), bounds[:-1]


def _span_costs(
    points: Points, weights: np.ndarray, options: SearchOptions, spans: list[tuple[int, int]]
) -> np.ndarray:
    """Exact robust cost of each span (first, last distinct size), inf if it cannot be fit."""
    first = int(points.first[min(start for start, _ in spans)])
    stop = int(points.first[max(end for _, end in spans) + 1])
    index = np.arange(first, stop)[None, :]
    lows = points.first[[start for start, _ in spans]][:, None]
    highs = points.first[[end + 1 for _, end in spans]][:, None]
    base = ((index >= lows) & (index < highs)) * weights[first:stop][None, :].astype(float)
    costs = np.full(len(spans), np.inf)
    usable = base.sum(axis=1) >= 2
    costs[usable] = _robust_rows(points, first, base[usable], options)
    return costs


def _search(
    points: Points, weights_sq: np.ndarray, starts: np.ndarray, min_sizes: int, max_regimes: int
) -> dict[int, tuple[float, list[int]]]:
    """best_segmentations over blocks that begin at `starts`, mapped back to size indices."""
    found = best_segmentations(_block_costs(points, weights_sq, starts, min_sizes), max_regimes)
    return {k: (cost, [int(starts[b]) for b in blocks]) for k, (cost, blocks) in found.items()}
