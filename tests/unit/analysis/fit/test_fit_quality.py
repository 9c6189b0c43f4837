"""Fit quality (issue 17): a fit must say when it explains its data badly, prefer fewer
regimes on noisy data, never print a latency finer than the clock, flag a peak busbw the
sweep never reached, and give r2/rms on all points as well as on the kept ones."""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import pytest

from collbench.analysis.fit.hockney import fit_curve
from collbench.analysis.fit.quality import CLOCK_FLOOR_US, clock_resolution_us
from collbench.render.fit import alpha_text, quality_text

CPU_SIZES = 2.0 ** np.arange(3, 25)  # 8 B .. 16 MiB: gloo's default sweep, 22 sizes
CPU_FACTOR = 1.0  # all-reduce on 2 ranks


def cpu_like(seed: int, alpha_us: float = 400.0, busbw_gbps: float = 0.5, noise: float = 0.5):
    """One alpha-beta line under the log-normal timing noise of a loaded CPU box."""
    rng = np.random.default_rng(seed)
    clean = alpha_us + CPU_SIZES * CPU_FACTOR / (busbw_gbps * 1e3)
    return clean * np.exp(noise * rng.standard_normal(len(CPU_SIZES)))


# -- fewer regimes on noisy data, and a poor verdict ---------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_noisy_cpu_data_gets_few_regimes_and_a_poor_verdict(seed):
    # before: 4-5 regimes from these 22 points (each regime's line threads noisy points)
    fit = fit_curve(CPU_SIZES, cpu_like(seed), CPU_FACTOR)
    assert len(fit.regimes) <= 2, [(r.min_bytes, r.max_bytes) for r in fit.regimes]
    assert fit.noise_rel > 0.2  # the search ran at the noise it measured, not at 2%
    quality = fit.quality
    assert quality.verdict == "poor"
    assert any(
        note.startswith("rms error") and "on all 22 points" in note for note in quality.notes
    )
    assert quality_text(fit).startswith("fit quality poor: rms error")
    data = json.loads(json.dumps(fit.to_dict(), allow_nan=False))
    assert data["quality"]["verdict"] == "poor" and data["quality"]["notes"] == list(quality.notes)


def test_a_clean_curve_is_good_with_no_notes():
    sizes = 2.0 ** np.arange(3, 34)
    rng = np.random.default_rng(0)
    times = (25.0 + sizes * 1.75 / 200e3) * np.exp(0.005 * rng.standard_normal(len(sizes)))
    fit = fit_curve(sizes, times, 1.75)
    assert fit.quality.verdict == "good" and fit.quality.notes == ()
    assert fit.noise_rel == pytest.approx(0.02)  # clean data keep the assumed noise
    assert quality_text(fit) == "fit quality good"


def test_noisy_fits_raise_no_overflow_warning():
    # before: `RuntimeWarning: overflow encountered in exp` from the robust line's e^q
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for seed in range(6):
            fit_curve(CPU_SIZES, cpu_like(seed), CPU_FACTOR)


# -- the clock's resolution ------------------------------------------------------------------


@pytest.mark.parametrize(
    "times, resolution",
    [
        ([12.31, 35.2, 1234.5, 90000.0], 0.01),  # nccl-tests: 2 decimals below 100 us
        ([135.8, 123.2, 20000.0], 0.1),  # every time >= 100 us: 1 decimal
        ([472.0082501989964, 1888.6345005739713], CLOCK_FLOOR_US),  # collbench's floats
    ],
)
def test_the_clock_resolution_is_read_off_the_times(times, resolution):
    assert clock_resolution_us(times) == pytest.approx(resolution)


def _bandwidth_only(decimals: int | None):
    """A pure bandwidth curve (alpha 0) with 2% noise: the fitted alpha lands near 0."""
    sizes = 2.0 ** np.arange(10, 31)
    rng = np.random.default_rng(3)
    times = sizes / 50e3 * np.exp(0.02 * rng.standard_normal(len(sizes)))
    if decimals is not None:
        times = np.round(times, decimals)
    return fit_curve(sizes, times, 1.0)


@pytest.mark.parametrize("decimals, shown", [(2, "< 0.01 us"), (None, "< 0.001 us")])
def test_a_latency_below_the_clock_is_never_a_number(decimals, shown):
    fit = _bandwidth_only(decimals)
    assert fit.alpha_us < fit.clock_resolution_us and not fit.alpha_resolved(0)
    text = alpha_text(fit)
    assert text.startswith(f"{shown} (below the clock's resolution)")
    assert not re.search(r"\de-\d", text)  # before: 'alpha 3.050e-13 us [0, 2944]'
    assert alpha_text(fit, ci=False) == f"{shown} (below the clock's resolution)"
    assert fit.quality.verdict != "good"
    assert any("below the clock's resolution" in note for note in fit.quality.notes)
    assert fit.to_dict()["quality"]["alpha_resolved"] is False


def test_a_resolved_latency_shows_its_interval():
    sizes = 2.0 ** np.arange(3, 34)
    fit = fit_curve(sizes, np.round(25.0 + sizes * 1.75 / 200e3, 2), 1.75)
    low, high = fit.alpha_us_ci
    assert fit.clock_resolution_us == pytest.approx(0.01)
    assert alpha_text(fit).startswith("25 us [") and alpha_text(fit, ci=False) == "25 us"


# -- a peak busbw above anything measured ----------------------------------------------------


def test_a_peak_above_everything_measured_is_flagged_with_its_interval():
    # the sweep stops at half the asymptote: t = 20 ms + S / 0.78 GB/s up to 16 MiB
    rng = np.random.default_rng(1)
    times = (20000.0 + CPU_SIZES / 0.78e3) * np.exp(0.01 * rng.standard_normal(len(CPU_SIZES)))
    fit = fit_curve(CPU_SIZES, times, CPU_FACTOR)
    measured_max = max(CPU_SIZES / (times * 1e3))
    assert fit.busbw_measured_max_gbps == pytest.approx(measured_max)
    assert fit.busbw_peak_gbps > 1.5 * measured_max
    quality = fit.quality
    assert quality.peak_above_measured and quality.verdict in ("fair", "poor")
    (note,) = [note for note in quality.notes if "above the highest measured" in note]
    low, high = fit.busbw_peak_gbps_ci
    assert f"[{low:.4g}, " in note and "GB/s" in note and "never reached" in note
    assert fit.to_dict()["quality"]["peak_above_measured"] is True


def test_a_peak_the_sweep_reached_is_not_flagged():
    sizes = 2.0 ** np.arange(3, 34)
    fit = fit_curve(sizes, 25.0 + sizes * 1.75 / 200e3, 1.75)
    assert not fit.quality.peak_above_measured


# -- outliers: quality on all points as well as on the kept ones ----------------------------


def test_dropping_outliers_reports_the_fit_on_all_points_too():
    sizes = 2.0 ** np.arange(18, 28)  # 10 points, 3 of them far off
    times = 40.0 + sizes * 1.75 / 180e3
    times[[2, 4, 6]] *= [1.6, 0.55, 1.8]
    fit = fit_curve(sizes, times, 1.75)
    assert len(fit.outliers) == 3 and fit.n_points == 10
    assert fit.r2_log_time > 0.9999  # on the 7 kept points: what was printed alone before
    assert fit.r2_log_time_all < 0.99 and fit.rmse_log_time_all > 10 * fit.rmse_log_time
    data = fit.to_dict()
    assert data["r2_log_time_all"] < data["r2_log_time"]
    assert data["quality"]["n_points_all"] == 10 and data["quality"]["n_points_kept"] == 7
    (note,) = [note for note in fit.quality.notes if "dropped as outliers" in note]
    assert note.startswith("3 of 10 points dropped as outliers: on all 10 r2 ")
    assert "on the 7 kept r2" in note
    assert fit.quality.verdict != "good"
