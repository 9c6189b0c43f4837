"""`collbench fit` as text and JSON, one block per fit group. Imports stay light (numpy and
scipy load with the fits, not here)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from collbench.core.units import counted, format_number, format_size

if TYPE_CHECKING:
    from collbench.analysis.fit.hockney import CurveFit, GroupFit
    from collbench.analysis.fit.vs_topology import SizeVsModel, TopologyComparison

UNKNOWN = "unknown"  # a table cell the fit did not determine (analysis/fit/quality.py)


def render_fits(
    pairs: Sequence[tuple[GroupFit, TopologyComparison | None]],
    sizes: list[int],
    as_json: bool = False,
) -> str:
    """Every group with its comparison: a JSON list, or the text blocks one blank line apart."""
    if as_json:
        return json.dumps([group_dict(group, sizes, vs) for group, vs in pairs], indent=2)
    knobs = knobs_texts([group for group, _ in pairs])
    return "\n\n".join(
        render_group(group, sizes, vs, knobs[index]) for index, (group, vs) in enumerate(pairs)
    )


def knobs_text(knobs: Any) -> str:
    """`NCCL_ALGO=Ring NCCL_PROTO=Simple` (sorted by name), or `default` when none is set."""
    return _pairs(knobs, "env") or "default"


def knobs_texts(groups: Sequence[GroupFit]) -> list[str]:
    """Each group's knobs_text, with collbench's own settings where two would read the same."""
    texts = [knobs_text(group.knobs) for group in groups]
    keys = [
        (*map(str, group.key.values()), text) for group, text in zip(groups, texts, strict=True)
    ]
    digests: dict[tuple[str, ...], set[str]] = {}
    for group, key in zip(groups, keys, strict=True):
        digests.setdefault(key, set()).add(group.knobs_digest)
    return [
        f"{text} ({_pairs(group.knobs, 'settings')})" if len(digests[key]) > 1 else text
        for group, key, text in zip(groups, keys, texts, strict=True)
    ]


def _pairs(knobs: Any, part: str) -> str:
    mapping = knobs.get(part) if isinstance(knobs, dict) else None
    mapping = mapping if isinstance(mapping, dict) else {}
    return " ".join(f"{name}={value}" for name, value in sorted(mapping.items()))


def predictions(curve: CurveFit, sizes: list[int]) -> list[dict[str, Any]]:
    """Predicted time and busbw at each size, from the regime that covers it."""
    result = []
    peak = curve.quality.peak_determined
    for size in sizes:
        extrapolated = None
        if size < curve.regimes[0].min_bytes:
            extrapolated = "below"
        elif size > curve.regimes[-1].max_bytes:
            extrapolated = "above"
        known = peak or extrapolated != "above"  # above the sweep the peak rules the time
        result.append(
            {
                "size_bytes": size,
                "time_us": round(curve.predict_time_us(size), 4) if known else None,
                "busbw_gbps": round(curve.predict_busbw_gbps(size), 4) if known else None,
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
    group: GroupFit,
    sizes: list[int],
    versus: TopologyComparison | None = None,
    knobs: str | None = None,
) -> str:
    """One compact plain-text block per group (`knobs`: its knobs as knobs_texts says them)."""
    key = group.key
    runs, op = counted(len(group.runs), "run"), key.get("op")
    lines = [
        f"{key['collective']} | {key['backend']} | {key['world_size']} ranks | "
        f"{key['dtype']}{f' {op}' if op and op != 'sum' else ''} | {key['placement']} | "
        f"{topology_text(key['topology'], versus)} | "
        f"knobs {knobs or knobs_text(group.knobs)} | {group.n_points} points from {runs}"
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


def topology_text(recorded: str | None, versus: TopologyComparison | None) -> str:
    """The group header's topology: the one compared with, and the one the rows record."""
    if versus is None or versus.topology == recorded:
        return f"topology {recorded or '-'}"
    rows_say = f"the rows record {recorded}" if recorded else "the rows record none"
    return f"topology {versus.topology} (from --topology; {rows_say})"


def alpha_text(curve: CurveFit, regime_index: int = 0, ci: bool = True) -> str:
    """'9.23 us [9.211, 9.249]', '< 0.01 us (below the clock's resolution) [0, 2944]', or
    'not determined' when its interval is unbounded (never a number then)."""
    from collbench.analysis.fit.quality import alpha_undetermined

    regime = curve.regimes[regime_index]
    if regime_index == 0 and alpha_undetermined(curve) is not None:
        return "not determined"
    low, high = regime.alpha_us_ci
    interval = f" [{_latency(curve, low)}, {_latency(curve, high)}]" if ci else ""
    if not curve.alpha_resolved(regime_index):
        resolution = _num(curve.clock_resolution_us)
        return f"< {resolution} us (below the clock's resolution){interval}"
    return f"{_num(regime.alpha_us)} us{interval}"


def quality_text(curve: CurveFit) -> str:
    """One line: 'fit quality poor: reason; reason', or 'fit quality good'."""
    quality = curve.quality
    notes = "; ".join(quality.notes)
    return f"fit quality {quality.verdict}" + (f": {notes}" if notes else "")


def _peak_and_n_half(curve: CurveFit) -> str:
    """'peak busbw 89.3 GB/s [88.3, 90.2]   n_half 536 KiB', flagged when above every measured
    busbw; 'not determined' for both where the sweep does not determine the peak."""
    if not curve.quality.peak_determined:
        return "peak busbw not determined   n_half not determined"
    peak_flag = ""
    if curve.quality.peak_above_measured:
        peak_flag = f" (!) above the highest measured {_num(curve.busbw_measured_max_gbps)} GB/s"
    low, high = curve.busbw_peak_gbps_ci
    return (
        f"peak busbw {_num(curve.busbw_peak_gbps)} GB/s [{_num(low)}, {_num(high)}]"
        f"{peak_flag}   n_half {format_size(curve.n_half_bytes)}"
    )


def _summary(curve: CurveFit) -> list[str]:
    goodness = _goodness(curve.rmse_log_time, curve.r2_log_time)
    if curve.outliers:
        kept = curve.n_points - len(curve.outliers)
        every = _goodness(curve.rmse_log_time_all, curve.r2_log_time_all)
        goodness = f"fit on the {kept} kept points: {goodness}; on all {curve.n_points}: {every}"
    else:
        goodness = f"fit on all {curve.n_points} points: {goodness}"
    return [
        f"  alpha {alpha_text(curve)}   {_peak_and_n_half(curve)}",
        f"  {goodness} (log time); busbw at {format_size(curve.regimes[-1].max_bytes)}: "
        f"{_num(curve.busbw_at_max_bytes_gbps)} GB/s; CI 95% from the fit's Jacobian",
        f"  {quality_text(curve)}",
    ]


def _goodness(rms: float, r2: float) -> str:
    return f"rms {100 * rms:.2f}% of time, r2 {r2:.5f}"


def _regime_lines(curve: CurveFit) -> list[str]:
    """The regime table; a figure the fit did not determine reads `unknown`."""
    from collbench.analysis.fit.quality import alpha_undetermined, regime_busbw_undetermined

    lines = [f"  {'regime':>6}  {'sizes':<23} {'alpha_us':>10} {'busbw_gbps':>11} {'points':>6}"]
    for number, regime in enumerate(curve.regimes, 1):
        span = f"{format_size(regime.min_bytes)} .. {format_size(regime.max_bytes)}"
        busbw = _num(regime.busbw_gbps)
        if curve.latency_bound(regime):
            busbw = "latency"
        elif regime_busbw_undetermined(curve, number - 1) is not None:
            busbw = UNKNOWN
        alpha = _latency(curve, regime.alpha_us)
        if number == 1 and alpha_undetermined(curve) is not None:
            alpha = UNKNOWN
        lines.append(f"  {number:>6}  {span:<23} {alpha:>10} {busbw:>11} {regime.n_points:>6}")
    return lines


def _outlier_lines(curve: CurveFit) -> list[str]:
    if not curve.outliers:
        return ["  outliers: none"]
    lines = [f"  {'outlier':>7}  {'time_us':>10} {'busbw_gbps':>11} {'fitted':>10} {'off':>7}"]
    for outlier in curve.outliers:
        off = 100 * (outlier.busbw_gbps / outlier.busbw_fit_gbps - 1)
        off_text = f"{off:>+6.1f}" if abs(off) < 1e6 else f"{off:+.1e}"  # absurd times
        lines.append(
            f"  {format_size(outlier.size_bytes):>7}  {_num(outlier.time_us):>10} "
            f"{_num(outlier.busbw_gbps):>11} {_num(outlier.busbw_fit_gbps):>10} "
            f"{off_text}%"
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
        if item["time_us"] is None:
            note += " (the peak busbw it needs is not determined)"
        time_us, busbw = (
            UNKNOWN if item[k] is None else _num(item[k]) for k in ("time_us", "busbw_gbps")
        )
        lines.append(
            f"  {format_size(item['size_bytes']):>7}  {time_us:>10} "
            f"{busbw:>11} {item['regime_index'] + 1:>6}{note}"
        )
    return lines


def _versus_lines(versus: TopologyComparison) -> list[str]:
    """Per size band: its geomean, then its largest size; one measure, % of model speed."""
    from collbench.analysis.fit.vs_topology import (
        FASTER_RULE,
        MEASURE,
        MEASURE_DEFINITION,
        MODEL_WRONG_SPEEDUP,
    )

    nodes = counted(versus.nodes, "node")
    head = (
        f"  vs topology {versus.topology} ({nodes} x {versus.ranks_per_node} ranks, "
        f"{versus.group.ranks_per_domain} per scale-up domain)"
    )
    notes = [f"    note: {note}" for note in versus.notes]
    if versus.skipped is not None:
        return [f"{head}: not compared, {versus.skipped}", *notes]
    lines = [
        f"{head}: {MEASURE} = {MEASURE_DEFINITION}; 100% = as fast as the model, over "
        f"{MODEL_WRONG_SPEEDUP:.0%} = the model is wrong there; faster than it ({FASTER_RULE}) "
        f"at {len(versus.faster_sizes)} of {len(versus.sizes)} sizes",
        *notes,
    ]
    for band in versus.bands:
        where = (
            f"{format_size(band.sizes[0].size_bytes)} .. {format_size(band.largest.size_bytes)}, "
            f"{counted(len(band.sizes), 'size')}"
        )
        wrong = _model_wrong_text(band.ratio_geomean) if band.model_wrong else ""
        lines.append(f"    {band.band} ({where}): {_pct(band.ratio_geomean)} (geomean){wrong}")
        lines.append(f"      {_size_versus(band.largest)}")
    return lines


def _size_versus(item: SizeVsModel) -> str:
    """One size: its % of model speed, from the times (latency) or the busbw (bandwidth)."""
    model = item.prediction
    if model.bottleneck == "latency":
        inputs = f"measured {_num(item.measured_time_us)} us, model {_num(model.time_s * 1e6)} us"
    else:
        inputs = (
            f"measured busbw {_num(item.measured_busbw_gbps)} GB/s, model "
            f"{_num(model.busbw_gbps)} GB/s"
        )
    if item.model_wrong:
        why = f"({model.algorithm}, {model.bottleneck} term){_model_wrong_text(item.ratio)}"
    else:
        why = f"({model.algorithm}, {model.bottleneck} bound)"
    return f"at {format_size(item.size_bytes)}: {_pct(item.ratio)}: {inputs} {why}"


def _pct(ratio: float) -> str:
    """0.9 -> '90% of model speed'."""
    from collbench.analysis.fit.vs_topology import MEASURE

    return f"{100 * ratio:.0f}{MEASURE}"


def _model_wrong_text(ratio: float) -> str:
    return (
        f": measured {ratio:.1f}x faster than the model, so the model is wrong here, not "
        "the fabric, and no bound"
    )


def _latency(curve: CurveFit, value: float) -> str:
    """A latency or a bound of its interval; below the clock's resolution never a number."""
    if value == 0:
        return "0"
    if value < curve.clock_resolution_us:
        return f"<{_num(curve.clock_resolution_us)}"
    return _num(value)  # format_number spells infinity "inf"


def _num(value: float) -> str:
    return format_number(value, 4, scientific=True)
