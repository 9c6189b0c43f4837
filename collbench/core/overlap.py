"""Overlap probes: what to measure (OverlapSpec) and what the measurements mean (pure).

A probe runs one collective and a matmul alone and together: what each of its times
(t_comm, t_comp, t_both, t_comp_during, t_comm_during) spans is docs/overlap.md's table.
No torch here: the CLI validates an OverlapSpec before any rank starts.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

import msgspec

from collbench.core.dtypes import lookup_dtype
from collbench.core.errors import SpecError

# Compute time as a multiple of the collective's time, when neither ratios nor a fixed
# amount of work is given: less, as much, and more compute than communication.
DEFAULT_RATIOS = (0.5, 1.0, 2.0)
COMPUTE_DTYPES = ("float32", "bfloat16", "float16", "float64")
AUTO = "auto"
MAX_COMPUTE_STREAMS = 32
# Largest square matmul tried when sizing the compute (per device type): big enough to run
# the device near its matmul peak, small enough that one of them fits the probes' usual
# target times.
MAX_SQUARE = {"cuda": 8192, "cpu": 1024}
_SHAPE_RE = re.compile(r"^\s*(\d+)\s*[xX,]\s*(\d+)\s*[xX,]\s*(\d+)\s*$")
ALLOW_BLOCKING_FLAG = "--allow-blocking-env"
# Variables that make the host wait for the GPU (or the GPU for itself) on a CUDA/ROCm
# backend, so that a collective and a matmul never run at once: overlap reads ~0 however
# the hardware would do. Name -> what it does (torch, CUDA and HIP runtime documentation).
BLOCKING_ENV = {
    "TORCH_NCCL_BLOCKING_WAIT": "makes every wait() block the host until the collective is "
    "done, so the compute is launched after it",
    "NCCL_BLOCKING_WAIT": "(torch's older TORCH_NCCL_BLOCKING_WAIT) makes every wait() block "
    "the host until the collective is done",
    "CUDA_LAUNCH_BLOCKING": "makes every kernel launch wait until the GPU has run it",
    "HIP_LAUNCH_BLOCKING": "makes every kernel launch wait until the GPU has run it",
    "AMD_SERIALIZE_KERNEL": "makes the HIP runtime wait for the GPU around every kernel",
}
# Values the libraries read as "off" (torch's getCvarBool, CUDA's and HIP's 0).
_OFF = ("", "0", "false", "no", "n", "off")


def blocking_env(environ: Mapping[str, str]) -> list[str]:
    """The BLOCKING_ENV variables switched on in `environ`, in BLOCKING_ENV's order. They
    matter on GPU backends (nccl, rccl) only; the caller knows which it runs."""
    return [name for name in BLOCKING_ENV if environ.get(name, "").strip().lower() not in _OFF]


def check_blocking_env(environ: Mapping[str, str], overlap: OverlapSpec | None) -> str:
    """The warning for a run on a GPU backend under `environ` ("" when no BLOCKING_ENV
    variable is on): `NAME=VALUE makes ...` for each. With overlap probes that do not allow
    them (ALLOW_BLOCKING_FLAG), a SpecError naming the first instead: the probe would read
    ~0%."""
    found = blocking_env(environ)
    if not found:
        return ""
    if overlap is not None and not overlap.allow_blocking_env:
        name = found[0]
        raise SpecError(
            name,
            environ[name],
            f"{BLOCKING_ENV[name]}: overlap probes would read ~0%; unset it, or give "
            f"{ALLOW_BLOCKING_FLAG} to measure it anyway",
        )
    why = "the host waits for the GPU (overlap reads ~0%, small sizes pay launch latency)"
    return f"{why}: " + "; ".join(f"{name}={environ[name]} {BLOCKING_ENV[name]}" for name in found)


def parse_ratios(text: str) -> tuple[float, ...]:
    """'0.5,1,2' -> (0.5, 1.0, 2.0), or SpecError naming --compute-ratio."""
    ratios = []
    for part in (piece.strip() for piece in str(text).split(",")):
        try:
            ratios.append(float(part))
        except ValueError:
            raise SpecError(
                "--compute-ratio", text, "is not a comma list of numbers, e.g. 0.5,1,2"
            ) from None
    return tuple(ratios)


def parse_shape(text: str) -> tuple[int, int, int]:
    """'8192x8192x4096' -> (M, N, K) of an (M x K) @ (K x N) matmul, or SpecError."""
    match = _SHAPE_RE.match(str(text))
    if not match:
        raise SpecError("--matmul-shape", text, "is not MxNxK, e.g. 4096x4096x4096")
    m, n, k = (int(group) for group in match.groups())
    return m, n, k


@dataclass(frozen=True)
class OverlapSpec:
    """How each probe sizes and runs its compute. Defaults live here and nowhere else."""

    # Compute per iteration as a multiple of the collective's own time (one probe each).
    # None: DEFAULT_RATIOS, unless compute_tflop is given.
    ratios: tuple[float, ...] | None = None
    # A fixed amount of compute per iteration (TFLOP) instead of ratios.
    compute_tflop: float | None = None
    # auto: bfloat16 on GPUs (what training runs), float32 on CPU (fast there).
    compute_dtype: str = AUTO
    # (M, N, K); None: square, the largest that fits the target time, repeated to fill it.
    matmul_shape: tuple[int, int, int] | None = None
    # GPU streams the compute is spread over (round robin); CPU compute is the main thread.
    compute_streams: int = 1
    # Measure on a GPU backend even where BLOCKING_ENV variables make overlap impossible
    # (warned, not refused): to show what they cost.
    allow_blocking_env: bool = False

    def __post_init__(self) -> None:
        ratios = tuple(float(r) for r in self.ratios) if self.ratios is not None else None
        if ratios and self.compute_tflop is not None:
            raise SpecError(
                "--compute-tflop", self.compute_tflop, "conflicts with --compute-ratio: give one"
            )
        if ratios is None or (not ratios and self.compute_tflop is None):
            ratios = () if self.compute_tflop is not None else DEFAULT_RATIOS
        for ratio in ratios:
            if not (math.isfinite(ratio) and ratio > 0):
                raise SpecError("--compute-ratio", ratio, "must be a number greater than 0")
        object.__setattr__(self, "ratios", ratios)
        if self.compute_tflop is not None and not (
            math.isfinite(self.compute_tflop) and self.compute_tflop > 0
        ):
            raise SpecError("--compute-tflop", self.compute_tflop, "must be greater than 0")
        if self.compute_dtype != AUTO:
            dtype = lookup_dtype(self.compute_dtype)
            if dtype is None or dtype.name not in COMPUTE_DTYPES:
                raise SpecError(
                    "--compute-dtype",
                    self.compute_dtype,
                    f"is not a matmul dtype; choose from {AUTO}, {', '.join(COMPUTE_DTYPES)}",
                )
            object.__setattr__(self, "compute_dtype", dtype.name)
        if self.matmul_shape is not None:
            shape = tuple(int(v) for v in self.matmul_shape)
            if len(shape) != 3 or min(shape) < 1:
                raise SpecError(
                    "--matmul-shape", self.matmul_shape, "needs three sizes of at least 1 (MxNxK)"
                )
            object.__setattr__(self, "matmul_shape", shape)
        if not 1 <= self.compute_streams <= MAX_COMPUTE_STREAMS:
            raise SpecError(
                "--compute-streams",
                self.compute_streams,
                f"must be between 1 and {MAX_COMPUTE_STREAMS}",
            )

    def points(self) -> tuple[float | None, ...]:
        """One probe per ratio, or a single probe (None) with the fixed compute_tflop."""
        return self.ratios if self.ratios else (None,)

    def resolved_dtype(self, device_type: str) -> str:
        if self.compute_dtype != AUTO:
            return self.compute_dtype
        return "bfloat16" if device_type == "cuda" else "float32"

    def to_args(self) -> list[str]:
        """The command-line options that give exactly this spec."""
        if self.ratios:
            args = ["--compute-ratio", ",".join(f"{r:g}" for r in self.ratios)]
        else:
            args = ["--compute-tflop", f"{self.compute_tflop:g}"]
        args += [
            "--compute-dtype",
            self.compute_dtype,
            "--compute-streams",
            str(self.compute_streams),
        ]
        if self.matmul_shape is not None:
            args += ["--matmul-shape", "x".join(str(v) for v in self.matmul_shape)]
        if self.allow_blocking_env:
            args.append(ALLOW_BLOCKING_FLAG)
        return args

    @classmethod
    def from_dict(cls, data: dict) -> OverlapSpec:
        return msgspec.convert(data, cls)


@dataclass(frozen=True)
class OverlapFigures:
    """The derived figures of one probe (docs/overlap.md's definitions)."""

    # Share of the collective hidden behind compute (OSU), in [0, 100].
    overlap_pct: float
    # Wall time the overlapped run takes beyond the compute alone, at least 0.
    exposed_comm_us: float
    # Time the overlapped run still waits for the collective after its compute is done.
    comm_wait_us: float
    # How much longer the compute takes while the collective runs (negative: faster).
    compute_slowdown: float
    # How much longer the collective takes while the compute runs; None if not observed.
    comm_slowdown: float | None
    # The compute:communication ratio actually reached (t_comp / t_comm).
    compute_ratio_actual: float


def overlap_figures(
    t_comm_us: float,
    t_comp_us: float,
    t_both_us: float,
    t_comp_during_us: float,
    t_comm_during_us: float | None = None,
) -> OverlapFigures:
    """Figures from the four (or five) times of one probe, all in microseconds.

    overlap_pct = max(0, 100 - 100 (t_both - t_comp) / t_comm) is OSU's definition; it is
    capped at 100 because a t_both below t_comp (noise) cannot hide more than everything.
    compute_slowdown and comm_slowdown are never clamped: a negative value is a result.
    """
    if min(t_comm_us, t_comp_us, t_both_us, t_comp_during_us) <= 0:
        raise ValueError("probe times must be positive")
    exposed = t_both_us - t_comp_us
    overlap = 100.0 - 100.0 * exposed / t_comm_us
    comm_slowdown = (
        t_comm_during_us / t_comm_us - 1.0
        if t_comm_during_us is not None and t_comm_during_us > 0
        else None
    )
    return OverlapFigures(
        overlap_pct=min(100.0, max(0.0, overlap)),
        exposed_comm_us=max(0.0, exposed),
        comm_wait_us=max(0.0, t_both_us - t_comp_during_us),
        compute_slowdown=t_comp_during_us / t_comp_us - 1.0,
        comm_slowdown=comm_slowdown,
        compute_ratio_actual=t_comp_us / t_comm_us,
    )
