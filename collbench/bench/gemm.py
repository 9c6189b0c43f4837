"""`collbench gemm`'s measurement: one matmul shape on the local accelerator, timed as
nccl-tests times a collective.

After `warmup` untimed matmuls, one batch of `iters` matmuls back to back is timed whole
(GPU: a CUDA event before and after it on the stream; CPU: perf_counter around it), and
its time / iters is the row's figure. A second batch, timed matmul by matmul, gives the
per-iteration median, minimum and maximum, so the per-call timers never inflate the
headline figure. The operands are the overlap probe's (bench.overlap.matmul): random, drawn
on the device, with one output buffer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from collbench.bench.overlap.clock import CpuProbeClock, CudaProbeClock
from collbench.bench.overlap.matmul import MatmulKernel
from collbench.bench.provenance import device_name
from collbench.core.errors import SpecError
from collbench.core.stats import median

DEVICES = ("cuda", "cpu")
# collbench gemm's dtype names (as mfu's --dtype says them) -> core.dtypes names
DTYPE_NAMES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


@dataclass(frozen=True)
class GemmTiming:
    """One shape's timed batch and its per-iteration spread, in microseconds."""

    time_us: float
    samples_us: tuple[float, ...]
    timing: str

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

    def free_bytes(self) -> int | None:
        """Memory free for operands on the device (None: unknown)."""
        if self.device.type == "cuda":
            free, _ = self.torch.cuda.mem_get_info(self.device)
            return int(free)
        try:
            with open("/proc/meminfo", encoding="ascii") as handle:
                for line in handle:
                    if line.startswith("MemAvailable:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            return None
        return None

    def once_s(self, shape: tuple[int, int, int], batch: int) -> float:
        """One matmul of the shape, timed (to size the job before running it)."""
        self.kernel.set_shape(shape, batch)
        self.kernel.run(1)  # the first call pays for the library's setup
        return self.clock.time(lambda: self.kernel.run(1))

    def measure(
        self, shape: tuple[int, int, int], batch: int, warmup: int, iters: int
    ) -> GemmTiming:
        kernel = self.kernel
        kernel.set_shape(shape, batch)
        kernel.run(warmup)
        self._sync()
        batch_s = self.clock.time(lambda: kernel.run(iters))
        samples = tuple(self.clock.time(lambda: kernel.run(1)) * 1e6 for _ in range(iters))
        return GemmTiming(batch_s / iters * 1e6, samples, self.timing)

    def _sync(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)
