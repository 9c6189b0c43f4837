"""Clocks for overlap probes: one round = the collective alone, the compute alone, both.

The method, in full: docs/overlap.md#collbench-bench-overlap-clock-py.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from collbench.bench.overlap.matmul import MatmulKernel

SERIES = ("comm", "comp", "both", "comp_during", "comm_during")
# How long to wait for a completion callback after the collective is known to be done.
_CALLBACK_GRACE_S = 1.0

Launch = Callable[[], Any]  # starts one collective, returns a Work or a list of Works


def _works(handle: Any) -> list[Any]:
    return [] if handle is None else list(handle) if isinstance(handle, (list, tuple)) else [handle]


def wait_all(handle: Any) -> None:
    for work in _works(handle):
        work.wait()


def empty_series() -> dict[str, list[float]]:
    return {name: [] for name in SERIES}


class CpuProbeClock:
    """perf_counter for everything; completion callbacks for the collective's own span."""

    method = "perf_counter+future_callback"

    def __init__(self, torch: Any) -> None:
        self._torch = torch

    def time(self, run: Callable[[], None]) -> float:
        start = time.perf_counter()
        run()
        return time.perf_counter() - start

    def rounds(
        self, launch: Launch, kernel: MatmulKernel, reps: int, iters: int, align: Callable[[], None]
    ) -> dict[str, list[float]]:
        series = empty_series()
        for _ in range(iters):
            align()
            series["comm"].append(self.time(lambda: wait_all(launch())))
            align()
            series["comp"].append(self.time(lambda: kernel.run(reps)))
            align()
            together = self._together(launch, kernel, reps)
            for name, value in zip(("both", "comp_during", "comm_during"), together, strict=True):
                series[name].append(value)
        return series

    def _together(
        self, launch: Launch, kernel: MatmulKernel, reps: int
    ) -> tuple[float, float, float]:
        clock = time.perf_counter
        done: list[float] = []
        start = clock()
        handle = launch()
        observed = self._on_done(handle, done)
        comp_start = clock()
        kernel.run(reps)
        comp_end = clock()
        wait_all(handle)
        end = clock()
        if observed:
            deadline = clock() + _CALLBACK_GRACE_S
            while not done and clock() < deadline:
                time.sleep(0)
        comm_during = done[0] - start if done else math.nan
        return end - start, comp_end - comp_start, comm_during

    def _on_done(self, handle: Any, done: list[float]) -> bool:
        """Stamp the time the collective completes; False if its backend has no futures."""
        try:
            futures = [work.get_future() for work in _works(handle)]
        except RuntimeError:
            return False
        if not futures:
            return False
        future = futures[0] if len(futures) == 1 else self._torch.futures.collect_all(futures)
        future.add_done_callback(lambda _: done.append(time.perf_counter()))
        return True


class StreamHold:
    """A device-side spin (torch.cuda._sleep) queued before a span's start event, long
    enough that the host enqueues the whole span while the GPU still spins.

    Whether it was long enough is known right after the enqueue: if the start event has
    already completed (`Event.query()`), the GPU caught up with the host inside the span.
    Then the hold doubles for the next span (up to HOLD_MAX_S), so the warm-up rounds size it,
    and the spin's rate is measured again: one measured while the clocks ramped (345 -> 1980
    MHz on an H200) makes every hold shorter than it says. `short` counts those spans."""

    HOLD_START_S = 200e-6
    HOLD_MAX_S = 0.1
    # Cycles of the spin timed once to learn the device's cycles per second.
    CALIBRATION_CYCLES = 2_000_000

    def __init__(self, cuda: Any, device: Any) -> None:
        self._cuda, self._device = cuda, device
        self.seconds = self.HOLD_START_S
        self._cycles_per_s: float | None = None
        self.short = 0

    def hold(self, stream: Any) -> None:
        """Queue the spin on `stream` (the span's start event follows it)."""
        cycles = max(1, round(self.seconds * self.cycles_per_second()))
        with self._cuda.stream(stream):
            self._cuda._sleep(cycles)

    def enqueued(self, start: Any) -> None:
        """The host has enqueued the span that `start` opens: was the spin still running?"""
        if start.query():
            self.seconds = min(self.HOLD_MAX_S, 2 * self.seconds)
            self.short, self._cycles_per_s = self.short + 1, None

    def cycles_per_second(self) -> float:
        if self._cycles_per_s is None:
            cuda = self._cuda
            stream = cuda.current_stream(self._device)
            start, end = (cuda.Event(enable_timing=True) for _ in range(2))
            with cuda.stream(stream):
                cuda._sleep(self.CALIBRATION_CYCLES)  # load the kernel, let the clocks rise
                start.record(stream)
                cuda._sleep(self.CALIBRATION_CYCLES)
                end.record(stream)
            end.synchronize()
            self._cycles_per_s = self.CALIBRATION_CYCLES / (start.elapsed_time(end) * 1e-3)
        return self._cycles_per_s


class CudaProbeClock:
    """CUDA events on the compute stream and on the collective's side stream, every span
    opened on a held stream (StreamHold)."""

    method = "cuda_events_two_streams_held"

    def __init__(self, torch: Any, device: Any) -> None:
        self._cuda = torch.cuda
        self._comm_stream = torch.cuda.Stream(device=device)
        self._device = device
        self.hold = StreamHold(torch.cuda, device)

    def time(self, run: Callable[[], None]) -> float:
        start, end = self._events(2)
        current = self._cuda.current_stream(self._device)
        self.hold.hold(current)
        start.record(current)
        run()
        end.record(current)
        self.hold.enqueued(start)
        end.synchronize()
        return start.elapsed_time(end) * 1e-3

    def rounds(
        self, launch: Launch, kernel: MatmulKernel, reps: int, iters: int, align: Callable[[], None]
    ) -> dict[str, list[float]]:
        recorded = []
        for _ in range(iters):
            align()
            comm = self._span(launch, None, 0)
            align()
            comp = self._span(None, kernel, reps)
            align()
            both = self._span(launch, kernel, reps)
            recorded.append((comm, comp, both))
        self._cuda.synchronize(self._device)
        series = empty_series()
        for comm, comp, both in recorded:
            series["comm"].append(self._elapsed(comm["start"], comm["end"]))
            series["comp"].append(self._elapsed(comp["start"], comp["end"]))
            series["both"].append(self._elapsed(both["start"], both["end"]))
            series["comp_during"].append(self._elapsed(both["comp_start"], both["comp_end"]))
            series["comm_during"].append(self._elapsed(both["start"], both["comm_end"]))
        return series

    def _span(
        self, launch: Launch | None, kernel: MatmulKernel | None, reps: int
    ) -> dict[str, Any]:
        """Enqueue one timed span; returns its (not yet completed) events."""
        names = ("start", "end", "comm_end", "comp_start", "comp_end")
        events = dict(zip(names, self._events(len(names)), strict=True))
        current = self._cuda.current_stream(self._device)
        self.hold.hold(current)
        events["start"].record(current)
        if launch is not None:
            side = self._comm_stream
            side.wait_stream(current)
            with self._cuda.stream(side):
                wait_all(launch())
                events["comm_end"].record(side)
        if kernel is not None:
            events["comp_start"].record(current)
            kernel.run(reps)
            events["comp_end"].record(current)
        if launch is not None:
            current.wait_stream(self._comm_stream)
        events["end"].record(current)
        self.hold.enqueued(events["start"])
        return events

    def _events(self, count: int) -> list[Any]:
        return [self._cuda.Event(enable_timing=True) for _ in range(count)]

    @staticmethod
    def _elapsed(start: Any, end: Any) -> float:
        return start.elapsed_time(end) * 1e-3
