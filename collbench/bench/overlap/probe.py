"""The overlap probe one rank runs for one (collective, size, ratio): see collbench.core.overlap.

The method, in full: docs/overlap.md#collbench-bench-overlap-probe-py.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from collbench.bench.overlap.clock import SERIES, wait_all
from collbench.bench.overlap.matmul import MatmulKernel, square_ladder
from collbench.bench.runner import Bound, Runner
from collbench.core.collectives import Geometry
from collbench.core.errors import SpecError
from collbench.core.overlap import OverlapFigures, OverlapSpec, check_blocking_env, overlap_figures
from collbench.core.spec import Step
from collbench.core.stats import TimeStats, combine_ranks

# Operations timed to estimate the collective's time before sizing the compute.
_ESTIMATE_OPS = 5
# Matmuls timed per calibration of one shape (after one untimed).
_CALIBRATE_REPS = 3
_MAX_CORRECTION = 2.0


@dataclass(frozen=True)
class ComputeInfo:
    """The compute one probe ran per iteration."""

    dtype: str
    shape: tuple[int, int, int]
    reps: int
    streams: int

    @property
    def tflop(self) -> float:
        m, n, k = self.shape
        return 2.0 * m * n * k * self.reps / 1e12


@dataclass(frozen=True)
class ProbeResult:
    """One probe, combined across ranks (identical on every rank)."""

    geometry: Geometry
    ratio: float | None
    compute: ComputeInfo
    # comm, comp, both, comp_during, and comm_during (None when it could not be observed).
    series: dict[str, TimeStats | None]
    figures: OverlapFigures
    n_wrong: int | None
    short_holds: int | None = None  # timed spans whose hold ran out, all ranks; None: no hold


@dataclass
class _Prepared:
    key: tuple[str, int, str]
    bound: Bound
    t_comm_s: float  # the collective alone, averaged over ranks: what ratios multiply
    comm_samples_s: list[float]  # this rank's timed calls behind that estimate


class OverlapProbe:
    """Measures overlap probes on this rank, through a Runner (buffers, checks, gathers)."""

    def __init__(self, runner: Runner, clock: Any, overlap: OverlapSpec) -> None:
        self.runner, self.clock, self.overlap = runner, clock, overlap
        device = runner.device
        self.kernel = MatmulKernel(
            runner.torch, device, overlap.resolved_dtype(device.type), overlap.compute_streams
        )
        self._prepared: _Prepared | None = None
        self._seconds_per_matmul: dict[tuple[int, int, int], float] = {}

    def problem(self) -> str | None:
        """Why the compute cannot run on this rank, or None (checked before any step): the
        dtype, or (GPU) an environment that makes the host wait for every kernel or
        collective, unless the spec allows it (core.overlap.check_blocking_env)."""
        if self.runner.device.type == "cuda":
            try:
                check_blocking_env(os.environ, self.overlap)
            except SpecError as error:
                return str(error)
        return self.kernel.check_supported()

    def measure(self, step: Step) -> ProbeResult:
        prepared = self._prepare((step.collective, step.size_bytes, step.placement))
        bound, spec = prepared.bound, self.runner.spec
        reps = self._size_compute(step.ratio, prepared.t_comm_s)
        launch = partial(bound.run, async_op=True)
        warm = self.clock.rounds(launch, self.kernel, reps, spec.warmup, self.runner.barrier)
        if step.ratio is not None and spec.warmup:
            reps = self._rescaled(
                reps, step.ratio, prepared.comm_samples_s + warm["comm"], warm["comp"]
            )
        self.runner.timer.synchronize()
        self.runner.barrier()
        hold = getattr(self.clock, "hold", None)  # GPU: StreamHold counts its short spans
        before = hold.short if hold else 0
        series = self.clock.rounds(launch, self.kernel, reps, spec.iters, self.runner.barrier)
        wrong = 0
        if spec.check:
            wrong = self.runner.check(bound, lambda: self._overlapped_once(launch, reps))
        short = hold.short - before if hold else 0
        table = self.runner.gather([wrong, short, *(s for name in SERIES for s in series[name])])
        combined = self._combine(table[:, 2:], spec.iters)
        figures = overlap_figures(*(self._mean(combined, name) for name in SERIES))
        compute = ComputeInfo(
            self.kernel.dtype_name, self.kernel.shape, reps, self.overlap.compute_streams
        )
        n_wrong = int(table[:, 0].sum()) if spec.check else None
        holds = int(table[:, 1].sum()) if hold else None
        return ProbeResult(bound.geometry, step.ratio, compute, combined, figures, n_wrong, holds)

    def _prepare(self, key: tuple[str, int, str]) -> _Prepared:
        """Buffers, warm-up and the collective's time alone for one size (cached)."""
        if self._prepared is not None and self._prepared.key == key:
            return self._prepared
        self._prepared = None  # free the previous size's buffers first
        runner = self.runner
        bound = runner.prepare(*key)
        for _ in range(runner.spec.warmup):
            bound.run()
        runner.timer.synchronize()
        runner.barrier()
        samples = [self.clock.time(bound.run) for _ in range(_ESTIMATE_OPS)]
        t_comm_s = float(runner.gather([float(np.median(samples))])[:, 0].mean())
        self._prepared = _Prepared(key, bound, t_comm_s, samples)
        return self._prepared

    def _size_compute(self, ratio: float | None, t_comm_s: float) -> int:
        """Pick the matmul shape and the repetitions for this probe; returns repetitions."""
        overlap = self.overlap
        if ratio is None:  # a fixed amount of work
            side = square_ladder(self.runner.device.type)[0]  # the largest square
            self.kernel.set_shape(overlap.matmul_shape or (side, side, side))
            return max(1, round(overlap.compute_tflop * 1e12 / self.kernel.flop_per_matmul))
        # Without --matmul-shape: the largest square whose single matmul fits the smallest
        # target of this size, so every ratio of a size uses the same kernel, repeated more.
        shape = overlap.matmul_shape or self._square_fitting(min(overlap.ratios) * t_comm_s)
        return max(1, round(ratio * t_comm_s / self._calibrated(shape)))

    def _rescaled(self, reps: int, ratio: float, comm_s: list[float], comp_s: list[float]) -> int:
        """Correct the repetitions with the warm-up rounds' own times (medians, averaged
        over ranks): the estimate before them can be off on a busy host."""
        mine = [float(np.median(comm_s)), float(np.median(comp_s))]
        comm_s, comp_s = self.runner.gather(mine).mean(axis=0)
        if comp_s <= 0:
            return reps
        # A handful of warm-up calls on a noisy host can be off by far more than the
        # calibration: correct by at most 2x either way, so a larger ratio always runs
        # more compute than a smaller one of the same size.
        wanted = ratio * comm_s / (comp_s / reps)  # repetitions that would hit the ratio
        correction = min(_MAX_CORRECTION, max(1 / _MAX_CORRECTION, wanted / reps))
        return max(1, round(reps * correction))

    def _square_fitting(self, target_s: float) -> tuple[int, int, int]:
        ladder = square_ladder(self.runner.device.type)
        fitting = (side for side in ladder if self._calibrated((side, side, side)) <= target_s)
        side = next(fitting, ladder[-1])
        return side, side, side

    def _calibrated(self, shape: tuple[int, int, int]) -> float:
        """Seconds per matmul of this shape: the slowest rank's, so all ranks agree."""
        if shape not in self._seconds_per_matmul:
            kernel = self.kernel
            kernel.set_shape(shape)
            kernel.run(1)
            self.runner.timer.synchronize()
            mine = self.clock.time(lambda: kernel.run(_CALIBRATE_REPS)) / _CALIBRATE_REPS
            self._seconds_per_matmul[shape] = float(self.runner.gather([mine])[:, 0].max())
        self.kernel.set_shape(shape)
        return self._seconds_per_matmul[shape]

    def _overlapped_once(self, launch: Any, reps: int) -> None:
        """One collective under compute, as measured (the data check runs this)."""
        handle = launch()
        self.kernel.run(reps)
        wait_all(handle)

    def _combine(self, per_rank: np.ndarray, iters: int) -> dict[str, TimeStats | None]:
        """Each series' per-iteration samples combined across ranks (spec.rank_stat)."""
        combined: dict[str, TimeStats | None] = {}
        for index, name in enumerate(SERIES):
            samples = per_rank[:, index * iters : (index + 1) * iters]
            if np.isnan(samples).any():
                combined[name] = None  # not observed on some rank (no completion callback)
                continue
            combined[name] = combine_ranks(
                samples.mean(axis=1), samples, self.runner.spec.rank_stat
            )
        return combined

    @staticmethod
    def _mean(combined: dict[str, TimeStats | None], name: str) -> float | None:
        stats = combined[name]  # None: comm_during without a completion callback (_combine)
        return stats.time_us if stats is not None and math.isfinite(stats.time_us) else None
