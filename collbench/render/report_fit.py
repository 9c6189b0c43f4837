"""A fit as the report says it: the same latency text and quality line as `collbench fit`
(render/fit.py's alpha_text and quality_text), a poor fit flagged, a latency below the
clock's resolution never shown as a number (not in a table, a label or a drawn line), and
a peak busbw or n_half the fit did not determine (analysis/fit/quality.py) never a figure."""

from __future__ import annotations

from typing import Any

from collbench.core.units import format_size
from collbench.render import charts
from collbench.render.report_doc import Flagged
from collbench.store.rows import ResultRow

POOR = "poor"  # FitQuality.verdict of a fit that explains its data badly
NOT_DETERMINED = "not determined"  # a figure the fit could not determine


def series_for(label: str, rows: list[ResultRow], curve: Any) -> charts.Series:
    """One run's rows and fit as the charts draw them."""
    from collbench.render.fit import alpha_text

    if curve is None:
        return charts.Series(label, rows)
    return charts.Series(
        label,
        rows,
        curve,
        alpha_texts=tuple(
            alpha_text(curve, index, ci=False) for index in range(len(curve.regimes))
        ),
        latency_us=curve.alpha_us if curve.alpha_resolved(0) else None,
        poor=curve.quality.verdict == POOR,
    )


def regime_rows(item: charts.Series) -> list[tuple[Any, ...]]:
    """The regime table's rows for one fitted series."""
    fit = item.fit
    return [
        (
            item.label,
            f"{charts.size_label(regime.min_bytes)} .. {charts.size_label(regime.max_bytes)}",
            item.alpha_texts[index],
            regime_busbw_text(fit, index),
            regime.n_points,
        )
        for index, regime in enumerate(fit.regimes)
    ]


def regime_busbw_text(fit: Any, index: int) -> str:
    """A regime's busbw: 'latency-bound', 'not determined' or the figure."""
    from collbench.analysis.fit.quality import regime_busbw_undetermined

    regime = fit.regimes[index]
    if fit.latency_bound(regime):
        return "latency-bound"
    if regime_busbw_undetermined(fit, index) is not None:
        return NOT_DETERMINED
    return f"{regime.busbw_gbps:.4g}"


def quality_line(curve: Any) -> str:
    """One line on how well the fit explains its data, worded as `collbench fit` does."""
    from collbench.render.fit import quality_text

    return quality_text(curve)


def summary_cells(curve: Any) -> tuple[Any, ...]:
    """Fitted peak busbw (with its interval and a flag when above every measured point),
    latency, n_half, regimes and fit quality (a poor one flagged)."""
    from collbench.render.fit import alpha_text

    if curve is None:
        return ("-",) * 5
    verdict = curve.quality.verdict
    return (
        peak_text(curve),
        alpha_text(curve),
        approx_size(curve.n_half_bytes) if curve.quality.peak_determined else NOT_DETERMINED,
        len(curve.regimes),
        Flagged(f"{verdict}: see the notes") if verdict == POOR else verdict,
    )


def peak_text(curve: Any) -> str:
    """'317', or, fitted above every measured busbw, 'flagged: 0.78 [0.41, 2.1], above the
    highest measured 0.46', or, not determined by the sweep, flagged 'not determined: see
    the notes' (never the fitted number)."""
    if not curve.quality.peak_determined:
        return Flagged(f"{NOT_DETERMINED}: see the notes")
    peak = f"{curve.busbw_peak_gbps:.4g}"
    if not curve.quality.peak_above_measured:
        return peak
    low, high = curve.busbw_peak_gbps_ci
    interval = f"[{charts.number(low)}, {'inf' if high == float('inf') else charts.number(high)}]"
    return Flagged(
        f"{peak} {interval}, above the highest measured {charts.number(curve.busbw_measured_max_gbps)}"
    )


def approx_size(num_bytes: float) -> str:
    """A size to 3 significant digits in K/M/G (powers of 1024): 1.39M, 155M, 502K."""
    return format_size(num_bytes, compact=True, digits=3)
