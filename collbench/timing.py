"""Timers: a batch of back-to-back operations with a timestamp after each one.

The batch time (first to last timestamp, divided by iters) is nccl-tests' figure; the
differences between consecutive timestamps are the per-iteration samples. Timestamps
do not break the batch: on GPU they are events recorded on the stream, on CPU a clock
read between synchronous calls.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


class CpuTimer:
    """perf_counter around synchronous CPU collectives (gloo)."""

    method = "perf_counter"

    def synchronize(self) -> None:
        """Nothing is queued on CPU: gloo calls return when the operation is done."""

    def time_batch(self, run: Callable[[], None], iters: int) -> tuple[float, list[float]]:
        stamps = [0.0] * (iters + 1)
        clock = time.perf_counter
        stamps[0] = clock()
        for i in range(1, iters + 1):
            run()
            stamps[i] = clock()
        return _batch_and_samples(stamps, iters)


class CudaEventTimer:
    """CUDA events recorded on the current stream after each operation.

    ProcessGroupNCCL runs each collective on its own internal stream and makes the current
    stream wait for it, so an event recorded on the current stream right after the call
    completes when the collective does, and the next collective starts after it.
    """

    method = "cuda_events"

    def __init__(self, torch: Any) -> None:
        self._torch = torch

    def synchronize(self) -> None:
        self._torch.cuda.synchronize()

    def time_batch(self, run: Callable[[], None], iters: int) -> tuple[float, list[float]]:
        cuda = self._torch.cuda
        events = [cuda.Event(enable_timing=True) for _ in range(iters + 1)]
        stream = cuda.current_stream()
        events[0].record(stream)
        for i in range(1, iters + 1):
            run()
            events[i].record(stream)
        events[-1].synchronize()
        stamps = [0.0] + [events[0].elapsed_time(e) * 1e-3 for e in events[1:]]
        return _batch_and_samples(stamps, iters)


def _batch_and_samples(stamps: list[float], iters: int) -> tuple[float, list[float]]:
    samples = [stamps[i + 1] - stamps[i] for i in range(iters)]
    return (stamps[-1] - stamps[0]) / iters, samples
