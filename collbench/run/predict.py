"""`collbench predict`'s use-case: the fabrics to compare, the measured runs that replace a
fabric's predictions (`--curves NAME=RUN`), and the comparison (analysis/model/fabric_compare.py).

The method, in full: docs/architecture.md#collbench-run-predict-py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collbench.analysis.mfu.inputs import one_point_set
from collbench.analysis.model.costmodel import DEFAULT_COMM_EFFICIENCY
from collbench.core.collectives import DEFAULT_COLLECTIVES
from collbench.core.errors import SpecError
from collbench.core.spec import DEFAULT_MAX_BYTES, SweepSpec
from collbench.store.load import Run, load_run

if TYPE_CHECKING:
    from collbench.analysis.model.fabric_compare import Line, Measured
    from collbench.store.rows import ResultRow
    from collbench.topologies.schema import Topology


@dataclass(frozen=True)
class PredictRequest:
    """What `collbench predict` was asked for."""

    topology: tuple[str, ...] = ()  # catalog names or files, compared side by side
    collectives: tuple[str, ...] = DEFAULT_COLLECTIVES
    min_bytes: int = SweepSpec.min_bytes
    # A sweep's default on a GPU backend, so that a measured run's sizes line up.
    max_bytes: int = DEFAULT_MAX_BYTES["nccl"]
    factor: float | None = None  # multiply the size by this each step (None: the sweep's)
    step_bytes: int | None = None  # or add this many bytes each step
    nodes: int | None = None  # of every fabric (None: each topology's own)
    curves: tuple[str, ...] = ()  # NAME=RUN (or RUN, for the first): measured runs
    comm_efficiency: float = DEFAULT_COMM_EFFICIENCY  # share of the link rates, as mfu's
    html: Path | None = None  # also write the comparison as an HTML report there
    force: bool = False  # write over an existing --html file

    def sizes(self) -> list[int]:
        """The sizes, checked and spelled as `collbench sweep` does (SweepSpec)."""
        return SweepSpec(
            collectives=self.collectives,
            min_bytes=self.min_bytes,
            max_bytes=self.max_bytes,
            factor=self.factor,
            step_bytes=self.step_bytes,
        ).sizes()


@dataclass(frozen=True)
class Fabric:
    """One fabric as compared: its topology at the node count priced, and its runs."""

    topology: Topology
    nodes_given: bool  # --nodes set its node count (else its file's)
    runs: tuple[str, ...] = ()  # the measured runs that replace its predictions


@dataclass(frozen=True)
class Prediction:
    request: PredictRequest
    fabrics: list[Fabric]
    lines: list[Line]
    warnings: list[str]


def predict_fabrics(request: PredictRequest) -> Prediction:
    """Load the fabrics and runs, and compare every collective and size on them."""
    from collbench.analysis.model.costmodel import Efficiency
    from collbench.analysis.model.fabric_compare import Side, compare_fabrics
    from collbench.run.mfu import curve_source, file_curves, load_topologies

    sizes = request.sizes()
    if len(request.topology) < 1:
        raise SpecError("--topology", "", "names no fabric: give -T NAME (twice to compare)")
    topologies = [
        _at_nodes(topology, request.nodes) for topology in load_topologies(list(request.topology))
    ]
    known = [topology.name for topology in topologies]
    given: dict[str, list[Run]] = {}
    for text in request.curves:
        name, _, source = curve_source(text, known, labels=False)
        given.setdefault(name, []).append(load_run(source, "--curves"))
    fabrics, sides, warnings = [], [], []
    for topology in topologies:
        runs = [
            *given.get(topology.name, []),
            *(load_run(path, "--curves") for path in file_curves(topology)),
        ]
        times = MeasuredTimes(runs, topology) if runs else None
        if times is not None:
            warnings += [*times.notes, *times.unmatched(request.collectives)]
        fabrics.append(Fabric(topology, request.nodes is not None, tuple(r.path for r in runs)))
        sides.append(Side(topology, times))
    efficiency = Efficiency.uniform(request.comm_efficiency)
    lines = compare_fabrics(sides, request.collectives, sizes, efficiency)
    return Prediction(request, fabrics, lines, warnings)


def _at_nodes(topology: Topology, nodes: int | None) -> Topology:
    """The topology at --nodes nodes (its own count when not given)."""
    if nodes is None or nodes == topology.nodes:
        return topology
    try:
        return topology.with_nodes(nodes)
    except SpecError as error:  # e.g. several nodes of a topology without scale-out
        raise SpecError("--nodes", nodes, f"does not fit {topology.name}: {error}") from None


class MeasuredTimes:
    """A fabric's measured times (a fabric_compare.MeasuredLookup): its runs' sweep rows at
    its rank count and node count (rows that do not record nodes count as matching)."""

    def __init__(self, runs: Sequence[Run], topology: Topology) -> None:
        self.shape = self.ranks, self.nodes = topology.world_size, topology.nodes
        self.label = ", ".join(run.path for run in runs)
        self.sweep_rows = rows = [row for run in runs for row in run.sweep_rows]
        shaped = [row for row in rows if (row.world_size, row.nodes or self.nodes) == self.shape]
        chosen, self.notes = one_point_set(shaped, self.label)  # the store's point key
        self.rows: dict[str, list[ResultRow]] = {}
        for row in chosen:
            self.rows.setdefault(row.collective, []).append(row)
        self.curves: dict[str, Any] = {}

    def __call__(self, collective: str, size_bytes: int) -> Measured | None:
        from collbench.analysis.model.fabric_compare import EXTRAPOLATED, FITTED, MEASURED, Measured
        from collbench.core.stats import median

        times = [
            row.time_us for row in self.rows.get(collective, []) if row.size_bytes == size_bytes
        ]
        if times:
            return Measured(float(median(times)) * 1e-6, MEASURED, self.label)
        curve = self._curve(collective)
        if curve is None or size_bytes <= 0:
            return None
        source = EXTRAPOLATED if curve.is_extrapolated(size_bytes) else FITTED
        return Measured(curve.predict_time_us(size_bytes) * 1e-6, source, self.label)

    def _curve(self, collective: str) -> Any:
        """The curve `mfu --curves` fits through the collective's rows (None: too few)."""
        from collbench.analysis.mfu.inputs import fit_measured_curves

        if collective not in self.curves:
            fitted, _ = fit_measured_curves(self.rows.get(collective, []), self.label)
            self.curves[collective] = fitted[0].curve if fitted else None
        return self.curves[collective]

    def unmatched(self, collectives: Sequence[str]) -> list[str]:
        """Why the runs replace no prediction of some collectives (they stay predicted)."""
        missing = [name for name in collectives if name not in self.rows]
        if not missing:
            return []
        held = sorted({(row.collective, row.world_size, row.nodes or 0) for row in self.sweep_rows})
        shapes = ", ".join(
            f"{name} at {ranks} ranks over {nodes or '?'}" for name, ranks, nodes in held
        )
        other_shape = any((ranks, nodes) != (self.ranks, self.nodes) for _, ranks, nodes in held)
        hint = " (--nodes sets the node count priced)" if other_shape else ""
        return [
            f"--curves {self.label}: no timed {', '.join(missing)} rows at {self.ranks} ranks "
            f"over {self.nodes} nodes (it holds {shapes or 'no sweep rows'}): "
            f"{'it stays' if len(missing) == 1 else 'they stay'} predicted{hint}"
        ]
