"""Doctor: what `collbench doctor` measures (DoctorSpec) and the names of its stages (pure).

Rounds that pull the nodes apart, because in one collective every rank waits for the
slowest link; what each stage runs and finds: docs/doctor.md's table of stages.
No torch here: the CLI validates a DoctorSpec before any rank starts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from collbench.core.errors import SpecError

DOCTOR = "doctor"  # the kind of a doctor row and the command that measures it
GPU_PAIR = "gpu-pair"
# A one-node doctor (a node check) on GPUs ends with a gemm burn-in (no rows: meta.json's doctor.gemm)
GEMM = "gemm"
STAGES = ("full", "intra", GPU_PAIR, "rail", "pair", "shuffle", "bisect")
# The message size per rank when --size is not given: big enough to be bandwidth-bound on
# the backend's fabric, small enough that every round of a gloo doctor on a laptop is quick.
DEFAULT_DOCTOR_BYTES = {"gloo": 16 * 1024**2, "nccl": 256 * 1024**2, "rccl": 256 * 1024**2}
# Below this a transfer measures latency, not bandwidth (a warning, not an error).
MIN_BANDWIDTH_BYTES = 1024**2
MAX_SHUFFLE_ROUNDS = 1000
MAX_DOCTOR_REPEATS = 100
# A finding needs the slow result in a majority of at least this many repeats of its round
# (with fewer, a stage is unjudged): one round can be slowed by a neighbour for seconds.
MIN_DOCTOR_REPEATS = 3
# How the pair stage pairs the nodes (core.doctor_plan.pair_plan): every pair once (the
# circle method), K random rounds, or by fleet size.
PAIR_MODES = ("auto", "all", "sampled")


@dataclass(frozen=True)
class DoctorSpec:
    """The doctor's rounds and how it judges them. Defaults live here and nowhere else."""

    # Bytes per rank per operation; None: DEFAULT_DOCTOR_BYTES for the backend.
    size_bytes: int | None = None
    # Extra rounds of random node pairings after the circle method (0: none); with
    # sampled pairs, the rounds that replace it (0: DEFAULT_SAMPLED_ROUNDS).
    shuffle_rounds: int = 0
    # "all": the circle method, every node pair once (N-1 rounds); "sampled": only the
    # random rounds; "auto": all up to SAMPLE_ABOVE_NODES nodes, sampled above.
    pairs: str = "auto"
    # Halve the node set and re-test until the slow part is found.
    bisect: bool = False
    # Every round runs this many times, in passes (all rounds, then all rounds again), so a
    # few seconds' interference slows one repeat of a round, not all of them; a finding
    # needs a majority of at least MIN_DOCTOR_REPEATS repeats.
    repeats: int = MIN_DOCTOR_REPEATS
    # Seed of the random pairings (the same seed gives every rank the same pairings).
    seed: int = 0
    # Expectations, most specific first: a bus bandwidth every group should reach ...
    expect_busbw_gbps: float | None = None
    # ... or the bound of the fabric's topology (a catalog name or a file, as given) ...
    topology: str | None = None
    # ... or an earlier doctor run on a healthy fabric (its directory).
    baseline: str | None = None
    # An A/A noise floor `collbench noise` recorded (a file, as given): a check against an
    # expectation holds its bar at least the floor of the size's band below it.
    noise_floor: str | None = None
    # Flag what is more than this far below an expectation (busbw, topology or baseline);
    # SuperBench's rules use 5%.
    tolerance_pct: float = 5.0
    # Without an expectation the fleet is its own: flag what is this far below the fleet's
    # median ...
    fleet_tolerance_pct: float = 40.0
    # ... and at least this many scaled MADs below it (noise within the fleet is not a fault).
    outlier_mads: float = 4.0

    def __post_init__(self) -> None:
        if self.size_bytes is not None and self.size_bytes < 1:
            raise SpecError("--size", self.size_bytes, "must be at least 1 byte")
        if not 0 <= self.shuffle_rounds <= MAX_SHUFFLE_ROUNDS:
            raise SpecError(
                "--shuffle-rounds",
                self.shuffle_rounds,
                f"must be between 0 and {MAX_SHUFFLE_ROUNDS}",
            )
        if self.pairs not in PAIR_MODES:
            raise SpecError("--pairs", self.pairs, f"must be one of {', '.join(PAIR_MODES)}")
        if isinstance(self.repeats, bool) or not (
            isinstance(self.repeats, int) and 1 <= self.repeats <= MAX_DOCTOR_REPEATS
        ):
            raise SpecError("--repeats", self.repeats, f"must be from 1 to {MAX_DOCTOR_REPEATS}")
        if self.expect_busbw_gbps is not None and not (
            math.isfinite(self.expect_busbw_gbps) and self.expect_busbw_gbps > 0
        ):
            raise SpecError("--expect-busbw", self.expect_busbw_gbps, "must be more than 0 GB/s")
        if self.expect_busbw_gbps is not None and self.baseline is not None:
            raise SpecError(
                "--expect-busbw",
                self.expect_busbw_gbps,
                f"conflicts with --baseline ({self.baseline}): give one expectation",
            )
        for flag, value in (
            ("--tolerance", self.tolerance_pct),
            ("--fleet-tolerance", self.fleet_tolerance_pct),
        ):
            if not (math.isfinite(value) and 0 <= value < 100):
                raise SpecError(flag, value, "must be a percentage from 0 to below 100")
        if not (math.isfinite(self.outlier_mads) and self.outlier_mads >= 0):
            raise SpecError("--outlier-mads", self.outlier_mads, "must be 0 or more")

    def size_for(self, backend: str) -> int:
        """The size per rank on `backend` (the default when none was given)."""
        return self.size_bytes if self.size_bytes is not None else DEFAULT_DOCTOR_BYTES[backend]

    def to_args(self) -> list[str]:
        """`collbench doctor` options that give exactly this spec (for the ranks' command)."""
        from collbench.core.units import size_arg

        args = [] if self.size_bytes is None else ["--size", size_arg(self.size_bytes)]
        args += ["--shuffle-rounds", str(self.shuffle_rounds), "--seed", str(self.seed)]
        args += ["--repeats", str(self.repeats)]
        args += ["--bisect"] if self.bisect else []
        args += ["--pairs", self.pairs]
        busbw = None if self.expect_busbw_gbps is None else f"{self.expect_busbw_gbps:g}"
        for flag, value in (
            ("--expect-busbw", busbw),
            ("--topology", self.topology),
            ("--baseline", self.baseline),
            ("--noise-floor", self.noise_floor),
        ):
            args += [] if value is None else [flag, value]
        for flag, number in (
            ("--tolerance", self.tolerance_pct),
            ("--fleet-tolerance", self.fleet_tolerance_pct),
            ("--outlier-mads", self.outlier_mads),
        ):
            args += [flag, f"{number:g}"]
        return args

    @classmethod
    def from_dict(cls, data: dict) -> DoctorSpec:
        """From asdict's output; a spec written before `repeats` existed ran each round once,
        and one written before `pairs` ran every circle round."""
        return cls(**{"repeats": 1, "pairs": "all", **data})
