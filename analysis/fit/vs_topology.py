"""Measured sweep rows against the cost model: `collbench fit RUN --topology X`.

The method, in full: docs/fit.md#analysis-fit-vs-topology-py.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from collbench.analysis.model.costmodel import MODELS, Group, Prediction, predict
from collbench.analysis.rules.bands import BAND_NAMES, band_of
from collbench.core.bandwidth import busbw_gbps
from collbench.core.stats import median
from collbench.core.units import round_sig
from collbench.store.rows import ResultRow
from collbench.topologies.schema import Topology

MEASURE = "% of model speed"
MEASURE_DEFINITION = "predicted time / measured time (= measured busbw / predicted busbw)"
# Measured this much faster than the model: the model is wrong there, not the fabric.
MODEL_WRONG_SPEEDUP = 1.5
# Measured faster than the model by more than this (ratio of times) counts as faster than
# it, in fit and in the report alike: below it, timing noise and the model's rounding.
FASTER_THAN_MODEL = 1.05
FASTER_RULE = f"more than {FASTER_THAN_MODEL:.0%} of model speed"


@dataclass(frozen=True)
class SizeVsModel:
    """One measured size against its prediction."""

    size_bytes: int
    measured_time_us: float
    measured_busbw_gbps: float
    prediction: Prediction

    @property
    def ratio(self) -> float:
        """Predicted time / measured time (% of model speed / 100): > 1 is faster."""
        return self.prediction.time_s * 1e6 / self.measured_time_us

    @property
    def model_wrong(self) -> bool:
        """Whether the ratio says the model, not the fabric, is wrong."""
        return self.ratio > MODEL_WRONG_SPEEDUP

    def to_dict(self) -> dict[str, Any]:
        return {
            "size_bytes": self.size_bytes,
            "measured_time_us": round_sig(self.measured_time_us),
            "predicted_time_us": round_sig(self.prediction.time_s * 1e6),
            "pct_of_model_speed": round_sig(100 * self.ratio),
            "model_wrong": self.model_wrong,
            "measured_busbw_gbps": round_sig(self.measured_busbw_gbps),
            "predicted_busbw_gbps": round_sig(self.prediction.busbw_gbps),
            "predicted_peak_busbw_gbps": round_sig(self.prediction.peak_busbw_gbps),
            "algorithm": self.prediction.algorithm,
            "bottleneck": self.prediction.bottleneck,
        }


@dataclass(frozen=True)
class BandVsModel:
    """One size band: the geometric-mean ratio, and the band's largest size in detail."""

    band: str
    sizes: tuple[SizeVsModel, ...]

    @property
    def ratio_geomean(self) -> float:
        return math.exp(statistics.fmean(math.log(item.ratio) for item in self.sizes))

    @property
    def largest(self) -> SizeVsModel:
        return self.sizes[-1]

    @property
    def model_wrong(self) -> bool:
        return self.ratio_geomean > MODEL_WRONG_SPEEDUP

    def to_dict(self) -> dict[str, Any]:
        return {
            "band": self.band,
            "n_sizes": len(self.sizes),
            "min_bytes": self.sizes[0].size_bytes,
            "max_bytes": self.largest.size_bytes,
            "pct_of_model_speed_geomean": round_sig(100 * self.ratio_geomean),
            "model_wrong": self.model_wrong,
            "at_max_bytes": self.largest.to_dict(),
        }


@dataclass(frozen=True)
class TopologyComparison:
    """One fit group's measured times against one topology's predictions."""

    topology: str
    origin: str
    group: Group
    nodes: int
    ranks_per_node: int
    notes: tuple[str, ...]
    sizes: tuple[SizeVsModel, ...]
    skipped: str | None = None

    @property
    def faster_sizes(self) -> list[SizeVsModel]:
        """The sizes measured faster than the model (FASTER_THAN_MODEL: the one rule)."""
        return [item for item in self.sizes if item.ratio > FASTER_THAN_MODEL]

    @property
    def bands(self) -> list[BandVsModel]:
        by_band: dict[str, list[SizeVsModel]] = {}
        for item in self.sizes:
            by_band.setdefault(band_of(item.size_bytes), []).append(item)
        return [BandVsModel(name, tuple(by_band[name])) for name in BAND_NAMES if name in by_band]

    def to_dict(self) -> dict[str, Any]:
        head = {
            "topology": self.topology,
            "origin": self.origin,
            "measure": f"{MEASURE} = {MEASURE_DEFINITION}",
            "ranks": self.group.ranks,
            "nodes": self.nodes,
            "ranks_per_node": self.ranks_per_node,
            "ranks_per_domain": self.group.ranks_per_domain,
            "notes": list(self.notes),
        }
        if self.skipped is not None:
            return {**head, "skipped": self.skipped}
        return {
            **head,
            "faster_than_model": {"rule": FASTER_RULE, "sizes": len(self.faster_sizes)},
            "bands": [band.to_dict() for band in self.bands],
            "sizes": [item.to_dict() for item in self.sizes],
        }


@dataclass(frozen=True)
class RunPlacement:
    """A run's layout on a topology: the topology sized to it, its group, and notes."""

    topology: Topology
    group: Group
    nodes: int
    ranks_per_node: int
    notes: tuple[str, ...]


def run_placement(
    topology: Topology, world_size: int, nodes: int | None, ranks_per_node: int | None
) -> RunPlacement:
    """Where a run's ranks sit on `topology` (nodes filled in order, a node per host).

    A run bigger than the topology is compared on more nodes of the same kind, with a note.
    """
    per_node = ranks_per_node or (
        math.ceil(world_size / nodes) if nodes else min(world_size, topology.accelerators_per_node)
    )
    nodes = nodes or math.ceil(world_size / per_node)
    notes = []
    if world_size > topology.world_size:
        notes.append(
            f"the run has {world_size} ranks, topology {topology.name} describes "
            f"{topology.world_size}: compared on {nodes} node(s) of its kind"
        )
        topology = topology.with_nodes(max(nodes, topology.nodes))
    if per_node > topology.accelerators_per_node:
        notes.append(
            f"the run places {per_node} ranks per node, topology {topology.name} has "
            f"{topology.accelerators_per_node} accelerators per node: ranks share "
            f"them (the model is optimistic)"
        )
    domain = topology.scale_up.domain_size
    if domain >= topology.accelerators_per_node:
        per_domain = per_node * topology.nodes_per_domain
    else:
        per_domain = min(per_node, domain)
    group = Group(
        ranks=world_size, ranks_per_domain=min(world_size, per_domain), ranks_per_node=per_node
    )
    return RunPlacement(topology, group, nodes, per_node, tuple(notes))


def compare_rows(topology: Topology, rows: Iterable[ResultRow]) -> TopologyComparison:
    """One fit group's rows (one collective and world size) against the topology.

    TopologyError when the run's placement needs scale-out the topology lacks.
    """
    rows = list(rows)
    collective, world_size = str(rows[0].collective), int(rows[0].world_size)
    placement = run_placement(
        topology, world_size, _first(rows, "nodes"), _first(rows, "ranks_per_node")
    )
    base = TopologyComparison(
        topology.name,
        topology.origin,
        placement.group,
        placement.nodes,
        placement.ranks_per_node,
        placement.notes,
        (),
    )
    if collective not in MODELS:
        return replace(base, skipped=f"the cost model has no {collective!r}")
    if world_size < 2:
        return replace(base, skipped="one rank: nothing crosses the fabric")
    items = []
    for size, time_us in _median_times(rows).items():
        prediction = predict(placement.topology, collective, size, placement.group)
        items.append(
            SizeVsModel(
                size, time_us, busbw_gbps(collective, world_size, size, time_us), prediction
            )
        )
    if not items:
        return replace(base, skipped="no sizes above 0 bytes with a time")
    return replace(base, sizes=tuple(items))


def _median_times(rows: list[ResultRow]) -> dict[int, float]:
    """Median time per size (sizes > 0 with a positive time), smallest size first."""
    times: dict[int, list[float]] = {}
    for row in rows:
        size, time_us = row.size_bytes or 0, row.time_us or 0
        if size > 0 and time_us > 0:
            times.setdefault(int(size), []).append(float(time_us))
    return {size: median(values) for size, values in sorted(times.items())}


def _first(rows: list[ResultRow], column: str) -> int | None:
    return next((int(getattr(row, column)) for row in rows if getattr(row, column)), None)


def compare_fits(
    topology: Topology, rows: Iterable[ResultRow], fits: Iterable[Any]
) -> list[TopologyComparison]:
    """A comparison per fit group (`analysis.fit.GroupFit`), in the fits' order."""
    from collbench.analysis.fit.hockney import GROUP_KEYS, group_rows

    grouped = group_rows(rows)
    return [
        compare_rows(topology, grouped[(*(fit.key[name] for name in GROUP_KEYS), fit.knobs_digest)])
        for fit in fits
    ]
