"""The regime search's segment costs (analysis/fit/segments.py): the vectorised exact costs
equal a line-by-line scipy nnls reference, and the candidate search of a long sweep finds
the real breakpoints through noise and a spike."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import nnls

from collbench.analysis.fit.regimes import (
    MAX_EXACT_SIZES,
    Points,
    SearchOptions,
    choose_regimes,
    segment_costs,
)
from collbench.analysis.fit.segments import capped_loss, nnls_two

ROOT = Path(__file__).resolve().parents[4]


def reference_cost(sizes, times, weights, options: SearchOptions) -> float:
    """The search's robust line cost written the slow way: scipy nnls per reweighting."""
    row_weights = weights.astype(float)
    for _ in range(3):
        design = np.column_stack((row_weights / times, row_weights * sizes / times))
        norms = np.linalg.norm(design, axis=0)
        norms[norms == 0] = 1.0
        coef, _ = nnls(design / norms, row_weights)
        alpha, slope = coef / norms
        residuals = np.log(times / np.maximum(alpha + slope * sizes, 1e-300))
        row_weights = weights / np.sqrt(1 + (residuals / options.noise_rel) ** 2)
    return float(np.sum(weights * capped_loss(residuals, options.noise_rel, options.cap_sigmas)))


def three_protocols(sizes: np.ndarray) -> np.ndarray:
    """Crossovers at 21,000 B and about 154,286 B."""
    return np.minimum(np.minimum(5 + sizes / 2e3, 12 + sizes / 6e3), 30 + sizes / 2e4)


@pytest.mark.parametrize("seed", range(6))
def test_vectorised_costs_equal_the_nnls_reference(seed):
    rng = np.random.default_rng(seed)
    sizes = np.repeat(np.unique(np.round(np.geomspace(8, 1 << 30, 14))), 1 + seed % 2)
    times = three_protocols(sizes) * np.exp(rng.normal(0, 0.03 * (1 + seed), len(sizes)))
    times[rng.integers(len(sizes))] *= 3  # a spike
    points = Points.from_arrays(sizes, times)
    weights = np.ones(len(sizes))
    weights[rng.integers(len(sizes))] = 0  # a flagged outlier
    options = SearchOptions()
    costs = segment_costs(points, weights, options, 3)
    count = len(points.unique_sizes_bytes)
    for start in range(count):
        for end in range(count):
            span = points.span(start, end)
            if end - start < 2 or weights[span].sum() < 2:
                assert costs[start, end] == math.inf
                continue
            expected = reference_cost(
                points.sizes_bytes[span], points.times_us[span], weights[span], options
            )
            assert costs[start, end] == pytest.approx(expected, rel=1e-7, abs=1e-9)


def test_two_column_nnls_matches_scipy_inside_and_on_the_boundary():
    rng = np.random.default_rng(3)
    boundary = 0
    for _ in range(300):
        design = np.abs(rng.normal(size=(6, 2))) * rng.uniform(0.1, 10, size=2)
        target = rng.normal(size=6) + rng.uniform(0, 2)
        if (design.T @ target <= 0).any():
            continue  # the search's sums a.y and b.y are always positive
        expected, _ = nnls(design, target)
        sums = tuple(
            np.array([value])
            for value in (
                design[:, 0] @ design[:, 0],
                design[:, 0] @ design[:, 1],
                design[:, 1] @ design[:, 1],
                design[:, 0] @ target,
                design[:, 1] @ target,
            )
        )
        first, second = nnls_two(sums)
        boundary += int((expected == 0).any())
        assert [first[0], second[0]] == pytest.approx(expected, rel=1e-9, abs=1e-12)
    assert boundary > 20  # the constrained case was exercised


def test_a_long_sweep_is_searched_over_candidates_and_finds_the_crossovers():
    rng = np.random.default_rng(1)
    sizes = np.arange(1, 3_001) * 256.0  # an -i 256 sweep: 3,000 sizes
    times = three_protocols(sizes) * np.exp(rng.normal(0, 0.02, len(sizes)))
    times[1_234] *= 4  # a spike cannot buy a regime
    assert len(sizes) > MAX_EXACT_SIZES
    points = Points.from_arrays(sizes, times)
    spans = choose_regimes(points, np.ones(len(sizes)), SearchOptions())
    assert len(spans) == 3
    starts = [points.unique_sizes_bytes[first] for first, _ in spans[1:]]
    # within 10% of each crossover: there the two lines differ by less than the 2% noise
    assert starts[0] == pytest.approx(21_000, rel=0.1)
    assert starts[1] == pytest.approx(154_286, rel=0.1)


@pytest.mark.slow
def test_the_scale_benchmark_runs_quick():
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "scale.py"), "--quick", "--only", "fit"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert "| `fit RUN` | 99 / 999 rows |" in done.stdout
