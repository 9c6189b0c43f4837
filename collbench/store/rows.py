"""Result rows: one typed row per measurement, exactly as rows.jsonl stores it.

The method, in full: docs/run-directory.md#collbench-store-rows-py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from datetime import datetime, timezone
from types import SimpleNamespace
from typing import Any

from collbench.core.doctor_spec import DOCTOR
from collbench.core.errors import SpecError
from collbench.core.limits import INT64_MAX
from collbench.store.row_values import (
    Check,
    as_plain,
    float_range,
    floats_range,
    pack_samples,
    short,
    type_check,
)

SCHEMA_VERSION = 1
SWEEP = "sweep"
OVERLAP = "overlap"
# The probe's timed series (bench.overlap.clock.SERIES): each has t_<name>_us, _us_p50, _cv.
PROBE_SERIES = ("comm", "comp", "both", "comp_during", "comm_during")


@dataclass(frozen=True, kw_only=True)
class ResultRow:
    """One run x collective x dtype x size x placement (docs/run-directory.md, row columns).

    Units live in the names. A row read from an older run lacks some columns: they are
    None (see `row_from_dict`).
    """

    schema_version: int = SCHEMA_VERSION
    run_id: str | None
    timestamp_utc: str | None
    kind: str = SWEEP
    collective: str
    backend: str | None
    dtype: str
    op: str | None  # None for collectives that do not reduce
    root: int | None  # -1 for collectives without a root
    size_bytes: int  # nccl-tests' "size": max(send, recv) bytes per rank
    count: int | None  # per-rank element count, as nccl-tests prints it
    world_size: int
    nodes: int | None
    ranks_per_node: int | None
    placement: str  # out_of_place | in_place
    warmup: int | None
    iters: int | None
    # Which repeat of the run's measurement (0-based, SweepSpec.repeats); None: a row that
    # does not record one (an older run, an import), read as repeat 0 (`repeat_index`).
    repeat: int | None = None
    time_us: float  # the cross-rank statistic of the batch time (default: average)
    time_us_p50: float | None  # None: the source kept no per-iteration samples (imports)
    time_us_p95: float | None
    time_us_min: float | None
    time_us_max: float | None
    time_cv: float | None
    algbw_gbps: float
    busbw_gbps: float
    n_wrong: int | None  # None: data check off
    topology: str | None
    knobs: dict[str, Any]  # {"env": NCCL_*/... variables, "settings": collbench's own}
    # A row read back holds them packed (store.row_values.Samples, equal to the list).
    time_us_samples: list[float]

    @property
    def repeat_index(self) -> int:
        """The repeat this row belongs to: a row without one is repeat 0."""
        return self.repeat or 0

    def to_dict(self) -> dict[str, Any]:
        """The row as rows.jsonl holds it: every column, in column order."""
        # The fields in column order, as __init__ set them (a frozen row holds nothing else);
        # dataclasses.fields per row made writing a 200k-row import take seconds on its own.
        data = dict(self.__dict__)
        data["time_us_samples"] = as_plain(self.time_us_samples)
        return data


@dataclass(frozen=True, kw_only=True)
class ProbeRow(ResultRow):
    """An overlap probe's row (kind "overlap"): the collective alone, then the probe."""

    kind: str = OVERLAP
    compute_ratio: float | None  # requested compute:comm ratio; None: fixed compute
    compute_ratio_actual: float | None
    compute_dtype: str | None
    matmul_shape: str | None  # "MxNxK"
    matmul_reps: int | None
    compute_streams: int | None
    compute_tflop: float | None
    compute_tflops: float | None
    t_comm_us: float | None
    t_comm_us_p50: float | None
    t_comm_cv: float | None
    t_comp_us: float | None
    t_comp_us_p50: float | None
    t_comp_cv: float | None
    t_both_us: float | None
    t_both_us_p50: float | None
    t_both_cv: float | None
    t_comp_during_us: float | None
    t_comp_during_us_p50: float | None
    t_comp_during_cv: float | None
    t_comm_during_us: float | None
    t_comm_during_us_p50: float | None
    t_comm_during_cv: float | None
    overlap_pct: float | None
    exposed_comm_us: float | None
    comm_wait_us: float | None
    compute_slowdown: float | None
    comm_slowdown: float | None
    probe_timing: str | None
    short_holds: int | None  # timed spans (all ranks) that began before the host enqueued them
    probe_samples_us: dict[str, list[float]] | None  # per series "t_<name>"


@dataclass(frozen=True, kw_only=True)
class DoctorRow(ResultRow):
    """A doctor round's row (kind "doctor"): one group's collective in the base columns
    (world_size: ranks in the group; a pair row is one rank pair's send/recv, one direction
    with both running), then which stage, group and ranks it was, and each rank's time."""

    kind: str = DOCTOR
    stage: str | None  # collbench.core.doctor_spec.STAGES
    group: str | None  # "all", "node HOST", "rail I", "HOSTA<->HOSTB", "bisect L1 a"
    round_index: int | None  # pair/shuffle round (0-based), bisect level; else 0
    group_hosts: list[str] | None  # hosts in the group (a pair: its two, in order)
    group_ranks: list[int] | None  # global ranks in the group
    # Each group rank's own time, group_ranks' order: all-reduce, its median wait in the
    # arrival-timed collectives (bench.doctor_rounds.arrival_waits); send/recv, its batch time.
    rank_time_us: list[float] | None
    # Per group rank: iterations in which its wait was the group's shortest (it came last,
    # the others waited for it); all-reduce: the arrival-timed ones.
    rank_last_count: list[int] | None


def utc_now() -> str:
    """A timestamp as rows and meta.json record it (UTC, microseconds)."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


ROW_TYPES: dict[str, type[ResultRow]] = {SWEEP: ResultRow, OVERLAP: ProbeRow, DOCTOR: DoctorRow}
# The row kinds, a closed set: select rows by kind with `rows_of` (never `isinstance`, as
# ProbeRow and DoctorRow are ResultRows too, nor a string of your own).
ROW_KINDS = tuple(ROW_TYPES)
_COLUMNS_OF = {kind: tuple(column.name for column in fields(kind)) for kind in ROW_TYPES.values()}
ROW_COLUMNS = _COLUMNS_OF[ResultRow]
ALL_COLUMNS = _COLUMNS_OF[ProbeRow]
# Doctor rows carry these after ROW_COLUMNS.
DOCTOR_COLUMNS = _COLUMNS_OF[DoctorRow][len(ROW_COLUMNS) :]


def row_from_dict(data: Any, where: str = "a row") -> ResultRow:
    """The typed row of a JSON row. Columns an older row lacks are None; a row without a
    kind is a sweep row (rows had no kind before overlap probes). SpecError naming `where`
    (file and line) for a row that is not an object or whose kind collbench does not know;
    columns it does not know are not read."""
    if not isinstance(data, Mapping):
        raise SpecError("row", type(data).__name__, f"in {where} is not a JSON object")
    kind = data.get("kind", SWEEP)
    row_type = ROW_TYPES.get(kind) if isinstance(kind, str) else None
    if row_type is None:
        raise SpecError(
            "kind", kind, f"in {where} is not a row kind collbench reads ({', '.join(ROW_TYPES)})"
        )
    values = {column: data.get(column) for column in _COLUMNS_OF[row_type]}
    for column in _REQUIRED:
        if values[column] is None:
            raise SpecError(column, None, f"is missing in {where}: not a result row")
    values["time_us_samples"] = pack_samples(values["time_us_samples"])
    _check(values, _CHECKS_OF[row_type], where)
    return row_type(**{**values, "kind": kind})


def _check(values: dict[str, Any], checks: tuple[Any, ...], where: str) -> None:
    """SpecError naming the first column (in column order) of a wrong type, or else the
    first one out of its range. `checks`: (column, type check, range check) in column order;
    a value that is None passes both."""
    out_of_range = None
    for column, of_type, in_range in checks:
        value = values[column]
        if value is None:
            continue
        problem = of_type(value) if of_type is not None else None
        if problem:
            raise SpecError(column, short(value), f"in {where} {problem}")
        if out_of_range is None and in_range is not None:
            problem = in_range(value)
            if problem:
                out_of_range = (column, value, problem)
    if out_of_range is not None:
        column, value, problem = out_of_range
        raise SpecError(column, short(value), f"in {where} {problem}")


def rows_of(rows: Iterable[ResultRow], kind: str) -> list[Any]:
    """The rows of one kind (SWEEP, OVERLAP or DOCTOR), in the order given: the one
    selector of rows by kind. A kind outside ROW_KINDS is a ValueError (a typo would
    otherwise select nothing)."""
    return [row for row in rows if row_is(row, kind)]


def row_is(row: ResultRow, kind: str) -> bool:
    """Whether one row is of `kind` (rows_of for a row that arrives alone, as a sink's)."""
    if kind not in ROW_TYPES:
        raise ValueError(f"{kind!r} is not a row kind ({', '.join(ROW_KINDS)})")
    return row.kind == kind


def point_key(row: ResultRow) -> tuple[str, str, int, str, str]:
    """What one measured point of a sweep is, whatever its repeat: (collective, placement,
    size_bytes, dtype, op). The one row key every reader that pairs rows across repeats or
    runs uses (compare, noise): a run's dtypes and ops are different points, never repeats."""
    return (
        str(row.collective),
        str(row.placement),
        int(row.size_bytes),
        str(row.dtype),
        str(row.op),
    )


def median_over_repeats(rows: Iterable[ResultRow]) -> list[ResultRow]:
    """One row per measured point of a run measured with --repeats: the rows of one run that
    differ only in their repeat become one. A sweep point's time_us is the median over its
    repeats (core.stats.median: the mean of the middle two for an even count), its
    algbw/busbw follow from that time, and its other columns are those of the repeat whose
    time is nearest below the median. A probe point is the repeat whose overlap_pct is the
    median (the lower middle one for an even count), unchanged. Rows that record no repeat
    (older runs, imports) and doctor rows pass through. Order: each point where it first
    appears; with one repeat, the rows come back as given."""
    groups: dict[Any, list[ResultRow]] = {}
    for row in rows:
        key: Any = id(row)
        if row.kind in (SWEEP, OVERLAP) and row.repeat is not None:
            key = (row.run_id, row.kind, row.collective, row.dtype, row.op, row.root)
            key += (row.placement, row.size_bytes, row.world_size)
            key += (getattr(row, "compute_ratio", None),)
        groups.setdefault(key, []).append(row)
    return [_median_row(group) for group in groups.values()]


def _median_row(rows: list[ResultRow]) -> ResultRow:
    if len(rows) == 1:
        return rows[0]
    if isinstance(rows[0], ProbeRow):
        ordered = sorted(rows, key=lambda row: getattr(row, "overlap_pct", None) or 0.0)
        return ordered[(len(ordered) - 1) // 2]
    from collbench.core.stats import median

    time_us = median(row.time_us for row in rows)
    ordered = sorted(rows, key=lambda row: row.time_us)
    base = ordered[(len(ordered) - 1) // 2]
    if time_us == base.time_us:
        return base
    algbw = base.size_bytes / time_us / 1e3 if time_us > 0 else 0.0
    factor = base.busbw_gbps / base.algbw_gbps if base.algbw_gbps else 0.0
    return replace(base, time_us=time_us, algbw_gbps=algbw, busbw_gbps=algbw * factor)


# Columns without which a line is not a row; every other column may be missing (an older
# row) or null, and otherwise must have its field's type.
_REQUIRED = ("collective", "size_bytes")
COLUMN_TYPES = {
    column.name: str(column.type) for row_type in _COLUMNS_OF for column in fields(row_type)
}


def check_collective(row: ResultRow, where: str) -> ResultRow:
    """The row, if its collective is one collbench knows; else a SpecError naming `where`.
    (Loading a run checks this; a row built in memory may name any collective.)"""
    from collbench.core.collectives import REGISTRY

    if row.collective not in REGISTRY:
        raise SpecError(
            "collective",
            row.collective,
            f"in {where} is not a collective collbench knows ({', '.join(REGISTRY)})",
        )
    return row


# A probe's figures (bench.overlap.probe.overlap_figures) its row holds as they are.
_PROBE_FIGURES = "overlap_pct exposed_comm_us comm_wait_us compute_slowdown comm_slowdown".split()
# Ranges, checked after types: a row outside them is not a measurement (a world of 0 ranks
# divides by zero in fit; a NaN, zero or negative time has no bandwidth). None passes.
_AT_LEAST = {
    "world_size": 1,
    "nodes": 1,
    "ranks_per_node": 1,
    "size_bytes": 0,
    "count": 0,
    "warmup": 0,
    "iters": 0,
    "repeat": 0,
    "n_wrong": 0,
    "matmul_reps": 0,
    "compute_streams": 0,
    "round_index": 0,
}
# Float columns that must be more than 0 (a batch time); every other float column (and
# each item of a list of floats) must be finite, and these non-negative too.
_POSITIVE = ("time_us",)
_NON_NEGATIVE = ("time_us_p50", "time_us_p95", "time_us_min", "time_us_max", "time_cv")
_NON_NEGATIVE += ("algbw_gbps", "busbw_gbps", "time_us_samples", "rank_time_us")
_NON_NEGATIVE += tuple(f"t_{name}_us{end}" for name in PROBE_SERIES for end in ("", "_p50"))


def int_bounds(column: str) -> tuple[int, int]:
    """The least and most an integer column of a row holds: int64's range (what a parquet
    column holds), narrowed where the column's meaning is (a size, a count, #wrong: 0)."""
    return _AT_LEAST.get(column, -INT64_MAX - 1), INT64_MAX


def _range_check(column: str, annotation: str) -> Check | None:
    """The range check of a value of the right type in `column` (None: no range)."""
    if column in _AT_LEAST:
        least = _AT_LEAST[column]  # and at most int64's, what a parquet column holds
        return lambda value: None if least <= value <= INT64_MAX else f"must be {least} to 2^63-1"
    if column in ("rank_last_count", "group_ranks"):  # lists of integers
        return lambda value: None if all(0 <= i <= INT64_MAX for i in value) else "out of range"
    base = annotation.removesuffix(" | None")
    positive, non_negative = column in _POSITIVE, column in _NON_NEGATIVE
    if base == "float":
        return lambda value: float_range(value, positive, non_negative)
    return (lambda value: floats_range(value, non_negative)) if base == "list[float]" else None


# Each column's checks, compiled once (a value that is None passes both).
_TYPE_CHECKS = {column: type_check(annotation) for column, annotation in COLUMN_TYPES.items()}
_RANGE_CHECKS = {
    column: _range_check(column, annotation) for column, annotation in COLUMN_TYPES.items()
}
_CHECKS_OF = {
    row_type: tuple(
        (column, _TYPE_CHECKS[column], _RANGE_CHECKS[column])
        for column in columns
        if _TYPE_CHECKS[column] is not None or _RANGE_CHECKS[column] is not None
    )
    for row_type, columns in _COLUMNS_OF.items()
}


@dataclass
class RowBuilder:
    """Turns a rank-combined measurement into a result row with the run's context."""

    run_id: str
    spec: Any
    world_size: int
    nodes: int
    knobs: dict[str, Any]
    topology: str | None = None

    def build(
        self,
        collective: str,
        placement: str,
        measured: Any,
        repeat: int = 0,
        dtype: str = "",
        op: str = "",
    ) -> ResultRow:
        """A sweep row from a `bench.runner.Measured` (geometry, stats, n_wrong), measured
        in repeat `repeat` (0-based), in `dtype` with `op` ("": the spec's first)."""
        return ResultRow(**self._base(collective, placement, measured, repeat, dtype, op))

    def build_probe(
        self, collective: str, placement: str, probe: Any, timing: str, repeat: int = 0
    ) -> ProbeRow:
        """A kind "overlap" row: the collective alone in the base columns, then the probe."""
        # the collective alone, shaped like a sweep measurement
        alone = SimpleNamespace(
            geometry=probe.geometry, stats=probe.series["comm"], n_wrong=probe.n_wrong
        )
        base = self._base(collective, placement, alone, repeat)
        compute, figures = probe.compute, probe.figures
        series: dict[str, Any] = {}
        samples = {}
        for name in PROBE_SERIES:
            stats = probe.series[name]
            series[f"t_{name}_us"] = None if stats is None else stats.time_us
            series[f"t_{name}_us_p50"] = None if stats is None else stats.time_us_p50
            series[f"t_{name}_cv"] = None if stats is None else stats.time_cv
            if stats is not None:
                samples[f"t_{name}"] = [round(sample, 3) for sample in stats.samples_us]
        return ProbeRow(
            **{**base, "kind": OVERLAP},
            compute_ratio=probe.ratio,
            compute_ratio_actual=figures.compute_ratio_actual,
            compute_dtype=compute.dtype,
            matmul_shape="x".join(map(str, compute.shape)),
            matmul_reps=compute.reps,
            compute_streams=compute.streams,
            compute_tflop=compute.tflop,
            compute_tflops=compute.tflop / (probe.series["comp"].time_us * 1e-6),
            **series,
            **{name: getattr(figures, name) for name in _PROBE_FIGURES},
            probe_timing=timing,
            short_holds=probe.short_holds,
            probe_samples_us=samples,
        )

    def build_doctor(
        self, collective: str, placement: str, measured: Any, group: DoctorGroup, repeat: int = 0
    ) -> DoctorRow:
        """A kind "doctor" row: one group's measurement, its bandwidth for the group's size."""
        from collbench.core.bandwidth import bus_factor

        base = self._base(collective, placement, measured, repeat)
        size = len(group.ranks)
        nodes = len(set(group.hosts))
        return DoctorRow(
            **{
                **base,
                "kind": DOCTOR,
                "world_size": size,
                "nodes": nodes,
                "ranks_per_node": size // max(1, nodes),
                "busbw_gbps": base["algbw_gbps"] * bus_factor(collective, size),
            },
            stage=group.stage,
            group=group.label,
            round_index=group.round_index,
            group_hosts=list(group.hosts),
            group_ranks=list(group.ranks),
            rank_time_us=[round(value, 3) for value in group.rank_time_us],
            rank_last_count=list(group.rank_last_count),
        )

    def _base(
        self,
        collective: str,
        placement: str,
        measured: Any,
        repeat: int,
        dtype: str = "",
        op: str = "",
    ) -> dict[str, Any]:
        """The sweep columns, by name."""
        from collbench.core.bandwidth import algbw_gbps, bus_factor
        from collbench.core.collectives import REGISTRY

        coll = REGISTRY[collective]
        stats = measured.stats
        algbw = algbw_gbps(measured.geometry.size_bytes, stats.time_us)
        return {
            "schema_version": SCHEMA_VERSION,
            "run_id": self.run_id,
            "timestamp_utc": utc_now(),
            "kind": SWEEP,
            "collective": collective,
            "backend": self.spec.backend,
            "dtype": dtype or self.spec.dtypes[0],
            "op": (op or self.spec.ops[0]) if coll.reduces else None,
            "root": coll.root,
            "size_bytes": measured.geometry.size_bytes,
            "count": measured.geometry.count,
            "world_size": self.world_size,
            "nodes": self.nodes,
            "ranks_per_node": self.world_size // max(1, self.nodes),
            "placement": placement,
            "warmup": self.spec.warmup,
            "iters": self.spec.iters,
            "repeat": repeat,
            "time_us": stats.time_us,
            "time_us_p50": stats.time_us_p50,
            "time_us_p95": stats.time_us_p95,
            "time_us_min": stats.time_us_min,
            "time_us_max": stats.time_us_max,
            "time_cv": stats.time_cv,
            "algbw_gbps": algbw,
            "busbw_gbps": algbw * bus_factor(collective, self.world_size),
            "n_wrong": measured.n_wrong,
            "topology": self.topology,
            "knobs": self.knobs,
            "time_us_samples": [round(sample, 3) for sample in stats.samples_us],
        }


@dataclass(frozen=True)
class DoctorGroup:
    """Which doctor group a measurement was, and its ranks' own figures (DoctorRow's)."""

    stage: str
    label: str
    round_index: int
    hosts: tuple[str, ...]
    ranks: tuple[int, ...]
    rank_time_us: tuple[float, ...]
    rank_last_count: tuple[int, ...]
