"""What the MFU estimator is fed: collective prices (measured curves or the topology cost
model), overlap figures from probe runs, and the what-if fabrics.

The method, in full: docs/mfu/index.md#analysis-mfu-inputs-py.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from collbench.analysis.mfu.estimate import EstimateOptions, Priced, Pricer
from collbench.analysis.model import costmodel
from collbench.analysis.model.costmodel import DEFAULT_COMM_EFFICIENCY
from collbench.core.bandwidth import bus_factor
from collbench.core.collectives import OUT_OF_PLACE
from collbench.core.errors import SpecError
from collbench.core.stats import median
from collbench.core.units import counted
from collbench.store.rows import ProbeRow, ResultRow, point_key
from collbench.topologies.schema import Topology

# DP buckets and ZeRO gathers are megabytes: probe rows below this size say little.
PROBE_MIN_BYTES = 1 << 20


def cost_model_pricer(
    topology: Topology, comm_efficiency: float = DEFAULT_COMM_EFFICIENCY
) -> Pricer:
    """Prices from the topology cost model at `comm_efficiency` of the hardware bound (the
    pricing `predict` shows fabric by fabric)."""
    efficiency = costmodel.Efficiency.uniform(comm_efficiency)

    def price(collective: str, size_bytes: float, ranks: int, stride: int) -> Priced:
        group = costmodel.group_for(topology, ranks, stride)
        prediction = costmodel.predict(
            topology, collective, int(size_bytes), group, efficiency=efficiency
        )
        return Priced(
            prediction.time_s,
            f"predicted ({prediction.algorithm}, "
            f"{comm_efficiency:.0%} of the {prediction.bottleneck} bound)",
        )

    return price


@dataclass(frozen=True)
class MeasuredCurve:
    """A fitted sweep of one collective at one world size over some nodes."""

    collective: str
    world_size: int
    nodes: int
    curve: Any  # analysis.fit.CurveFit
    run: str


def one_point_set(rows: Iterable[ResultRow], run: str) -> tuple[list[ResultRow], list[str]]:
    """Per collective and world size the timed rows of one point set (store.rows.point_key,
    never dtypes or ops pooled): out of place where measured, and of several (dtype, op) the
    most measured, then the first by name; a line for each such choice."""
    sets: dict[tuple[str, int], Counter[tuple[bool, str, str]]] = {}
    timed = [row for row in rows if timed_row(row)]
    for row in timed:
        sets.setdefault((row.collective, row.world_size), Counter())[_point_set(row)] += 1
    chosen, notes = {}, []
    for (collective, world), found in sets.items():
        best = chosen[collective, world] = min(
            found, key=lambda item: (item[0], -found[item], item)
        )
        pairs = sorted({" ".join(item[1:]) for item in found})
        if len(pairs) > 1:
            notes.append(
                f"--curves {run}: its {collective} at {world} ranks holds {len(pairs)} dtype/op "
                f"sets ({', '.join(pairs)}): priced with {' '.join(best[1:])} only"
            )
    kept = [row for row in timed if chosen[row.collective, row.world_size] == _point_set(row)]
    return kept, notes


def _point_set(row: ResultRow) -> tuple[bool, str, str]:
    """(not out of place, dtype, op): what sets a row's point apart beside its size."""
    _, placement, _, dtype, op = point_key(row)
    return placement != OUT_OF_PLACE, dtype, op


def fit_measured_curves(
    rows: Iterable[ResultRow], run: str
) -> tuple[list[MeasuredCurve], list[str]]:
    """One curve per (collective, world size) of a run's sweep rows, fitted as `collbench
    fit` fits them through their one_point_set (and its notes); of several fit groups
    (knobs, backends) the one with the most points."""
    from collbench.analysis.fit.hockney import fit_rows

    rows, notes = one_point_set(rows, run)
    nodes = {(row.collective, row.world_size): int(row.nodes or 1) for row in rows}
    best: dict[tuple[str, int], tuple[int, Any]] = {}
    for group in fit_rows(rows):
        key = (str(group.key["collective"]), int(group.key["world_size"] or 0))
        if group.curve is None or key[1] < 2 or group.n_points < 3:
            continue
        if key not in best or group.n_points > best[key][0]:
            best[key] = (group.n_points, group.curve)
    curves = [
        MeasuredCurve(collective, world, nodes[(collective, world)], curve, run)
        for (collective, world), (_, curve) in sorted(best.items())
    ]
    return curves, notes


def timed_row(row: ResultRow) -> bool:
    """A row a curve can be fitted through: a finite positive time at a positive size
    among 2+ ranks (a damaged or hand-edited run may hold nulls, zeros or inf)."""
    figures = (row.time_us, row.size_bytes, row.world_size)
    if any(isinstance(value, bool) or not isinstance(value, (int, float)) for value in figures):
        return False
    return (
        math.isfinite(row.time_us)
        and row.time_us > 0
        and row.size_bytes > 0
        and row.world_size >= 2
    )


@dataclass
class CurvePricer:
    """Measured curves where one matches the group (collective, ranks, nodes); else the
    fallback. A curve of the same group shape is used even from a bigger cluster: one
    collective's time depends on its own group, not on the rest of the machine.

    It remembers the groups it was asked about and the curves it used, so that a curve
    no group matched can be named (`unused_curves`)."""

    curves: Sequence[MeasuredCurve]
    topology: Topology
    fallback: Pricer
    groups: set[Group] = field(default_factory=set)  # every group asked about
    used: set[int] = field(default_factory=set)  # the curves used, by index

    def __call__(self, collective: str, size_bytes: float, ranks: int, stride: int) -> Priced:
        # the nodes a group of `ranks` ranks `stride` accelerators apart lands on
        ranks_per_node = max(1, self.topology.accelerators_per_node // stride)
        nodes = math.ceil(ranks / min(ranks, ranks_per_node))
        self.groups.add(Group(collective, ranks, nodes, stride))
        wanted = (collective, ranks, nodes)
        for index, measured in enumerate(self.curves):
            if (measured.collective, measured.world_size, measured.nodes) == wanted:
                self.used.add(index)
                tag = " (extrapolated)" if measured.curve.is_extrapolated(size_bytes) else ""
                time_s = measured.curve.predict_time_us(size_bytes) * 1e-6
                return Priced(time_s, f"measured {measured.run}{tag}", measured=True)
        return self.fallback(collective, size_bytes, ranks, stride)

    def unused_curves(self) -> list[tuple[MeasuredCurve, str]]:
        """Each curve no group matched, with why: no group runs its collective, none has
        its rank count, or none spans its node count."""
        return [
            (curve, _why_unused(curve, self.groups))
            for index, curve in enumerate(self.curves)
            if index not in self.used
        ]


@dataclass(frozen=True, order=True)
class Group:
    """One collective group a step runs: `ranks` ranks `stride` apart over `nodes` nodes."""

    collective: str
    ranks: int
    nodes: int
    stride: int


def _why_unused(curve: MeasuredCurve, groups: set[Group]) -> str:
    same = sorted(group for group in groups if group.collective == curve.collective)
    if not same:
        runs = ", ".join(sorted({group.collective for group in groups})) or "no collective"
        return f"the workload runs no {curve.collective} (it runs {runs})"
    shapes = ", ".join(f"{group.ranks} ranks over {counted(group.nodes, 'node')}" for group in same)
    if curve.world_size not in {group.ranks for group in same}:
        return (
            f"no {curve.collective} group of the workload has {curve.world_size} ranks "
            f"(its groups: {shapes})"
        )
    return (
        f"the workload's {curve.world_size}-rank {curve.collective} spans another node "
        f"count than the curve's {counted(curve.nodes, 'node')} (its groups: {shapes})"
    )


def probe_overlap(rows: Iterable[ResultRow], run: str, options: EstimateOptions) -> EstimateOptions:
    """The options with the overlap efficiency and compute slowdown a probe run measured:
    medians over its probe rows of at least 1 MiB with at least as much compute as
    communication (a 0.5 ratio can hide at most half of the collective, which says
    nothing about a trainer's long windows); fewer filters where no row passes them."""
    probes = [
        row
        for row in rows
        if isinstance(row, ProbeRow)
        and row.overlap_pct is not None
        and row.compute_slowdown is not None
    ]
    if not probes:
        raise SpecError(
            "--overlap",
            run,
            "holds no overlap-probe rows: pass a run written by "
            "collbench overlap or collbench sweep --overlap",
        )
    large = [row for row in probes if (row.size_bytes or 0) >= PROBE_MIN_BYTES] or probes
    long = [row for row in large if _ratio(row) >= 1] or large
    overlap = median(row.overlap_pct for row in long) / 100
    slowdown = median(row.compute_slowdown for row in long)
    source = (
        f"measured by {run}: {overlap:.0%} of the collective hidden, compute "
        f"{slowdown:+.0%} beside it (median of {len(long)} probe rows)"
    )
    return replace(
        options,
        overlap_efficiency=min(1.0, max(0.0, overlap)),
        compute_slowdown=slowdown,
        overlap_source=source,
    )


def _ratio(row: ProbeRow) -> float:
    value = row.compute_ratio_actual or row.compute_ratio
    return float(value) if value is not None else 1.0


def scale_out_doubled(topology: Topology) -> Topology:
    """The what-if fabric: every NIC twice as fast (None if there is no scale-out)."""
    if topology.scale_out is None:
        return topology
    scale_out = replace(topology.scale_out, nic_gbits_s=2 * topology.scale_out.nic_gbits_s)
    return replace(
        topology, name=f"{topology.name} (2x scale-out)", scale_out=scale_out, curves=None
    )


def busbw_at(table: Mapping[int, float], size_bytes: float) -> tuple[float, bool]:
    """(busbw, whether `size_bytes` lies within the measured sizes) from a size -> busbw
    table with at least one entry."""
    sizes = sorted(table)
    if size_bytes <= sizes[0] or size_bytes >= sizes[-1]:
        nearest = sizes[0] if size_bytes <= sizes[0] else sizes[-1]
        return table[nearest], sizes[0] <= size_bytes <= sizes[-1]
    index = bisect.bisect_right(sizes, size_bytes)
    low, high = sizes[index - 1], sizes[index]
    share = (math.log(size_bytes) - math.log(low)) / (math.log(high) - math.log(low))
    return table[low] + share * (table[high] - table[low]), True


class BusbwPricer:
    """A Pricer from one setting's busbw tables (`collbench tune --workload`), the fallback
    for collectives they lack. Between two measured sizes the busbw is interpolated in
    log(size), outside them it is the nearest one's (flagged); time = size x bus
    factor(ranks) / busbw, nccl-tests' definition read backwards, so a busbw measured on
    one rank count prices another only on that assumption, which the caller says.

    It remembers what it priced outside the measured sizes (`outside`: (collective,
    size_bytes)) and the collectives it had to hand to the fallback (`unmeasured`)."""

    def __init__(
        self, tables: Mapping[str, Mapping[int, float]], fallback: Pricer, name: str
    ) -> None:
        self.tables = {name: dict(table) for name, table in tables.items() if table}
        self.fallback = fallback
        self.name = name
        self.outside: set[tuple[str, float]] = set()
        self.unmeasured: set[str] = set()

    def __call__(self, collective: str, size_bytes: float, ranks: int, stride: int) -> Priced:
        table = self.tables.get(collective)
        if table is None:
            self.unmeasured.add(collective)
            return self.fallback(collective, size_bytes, ranks, stride)
        busbw, inside = busbw_at(table, size_bytes)
        tag = "" if inside else ", outside the measured sizes"
        if not inside:
            self.outside.add((collective, size_bytes))
        time_s = size_bytes * bus_factor(collective, ranks) / (busbw * 1e9)
        return Priced(time_s, f"busbw of {self.name}{tag}", measured=True)
