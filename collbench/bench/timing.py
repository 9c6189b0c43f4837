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
    """CUDA events on the current stream.

    ProcessGroupNCCL runs each collective on its own internal stream and makes the current
    stream wait for it, so an event recorded on the current stream right after the call
    completes when the collective does, and the next collective starts after it.

    Recording an event costs CPU time per call, which can matter when small NCCL calls are
    bound by how fast the CPU enqueues them. So the batch figure comes from a batch with
    only a start and an end event (as nccl-tests times it), and the per-iteration samples
    from a second batch with an event after every call.
    """

    method = "cuda_events"

    def __init__(self, torch: Any) -> None:
        self._torch = torch

    def synchronize(self) -> None:
        self._torch.cuda.synchronize()

    def time_batch(self, run: Callable[[], None], iters: int) -> tuple[float, list[float]]:
        batch_stamps = self._record(run, iters, every_call=False)
        batch_s = batch_stamps[-1] / iters
        _, samples = _batch_and_samples(self._record(run, iters, every_call=True), iters)
        return batch_s, samples

    def _record(self, run: Callable[[], None], iters: int, every_call: bool) -> list[float]:
        """Seconds from the first event to each later one."""
        cuda = self._torch.cuda
        stream = cuda.current_stream()
        events = [cuda.Event(enable_timing=True) for _ in range(iters + 1 if every_call else 2)]
        events[0].record(stream)
        if every_call:
            for event in events[1:]:
                run()
                event.record(stream)
        else:
            for _ in range(iters):
                run()
            events[1].record(stream)
        events[-1].synchronize()
        return [0.0] + [events[0].elapsed_time(event) * 1e-3 for event in events[1:]]


def _batch_and_samples(stamps: list[float], iters: int) -> tuple[float, list[float]]:
    samples = [stamps[i + 1] - stamps[i] for i in range(iters)]
    return (stamps[-1] - stamps[0]) / iters, samples
