"""What a doctor run should reach, and the bar below which a measurement is flagged (pure).

The method, in full: docs/doctor.md#analysis-doctor-expect-py.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from collbench.analysis.fit.vs_topology import run_placement
from collbench.analysis.model.costmodel import Group, predict
from collbench.analysis.rules.bands import band_of
from collbench.analysis.rules.decision import MIN_REPEATS, Evidence, spread_pct
from collbench.core.doctor_spec import GPU_PAIR, STAGES, DoctorSpec
from collbench.core.errors import SpecError
from collbench.core.noise import NoiseFloor
from collbench.core.units import format_number, format_size, size_arg
from collbench.store.rows import DoctorRow
from collbench.topologies.schema import Topology

FLEET = "fleet median"
# The share of the topology's bound a healthy fabric is expected to reach (see above).
TOPOLOGY_EFFICIENCY = 0.8
# A fleet median needs this many peers: with two, the median sits between them and
# neither can be an outlier.
MIN_FLEET = 3
MAD_TO_SIGMA = 1.4826  # scales a MAD to a normal distribution's standard deviation
# The factor that makes MAD_TO_SIGMA x MAD of `count` normal values unbiased for sigma (the
# MAD of few values is small). Simulated: 1 / the mean of 1.4826 x MAD over 200,000 samples
# of `count` standard normal values; from 10 values on, count / (count - 0.8) is within 1%.
_SMALL_SAMPLE = {3: 1.483, 4: 1.362, 5: 1.219, 6: 1.190, 7: 1.137, 8: 1.128, 9: 1.103}
# Stages whose rows are all-reduces (busbw 0 with one rank: nothing to judge).
ALL_REDUCE_STAGES = ("full", "intra", "rail", "bisect")
PAIR_STAGES = ("pair", "shuffle")


@dataclass(frozen=True)
class Expectation:
    """What each stage should reach, and where that figure comes from."""

    source: str  # "--expect-busbw", "topology NAME ...", "baseline PATH" or FLEET
    busbw_gbps: dict[str, float] = field(default_factory=dict)  # stage -> GB/s; {}: fleet
    tolerance_pct: float = 5.0  # flag what is below expected * (1 - tolerance_pct / 100)
    # A baseline's noise per stage (%, decision.spread_pct of its repeats): the bar is
    # expected * (1 - max(tolerance, spread) / 100).
    spread_pct: dict[str, float] = field(default_factory=dict)
    # A baseline's repeat figures per stage, for the decision rule (decision.judge).
    evidence: dict[str, Evidence] = field(default_factory=dict)
    notes: tuple[str, ...] = ()  # what the expectation could not give, and why
    # A recorded A/A noise floor (--noise-floor) and its figure for the run's size band (%,
    # a change either way; None: no floor, or none for that band).
    noise_floor: NoiseFloor | None = None
    floor_pct: float | None = None

    def bar_factor(self, stage: str) -> float:
        """The bar for `stage` as a share of the expected figure: min(1 - margin,
        1 / (1 + floor)), the margin (the tolerance or the spread, %) capped at 99%."""
        margin = max(self.tolerance_pct, self.spread_pct.get(stage, 0.0))
        factor = 1 - min(margin, 99.0) / 100
        if self.floor_pct is not None:
            factor = min(factor, 1 / (1 + self.floor_pct / 100))
        return factor

    @property
    def floor_source(self) -> str:
        """Where the floor came from (the file's path), "" without one."""
        return self.noise_floor.source if self.noise_floor is not None else ""


@dataclass(frozen=True)
class Bar:
    """The line one kind of measurement is judged against."""

    reference_gbps: float  # the expected figure, or the fleet's median
    threshold_gbps: float  # a value below this is flagged
    source: str  # Expectation.source, or FLEET
    peers: int = 0  # fleet: how many values the median is over (0: an expectation)
    spread_pct: float | None = None  # a baseline's own spread, where it set the bar
    floor_pct: float | None = None  # a recorded A/A floor for the size's band ...
    floor_source: str = ""  # ... and where it came from

    def describe(self, what: str = "") -> str:
        """'fleet median of 6 pairs 0.412 GB/s' or 'expected 40 GB/s from --expect-busbw'."""
        figure = f"{gbps(self.reference_gbps)} GB/s"
        if self.source == FLEET:
            return f"fleet median of {self.peers} {what or 'values'} {figure}"
        noise = []
        if self.spread_pct is not None:
            noise.append(f"its spread {self.spread_pct:.0f}%")
        if self.floor_pct is not None:
            noise.append(f"A/A floor {self.floor_pct:.3g}% from {self.floor_source}")
        said = f" ({', '.join(noise)})" if noise else ""
        return f"expected {figure} from {self.source}{said}"


def gbps(value: float) -> str:
    """A bandwidth as evidence shows it: 3 significant digits (0.0123, 0.412, 1234)."""
    return format_number(value, 3)


def bar_for(
    stage: str, values: Sequence[float], expectation: Expectation, spec: DoctorSpec
) -> Bar | None:
    """The bar for `stage`: the expectation's figure when it has one, else the fleet's
    (None: fewer than MIN_FLEET values to take a median of)."""
    expected = expectation.busbw_gbps.get(stage)
    if expected is not None:
        return Bar(
            expected,
            expected * expectation.bar_factor(stage),
            expectation.source,
            spread_pct=expectation.spread_pct.get(stage),
            floor_pct=expectation.floor_pct,
            floor_source=expectation.floor_source,
        )
    # A node's few local pairs (3 with 3 ranks) give a MAD of two values: the tolerance alone.
    return fleet_bar(values, spec, 0.0 if stage == GPU_PAIR else spec.outlier_mads)


def fleet_bar(values: Iterable[float], spec: DoctorSpec, outlier_mads: float) -> Bar | None:
    """The fleet's bar over `values` (GB/s, > 0): flag what is both `fleet_tolerance_pct`
    below their median and `outlier_mads` scaled MADs below it. None with fewer than
    MIN_FLEET values.

    The MAD is taken of the logarithms, so the spread is a factor: noise on a bandwidth is
    multiplicative, and with a relative spread of 25% or more a MAD in GB/s would put the bar
    below zero, so that nothing, not even a link ten times slower, could ever be flagged.
    It is scaled to an unbiased standard deviation for the few values a fleet has."""
    known = [value for value in values if math.isfinite(value) and value > 0]
    if len(known) < MIN_FLEET:
        return None
    middle = median_of(known)
    logs = [math.log(value) for value in known]
    log_middle = median_of(logs)
    # Without the small-sample factor a fleet of 4 reads as quieter than it is.
    unbiased = _SMALL_SAMPLE.get(len(known), len(known) / (len(known) - 0.8))
    spread = MAD_TO_SIGMA * unbiased * median_of([abs(value - log_middle) for value in logs])
    threshold = min(
        middle * (1 - spec.fleet_tolerance_pct / 100), middle * math.exp(-outlier_mads * spread)
    )
    return Bar(middle, threshold, FLEET, len(known))


def median_of(values: Sequence[float]) -> float:
    """The median of a non-empty list of numbers (the mean of the middle two for an even
    count), without core.stats.median's per-value checks: the doctor takes millions of
    these at fleet scale."""
    return float(statistics.median(values))


def repeat_medians(rows: Iterable[DoctorRow]) -> dict[int, float]:
    """The median busbw of `rows` per repeat index (repeats in the order first seen)."""
    by_repeat: dict[int, list[float]] = {}
    for row in rows:
        by_repeat.setdefault(row.repeat_index, []).append(float(row.busbw_gbps))
    return {repeat: median_of(values) for repeat, values in by_repeat.items()}


def expectation_from(
    spec: DoctorSpec,
    *,
    topology: Topology | None = None,
    baseline_rows: Sequence | None = None,
    baseline_path: str | None = None,
    backend: str | None = None,
    nodes: int | None = None,
    ranks_per_node: int | None = None,
    noise_floor: NoiseFloor | None = None,
) -> Expectation:
    """The expectation of a doctor run: `--expect-busbw` > topology > baseline > fleet.

    topology: already loaded (the caller reads the file); nodes and ranks_per_node place this
    run on it (default: the topology's own). baseline_rows: the rows of the run at
    `baseline_path` (the caller loads it). backend: this run's, to know its size when
    spec.size_bytes is None. SpecError("--baseline", ...) when the baseline has no doctor rows
    or was measured at another size. noise_floor: already loaded (--noise-floor); its figure
    for the size's band widens the bar of every expectation but the fleet.
    """
    size_bytes = spec.size_for(backend) if backend else spec.size_bytes
    tolerance = spec.tolerance_pct
    if spec.expect_busbw_gbps is not None:
        figures = dict.fromkeys(STAGES, spec.expect_busbw_gbps)
        expectation = Expectation("--expect-busbw", figures, tolerance)
    elif topology is not None:
        bounds = topology_bounds(
            topology, nodes=nodes, ranks_per_node=ranks_per_node, size_bytes=size_bytes
        )
        figures = {stage: bound * TOPOLOGY_EFFICIENCY for stage, bound in bounds.items()}
        source = f"topology {topology.name} at {TOPOLOGY_EFFICIENCY:.0%} of its bound"
        expectation = Expectation(source, figures, tolerance)
    elif baseline_rows is not None:
        evidence = baseline_evidence(baseline_rows, baseline_path, size_bytes)
        expectation = _from_baseline(evidence, f"baseline {baseline_path}", tolerance)
    else:
        expectation = Expectation(FLEET, {}, tolerance)
    return _with_floor(expectation, noise_floor, size_bytes)


def _with_floor(
    expectation: Expectation, noise_floor: NoiseFloor | None, size_bytes: int | None
) -> Expectation:
    """The expectation holding `noise_floor` and its figure for the band of `size_bytes`; a
    note where the floor cannot be used (the fleet, an unknown size, a band it lacks)."""
    if noise_floor is None:
        return expectation
    where = f"--noise-floor {noise_floor.source}"
    if expectation.source == FLEET:
        note = (
            f"{where} not used: the fleet is its own reference; the floor holds against "
            "--expect-busbw, --topology or --baseline"
        )
    elif size_bytes is None:
        note = f"{where} not used: the run's size, and so its band, is unknown"
    else:
        band = band_of(size_bytes)
        floor_pct = noise_floor.pct_at(size_bytes, band)[0]
        if floor_pct is not None:
            return replace(expectation, noise_floor=noise_floor, floor_pct=float(floor_pct))
        note = (
            f"{where} holds no floor for the {band} band ({format_size(size_bytes)}): "
            "the bar is not widened by it"
        )
        expectation = replace(expectation, noise_floor=noise_floor)
    return replace(expectation, notes=(*expectation.notes, note))


def _from_baseline(evidence: dict[str, Evidence], source: str, tolerance: float) -> Expectation:
    """Figures and spreads of the stages the baseline measured often enough to know its
    noise; a note for each of the others (judged by the fleet instead)."""
    figures, spreads, kept, notes = {}, {}, {}, []
    for stage, one in evidence.items():
        if one.n_repeats < MIN_REPEATS:
            notes.append(
                f"{source} holds {one.n_repeats} repeat(s) of the {stage} stage; its spread "
                f"needs {MIN_REPEATS} (rerun it with --repeats {MIN_REPEATS}): {stage} is "
                "judged by the fleet"
            )
            continue
        figures[stage], kept[stage] = one.figure, one
        spreads[stage] = spread_pct(one) or 0.0
    return Expectation(source, figures, tolerance, spreads, kept, tuple(notes))


def topology_bounds(
    topology: Topology,
    *,
    nodes: int | None = None,
    ranks_per_node: int | None = None,
    size_bytes: int | None = None,
) -> dict[str, float]:
    """The cost model's busbw (GB/s) for each stage's group on `topology`:
    - intra: an all-reduce over one node's ranks (scale-up);
    - rail: an all-reduce over one rank per node, every rail at once (each rank its NIC);
    - pair, shuffle: one rank pair's send/recv across two nodes (one NIC each way);
    - full: the all-reduce over every rank.
    nodes, ranks_per_node: this run's layout (default: the topology's); size_bytes: the run's
    size (None: the bound as the size grows). Stages a layout cannot have (intra with one rank
    per node; rail and pair on one node) are left out."""
    nodes = nodes or topology.nodes
    per_node = ranks_per_node or topology.accelerators_per_node
    placed = topology if nodes <= topology.nodes else topology.with_nodes(nodes)
    per_domain = min(nodes, placed.nodes_per_domain)  # one rank per node: nodes per domain
    groups: dict[str, tuple[Topology, str, Group]] = {}
    if per_node >= 2:
        inside = run_placement(placed, per_node, 1, per_node)
        groups["intra"] = (inside.topology, "all_reduce", inside.group)
    if nodes >= 2:
        # Every rail runs at once: per_node ranks share a node's NICs (ranks_per_node).
        groups["rail"] = (placed, "all_reduce", Group(nodes, per_domain, per_node))
        pair = Group(2, min(2, per_domain), per_node)
        groups["pair"] = groups["shuffle"] = (placed, "sendrecv", pair)
    if nodes * per_node >= 2:
        full = run_placement(placed, nodes * per_node, nodes, per_node)
        groups["full"] = (full.topology, "all_reduce", full.group)
    bounds = {}
    for stage, (on, collective, group) in groups.items():
        prediction = predict(on, collective, size_bytes or 1 << 40, group)
        bounds[stage] = prediction.busbw_gbps if size_bytes else prediction.peak_busbw_gbps
    return bounds


def baseline_evidence(
    rows: Sequence, path: str | None, size_bytes: int | None
) -> dict[str, Evidence]:
    """Each stage's repeat figures in a baseline run's doctor rows: per repeat, the median
    busbw over the stage's rows (pair and shuffle rows together, under both names). A row
    without a repeat index is repeat 0. SpecError("--baseline", path, ...) without doctor
    rows or when the baseline was measured at another size than `size_bytes` (None: not
    checked)."""
    doctor_rows = [row for row in rows if getattr(row, "stage", None) in STAGES]
    if not doctor_rows:
        raise SpecError("--baseline", path, "holds no doctor rows: give a `collbench doctor` run")
    sizes = sorted({int(row.size_bytes) for row in doctor_rows})
    if size_bytes is not None and sizes != [size_bytes]:
        measured = ", ".join(format_size(size) for size in sizes)
        raise SpecError(
            "--baseline",
            path,
            f"was measured at {measured} and this run at {format_size(size_bytes)}: "
            f"busbw depends on the size; rerun with --size {size_arg(sizes[0])}",
        )
    by_stage: dict[str, list[DoctorRow]] = {}
    for row in doctor_rows:
        if row.stage in ALL_REDUCE_STAGES and row.world_size < 2:
            continue  # one rank: busbw 0, nothing moved
        by_stage.setdefault("pair" if row.stage in PAIR_STAGES else row.stage, []).append(row)
    evidence = {
        stage: Evidence.of([median for _, median in sorted(repeat_medians(rows).items())])
        for stage, rows in by_stage.items()
    }
    if "pair" in evidence:
        evidence["shuffle"] = evidence["pair"]
    return evidence
