"""A topology's cost model on the report's busbw chart (`collbench report --topology`).

The curve is analysis/model/costmodel.py's prediction at the link rates (`Efficiency` 1.0) for
each run's placement on the topology (analysis/vs_topology.run_placement), the same model
`collbench fit --topology` compares with. Where a run measures faster than the model, the
model understates the fabric there and the report says it is no bound at those sizes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from collbench.core.errors import CollbenchError
from collbench.core.units import format_size
from collbench.render import charts

if TYPE_CHECKING:
    from collbench.topologies.schema import Topology

GRID_POINTS = 80  # sizes the curve is evaluated at, spread evenly on the log axis


def model_curves(
    topology: Topology, collective: str, series: Sequence[charts.Series]
) -> tuple[list[charts.ModelCurve], list[str]]:
    """One curve per distinct placement (ranks, nodes, ranks per node) among the series,
    over their sizes; and notes: the placement's caveats, why no curve could be drawn, where
    a run beats the model."""
    from collbench.analysis.model.costmodel import MODELS

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


class _NoCurve(CollbenchError):
    """The model cannot describe this placement; the report notes why."""


def _curve(
    topology: Topology,
    collective: str,
    layout: tuple[int, int | None, int | None],
    sizes: list[int],
    beaten: list[str],
) -> tuple[charts.ModelCurve, list[str]]:
    """The model's busbw over the sizes for one placement, and the placement's caveats; a
    model some run beats is not called a bound."""
    from collbench.analysis.fit.vs_topology import run_placement
    from collbench.analysis.model.costmodel import predict

    ranks, nodes, per_node = layout
    if ranks < 2:
        raise _NoCurve("one rank: nothing crosses the fabric")
    placement = run_placement(topology, ranks, nodes, per_node)
    grid = np.unique(np.geomspace(min(sizes), max(sizes), GRID_POINTS).astype(np.int64))
    predictions = [
        predict(placement.topology, collective, int(size), placement.group) for size in grid
    ]
    peak = predictions[-1]
    where = f"{placement.nodes} node" + ("s" if placement.nodes != 1 else "")
    what = "predicts up to" if beaten else "link-rate bound"
    label = (
        f"{topology.name} model, {ranks} ranks on {where}: {what} "
        f"{charts.number(peak.peak_busbw_gbps)} GB/s ({peak.algorithm}, {peak.bottleneck})"
        + (" - measured beats it, see notes" if beaten else "")
    )
    curve = charts.ModelCurve(
        label,
        tuple(float(size) for size in grid),
        tuple(item.busbw_gbps for item in predictions),
    )
    return curve, [f"topology {topology.name}, {ranks} ranks: {note}" for note in placement.notes]


def beats_model(topology: Topology, item: charts.Series) -> str | None:
    """A note when the run measures faster than the model at some sizes (by more than
    vs_topology.FASTER_THAN_MODEL, the rule fit counts with); beyond MODEL_WRONG_SPEEDUP it
    says the model, not the fabric, is wrong there."""
    from collbench.analysis.fit.vs_topology import (
        FASTER_RULE,
        MEASURE,
        MODEL_WRONG_SPEEDUP,
        compare_rows,
    )

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
    wrong = [size for size in faster if size.model_wrong]
    if wrong:
        return (
            f"{head}: over {MODEL_WRONG_SPEEDUP:.0%} at {len(wrong)} sizes, so the model, not "
            "the fabric, is wrong there; its curve is no bound at those sizes"
        )
    return f"{head}: the model understates the fabric there and is no bound"
