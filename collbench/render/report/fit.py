"""What the report draws and says of a collective's curves: fits worded as `collbench fit`
words them (a latency below the clock's resolution or an undetermined peak is never a
figure), and a topology's cost model at link rate, the one `fit --topology` compares with
(called no bound where a run measures faster)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from collbench.analysis.fit.quality import regime_busbw_undetermined
from collbench.analysis.fit.vs_topology import (
    FASTER_RULE,
    MEASURE,
    MODEL_WRONG_SPEEDUP,
    compare_rows,
    run_placement,
)
from collbench.analysis.model.costmodel import MODELS, predict
from collbench.core.errors import CollbenchError
from collbench.core.units import counted, format_size
from collbench.render import charts
from collbench.render.fit import alpha_text
from collbench.render.report.document import Flagged
from collbench.store.rows import ResultRow

if TYPE_CHECKING:
    from collbench.topologies.schema import Topology

POOR = "poor"  # FitQuality.verdict of a fit that explains its data badly
NOT_DETERMINED = "not determined"  # a figure the fit could not determine
GRID_POINTS = 80  # sizes the model curve is evaluated at, spread evenly on the log axis


def series_for(label: str, rows: list[ResultRow], curve: Any) -> charts.Series:
    """One run's rows and fit as the charts draw them."""
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
    regime = fit.regimes[index]
    if fit.latency_bound(regime):
        return "latency-bound"
    if regime_busbw_undetermined(fit, index) is not None:
        return NOT_DETERMINED
    return f"{regime.busbw_gbps:.4g}"


def summary_cells(curve: Any) -> tuple[Any, ...]:
    """Fitted peak busbw, latency, n_half, regimes and fit quality (a poor one flagged)."""
    if curve is None:
        return ("-",) * 5
    verdict = curve.quality.verdict
    return (
        peak_text(curve),
        alpha_text(curve),
        format_size(curve.n_half_bytes, compact=True, digits=3)
        if curve.quality.peak_determined
        else NOT_DETERMINED,
        len(curve.regimes),
        Flagged(f"{verdict}: see the notes") if verdict == POOR else verdict,
    )


def peak_text(curve: Any) -> str:
    """'317'; flagged with its interval when above every measured busbw, or 'not
    determined' (never the fitted number)."""
    if not curve.quality.peak_determined:
        return Flagged(f"{NOT_DETERMINED}: see the notes")
    peak = f"{curve.busbw_peak_gbps:.4g}"
    if not curve.quality.peak_above_measured:
        return peak
    low, high = curve.busbw_peak_gbps_ci
    return Flagged(
        f"{peak} [{charts.number(low)}, {charts.number(high)}], above the highest measured "
        f"{charts.number(curve.busbw_measured_max_gbps)}"
    )


def model_curves(
    topology: Topology, collective: str, series: Sequence[charts.Series]
) -> tuple[list[charts.ModelCurve], list[str]]:
    """One curve per distinct placement (ranks, nodes, ranks per node) among the series;
    and notes: caveats, why no curve, where a run beats the model."""
    if collective not in MODELS:
        return [], [f"topology {topology.name}: the cost model has no {collective}; no curve"]
    layouts: dict[tuple[int, int | None, int | None], list[int]] = {}
    for index, item in enumerate(series):
        first = item.rows[0]
        key = (int(first.world_size or 1), first.nodes or None, first.ranks_per_node or None)
        layouts.setdefault(key, []).append(index)
    curves: list[charts.ModelCurve] = []
    notes: list[str] = []
    for (ranks, nodes, per_node), indices in layouts.items():
        members = [series[index] for index in indices]
        sizes = [row.size_bytes for item in members for row in item.rows if row.size_bytes > 0]
        if not sizes:
            continue
        beaten = [note for item in members if (note := beats_model(topology, item))]
        try:
            curve, caveats = _curve(topology, collective, (ranks, nodes, per_node), sizes, beaten)
        except CollbenchError as error:
            notes.append(f"topology {topology.name}, {ranks} ranks: no model curve: {error}")
            continue
        # one run's model in its color; a placement several runs share in the neutral one
        curves.append(replace(curve, series_index=indices[0] if len(indices) == 1 else None))
        notes += caveats + beaten
    return curves, notes


def _curve(
    topology: Topology,
    collective: str,
    layout: tuple[int, int | None, int | None],
    sizes: list[int],
    beaten: list[str],
) -> tuple[charts.ModelCurve, list[str]]:
    ranks, nodes, per_node = layout
    if ranks < 2:
        raise CollbenchError("one rank: nothing crosses the fabric")  # noted: no model curve
    placement = run_placement(topology, ranks, nodes, per_node)
    grid = np.unique(np.geomspace(min(sizes), max(sizes), GRID_POINTS).astype(np.int64))
    predictions = [
        predict(placement.topology, collective, int(size), placement.group) for size in grid
    ]
    peak = predictions[-1]
    what = "predicts up to" if beaten else "link-rate bound"
    label = (
        f"{topology.name} model, {ranks} ranks on {counted(placement.nodes, 'node')}: {what} "
        f"{charts.number(peak.peak_busbw_gbps)} GB/s ({peak.algorithm}, {peak.bottleneck})"
        + (" - measured beats it, see notes" if beaten else "")
    )
    curve = charts.ModelCurve(
        label, tuple(float(size) for size in grid), tuple(item.busbw_gbps for item in predictions)
    )
    return curve, [f"topology {topology.name}, {ranks} ranks: {note}" for note in placement.notes]


def beats_model(topology: Topology, item: charts.Series) -> str | None:
    """A note when the run measures faster than the model at some sizes (as fit counts)."""
    try:
        versus = compare_rows(topology, item.rows)
    except CollbenchError:
        return None
    faster = versus.faster_sizes
    if versus.skipped is not None or not faster:
        return None
    best = max(faster, key=lambda size: size.ratio)
    head = (
        f"{item.label} is faster than the {topology.name} model at {len(faster)} of "
        f"{len(versus.sizes)} sizes ({FASTER_RULE}, as fit counts; "
        f"{format_size(faster[0].size_bytes)} .. "
        f"{format_size(faster[-1].size_bytes)}; up to {100 * best.ratio:.0f}{MEASURE}, at "
        f"{format_size(best.size_bytes)})"
    )
    if wrong := [size for size in faster if size.model_wrong]:
        return (
            f"{head}: over {MODEL_WRONG_SPEEDUP:.0%} at {len(wrong)} sizes, so the model, not "
            "the fabric, is wrong there; its curve is no bound at those sizes"
        )
    return f"{head}: the model understates the fabric there and is no bound"
