"""How long a `collbench gemm` job will take, from a quick calibration on its device.

One matmul timed once is no estimate: a single stall on a busy machine makes it several
times too long, and a job of small shapes is made of per-call costs, operand drawing and
warm-up that FLOPs alone do not count. So before anything is measured, these are timed by
wall clock (what the user waits for: launch, sync and stalls included), synced matmuls
after one untimed call each (the first pays the library's setup):

- a CALL_PROBE-sided matmul, CALL_REPEATS calls and more for CALL_MIN_S: the cost of one
  call, what small shapes are made of;
- the largest shape cut to PROBE_SIDE a side, RATE_REPEATS calls and more for RATE_MIN_S:
  the rate (FLOP/s) past that cost, and how fast operands are drawn (its allocation);
- the largest shape itself the same way, when the cut rate projects it to under
  LARGE_PROBE_S a call (large shapes run faster than a cut one on a GPU); a shape between
  the two gets a rate interpolated on log FLOPs.

Each is the mean of its calls, over a span of time rather than one call: a busy machine's
stalls (a thread descheduled while its peers wait) come and go, and their share of that
span is what every call of the job costs them on average (the measurement's own headline
is a median, bench.gemm: what a matmul takes, not what a job waits).

A shape then takes: its operand sets drawn + max(`warmup` matmuls, `warmup_s`) (the
warm-up stops about one matmul past it, bench.gemm) + 2 x `iters` matmuls (the timed batch
and the per-iteration samples), each matmul one call's cost + its FLOPs / the rate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from collbench.analysis.model.gemm_model import Gemm
from collbench.bench.gemm import operand_set_bytes, rotation_sets

CALL_REPEATS, CALL_MIN_S = 20, 0.05
RATE_REPEATS, RATE_MIN_S = 3, 0.1
CALL_PROBE = 8  # the per-call probe's side
PROBE_SIDE = 512  # the rate probe's largest side
LARGE_PROBE_S = 0.1  # the largest shape is timed itself when one call projects under this


@dataclass(frozen=True)
class RatePoint:
    """A shape's measured rate past the per-call cost."""

    shape: str
    flops: float
    rate_flops_s: float


@dataclass(frozen=True)
class Calibration:
    """What a job's time is estimated from (all measured on its device)."""

    call_s: float  # one synced call of a CALL_PROBE-sided matmul
    points: tuple[RatePoint, ...]  # one or two, by FLOPs ascending
    draw_bytes_s: float  # operand bytes drawn per second

    def rate_flops_s(self, flops: float) -> float:
        """The rate at `flops`: the nearer point's outside the points, log-interpolated
        between them."""
        low, high = self.points[0], self.points[-1]
        if flops <= low.flops or high.flops <= low.flops:
            return low.rate_flops_s
        if flops >= high.flops:
            return high.rate_flops_s
        share = math.log(flops / low.flops) / math.log(high.flops / low.flops)
        return low.rate_flops_s * (high.rate_flops_s / low.rate_flops_s) ** share

    def matmul_s(self, gemm: Gemm) -> float:
        return self.call_s + gemm.flops / self.rate_flops_s(gemm.flops)

    def basis(self) -> str:
        """The calibration in words, for the estimate's line."""
        rates = ", ".join(
            f"{point.rate_flops_s / 1e12:.3g} TFLOP/s at {point.shape}" for point in self.points
        )
        return f"timed here: {self.call_s * 1e6:,.0f} us a call, {rates}"


def shape_seconds(gemm: Gemm, job: Any, calibration: Calibration, drawn_bytes: float) -> float:
    """One shape's predicted wall time: its operands drawn, its warm-up, its two batches."""
    matmul_s = calibration.matmul_s(gemm)
    warm_s = max(job.warmup * matmul_s, job.warmup_s or 0.0)
    return drawn_bytes / calibration.draw_bytes_s + warm_s + 2 * job.iters * matmul_s


def job_seconds(
    job: Any, calibration: Calibration, element_bytes: int, cache_bytes: int, max_sets: int
) -> float:
    """The whole job's predicted wall time (GemmJob `job`, operands of `element_bytes`,
    rotated past a `cache_bytes` cache in at most `max_sets` sets as bench.gemm does)."""
    total_s = 0.0
    for gemm in job.gemms:
        set_bytes = operand_set_bytes((gemm.m, gemm.n, gemm.k), gemm.batch, element_bytes)
        sets = rotation_sets(set_bytes, cache_bytes, max_sets)
        total_s += shape_seconds(gemm, job, calibration, sets * set_bytes)
    return total_s


def calibrate(bench: Any, biggest: Gemm, element_bytes: int) -> Calibration:
    """Time the probes on `bench` (a bench.gemm.GemmBench) for a job whose largest shape
    is `biggest`."""
    _, calls_s = bench.calibration_s((CALL_PROBE,) * 3, 1, CALL_REPEATS, CALL_MIN_S)
    call_s = _mean(calls_s)
    cut = Gemm("probe", "-", *(min(side, PROBE_SIDE) for side in (biggest.m, biggest.n, biggest.k)))
    drawn_s, cut_s = bench.calibration_s((cut.m, cut.n, cut.k), 1, RATE_REPEATS, RATE_MIN_S)
    points = [_point(cut, _mean(cut_s), call_s)]
    cut_bytes = operand_set_bytes((cut.m, cut.n, cut.k), 1, element_bytes)
    draw_bytes_s = cut_bytes / max(drawn_s, 1e-6)
    if biggest.flops > cut.flops and biggest.flops / points[0].rate_flops_s < LARGE_PROBE_S:
        shape = (biggest.m, biggest.n, biggest.k)
        _, big_s = bench.calibration_s(shape, biggest.batch, RATE_REPEATS, RATE_MIN_S)
        points.append(_point(biggest, _mean(big_s), call_s))
    return Calibration(call_s, tuple(points), draw_bytes_s)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _point(gemm: Gemm, wall_s: float, call_s: float) -> RatePoint:
    """The rate past the per-call cost (past half the call at least: timing noise can
    make a small call look no longer than that cost)."""
    compute_s = max(wall_s - call_s, wall_s / 2)
    return RatePoint(gemm.shape, gemm.flops, gemm.flops / max(compute_s, 1e-9))


def seconds_text(seconds: float) -> str:
    """'0.8 s', '12 s', '1,234 s': a tenth below 10 s."""
    return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:,.0f} s"
