"""Fabrics side by side, collective by collective and size by size: what `collbench predict`
shows a buyer comparing vendor quotes before there is a cluster to measure.

The method, in full: docs/methodology/cost-model.md#analysis-model-fabric-compare-py.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from collbench.analysis.model.costmodel import Efficiency, Group, group_for, predict
from collbench.core.bandwidth import bus_factor
from collbench.topologies.schema import Topology

# Where a cell's time comes from: the cost model, or a measured run (at a measured size, its
# fit between measured sizes, its fit outside them, or that fit capped at the model's bound
# where it went past it).
PREDICTED, MEASURED, FITTED, EXTRAPOLATED = "predicted", "measured", "fitted", "extrapolated"
CAPPED = "capped"
# The cost model's bottleneck names as a person reads them.
REGIMES = {"latency": "latency", "scale_up": "scale-up", "scale_out": "scale-out"}


@dataclass(frozen=True)
class Measured:
    """A measured time for one collective and size, and where it came from."""

    time_s: float
    source: str  # MEASURED, FITTED or EXTRAPOLATED (CAPPED: cell() caps an EXTRAPOLATED one)
    run: str  # the run directory it was read from


# (collective, size_bytes) -> a measured time, or None where the run has none to give
MeasuredLookup = Callable[[str, int], "Measured | None"]


@dataclass(frozen=True)
class Side:
    """One fabric to compare: its topology (at the node count to price) and, optionally,
    measured times that replace the model's."""

    topology: Topology
    measured: MeasuredLookup | None = None


@dataclass(frozen=True)
class Cell:
    """One fabric's figures for one collective and size."""

    time_s: float
    algbw_gbps: float
    busbw_gbps: float
    source: str  # PREDICTED, MEASURED, FITTED, EXTRAPOLATED or CAPPED
    regime: str  # one of REGIMES' values: the model's largest term
    algorithm: str  # the model's chosen algorithm (ring, tree, ...)
    bound_busbw_gbps: float  # the chosen algorithm's busbw as the size grows
    run: str = ""  # the measured run, for a measured cell

    @property
    def measured(self) -> bool:
        return self.source != PREDICTED


@dataclass(frozen=True)
class Line:
    """One collective and size on every fabric, with each fabric's time over the first's."""

    collective: str
    size_bytes: int
    cells: tuple[Cell, ...]
    ratios: tuple[float | None, ...]  # time / the first fabric's time; the first's is 1.0


def compare_fabrics(
    sides: Sequence[Side],
    collectives: Sequence[str],
    sizes: Sequence[int],
    efficiency: Efficiency | None = None,
) -> list[Line]:
    """Every collective at every size on every fabric, collective by collective."""
    groups = [group_for(side.topology) for side in sides]
    lines = []
    for collective in collectives:
        for size in sizes:
            cells = tuple(
                cell(side, group, collective, size, efficiency)
                for side, group in zip(sides, groups, strict=True)
            )
            lines.append(Line(collective, size, cells, ratios(cells)))
    return lines


def cell(
    side: Side, group: Group, collective: str, size_bytes: int, efficiency: Efficiency | None = None
) -> Cell:
    """One fabric's Cell: the model's prediction, or the measured time where one is given."""
    model = predict(side.topology, collective, size_bytes, group, efficiency=efficiency)
    regime = REGIMES[model.bottleneck] if model.time_s > 0 else "none"
    found = side.measured(collective, size_bytes) if side.measured else None
    if found is None:
        time_s, algbw, busbw = model.time_s, model.algbw_gbps, model.busbw_gbps
        source, run = PREDICTED, ""
    else:
        time_s, source, run = found.time_s, found.source, found.run
        factor = bus_factor(collective, group.ranks)
        fastest_s = size_bytes * factor / (model.peak_busbw_gbps * 1e9 or math.inf)
        if source == EXTRAPOLATED and time_s < fastest_s:  # a guess past what the model allows
            time_s, source = fastest_s, CAPPED
        algbw = size_bytes / time_s / 1e9 if time_s > 0 and size_bytes else 0.0
        busbw = algbw * factor
    return Cell(time_s, algbw, busbw, source, regime, model.algorithm, model.peak_busbw_gbps, run)


def ratios(cells: Sequence[Cell]) -> tuple[float | None, ...]:
    """Each cell's time over the first's (None where the first's is 0)."""
    first = cells[0].time_s
    return tuple(item.time_s / first if first > 0 else None for item in cells)
