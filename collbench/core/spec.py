"""SweepSpec: what to measure. Defaults live here and nowhere else; the CLI maps onto it."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import NamedTuple

from collbench.core.collectives import DEFAULT_COLLECTIVES, REGISTRY
from collbench.core.collectives.base import IN_PLACE, OUT_OF_PLACE
from collbench.core.doctor_spec import DOCTOR, DoctorSpec
from collbench.core.dtypes import DTYPES, lookup_dtype
from collbench.core.errors import SpecError
from collbench.core.knobs import knob_args
from collbench.core.overlap import OverlapSpec
from collbench.core.stats import RANK_COMBINERS
from collbench.core.units import size_arg

REDUCE_OPS = ("sum", "prod", "min", "max", "avg")
PLACEMENT_CHOICES = (OUT_OF_PLACE, IN_PLACE, "both")
RANK_STATS = tuple(RANK_COMBINERS)
BACKENDS = ("auto", "nccl", "rccl", "gloo")
# Largest default size per backend: big enough to reach the bandwidth plateau, small
# enough that the default sweep on a laptop over gloo finishes in well under a minute.
DEFAULT_MAX_BYTES = {"gloo": 16 * 1024**2, "nccl": 1024**3, "rccl": 1024**3}
# Sizes grow by this factor per step when neither --factor nor --step-bytes is given.
DEFAULT_FACTOR = 2.0
# Repeats of a sweep when --repeats is not given: the fewest with which compare's gate kept
# identical reruns within its 5% false-alarm promise here (benchmarks/decision_rates.py:
# 1 repeat failed 4-21% of A/A pairs, 3 repeats 0 of 132); see README, "How collbench
# decides".
DEFAULT_REPEATS = 3


# Most sizes one sweep may have (-f/-i): more is a typo (`-i 1 -e 16M`), not a benchmark.
MAX_STEPS = 10_000
# Most timed operations per size (--iters): nccl-tests uses 20; a million keeps the
# samples of one size under ~100 MB per rank.
MAX_ITERS = 1_000_000
# Most repeats of a whole measurement (--repeats): a decision needs a handful; more is a
# typo that would run for days.
MAX_REPEATS = 1000
# Longest --timeout (seconds without progress before a run is declared hung): a week. inf or
# nan would pass "> 0" and break every rank's process-group timeout at start-up.
MAX_TIMEOUT_S = 7 * 24 * 3600.0


def iter_sizes(min_bytes: int, max_bytes: int, factor: float | None, step_bytes: int | None):
    """Sizes from min to max inclusive, multiplying by factor or adding step (nccl-tests),
    one at a time (a long series is counted without being built)."""
    size = min_bytes
    while size <= max_bytes:
        yield size
        if step_bytes:
            size += step_bytes
        else:
            # nccl-tests multiplies; a 0-byte start would never grow, so it steps to 1.
            size = max(int(size * (factor or DEFAULT_FACTOR)), size + 1)


def size_count(min_bytes: int, max_bytes: int, factor: float | None, step_bytes: int | None):
    """(number of sizes, exact?): exact up to MAX_STEPS, arithmetic estimate past it."""
    if max_bytes < min_bytes:
        return 0, True
    if step_bytes:
        return (max_bytes - min_bytes) // step_bytes + 1, True
    count = sum(
        1 for _ in itertools.islice(iter_sizes(min_bytes, max_bytes, factor, None), MAX_STEPS + 1)
    )
    if count <= MAX_STEPS:
        return count, True
    # Past the cap: sizes below 1/(f-1) grow by 1 byte a step, the rest by the factor.
    grow = factor or DEFAULT_FACTOR
    linear_end = min(max_bytes, math.floor(1 / (grow - 1)))
    linear = max(0, linear_end - min_bytes + 1)
    start = max(min_bytes, linear_end + 1, 1)
    scaled = (
        math.floor(math.log(max_bytes / start) / math.log(grow)) + 1 if start <= max_bytes else 0
    )
    return max(linear + scaled, MAX_STEPS + 1), False


class Step(NamedTuple):
    """One measurement: a sweep row, or an overlap probe (kind "overlap") at one ratio."""

    kind: str
    collective: str
    size_bytes: int  # requested size (before per-collective alignment to world size)
    placement: str
    ratio: float | None = None  # probes: compute:comm ratio (None: fixed compute_tflop)
    repeat: int = 0  # which repeat of the whole measurement (0-based; SweepSpec.repeats)
    dtype: str = ""  # this step's dtype, one of SweepSpec.dtypes ("": the spec's first)
    op: str = ""  # this step's reduction, one of SweepSpec.ops ("": the spec's first)


@dataclass(frozen=True)
class SweepSpec:
    """One sweep: collectives x sizes x placements, measured the same way on every rank."""

    collectives: tuple[str, ...] = DEFAULT_COLLECTIVES
    min_bytes: int = 8
    # None: the backend's default (DEFAULT_MAX_BYTES), resolved with `resolve_backend`.
    max_bytes: int | None = None
    # Multiply sizes by this (DEFAULT_FACTOR when no step is given) ...
    factor: float | None = None
    # ... or add this many bytes per step (nccl-tests -i). Not both.
    step_bytes: int | None = None
    # One dtype, or several comma-separated (`all`: every one), as nccl-tests' `-d all`:
    # sweep rows then run every size of each in turn (SweepSpec.dtypes) ...
    dtype: str = "float32"
    # ... and likewise one reduction or several (`all`), for the collectives that reduce.
    op: str = "sum"
    placement: str = "both"
    warmup: int = 5
    iters: int = 20
    check: bool = True
    rank_stat: str = "avg"
    backend: str = "auto"
    # Seconds a step may go without progress before the run is declared hung.
    timeout_s: float = 300.0
    # Overlap probes to run (collbench overlap, or sweep --overlap); None: none.
    overlap: OverlapSpec | None = None
    # Measure the plain sweep rows (False: probes only, as `collbench overlap`).
    sweep_rows: bool = True
    # The fabric this runs on (a topology's name), recorded in every row and meta.json ...
    topology: str | None = None
    # ... and the file it was read from (absolute), when it is not a catalog topology, so a
    # rank or a printed command finds it again.
    topology_file: str | None = None
    # Communication knobs (`--knob NAME=VALUE`), in the order given: every rank sets them
    # in its environment before the library starts (core.knobs.apply_knobs), and they are
    # part of every printed command, so a script run later measures what was asked for.
    knobs: tuple[tuple[str, str], ...] = ()
    # `collbench doctor`'s rounds instead of sweep rows (sweep_rows False); None: a sweep.
    doctor: DoctorSpec | None = None
    # Times the whole measurement runs in the same rank processes, interleaved (every step
    # of repeat 0, then of repeat 1, ...) so drift spreads over all of them; rows record
    # their repeat. Decisions take their statistics from repeats (ARCHITECTURE.md, "Contracts").
    # DEFAULT_REPEATS: measured (README, "How collbench decides").
    repeats: int = DEFAULT_REPEATS
    # Time the sweep rows' iterations as replays of a CUDA graph that captured them
    # (nccl-tests' -G): small sizes then read NCCL's latency without torch's per-call cost.
    # GPU backends only; meta.json's timing_method says "cuda_graph" (bench/timing.py).
    cuda_graph: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "collectives", tuple(self.collectives))
        knobs = self.knobs.items() if isinstance(self.knobs, Mapping) else self.knobs
        object.__setattr__(self, "knobs", tuple((str(n), str(v)) for n, v in knobs))
        if len({name for name, _ in self.knobs}) != len(self.knobs):
            raise SpecError("--knob", ",".join(n for n, _ in self.knobs), "repeats a knob")
        if isinstance(self.topology, (tuple, list)):  # --topology's (name, file or None)
            name, file = self.topology
            object.__setattr__(self, "topology", name)
            object.__setattr__(self, "topology_file", file)
        if self.topology_file is not None and self.topology is None:
            raise ValueError("a topology file needs the topology's name")
        if isinstance(self.overlap, dict):
            object.__setattr__(self, "overlap", OverlapSpec.from_dict(self.overlap))
        if isinstance(self.doctor, dict):
            object.__setattr__(self, "doctor", DoctorSpec.from_dict(self.doctor))
        if not self.sweep_rows and self.overlap is None and self.doctor is None:
            raise ValueError("a spec without sweep rows needs overlap probes")
        if self.doctor is not None and (self.sweep_rows or self.overlap is not None):
            raise ValueError("a doctor spec measures doctor rounds only")
        if self.doctor is not None:
            # A doctor repeats its rounds (DoctorSpec.repeats), never a sweep's steps: one
            # field, so its argv (which carries the doctor's) parses back to the same spec.
            object.__setattr__(self, "repeats", 1)
        if tuple(name.lower() for name in self.collectives) == ("all",):
            object.__setattr__(self, "collectives", tuple(REGISTRY))  # as -d all, -o all
        for name in self.collectives:
            if name not in REGISTRY:
                raise SpecError(
                    "--collective",
                    name,
                    f"is unknown{did_you_mean(name)}; choose from {', '.join(REGISTRY)} or all",
                )
        if not self.collectives:
            raise SpecError("--collective", "", "names no collective")
        if len(set(self.collectives)) < len(self.collectives):
            raise SpecError("--collective", ",".join(self.collectives), "names a collective twice")
        object.__setattr__(self, "dtype", _dtype_list(self.dtype))
        object.__setattr__(self, "op", _op_list(self.op))
        self._check_choice("--placement", self.placement, PLACEMENT_CHOICES)
        self._check_choice("--rank-stat", self.rank_stat, RANK_STATS)
        self._check_choice("--backend", self.backend, BACKENDS)
        self._check_numbers()
        for name in self.collectives:
            if not self.placements_for(name):
                note = REGISTRY[name].placement_note
                raise SpecError(
                    "--placement",
                    self.placement,
                    f"cannot be measured for {name}: {note}; use --placement both",
                )
        if self.cuda_graph and self.backend == "gloo":
            raise SpecError(
                "--cuda-graph", True, "needs a GPU backend (nccl/rccl); gloo runs on CPU"
            )
        if self.cuda_graph and not self.sweep_rows:
            raise SpecError("--cuda-graph", True, "times sweep rows; overlap probes have their own")
        self._check_lists()

    @property
    def dtypes(self) -> tuple[str, ...]:
        """The dtypes sweep rows are measured in, in order."""
        return tuple(self.dtype.split(","))

    @property
    def ops(self) -> tuple[str, ...]:
        """The reductions sweep rows of reducing collectives are measured with, in order."""
        return tuple(self.op.split(","))

    def pairs_for(self, collective: str) -> list[tuple[str, str]]:
        """The (dtype, op) pairs a collective is measured with: every op of every dtype
        for a reduction, the first op alone otherwise (its rows record none); `avg` only
        with a floating-point dtype (torch divides in floating point and cannot cast back:
        gloo raises; checked)."""
        ops = self.ops if REGISTRY[collective].reduces else self.ops[:1]
        return [
            (dtype, op)
            for dtype in self.dtypes
            for op in ops
            if op != "avg" or DTYPES[dtype].is_float or not REGISTRY[collective].reduces
        ]

    def _check_lists(self) -> None:
        several = len(self.dtypes) > 1 or len(self.ops) > 1
        if several and (self.overlap is not None or self.doctor is not None):
            what = "a doctor takes" if self.doctor is not None else "overlap probes take"
            flag = "--dtype" if len(self.dtypes) > 1 else "--op"
            value = self.dtype if flag == "--dtype" else self.op
            raise SpecError(flag, value, f"lists several; {what} one at a time")
        if "avg" in self.ops and not any(DTYPES[name].is_float for name in self.dtypes):
            # torch divides in floating point and cannot cast back (gloo raises; checked)
            raise SpecError("--op", "avg", f"needs a floating-point --dtype, not {self.dtype}")

    @staticmethod
    def _check_choice(flag: str, value: str, choices: tuple[str, ...]) -> None:
        if value not in choices:
            raise SpecError(flag, value, f"is not one of {', '.join(choices)}")

    def _check_numbers(self) -> None:
        if self.factor is not None and self.step_bytes is not None:
            raise SpecError("--factor", self.factor, "conflicts with --step-bytes: give one")
        if self.factor is not None and not (math.isfinite(self.factor) and self.factor > 1):
            raise SpecError("--factor", self.factor, "must be greater than 1")
        if self.step_bytes is not None and self.step_bytes < 1:
            raise SpecError("--step-bytes", self.step_bytes, "must be at least 1")
        if self.max_bytes is not None and self.min_bytes > self.max_bytes:
            raise SpecError(
                "--min-bytes", self.min_bytes, f"is larger than --max-bytes ({self.max_bytes})"
            )
        if self.max_bytes is not None and self.max_bytes < 1:
            raise SpecError("--max-bytes", self.max_bytes, "must be at least 1")
        if self.max_bytes is not None:
            self._check_step_count()
        if self.warmup < 0:
            raise SpecError("--warmup", self.warmup, "must be 0 or more")
        if self.warmup > MAX_ITERS:
            raise SpecError("--warmup", self.warmup, f"is more than the maximum, {MAX_ITERS:,}")
        if self.iters < 1:
            raise SpecError("--iters", self.iters, "must be at least 1")
        if self.iters > MAX_ITERS:
            raise SpecError("--iters", self.iters, f"is more than the maximum, {MAX_ITERS:,}")
        if not (isinstance(self.timeout_s, (int, float)) and 0 < self.timeout_s <= MAX_TIMEOUT_S):
            raise SpecError(
                "--timeout",
                self.timeout_s,
                f"must be more than 0 and at most {MAX_TIMEOUT_S:,.0f} seconds (7 days)",
            )
        if isinstance(self.repeats, bool) or not (
            isinstance(self.repeats, int) and 1 <= self.repeats <= MAX_REPEATS
        ):
            raise SpecError("--repeats", self.repeats, f"must be from 1 to {MAX_REPEATS:,}")

    def _check_step_count(self) -> None:
        count, exact = size_count(self.min_bytes, self.max_bytes, self.factor, self.step_bytes)
        if count <= MAX_STEPS:
            return
        if self.step_bytes is not None:
            flag, value = "--step-bytes", self.step_bytes
        else:
            flag, value = "--factor", self.factor if self.factor is not None else DEFAULT_FACTOR
        raise SpecError(
            flag,
            value,
            f"gives {'' if exact else 'about '}{count:,} sizes from {size_arg(self.min_bytes)} "
            f"to {size_arg(self.max_bytes)}; at most {MAX_STEPS:,} are allowed (raise {flag} "
            "or narrow -b/-e)",
        )

    def placements_for(self, collective: str) -> tuple[str, ...]:
        """Placements measured for a collective: the requested ones it supports, in order."""
        wanted = (OUT_OF_PLACE, IN_PLACE) if self.placement == "both" else (self.placement,)
        return tuple(p for p in wanted if p in REGISTRY[collective].placements)

    def with_backend(self, backend: str) -> SweepSpec:
        """A copy with a concrete backend and the max size that backend defaults to."""
        if self.doctor is not None:  # one size: the doctor's
            size = self.doctor.size_for(backend)
            return SweepSpec(
                **{**self.to_dict(), "backend": backend, "min_bytes": size, "max_bytes": size}
            )
        max_bytes = self.max_bytes if self.max_bytes is not None else DEFAULT_MAX_BYTES[backend]
        if self.min_bytes > max_bytes:
            raise SpecError(
                "--min-bytes",
                self.min_bytes,
                f"is larger than the default --max-bytes for {backend} ({max_bytes})",
            )
        return SweepSpec(**{**self.to_dict(), "backend": backend, "max_bytes": max_bytes})

    def sizes(self) -> list[int]:
        """Requested sizes in bytes (before per-collective alignment to world size)."""
        if self.max_bytes is None:
            raise ValueError("resolve the backend first (SweepSpec.with_backend)")
        return list(iter_sizes(self.min_bytes, self.max_bytes, self.factor, self.step_bytes))

    def steps(self) -> list[Step]:
        """Every measurement in order: the sweep rows, then the overlap probes, all of that
        once per repeat (repeat 0's steps, then repeat 1's, ... in the same order). (A
        doctor's rounds depend on the nodes it finds, so it plans none ahead.)"""
        once = []
        if self.sweep_rows:
            once += [
                Step("sweep", name, size, placement, dtype=dtype, op=op)
                for name in self.collectives
                for dtype, op in self.pairs_for(name)
                for size in self.sizes()
                for placement in self.placements_for(name)
            ]
        if self.overlap is not None:
            # One placement per probe: overlap does not depend on where the result lands.
            once += [
                Step(
                    "overlap",
                    name,
                    size,
                    self.placements_for(name)[0],
                    ratio,
                    dtype=self.dtype,
                    op=self.op,
                )
                for name in self.collectives
                for size in self.sizes()
                for ratio in self.overlap.points()
            ]
        return [step._replace(repeat=repeat) for repeat in range(self.repeats) for step in once]

    @property
    def command(self) -> str:
        """The collbench command that measures this spec: sweep, overlap (probes only) or
        doctor."""
        return DOCTOR if self.doctor is not None else "sweep" if self.sweep_rows else "overlap"

    def to_args(self) -> list[str]:
        """`collbench sweep` options that give exactly this spec, every field spelled out
        (printed commands and sbatch scripts must not depend on this version's defaults); a
        doctor's `collbench doctor` options (the doctor picks its collectives, and its
        topology is DoctorSpec's)."""
        if self.doctor is not None:
            return [
                *self.doctor.to_args(),
                "--dtype",
                self.dtype,
                *self._timing_args(),
                *knob_args(self.knobs),
            ]
        args = ["--collective", ",".join(self.collectives), "--min-bytes", size_arg(self.min_bytes)]
        if self.max_bytes is not None:
            args += ["--max-bytes", size_arg(self.max_bytes)]
        if self.step_bytes is not None:
            args += ["--step-bytes", size_arg(self.step_bytes)]
        if self.factor is not None:
            args += ["--factor", f"{self.factor:g}"]
        args += [
            "--dtype",
            self.dtype,
            "--op",
            self.op,
            "--placement",
            self.placement,
            *self._timing_args(),
            "--repeats",
            str(self.repeats),
            *(["--cuda-graph"] if self.cuda_graph else []),
            *knob_args(self.knobs),
        ]
        if self.topology is not None:
            args += ["--topology", self.topology_file or self.topology]
        if self.overlap is not None:
            args += (["--overlap"] if self.sweep_rows else []) + self.overlap.to_args()
        return args

    def _timing_args(self) -> list[str]:
        """How each size is measured and checked, and where: a sweep's and a doctor's alike."""
        return [
            "--warmup",
            str(self.warmup),
            "--iters",
            str(self.iters),
            "--check" if self.check else "--no-check",
            "--rank-stat",
            self.rank_stat,
            "--backend",
            self.backend,
            "--timeout",
            f"{self.timeout_s:g}",
        ]

    def to_dict(self) -> dict:
        data = asdict(self)
        data["collectives"] = list(self.collectives)
        data["knobs"] = dict(self.knobs)
        if self.overlap is not None:
            data["overlap"]["ratios"] = list(self.overlap.ratios)
        return data

    @classmethod
    def from_dict(cls, data: dict) -> SweepSpec:
        # A spec recorded before --repeats existed measured everything once.
        return cls(**{"repeats": 1, **data})


def _dtype_list(text: str) -> str:
    """`--dtype`: one name or alias, several comma-separated, or `all`; canonical names."""
    names = list(DTYPES) if text.strip().lower() == "all" else text.split(",")
    canonical = []
    for name in names:
        dtype = lookup_dtype(name)
        if dtype is None:
            which = f"names {name.strip()!r}, which " if len(names) > 1 else ""
            raise SpecError(
                "--dtype", text, f"{which}is unknown; choose from {', '.join(DTYPES)} or all"
            )
        canonical.append(dtype.name)
    if len(set(canonical)) != len(canonical):
        raise SpecError("--dtype", text, "names a dtype twice")
    return ",".join(canonical)


def _op_list(text: str) -> str:
    """`--op`: one reduction, several comma-separated, or `all`."""
    names = list(REDUCE_OPS) if text.strip().lower() == "all" else text.split(",")
    names = [name.strip() for name in names]
    for name in names:
        if name not in REDUCE_OPS:
            which = f"names {name!r}, which " if len(names) > 1 else ""
            raise SpecError("--op", text, f"{which}is not one of {', '.join(REDUCE_OPS)} or all")
    if len(set(names)) != len(names):
        raise SpecError("--op", text, "names a reduction twice")
    return ",".join(names)


def did_you_mean(name: str) -> str:
    """' (did you mean all_reduce?)' for 'allreduce', 'all-reduce' or a near miss; else ''."""
    import difflib

    squeezed = {known.replace("_", ""): known for known in REGISTRY}
    close = squeezed.get(name.lower().replace("-", "").replace("_", ""))
    close = close or next(iter(difflib.get_close_matches(name, list(REGISTRY), 1, 0.75)), None)
    return f" (did you mean {close}?)" if close else ""
