"""A fitted curve (CurveFit: its regimes and outliers) and how far it can be trusted: a verdict ("good", "fair", "poor") and the reasons.

The method, in full: docs/fit.md#analysis-fit-quality-py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields, is_dataclass
from typing import Any

import numpy as np

from collbench.core.units import format_number, format_size, round_sig

VERDICTS = ("good", "fair", "poor")  # best first
CLOCK_FLOOR_US = 1e-3
# rms of ln(t / t_fit) over ALL points: up to GOOD_RMS good, up to FAIR_RMS fair, else poor.
GOOD_RMS = 0.05
FAIR_RMS = 0.20
# A fitted peak busbw more than this far above the highest measured one is flagged.
PEAK_ABOVE_MEASURED = 0.10
# Outliers: more than this share of the points dropped makes a fit at best fair.
OUTLIER_SHARE = 0.10
# A fitted peak busbw over this many times the highest measured one is not determined.
PEAK_DETERMINED_FACTOR = 2.0
# Fewer kept points than this per fitted parameter: the fit may be fitting noise (poor).
POINTS_PER_PARAMETER = 2
# A peak busbw whose 95% interval spans more than this factor is not pinned down.
CI_SPAN = 2.0


@dataclass(frozen=True)
class FitQuality:
    """A fit's verdict, the reasons for it (one line each) and the figures they quote."""

    verdict: str
    notes: tuple[str, ...]
    clock_resolution_us: float
    n_points_all: int
    n_points_kept: int
    busbw_measured_max_gbps: float
    peak_above_measured: bool
    alpha_resolved: bool
    # (fit --json key, why) for each figure the fit could not determine (null in the JSON)
    not_determined: tuple[tuple[str, str], ...] = ()

    @property
    def peak_determined(self) -> bool:
        return not any(key == "busbw_peak_gbps" for key, _ in self.not_determined)

    def to_dict(self) -> dict[str, Any]:
        data = _rounded(self)
        del data["not_determined"]  # a dict, after peak_determined
        return {
            **data,
            "peak_determined": self.peak_determined,
            "not_determined": dict(self.not_determined),
        }


CI_METHOD = (
    "95% Student-t interval from the Jacobian of each regime's robust "
    "least_squares fit (busbw interval computed on log(1/B))"
)
LATENCY_BOUND_SHARE = 0.01


@dataclass(frozen=True)
class Regime:
    """One alpha-beta line fitted over the measured sizes min_bytes..max_bytes."""

    min_bytes: int
    max_bytes: int
    alpha_us: float
    busbw_gbps: float
    alpha_us_ci: tuple[float, float]
    busbw_gbps_ci: tuple[float, float]
    n_points: int

    def time_us(self, size_bytes: Any, bus_factor: float) -> Any:
        return self.alpha_us + size_bytes * bus_factor / (self.busbw_gbps * 1e3)

    def to_dict(self) -> dict[str, Any]:
        return _rounded(self)


@dataclass(frozen=True)
class Outlier:
    """A measured point the fit left out (a dip or a spike)."""

    size_bytes: int
    time_us: float
    busbw_gbps: float
    busbw_fit_gbps: float

    def to_dict(self) -> dict[str, Any]:
        deviation = round_sig(self.busbw_gbps / self.busbw_fit_gbps - 1, 4)
        return {**_rounded(self), "deviation_rel": deviation}


@dataclass(frozen=True)
class CurveFit:
    """A fitted sweep. Regime k predicts sizes in [breakpoints[k-1], breakpoints[k])."""

    bus_factor: float
    regimes: tuple[Regime, ...]
    breakpoints: tuple[int, ...]
    n_half_bytes: int
    r2_log_time: float
    rmse_log_time: float
    n_points: int
    outliers: tuple[Outlier, ...]
    # r2 and rms of ln(t / t_fit) on every point, the outliers included
    r2_log_time_all: float = 1.0
    rmse_log_time_all: float = 0.0
    clock_resolution_us: float = 0.0
    busbw_measured_max_gbps: float = 0.0  # the highest busbw of any measured point
    busbw_measured_max_bytes: int = 0  # and its size
    noise_rel: float = 0.0  # the timing noise scale the regime search used

    @property
    def quality(self) -> FitQuality:
        """How far the fit can be trusted: verdict and reasons (analysis/fit/quality.py)."""
        return assess(self)

    def alpha_resolved(self, index: int = 0) -> bool:
        """Whether regime `index`'s latency is at least the clock's resolution."""
        return self.regimes[index].alpha_us >= self.clock_resolution_us

    @property
    def alpha_us(self) -> float:
        """Latency: alpha of the smallest-size regime."""
        return self.regimes[0].alpha_us

    @property
    def busbw_peak_gbps(self) -> float:
        """Asymptotic bus bandwidth: that of the largest-size regime."""
        return self.regimes[-1].busbw_gbps

    @property
    def alpha_us_ci(self) -> tuple[float, float]:
        return self.regimes[0].alpha_us_ci

    @property
    def busbw_peak_gbps_ci(self) -> tuple[float, float]:
        return self.regimes[-1].busbw_gbps_ci

    @property
    def busbw_at_max_bytes_gbps(self) -> float:
        """Fitted busbw at the largest measured size (what the sweep actually reached)."""
        return self.predict_busbw_gbps(self.regimes[-1].max_bytes)

    def latency_bound(self, regime: Regime) -> bool:
        """Whether the size term stays under 1% of the regime's time up to its largest size:
        its fitted busbw is then unconstrained by the data (it can come out absurdly large)
        and says nothing about the fabric."""
        size_term_us = regime.max_bytes * self.bus_factor / (regime.busbw_gbps * 1e3)
        return size_term_us < LATENCY_BOUND_SHARE * regime.time_us(
            regime.max_bytes, self.bus_factor
        )

    def regime_index(self, size_bytes: float) -> int:
        """The regime that predicts this size (first or last one outside the data)."""
        return int(np.searchsorted(self.breakpoints, size_bytes, side="right"))

    def is_extrapolated(self, size_bytes: float) -> bool:
        return not self.regimes[0].min_bytes <= size_bytes <= self.regimes[-1].max_bytes

    def predict_time_us(self, size_bytes: float) -> float:
        regime = self.regimes[self.regime_index(size_bytes)]
        return float(regime.time_us(size_bytes, self.bus_factor))

    def predict_busbw_gbps(self, size_bytes: float) -> float:
        return busbw_gbps(size_bytes, self.predict_time_us(size_bytes), self.bus_factor)

    def to_dict(self) -> dict[str, Any]:
        """The fit as `fit --json` writes it: a figure the fit could not determine is null
        (quality.not_determined says why; the keys stay the same)."""
        quality = self.quality
        missing = dict(quality.not_determined)
        return {
            **_figure("alpha_us", self.alpha_us, self.alpha_us_ci, missing),
            **_figure("busbw_peak_gbps", self.busbw_peak_gbps, self.busbw_peak_gbps_ci, missing),
            "busbw_at_max_bytes_gbps": round_sig(self.busbw_at_max_bytes_gbps),
            "n_half_bytes": None if "n_half_bytes" in missing else self.n_half_bytes,
            "breakpoints": list(self.breakpoints),
            "regimes": [self._regime_dict(index) for index in range(len(self.regimes))],
            "r2_log_time": round_sig(self.r2_log_time),
            "rmse_log_time": round_sig(self.rmse_log_time),
            "r2_log_time_all": round_sig(self.r2_log_time_all),
            "rmse_log_time_all": round_sig(self.rmse_log_time_all),
            "noise_rel": round_sig(self.noise_rel),
            "quality": quality.to_dict(),
            "ci_method": CI_METHOD,
            "bus_factor": round_sig(self.bus_factor),
            "min_bytes": self.regimes[0].min_bytes,
            "max_bytes": self.regimes[-1].max_bytes,
            "outliers": [outlier.to_dict() for outlier in self.outliers],
        }

    def _regime_dict(self, index: int) -> dict[str, Any]:
        regime = self.regimes[index]
        data = {**regime.to_dict(), "latency_bound": self.latency_bound(regime)}
        if regime_busbw_undetermined(self, index) is not None:
            data.update(busbw_gbps=None, busbw_gbps_ci=[None, None])
        if index == 0 and alpha_undetermined(self) is not None:
            data.update(alpha_us=None, alpha_us_ci=[None, None])
        return data


def _figure(
    key: str, value: float, interval: tuple[float, float], missing: dict[str, str]
) -> dict[str, Any]:
    """`key` and `key_ci` as fit --json writes them: null (a pair of nulls) when missing."""
    if key in missing:
        return {key: None, f"{key}_ci": [None, None]}
    return {key: round_sig(value), f"{key}_ci": _rounded(interval)}


def busbw_gbps(size_bytes: float, time_us: float, bus_factor: float) -> float:
    return float(size_bytes / (time_us * 1e3) * bus_factor)


def _rounded(value: Any) -> Any:
    """`value` as fit --json writes it: each float to round_sig's 6 significant digits, a
    tuple as a list, a dataclass as a dict of its fields."""
    if is_dataclass(value):
        return {item.name: _rounded(getattr(value, item.name)) for item in fields(value)}
    if isinstance(value, tuple):
        return [_rounded(item) for item in value]
    return round_sig(value) if isinstance(value, float) else value


def goodness(times_us: np.ndarray, residuals: np.ndarray) -> tuple[float, float]:
    """(r2, rms) of the residuals ln(t / t_fit) of these points (r2 on ln t)."""
    log_times = np.log(times_us)
    total = float(np.sum((log_times - log_times.mean()) ** 2))
    squared = float(np.sum(residuals**2))
    return 1 - squared / total if total > 0 else 1.0, math.sqrt(squared / max(len(times_us), 1))


def clock_resolution_us(times_us: Sequence[float]) -> float:
    """The finest decimal step the times are recorded in (at least CLOCK_FLOOR_US)."""
    for decimals in range(0, 4):
        step = 10.0**-decimals
        if all(_is_multiple(time_us, step) for time_us in times_us):
            return max(step, CLOCK_FLOOR_US)
    return CLOCK_FLOOR_US


def _is_multiple(value: float, step: float) -> bool:
    scaled = value / step
    return abs(scaled - round(scaled)) <= 1e-6 * max(1.0, abs(scaled))


def assess(curve: CurveFit) -> FitQuality:
    """The verdict on `curve` and why: the worst of the checks below."""
    checks = (_rms_check, _r2_check, _outlier_check, _parameter_check, _alpha_check, _peak_check)
    findings = [found for check in checks if (found := check(curve)) is not None]
    verdict = max((level for level, _ in findings), key=VERDICTS.index, default="good")
    return FitQuality(
        not_determined=not_determined(curve),
        verdict=verdict,
        notes=tuple(note for _, note in findings),
        clock_resolution_us=curve.clock_resolution_us,
        n_points_all=curve.n_points,
        n_points_kept=curve.n_points - len(curve.outliers),
        busbw_measured_max_gbps=curve.busbw_measured_max_gbps,
        peak_above_measured=peak_above_measured(curve),
        alpha_resolved=curve.alpha_resolved(0),
    )


def peak_above_measured(curve: CurveFit) -> bool:
    """Whether the fitted peak busbw is beyond anything measured (by PEAK_ABOVE_MEASURED)."""
    return curve.busbw_peak_gbps > (1 + PEAK_ABOVE_MEASURED) * curve.busbw_measured_max_gbps


def peak_undetermined(curve: CurveFit) -> str | None:
    """Why the fitted peak busbw (and so n_half) is not a figure, or None when it is."""
    last = curve.regimes[-1]
    largest = format_size(last.max_bytes)
    if curve.latency_bound(last):
        return (
            f"peak busbw not determined: the largest sizes (up to {largest}) are "
            "latency-bound, their time barely grows with size"
        )
    if math.isinf(curve.busbw_peak_gbps_ci[1]):
        return "peak busbw not determined: its 95% interval is unbounded"
    if curve.busbw_peak_gbps > PEAK_DETERMINED_FACTOR * curve.busbw_measured_max_gbps:
        return (
            f"peak busbw not determined: busbw is still rising at the largest size, "
            f"{largest} (the curve has not flattened; its asymptote is over "
            f"{PEAK_DETERMINED_FACTOR:g}x the highest measured busbw, "
            f"{_num(curve.busbw_measured_max_gbps)} GB/s): sweep larger sizes"
        )
    return None


def regime_busbw_undetermined(curve: CurveFit, index: int) -> str | None:
    """Why regime `index`'s busbw is not a figure (the last one's is the peak), or None."""
    if index == len(curve.regimes) - 1:
        return peak_undetermined(curve)
    if math.isinf(curve.regimes[index].busbw_gbps_ci[1]):
        return f"regime {index + 1}'s busbw not determined: its 95% interval is unbounded"
    return None


def alpha_undetermined(curve: CurveFit) -> str | None:
    """Why the latency is not a figure (its interval is unbounded), or None."""
    if math.isinf(curve.alpha_us_ci[1]):
        return "latency not determined: its 95% interval is unbounded"
    return None


def not_determined(curve: CurveFit) -> tuple[tuple[str, str], ...]:
    """(`fit --json` key, why) for each figure of `curve` that is not determined."""
    found = []
    if (why := alpha_undetermined(curve)) is not None:
        found.append(("alpha_us", why))
    if (why := peak_undetermined(curve)) is not None:
        half = "n_half not determined: it is where busbw reaches half the peak, not determined"
        found += [("busbw_peak_gbps", why), ("n_half_bytes", half)]
    return tuple(found)


# Each check: (the worst verdict it allows, its note), or None when it finds nothing.
Finding = tuple[str, str] | None


def _r2_check(curve: CurveFit) -> Finding:
    if curve.r2_log_time_all >= 0:
        return None
    return (
        "poor",
        f"r2 {curve.r2_log_time_all:.5f} on all {curve.n_points} points (log time): the "
        "curve explains the times no better than their mean",
    )


def _rms_check(curve: CurveFit) -> Finding:
    rms = curve.rmse_log_time_all
    if rms <= GOOD_RMS:
        return None
    level = "fair" if rms <= FAIR_RMS else "poor"
    return level, f"rms error {_pct(rms)} of time on all {curve.n_points} points"


def _outlier_check(curve: CurveFit) -> Finding:
    dropped = len(curve.outliers)
    if not dropped:
        return None
    kept = curve.n_points - dropped
    level = "fair" if dropped > OUTLIER_SHARE * curve.n_points else "good"
    return (
        level,
        f"{dropped} of {curve.n_points} points dropped as outliers: on all "
        f"{curve.n_points} r2 {curve.r2_log_time_all:.4f}, rms "
        f"{_pct(curve.rmse_log_time_all)} of time; on the {kept} kept r2 "
        f"{curve.r2_log_time:.4f}, rms {_pct(curve.rmse_log_time)}",
    )


def _parameter_check(curve: CurveFit) -> Finding:
    parameters = 3 * len(curve.regimes) - 1  # alpha and busbw per regime, and each boundary
    kept = curve.n_points - len(curve.outliers)
    if kept >= POINTS_PER_PARAMETER * parameters:
        return None
    regimes = f"{len(curve.regimes)} regime" + ("s" if len(curve.regimes) != 1 else "")
    return (
        "poor",
        f"{regimes} ({parameters} parameters) from {kept} points: fewer than "
        f"{POINTS_PER_PARAMETER} points per parameter, it may be fitting noise",
    )


def _alpha_check(curve: CurveFit) -> Finding:
    if (why := alpha_undetermined(curve)) is not None:
        return "poor", why
    if not curve.alpha_resolved(0):
        resolution = _num(curve.clock_resolution_us)
        return "fair", f"latency below the clock's resolution ({resolution} us): not measured"
    low, high = curve.alpha_us_ci
    if low < curve.clock_resolution_us:
        return "fair", f"latency not told apart from 0: 95% CI [0, {_bound(high)}] us"
    return None


def _peak_check(curve: CurveFit) -> Finding:
    low, high = curve.busbw_peak_gbps_ci
    interval = f"[{_num(low)}, {_bound(high)}]"
    if (why := peak_undetermined(curve)) is not None:
        return "poor", why
    if peak_above_measured(curve):
        above = curve.busbw_peak_gbps / curve.busbw_measured_max_gbps - 1
        return (
            "fair",
            f"fitted peak busbw {_num(curve.busbw_peak_gbps)} GB/s {interval} is "
            f"{_pct(above)} above the highest measured "
            f"{_num(curve.busbw_measured_max_gbps)} GB/s (at "
            f"{format_size(curve.busbw_measured_max_bytes)}): the sweep never reached it",
        )
    if not (low > 0 and high <= CI_SPAN * low):  # latency-bound: peak_undetermined says so
        return "fair", f"peak busbw not pinned down: 95% CI {interval} GB/s"
    return None


def _pct(fraction: float) -> str:
    """0.849 -> '85%', 0.0612 -> '6.1%', 0.002 -> '0.20%'."""
    percent = 100 * fraction
    if percent >= 10:
        return f"{percent:.0f}%"
    return f"{percent:.2g}%" if percent >= 1 else f"{percent:.2f}%"


def _num(value: float) -> str:
    return format_number(value, 4, scientific=True)


def _bound(value: float) -> str:
    return "inf" if math.isinf(value) else _num(value)
