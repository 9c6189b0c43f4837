"""`collbench gemm`'s measurement: one matmul shape on the local accelerator, timed as
nccl-tests times a collective.

The method, in full: docs/architecture.md#collbench-bench-gemm-py.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collbench.bench.capacity import host_memory_available
from collbench.bench.device_clocks import clock_reader, read_clocks
from collbench.bench.overlap.clock import CpuProbeClock, CudaProbeClock
from collbench.bench.overlap.matmul import MatmulKernel
from collbench.bench.provenance import device_name
from collbench.core.errors import SpecError
from collbench.core.stats import median
from collbench.core.units import parse_size

DEVICES = ("cuda", "cpu")
# collbench gemm's dtype names (as mfu's --dtype says them) -> core.dtypes names
DTYPE_NAMES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
# Rotated operand sets fill this many times the last-level cache (one set: A, B and C).
CACHE_FILL = 2
GPU_MAX_SETS, CPU_MAX_SETS = 64, 4
UNKNOWN_CACHE_BYTES = 32 * 1024**2  # when the device does not say
BATCH_CHUNKS = 5  # the timed batch runs as this many chunks (fewer when iters is smaller)
MAX_WARMUP_CHUNK = 1024  # matmuls enqueued at once while warming up
MAX_CALIBRATION_CALLS = 1000  # timed calls of one calibration probe, at most


@dataclass(frozen=True)
class GemmTiming:
    """One shape's timed batch and its per-iteration spread, in microseconds: `time_us` is
    the median of `chunks_us` (each chunk's time per matmul), `mean_us` the whole batch's
    mean (batch_figures)."""

    time_us: float
    samples_us: tuple[float, ...]
    timing: str
    mean_us: float = 0.0
    chunks_us: tuple[float, ...] = ()
    warmup_s: float = 0.0  # the warm-up's wall time
    operand_sets: int = 1
    clocks: dict[str, Any] = field(default_factory=dict)  # "before" / "after" the batch

    @property
    def p50_us(self) -> float:
        return median(self.samples_us) or 0.0  # iters >= 1: never empty


class GemmBench:
    """Matmuls of one dtype on one device, shape after shape."""

    def __init__(self, device: str | None, dtype: str) -> None:
        import torch

        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if device == "cuda" and not torch.cuda.is_available():
            raise SpecError("--device", device, "has no CUDA device here (torch sees none)")
        self.torch = torch
        self.device = torch.device(device)
        self.kernel = MatmulKernel(torch, self.device, DTYPE_NAMES[dtype])
        problem = self.kernel.check_supported()
        if problem is not None:
            raise SpecError.from_message(problem.replace("--compute-dtype", "--dtype"))
        if self.device.type == "cuda":
            self.clock: Any = CudaProbeClock(torch, self.device)
            self.timing = "cuda_events"
        else:
            self.clock = CpuProbeClock(torch)
            self.timing = "perf_counter"
        self.accelerator = device_name(torch, self.device)
        self.clocks, self.no_clocks_why = clock_reader(torch, self.device)

    def free_bytes(self) -> int | None:
        """Memory free for operands on the device (host: MemAvailable, bench.capacity)."""
        if self.device.type == "cuda":
            free, _ = self.torch.cuda.mem_get_info(self.device)
            return int(free)
        return host_memory_available()

    def calibration_s(
        self, shape: tuple[int, int, int], batch: int, repeats: int, min_s: float = 0.0
    ) -> tuple[float, list[float]]:
        """(seconds to draw the shape's operands, wall seconds of each synced matmul of it
        after one untimed call, which pays for the library's setup: at least `repeats`, and
        more until `min_s` have passed, at most MAX_CALIBRATION_CALLS), to size the job
        before running it (run.gemm.calibrate)."""
        started = time.perf_counter()
        self.kernel.set_shape(shape, batch)
        self._sync()
        drawn_s = time.perf_counter() - started
        self.kernel.run(1)
        self._sync()
        calls_s: list[float] = []
        while len(calls_s) < repeats or (
            sum(calls_s) < min_s and len(calls_s) < MAX_CALIBRATION_CALLS
        ):
            begun = time.perf_counter()
            self.kernel.run(1)
            self._sync()
            calls_s.append(time.perf_counter() - begun)
        return drawn_s, calls_s

    def measure(
        self, shape: tuple[int, int, int], batch: int, warmup: int, iters: int, warmup_s: float
    ) -> GemmTiming:
        """Warm up (`warmup` matmuls and `warmup_s` seconds), then time the batch."""
        self.kernel.set_shape((1, 1, 1))  # the sizing operands go before the sets come
        set_bytes = operand_set_bytes(shape, batch, self.kernel.dtype.itemsize)
        sets = rotation_sets(set_bytes, self.cache_bytes(), self.max_sets)
        operands = RotatingOperands(self.torch, self.device, self.kernel.dtype, shape, batch, sets)
        warmed_s = self._warm_up(operands, warmup, warmup_s)
        before = read_clocks(self.clocks, self.no_clocks_why)
        sizes = chunk_sizes(iters, BATCH_CHUNKS)
        chunk_s = [self.clock.time(lambda size=size: operands.run(size)) for size in sizes]
        after = read_clocks(self.clocks, self.no_clocks_why)
        samples = tuple(self.clock.time(lambda: operands.run(1)) * 1e6 for _ in range(iters))
        time_us, mean_us, chunks_us = batch_figures(chunk_s, sizes)
        return GemmTiming(
            time_us=time_us,
            samples_us=samples,
            timing=self.timing,
            mean_us=mean_us,
            chunks_us=chunks_us,
            warmup_s=warmed_s,
            operand_sets=sets,
            clocks={"before": before, "after": after},
        )

    def _warm_up(self, operands: RotatingOperands, warmup: int, warmup_s: float) -> float:
        """`warmup` matmuls, then more in chunks until `warmup_s` have passed (the clock
        is read after a sync, so queued work counts only once it ran). Each chunk doubles
        the last, but holds no more matmuls than the last one's rate fits in the time left."""
        started = time.perf_counter()
        operands.run(warmup)
        self._sync()
        chunk = max(1, operands.sets)
        while (left_s := warmup_s - (time.perf_counter() - started)) > 0:
            begun = time.perf_counter()
            operands.run(chunk)
            self._sync()
            chunk = next_warmup_chunk(chunk, time.perf_counter() - begun, left_s)
        return time.perf_counter() - started

    @property
    def max_sets(self) -> int:
        return GPU_MAX_SETS if self.device.type == "cuda" else CPU_MAX_SETS

    def cache_bytes(self) -> int:
        """The last-level cache a set of operands could stay in: a GPU's L2, a CPU's
        largest cache (sysfs); UNKNOWN_CACHE_BYTES when the device does not say."""
        if self.device.type == "cuda":
            props = self.torch.cuda.get_device_properties(self.device)
            return int(getattr(props, "L2_cache_size", 0) or UNKNOWN_CACHE_BYTES)
        return cpu_cache_bytes() or UNKNOWN_CACHE_BYTES

    def _sync(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)


class RotatingOperands:
    """`sets` sets of random operands (A, B and an output each) of one shape; each matmul
    takes the next set, so a small shape reads operands that are not still in cache."""

    def __init__(
        self,
        torch: Any,
        device: Any,
        dtype: Any,
        shape: tuple[int, int, int],
        batch: int,
        sets: int,
    ) -> None:
        self.torch, self.batch, self.sets, self._next = torch, batch, sets, 0
        m, n, k = shape
        lead = (batch,) if batch > 1 else ()
        # drawn on the device: an 8192 x 8192 draw on the host takes seconds
        generator = torch.Generator(device=device).manual_seed(1234)

        kind = {"dtype": dtype, "device": device}

        def draw(*size: int) -> Any:
            return torch.randn(*size, generator=generator, **kind)

        self._sets = [
            (draw(*lead, m, k), draw(*lead, k, n), torch.empty(*lead, m, n, **kind))
            for _ in range(sets)
        ]

    def run(self, reps: int) -> None:
        """Enqueue `reps` matmuls (CPU: run them), each on the next set."""
        mm = self.torch.bmm if self.batch > 1 else self.torch.mm
        for _ in range(reps):
            a, b, out = self._sets[self._next]
            mm(a, b, out=out)
            self._next = (self._next + 1) % self.sets


def operand_set_bytes(shape: tuple[int, int, int], batch: int, element_bytes: int) -> int:
    """Bytes of one set of operands: A (M x K), B (K x N) and the output (M x N)."""
    m, n, k = shape
    return element_bytes * batch * (m * k + k * n + m * n)


def next_warmup_chunk(chunk: int, spent_s: float, left_s: float) -> int:
    """The warm-up's next chunk after one of `chunk` matmuls took `spent_s` with `left_s`
    left before it: twice as many (at most MAX_WARMUP_CHUNK), but no more than that rate
    fits in the time left after it, and at least one."""
    fits = math.ceil((left_s - spent_s) / max(spent_s / chunk, 1e-9))
    return max(1, min(chunk * 2, MAX_WARMUP_CHUNK, fits))


def time_stat(chunks: int) -> str:
    """What a row's time_us is, in words (its `time_stat`)."""
    return f"median of {chunks} timed chunks of the batch, per matmul"


def batch_figures(
    chunk_s: list[float], sizes: tuple[int, ...]
) -> tuple[float, float, tuple[float, ...]]:
    """(the median of the chunks' per-matmul times, the whole batch's mean, the per-matmul
    time of each chunk), in microseconds, from each chunk's seconds and matmul count."""
    per_matmul_us = tuple(spent / size * 1e6 for spent, size in zip(chunk_s, sizes, strict=True))
    mean_us = sum(chunk_s) / sum(sizes) * 1e6
    return median(per_matmul_us) or 0.0, mean_us, per_matmul_us


def chunk_sizes(iters: int, chunks: int) -> tuple[int, ...]:
    """`iters` split into min(iters, chunks) chunks as even as they come (7, 5: 2 2 1 1 1)."""
    count = max(1, min(iters, chunks))
    return tuple(iters // count + (1 if index < iters % count else 0) for index in range(count))


def rotation_sets(set_bytes: int, cache_bytes: int, max_sets: int) -> int:
    """Operand sets to rotate through so they fill CACHE_FILL x the cache: 1 when one set
    already does, at most `max_sets`."""
    if set_bytes <= 0 or set_bytes >= CACHE_FILL * cache_bytes:
        return 1
    return max(1, min(max_sets, math.ceil(CACHE_FILL * cache_bytes / set_bytes)))


def cpu_cache_bytes(root: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> int | None:
    """The largest cache of CPU 0 as sysfs lists it (index*/size, e.g. "32768K"), or None."""
    sizes = []
    for path in root.glob("index*/size"):
        with contextlib.suppress(OSError, SpecError):  # sysfs' K and M are 1024's, as here
            sizes.append(parse_size(path.read_text(encoding="ascii")))
    return max(sizes, default=None)
