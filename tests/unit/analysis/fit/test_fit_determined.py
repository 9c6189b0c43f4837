"""A fit whose figures the sweep cannot determine is poor and never prints them (issue 30):
an unbounded interval, a negative r2, too few points for the parameters, a peak busbw over
2x the highest measured one (busbw still rising at the largest size) or a latency-bound
last regime. The rules: analysis/fit/quality.py's docstring."""

from __future__ import annotations

import json

import numpy as np
import pytest

from collbench.analysis.fit.hockney import fit_curve
from collbench.analysis.fit.quality import PEAK_DETERMINED_FACTOR
from collbench.render.fit import alpha_text, predictions, render_group

FOUR = [1 << 10, 1 << 12, 1 << 14, 1 << 16]  # 1 KiB .. 64 KiB: a tune setting's 4 sizes


def _strict(fit):
    """fit.to_dict() through strict JSON (no NaN, no Infinity)."""
    return json.loads(json.dumps(fit.to_dict(), allow_nan=False))


def _text(fit, sizes=()):
    from collbench.analysis.fit.hockney import GroupFit

    key = {
        "collective": "all_reduce",
        "backend": "gloo",
        "world_size": 2,
        "topology": None,
        "placement": "in_place",
        "dtype": "float32",
    }
    return render_group(GroupFit(key, "0" * 12, ("r",), fit.n_points, fit), list(sizes))


@pytest.mark.parametrize(
    "times",
    [
        [50.3, 50.0, 49.8, 49.9],  # issue 30's shape: r2 < 0, [0, inf], a peak of 1e8 GB/s
        [50.0, 50.3, 49.8, 50.1],  # [0, inf]
        [50.0, 50.3, 49.8, 50.6],  # a finite interval, but 94x the highest measured busbw
    ],
)
def test_a_still_linear_four_point_curve_is_poor_and_prints_no_peak(times):
    fit = fit_curve(FOUR, times, 1.0)
    assert fit.busbw_peak_gbps > 50 * fit.busbw_measured_max_gbps  # the premise: absurd
    quality = fit.quality
    assert quality.verdict == "poor"  # before: "fair"
    assert not quality.peak_determined
    assert any(note.startswith("peak busbw not determined: ") for note in quality.notes)
    text = _text(fit, [1 << 20])
    assert "peak busbw not determined   n_half not determined" in text
    assert "inf]" not in text and "GiB" not in text and "e+0" not in text
    assert f"{fit.busbw_peak_gbps:.4g}" not in text
    assert "% above the highest measured" not in text
    data = _strict(fit)
    assert data["busbw_peak_gbps"] is None and data["busbw_peak_gbps_ci"] == [None, None]
    assert data["n_half_bytes"] is None and data["regimes"][-1]["busbw_gbps"] is None
    assert set(data["quality"]["not_determined"]) == {"busbw_peak_gbps", "n_half_bytes"}
    assert data["quality"]["peak_determined"] is False
    assert data["alpha_us"] == pytest.approx(50, rel=0.01)  # the latency is a figure
    (above,) = predictions(fit, [1 << 20])
    assert above["time_us"] is None and above["busbw_gbps"] is None


def test_a_negative_r2_makes_a_fit_poor():
    fit = fit_curve(FOUR, [50.3, 50.0, 49.8, 49.9], 1.0)
    assert fit.r2_log_time_all < 0
    (note,) = [note for note in fit.quality.notes if note.startswith("r2 -")]
    assert "no better than their mean" in note


def test_two_points_leave_every_interval_unbounded_and_no_figure():
    fit = fit_curve([1 << 10, 1 << 20], [10.0, 110.0], 1.0)
    assert np.isinf(fit.alpha_us_ci[1]) and np.isinf(fit.busbw_peak_gbps_ci[1])  # premise
    quality = fit.quality
    assert quality.verdict == "poor"
    assert "latency not determined: its 95% interval is unbounded" in quality.notes
    assert "peak busbw not determined: its 95% interval is unbounded" in quality.notes
    assert any(note.startswith("1 regime (2 parameters) from 2 points") for note in quality.notes)
    assert alpha_text(fit) == "not determined"
    data = _strict(fit)
    assert data["alpha_us"] is None and data["alpha_us_ci"] == [None, None]
    assert data["regimes"][0]["alpha_us"] is None
    assert "unknown" in _text(fit).split("regime  sizes")[1]


def test_too_few_points_is_poor_but_determined_figures_stay_figures():
    # 3 clean points past n_half (100 KB): the peak is determined, the fit has 1 spare point
    sizes = [1 << 16, 1 << 20, 1 << 24]
    fit = fit_curve(sizes, [10.0 + size / 10e3 for size in sizes], 1.0)
    quality = fit.quality
    assert quality.verdict == "poor" and quality.peak_determined
    assert quality.notes[0].startswith("1 regime (2 parameters) from 3 points: fewer than 2")
    assert _strict(fit)["busbw_peak_gbps"] == pytest.approx(10, rel=1e-3)
    assert "peak busbw 10 GB/s" in _text(fit)


@pytest.mark.parametrize("largest, determined", [(1 << 24, True), (1 << 22, False)])
def test_the_peak_is_a_figure_only_within_2x_of_the_highest_measured(largest, determined):
    # 2 ms + S / 5 GB/s: n_half 10 MB; 16 MiB reaches 3.1 GB/s (1.6x below), 4 MiB 1.5 (3.4x)
    sizes = [2**k for k in range(3, 25) if 2**k <= largest]
    fit = fit_curve(sizes, [2000.0 + size / 5e3 for size in sizes], 1.0)
    ratio = fit.busbw_peak_gbps / fit.busbw_measured_max_gbps
    assert (ratio <= PEAK_DETERMINED_FACTOR) == determined  # the premise
    assert fit.quality.peak_determined == determined
    assert fit.quality.verdict == ("fair" if determined else "poor")
    text = _text(fit)
    assert ("peak busbw 5 GB/s [5, 5] (!) above the highest measured" in text) == determined
    assert ("n_half 9.53674 MiB" in text) == determined
    assert ("sweep larger sizes" in text) != determined


def test_a_latency_bound_last_regime_gives_no_peak():
    fit = fit_curve(FOUR, [50.0] * 4, 1.0)
    assert fit.latency_bound(fit.regimes[-1])  # the premise
    (note,) = [note for note in fit.quality.notes if "not determined" in note]
    assert "latency-bound" in note and fit.quality.verdict == "poor"
    assert "latency" in _text(fit).split("regime  sizes")[1]
