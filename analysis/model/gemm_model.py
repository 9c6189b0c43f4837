"""How long one matrix multiplication takes on one accelerator, from its shape alone.

The method, in full: docs/methodology/cost-model.md#analysis-model-gemm-model-py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from collbench.topologies.schema import Accelerator

# Output tiles (rows x columns) and their efficiency relative to the largest: the guide
# shows larger tiles reaching more of the peak, as each loaded operand byte feeds more
# multiply-adds. ASSUMED relative figures, ordered as the guide's measurements are.
TILES: tuple[tuple[int, int, float], ...] = (
    (256, 128, 1.0),
    (128, 256, 1.0),
    (128, 128, 0.94),
    (128, 64, 0.85),
    (64, 128, 0.85),
    (64, 64, 0.72),
)
# The main loop's ramp in K (elements): a 64-deep step is one stage of the pipelined loop;
# a tile with K = 2 x K_RAMP reaches 2/3 of its steady rate (prologue and epilogue).
K_RAMP = 32
# What the compute model assumes where the topology's accelerator entry says nothing: the
# share of the peak a large matmul reaches (the median of the measured table cited in the
# catalog entries, 80%), and streaming kernels' share of the HBM datasheet bandwidth.
DEFAULT_MATMUL_FRACTION = 0.80
MEMORY_FRACTION = 0.85
ELEMENT_BYTES = 2  # bf16 / fp16 operands
# Operand bytes by dtype, for the memory time (fp32 matmuls, TF32 or not, read fp32 operands).
DTYPE_ELEMENT_BYTES = {"fp8": 1, "bf16": 2, "fp16": 2, "fp32": 4, "tf32": 4}


@dataclass(frozen=True)
class Gemm:
    """One matrix multiplication an operator runs: `batch` x (M x K) · (K x N)."""

    op: str  # the operator: qkv, attn_proj, mlp_up, mlp_down, logits, attn_scores, ...
    pass_name: str  # fwd, dgrad (input gradient), wgrad (weight gradient)
    m: int
    n: int
    k: int
    batch: int = 1

    @property
    def flops(self) -> float:
        return 2.0 * self.batch * self.m * self.n * self.k

    @property
    def shape(self) -> str:
        """ "MxNxK", or "BxMxNxK" for a batched one: the key measured rows match on."""
        core = f"{self.m}x{self.n}x{self.k}"
        return core if self.batch == 1 else f"{self.batch}x{core}"

    @property
    def bytes_moved(self) -> float:
        """A, B and C once each (the roofline's minimum traffic)."""
        m, n, k = self.m, self.n, self.k
        return float(ELEMENT_BYTES * self.batch * (m * k + k * n + m * n))


def training_gemms(op: str, m: int, n: int, k: int, batch: int = 1) -> tuple[Gemm, ...]:
    """Forward (m x n x k), input gradient (m x k x n), weight gradient (k x n x m)."""
    return (
        Gemm(op, "fwd", m, n, k, batch),
        Gemm(op, "dgrad", m, k, n, batch),
        Gemm(op, "wgrad", k, n, m, batch),
    )


@dataclass(frozen=True)
class GemmTime:
    """A GEMM's predicted time and why: its efficiency and what bounds it."""

    time_s: float
    efficiency: float  # achieved share of the dense peak
    bound: str  # "compute" or "memory"
    tile: str  # e.g. "256x128"
    waves: int


def shape_efficiency(gemm: Gemm, sm_count: int | None) -> tuple[float, str, int]:
    """(efficiency relative to the accelerator's best, tile, waves) of the best tile."""
    ramp = gemm.k / (gemm.k + K_RAMP)
    if sm_count is None:
        return ramp, "-", 1
    best = (0.0, "-", 1)
    for rows, cols, tile_efficiency in TILES:
        tiles = math.ceil(gemm.m / rows) * math.ceil(gemm.n / cols) * gemm.batch
        waves = math.ceil(tiles / sm_count)
        inside = gemm.m * gemm.n * gemm.batch / (tiles * rows * cols)
        filled = tiles / (waves * sm_count)
        value = tile_efficiency * inside * filled * ramp
        if value > best[0]:
            best = (value, f"{rows}x{cols}", waves)
    return best


def matmul_fraction(accelerator: Accelerator, dtype: str = "bf16") -> float:
    """The accelerator's measured share of its peak for large matmuls in `dtype` (fp8:
    its own figure where the entry has one, else the bf16 one; fp32 and tf32: the bf16
    one, ASSUMED, as the catalog measures none; the default otherwise), at the sustained
    clock where the entry measures it (`matmul_sustained`: the power-saturated rate over
    the burst one, the same for every dtype, since it is the clock that drops)."""
    if dtype == "fp8" and accelerator.matmul_fraction_fp8:
        burst = accelerator.matmul_fraction_fp8
    else:
        burst = accelerator.matmul_fraction or DEFAULT_MATMUL_FRACTION
    return burst * (accelerator.matmul_sustained or 1.0)


def gemm_time(
    gemm: Gemm, accelerator: Accelerator, peak_flops: float, dtype: str = "bf16"
) -> GemmTime:
    """Predicted time of `gemm` in `dtype` on `accelerator` whose dense peak in that dtype
    is `peak_flops` (fp8 operands move half the bytes, fp32 twice: DTYPE_ELEMENT_BYTES)."""
    fraction = matmul_fraction(accelerator, dtype)
    shape, tile, waves = shape_efficiency(gemm, accelerator.sm_count)
    efficiency = fraction * shape
    compute_s = gemm.flops / (peak_flops * efficiency)
    scale = DTYPE_ELEMENT_BYTES.get(dtype, ELEMENT_BYTES) / ELEMENT_BYTES
    memory_s = memory_time_s(gemm.bytes_moved * scale, accelerator)
    if memory_s > compute_s:
        return GemmTime(memory_s, gemm.flops / memory_s / peak_flops, "memory", tile, waves)
    return GemmTime(compute_s, efficiency, "compute", tile, waves)


def memory_time_s(size_bytes: float, accelerator: Accelerator) -> float:
    """Time to stream `size_bytes` through HBM (0 when the entry gives no bandwidth)."""
    if not accelerator.hbm_gbytes_s:
        return 0.0
    return size_bytes / (accelerator.hbm_gbytes_s * 1e9 * MEMORY_FRACTION)
