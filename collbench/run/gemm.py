"""`collbench gemm`: measure matmul throughput on this machine's accelerator, shape by
shape, into a run directory (meta.json, gemm.jsonl), nothing lost if it is killed.

The method, in full: docs/architecture.md#collbench-run-gemm-py.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import socket
import statistics
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from collbench.analysis.model.gemm_model import ELEMENT_BYTES, Gemm
from collbench.bench.device_clocks import TF32_OVERRIDE_VAR, math_settings
from collbench.bench.gemm import DEVICES, GemmBench, operand_set_bytes, rotation_sets, time_stat
from collbench.bench.provenance import command_line, git_sha, versions
from collbench.core.errors import SpecError
from collbench.store.gemm_rows import GEMM_FILE, GemmRow, append_gemm_row
from collbench.store.meta import RunMeta
from collbench.store.outputs import OutputError, check_output_dir, path_error
from collbench.store.rank_status import process_token
from collbench.store.rows import utc_now
from collbench.store.rundir import (
    META_FILE,
    new_run_id,
    prepare_run_dir,
    read_meta,
    remove_temp_files,
    unclaim_run_dir,
    update_meta,
    write_meta,
)

DTYPE_BYTES = {"bf16": ELEMENT_BYTES, "fp16": ELEMENT_BYTES, "fp32": 4}
MEMORY_SHARE = 0.5  # of the free memory, at most, for one shape's operands
# Seconds each shape warms up for when --warmup-seconds is not given, by device: long
# enough for a GPU's clocks to leave their first boost; a CPU needs little.
WARMUP_SECONDS = {"cuda": 1.0, "cpu": 0.1}
MIN_GPU_WARMUP_S = 0.5  # below this a GPU figure is a burst (a warning, not an error)


@dataclass(frozen=True)
class GemmJob:
    """What `collbench gemm` measures and how."""

    gemms: tuple[Gemm, ...]
    dtype: str = "bf16"
    device: str | None = None  # None: cuda when there is one, else cpu
    warmup: int = 5
    iters: int = 20
    warmup_s: float | None = None  # None: WARMUP_SECONDS for the device
    out: Path | None = None
    max_seconds: float = 600.0
    workload: str = ""  # what the shapes are (a workload, or "shape sweep")

    def __post_init__(self) -> None:
        if self.dtype == "fp8":
            raise SpecError("--dtype", self.dtype, "is not measured yet (bf16, fp16 or fp32)")
        if self.dtype not in DTYPE_BYTES:
            raise SpecError("--dtype", self.dtype, f"must be one of {', '.join(DTYPE_BYTES)}")
        if self.device not in (None, *DEVICES):
            raise SpecError("--device", self.device, f"must be {' or '.join(DEVICES)}")
        if self.warmup < 0:
            raise SpecError("--warmup", self.warmup, "must be >= 0")
        if self.warmup_s is not None and not 0 <= self.warmup_s <= 3600:
            raise SpecError("--warmup-seconds", self.warmup_s, "must be between 0 and 3600")
        if self.iters < 1:
            raise SpecError("--iters", self.iters, "must be >= 1")
        if not self.max_seconds > 0:
            raise SpecError("--max-seconds", self.max_seconds, "must be > 0")


@dataclass(frozen=True)
class GemmSweep:
    """A shape sweep (instead of a workload's shapes), and the topology whose accelerator
    each shape's rate is read against."""

    shapes: tuple[str, ...] = ()  # MxNxK or BxMxNxK
    square: str | None = None  # MIN:MAX, M = N = K doubling
    topology: str | None = None  # a catalog name or a topology file

    def gemms(self) -> tuple[Gemm, ...]:
        """The shapes, each once (SpecError naming --shape or --square for a bad one)."""
        gemms = [_parse_shape(text) for text in self.shapes]
        if self.square:  # MIN:MAX, doubling
            match = re.match(r"^(\d+):(\d+)$", self.square.strip())
            low, high = (int(part) for part in match.groups()) if match else (0, 0)
            if not match or not 1 <= low <= high:
                raise SpecError(
                    "--square", self.square, "must be MIN:MAX with 1 <= MIN <= MAX, e.g. 256:8192"
                )
            sizes = (low << doubling for doubling in range((high // low).bit_length()))
            gemms += [Gemm("sweep", "-", size, size, size) for size in sizes]
        return tuple(dict.fromkeys(gemms))


def _parse_shape(text: str) -> Gemm:
    match = re.match(r"^(?:(\d+)x)?(\d+)x(\d+)x(\d+)$", text.strip().lower())
    if not match:
        raise SpecError("--shape", text, "must be MxNxK or BxMxNxK, e.g. 4096x4096x4096")
    batch, m, n, k = (int(part) if part else 1 for part in match.groups())
    if min(batch, m, n, k) < 1:
        raise SpecError("--shape", text, "must have every dimension >= 1")
    return Gemm("sweep", "-", m, n, k, batch)


def run_gemm(
    job: GemmJob,
    progress: Callable[[GemmRow], None] = lambda row: None,
    said: Callable[[str], None] = lambda text: None,
) -> tuple[Path, list[GemmRow]]:
    """Size, then measure every shape; rows are appended as each finishes."""
    if job.out is not None:  # before the sizing runs: a path that cannot be a run
        check_output_dir("--out", job.out)
    bench = GemmBench(job.device, job.dtype)
    _check_memory(job, bench)
    job = _with_warmup(job, bench, said)
    _check_time(job, bench, said)
    run_id = new_run_id()
    made = job.out is None or not os.path.isdir(job.out)  # (isdir: bad names are refused below)
    run_dir = prepare_run_dir(job.out, run_id)
    started = utc_now()
    try:
        write_meta(run_dir, _meta(job, bench, run_id, "running", started))
    except OSError as error:  # nothing measured yet: leave no run behind
        remove_temp_files(run_dir)
        unclaim_run_dir(run_dir, (META_FILE,), remove_dir=made)
        raise path_error("--out", run_dir, error) from None
    rows: list[GemmRow] = []
    try:
        for gemm in job.gemms:
            row = _measure(job, bench, gemm, run_id)
            append_gemm_row(run_dir, row)
            rows.append(row)
            progress(row)
    except OSError as error:
        if not rows:  # nothing measured: leave no run behind
            unclaim_run_dir(run_dir, (META_FILE, GEMM_FILE), remove_dir=made)
            raise path_error("--out", run_dir, error) from None
        _end(run_dir, "failed")
        raise OutputError(
            "--out", run_dir, error, kept=f"the {len(rows)} finished shape(s) are kept there"
        ) from None
    except BaseException:
        _end(run_dir, "interrupted")
        raise
    try:
        write_meta(run_dir, _meta(job, bench, run_id, "completed", started))
    except OSError as error:
        _end(run_dir, "completed")
        raise OutputError(
            "--out", run_dir, error, kept=f"all {len(rows)} shape(s) are kept there"
        ) from None
    return run_dir, rows


def tf32_matmuls(run_dir: Path) -> bool:
    """Whether the run's fp32 matmuls may have run as TF32 on tensor cores, as its
    meta.json's gemm.math recorded torch's settings (TF32 allowed, a float32 matmul
    precision below "highest", torch >= 2.9's fp32_precision "tf32", or the override)."""
    meta = read_meta(run_dir)
    math = (meta.extra.get("gemm") or {}).get("math") or {} if meta else {}
    return bool(
        math.get("allow_tf32")
        or math.get("float32_matmul_precision") in ("high", "medium")
        or math.get("fp32_precision") == "tf32"
        or math.get(TF32_OVERRIDE_VAR) == "1"
    )


def _end(run_dir: Path, state: str) -> None:
    """meta.json's final state for a run cut short; on a full disk, written over the file's
    own blocks where it fits (update_meta), else left as it was."""
    with contextlib.suppress(OSError):
        update_meta(run_dir, state=state, finished_utc=utc_now())
    remove_temp_files(run_dir)


def _measure(job: GemmJob, bench: GemmBench, gemm: Gemm, run_id: str) -> GemmRow:
    shape = (gemm.m, gemm.n, gemm.k)
    timing = bench.measure(shape, gemm.batch, job.warmup, job.iters, job.warmup_s or 0.0)
    samples = timing.samples_us
    return GemmRow(
        run_id=run_id,
        timestamp_utc=utc_now(),
        **{name: getattr(gemm, name) for name in ("op", "pass_name", "m", "n", "k", "batch")},
        shape=gemm.shape,
        dtype=job.dtype,
        device=bench.device.type,
        accelerator=bench.accelerator,
        time_us=timing.time_us,
        tflops=gemm.flops / (timing.time_us * 1e-6) / 1e12,
        timing=timing.timing,
        warmup=job.warmup,
        iters=job.iters,
        time_stat=time_stat(len(timing.chunks_us)),
        time_us_mean=timing.mean_us,
        time_us_chunks=list(timing.chunks_us),
        time_us_p50=timing.p50_us,
        time_us_min=min(samples),
        time_us_max=max(samples),
        time_us_samples=list(samples),
        warmup_s=round(timing.warmup_s, 6),
        operand_sets=timing.operand_sets,
        clocks=timing.clocks,
    )


def _with_warmup(job: GemmJob, bench: GemmBench, said: Callable[[str], None]) -> GemmJob:
    """The job with its warm-up seconds settled (WARMUP_SECONDS for the device when not
    given); a GPU warm-up under MIN_GPU_WARMUP_S is said to measure a burst."""
    if job.warmup_s is None:
        return replace(job, warmup_s=WARMUP_SECONDS[bench.device.type])
    if bench.device.type == "cuda" and job.warmup_s < MIN_GPU_WARMUP_S:
        said(
            f"warning: --warmup-seconds {job.warmup_s:g} is under {MIN_GPU_WARMUP_S:g} s: "
            "the figures may be a burst at boost clock"
        )
    return job


def _check_memory(job: GemmJob, bench: GemmBench) -> None:
    free = bench.free_bytes()
    if free is None:
        return

    def operand_bytes(gemm: Gemm) -> int:
        return operand_set_bytes((gemm.m, gemm.n, gemm.k), gemm.batch, DTYPE_BYTES[job.dtype])

    biggest = max(job.gemms, key=operand_bytes)
    need = operand_bytes(biggest)
    if need > MEMORY_SHARE * free:
        raise SpecError(
            "--shape" if biggest.op == "sweep" else "--model",
            biggest.shape,
            f"needs {need / 2**30:,.1f} GiB of operands, more than half the "
            f"{free / 2**30:,.1f} GiB free on {bench.device.type}; measure smaller shapes",
        )


def _check_time(job: GemmJob, bench: GemmBench, said: Callable[[str], None]) -> None:
    """Estimate the job from a quick calibration on its device (calibrate), say the
    estimate and its basis, and refuse the job when it runs past max_seconds."""
    biggest = max(job.gemms, key=lambda gemm: gemm.flops)
    calibration = calibrate(bench, biggest, DTYPE_BYTES[job.dtype])
    estimate_s = job_seconds(job, calibration, bench.cache_bytes(), bench.max_sets)
    basis = f"{calibration.basis()}; {job.warmup_s or 0:g} s warm-up a shape"
    if estimate_s > job.max_seconds:
        raise SpecError(
            "--max-seconds",
            job.max_seconds,
            f"is less than the ~{seconds_text(estimate_s)} of measuring this job is estimated "
            f"to take on {bench.accelerator} ({basis}); measure fewer or smaller shapes, or "
            "raise --max-seconds",
        )
    said(
        f"{len(job.gemms)} shapes, about {seconds_text(estimate_s)} of measuring on "
        f"{bench.accelerator} (estimated from matmuls {basis})"
    )


def _meta(job: GemmJob, bench: GemmBench, run_id: str, state: str, started: str) -> RunMeta:
    return RunMeta(
        run_id=run_id,
        state=state,
        command_line=command_line(),
        backend=None,
        world_size=1,
        nodes=1,
        ranks_per_node=1,
        hosts=[socket.gethostname()],
        timing_method=bench.timing,
        versions=versions(bench.torch, "none"),
        git_sha=git_sha(),
        started_utc=started,
        finished_utc=None if state == "running" else utc_now(),
        extra={
            "kind": "gemm",
            "gemm": {
                "what": job.workload,
                "device": bench.device.type,
                "accelerator": bench.accelerator,
                "dtype": job.dtype,
                "warmup": job.warmup,
                "warmup_s": job.warmup_s,
                "iters": job.iters,
                "math": math_settings(bench.torch),
                "clocks_source": bench.clocks.source if bench.clocks else None,
                "clocks_why": bench.no_clocks_why or None,
                "shapes": [gemm.shape for gemm in job.gemms],
                # The one process measuring, so `status` can tell a killed run from a live one.
                "pid": os.getpid(),
                "pid_token": process_token(os.getpid()),
                "host": socket.gethostname(),
            },
        },
    )


# How long a `collbench gemm` job will take, from a quick calibration on its device: the
# probes, why each is a mean over a span of calls, and what a shape then costs are in
# docs/architecture.md#collbench-run-gemm-py ("The calibration").
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


def job_seconds(job: GemmJob, calibration: Calibration, cache_bytes: int, max_sets: int) -> float:
    """The whole job's predicted wall time (operands rotated past a `cache_bytes` cache in
    at most `max_sets` sets as bench.gemm does): each shape's operands drawn, its warm-up,
    its two batches."""
    total_s = 0.0
    for gemm in job.gemms:
        set_bytes = operand_set_bytes((gemm.m, gemm.n, gemm.k), gemm.batch, DTYPE_BYTES[job.dtype])
        drawn_bytes = rotation_sets(set_bytes, cache_bytes, max_sets) * set_bytes
        matmul_s = calibration.matmul_s(gemm)
        warm_s = max(job.warmup * matmul_s, job.warmup_s or 0.0)
        total_s += drawn_bytes / calibration.draw_bytes_s + warm_s + 2 * job.iters * matmul_s
    return total_s


def calibrate(bench: GemmBench, biggest: Gemm, element_bytes: int) -> Calibration:
    """Time the probes on `bench` for a job whose largest shape is `biggest`."""
    _, calls_s = bench.calibration_s((CALL_PROBE,) * 3, 1, CALL_REPEATS, CALL_MIN_S)
    call_s = statistics.fmean(calls_s)
    cut = Gemm("probe", "-", *(min(side, PROBE_SIDE) for side in (biggest.m, biggest.n, biggest.k)))
    drawn_s, cut_s = bench.calibration_s((cut.m, cut.n, cut.k), 1, RATE_REPEATS, RATE_MIN_S)
    points = [_point(cut, statistics.fmean(cut_s), call_s)]
    cut_bytes = operand_set_bytes((cut.m, cut.n, cut.k), 1, element_bytes)
    draw_bytes_s = cut_bytes / max(drawn_s, 1e-6)
    if biggest.flops > cut.flops and biggest.flops / points[0].rate_flops_s < LARGE_PROBE_S:
        shape = (biggest.m, biggest.n, biggest.k)
        _, big_s = bench.calibration_s(shape, biggest.batch, RATE_REPEATS, RATE_MIN_S)
        points.append(_point(biggest, statistics.fmean(big_s), call_s))
    return Calibration(call_s, tuple(points), draw_bytes_s)


def _point(gemm: Gemm, wall_s: float, call_s: float) -> RatePoint:
    """The rate past the per-call cost (past half the call at least: timing noise can
    make a small call look no longer than that cost)."""
    compute_s = max(wall_s - call_s, wall_s / 2)
    return RatePoint(gemm.shape, gemm.flops, gemm.flops / max(compute_s, 1e-9))


def seconds_text(seconds: float) -> str:
    """'0.8 s', '12 s', '1,234 s': a tenth below 10 s."""
    return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:,.0f} s"
