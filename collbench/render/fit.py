"""`collbench fit` as text and JSON: one block (or one mapping) per fit group, with the
predictions asked for and the comparison with a topology.

Pure: fits in, strings out. Imports stay light (numpy and scipy load with the fits, not here).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from collbench.core.units import format_number, format_size

if TYPE_CHECKING:
    from collbench.analysis.fit import CurveFit, GroupFit
    from collbench.analysis.vs_topology import TopologyComparison


def render_fits(
    pairs: Sequence[tuple[GroupFit, TopologyComparison | None]],
    sizes: list[int],
    as_json: bool = False,
) -> str:
    """Every group with its comparison: a JSON list, or the text blocks one blank line apart."""
    if as_json:
        return json.dumps([group_dict(group, sizes, vs) for group, vs in pairs], indent=2)
    return "\n\n".join(render_group(group, sizes, vs) for group, vs in pairs)


def predictions(curve: CurveFit, sizes: list[int]) -> list[dict[str, Any]]:
    """Predicted time and busbw at each size, from the regime that covers it."""
    result = []
    for size in sizes:
        extrapolated = None
        if size < curve.regimes[0].min_bytes:
            extrapolated = "below"
        elif size > curve.regimes[-1].max_bytes:
            extrapolated = "above"
        result.append(
            {
                "size_bytes": size,
                "time_us": round(curve.predict_time_us(size), 4),
                "busbw_gbps": round(curve.predict_busbw_gbps(size), 4),
                "regime_index": curve.regime_index(size),
                "extrapolated": extrapolated,
            }
        )
    return result


def group_dict(
    group: GroupFit, sizes: list[int], versus: TopologyComparison | None = None
) -> dict[str, Any]:
    data = group.to_dict()
    if sizes and group.curve is not None:
        data["predictions"] = predictions(group.curve, sizes)
    if versus is not None:
        data["vs_topology"] = versus.to_dict()
    return data


def render_group(
    group: GroupFit, sizes: list[int], versus: TopologyComparison | None = None
) -> str:
    """One compact plain-text block per group."""
    key = group.key
    runs = f"{len(group.runs)} run" + ("s" if len(group.runs) != 1 else "")
    lines = [
        f"{key['collective']} | {key['backend']} | {key['world_size']} ranks | "
        f"{key['dtype']} | {key['placement']} | topology {key['topology'] or '-'} | "
        f"knobs {group.knobs_digest} | {group.n_points} points from {runs}"
    ]
    versus_lines = [] if versus is None else _versus_lines(versus)
    if group.curve is None:
        return "\n".join([*lines, f"  not fitted: {group.skipped}", *versus_lines])
    return "\n".join(
        [
            *lines,
            *_summary(group.curve),
            *_regime_lines(group.curve),
            *_outlier_lines(group.curve),
            *_prediction_lines(group.curve, sizes),
            *versus_lines,
        ]
    )


def _summary(curve: CurveFit) -> list[str]:
    return [
        f"  alpha {_num(curve.alpha_us)} us {_ci(curve.alpha_us_ci)}   "
        f"peak busbw {_num(curve.busbw_peak_gbps)} GB/s {_ci(curve.busbw_peak_gbps_ci)}   "
        f"n_half {format_size(curve.n_half_bytes)}",
        f"  fit: rms {100 * curve.rmse_log_time:.2f}% of time, r2 {curve.r2_log_time:.5f} "
        f"(log time); busbw at {format_size(curve.regimes[-1].max_bytes)}: "
        f"{_num(curve.busbw_at_max_bytes_gbps)} GB/s; CI 95% from the fit's Jacobian",
    ]


def _regime_lines(curve: CurveFit) -> list[str]:
    lines = [f"  {'regime':>6}  {'sizes':<23} {'alpha_us':>10} {'busbw_gbps':>11} {'points':>6}"]
    for number, regime in enumerate(curve.regimes, 1):
        span = f"{format_size(regime.min_bytes)} .. {format_size(regime.max_bytes)}"
        busbw = "latency" if curve.latency_bound(regime) else _num(regime.busbw_gbps)
        lines.append(
            f"  {number:>6}  {span:<23} {_num(regime.alpha_us):>10} "
            f"{busbw:>11} {regime.n_points:>6}"
        )
    return lines


def _outlier_lines(curve: CurveFit) -> list[str]:
    if not curve.outliers:
        return ["  outliers: none"]
    lines = [f"  {'outlier':>7}  {'time_us':>10} {'busbw_gbps':>11} {'fitted':>10} {'off':>7}"]
    for outlier in curve.outliers:
        off = outlier.busbw_gbps / outlier.busbw_fit_gbps - 1
        lines.append(
            f"  {format_size(outlier.size_bytes):>7}  {_num(outlier.time_us):>10} "
            f"{_num(outlier.busbw_gbps):>11} {_num(outlier.busbw_fit_gbps):>10} "
            f"{100 * off:>+6.1f}%"
        )
    return lines


def _prediction_lines(curve: CurveFit, sizes: list[int]) -> list[str]:
    if not sizes:
        return []
    lines = [f"  {'predict':>7}  {'time_us':>10} {'busbw_gbps':>11} {'regime':>6}"]
    for item in predictions(curve, sizes):
        note = ""
        if item["extrapolated"] == "below":
            note = f"  extrapolated below the smallest measured size, {format_size(curve.regimes[0].min_bytes)}"
        elif item["extrapolated"] == "above":
            note = f"  extrapolated above the largest measured size, {format_size(curve.regimes[-1].max_bytes)}"
        lines.append(
            f"  {format_size(item['size_bytes']):>7}  {_num(item['time_us']):>10} "
            f"{_num(item['busbw_gbps']):>11} {item['regime_index'] + 1:>6}{note}"
        )
    return lines


def _versus_lines(versus: TopologyComparison) -> list[str]:
    """Per size band: measured as % of the topology's prediction (a ratio of times)."""
    nodes = f"{versus.nodes} node" + ("s" if versus.nodes != 1 else "")
    head = (
        f"  vs topology {versus.topology} ({nodes} x {versus.ranks_per_node} ranks, "
        f"{versus.group.ranks_per_domain} per scale-up domain)"
    )
    notes = [f"    note: {note}" for note in versus.notes]
    if versus.skipped is not None:
        return [f"{head}: not compared, {versus.skipped}", *notes]
    lines = [
        f"{head}: % = predicted time / measured time, over 100% is faster than the model",
        *notes,
    ]
    for band in versus.bands:
        at = band.largest
        where = (
            f"{format_size(band.sizes[0].size_bytes)} .. {format_size(at.size_bytes)}, "
            f"{len(band.sizes)} size" + ("s" if len(band.sizes) != 1 else "")
        )
        model = at.prediction
        if model.bottleneck == "latency":
            detail = (
                f"measured {_num(at.measured_time_us)} us vs predicted "
                f"{_num(model.time_s * 1e6)} us = {at.ratio:.0%}"
            )
        else:
            detail = (
                f"measured busbw {_num(at.measured_busbw_gbps)} GB/s = {at.ratio:.0%} of "
                f"predicted {_num(model.busbw_gbps)}"
            )
        lines.append(
            f"    {band.band} ({where}): {band.ratio_geomean:.0%} geomean; at "
            f"{format_size(at.size_bytes)} {detail} ({model.algorithm}, "
            f"{model.bottleneck} bound)"
        )
    return lines


def _num(value: float) -> str:
    """4 significant digits, plain where readable."""
    return format_number(value, 4, scientific=True)


def _ci(pair: tuple[float, float]) -> str:
    high = "inf" if pair[1] == float("inf") else _num(pair[1])
    return f"[{_num(pair[0])}, {high}]"
