"""Timers: a batch of back-to-back operations with a timestamp after each one.

The method, in full: docs/architecture.md#collbench-bench-timing-py.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from collbench.core.errors import SpecError
from collbench.core.spec import SweepSpec


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


class CudaGraphTimer(CudaEventTimer):
    """nccl-tests' `-G`: the timed operations captured in a CUDA graph and replayed.

    Called from Python, an operation pays torch's per-call host cost (c10d's bookkeeping,
    the work object, the stream waits): ~10-30 us, more than NCCL itself takes at small
    sizes (an 8 B all-reduce reads 15-40 us where nccl-tests reads 8-15). Captured once
    (NCCL supports capture since 2.9; ProcessGroupNCCL skips its watchdog bookkeeping while
    a stream captures) and replayed, they run back to back as the GPU takes them. The batch
    figure: `iters` operations in one graph replayed once between two events, divided by
    iters. The samples: a graph of one operation replayed `iters` times with an event after
    each (an event inside a capture becomes a dependency, not a timestamp). Every operation
    runs eagerly once first (NCCL connects its peers outside the capture) and each graph is
    replayed once untimed (its upload). The data check runs eagerly, as always.
    """

    method = "cuda_graph"

    def time_batch(self, run: Callable[[], None], iters: int) -> tuple[float, list[float]]:
        run()  # eagerly: NCCL sets up this size's connections outside the capture
        self.synchronize()
        batch_graph = self._capture(run, iters)
        one_graph = self._capture(run, 1)
        for graph in (batch_graph, one_graph):
            graph.replay()  # untimed: uploads the graph
        self.synchronize()
        import torch.distributed as dist

        # the runner's barrier came before the captures and untimed replays: every rank
        # starts the timed replays together, as the eager batch does
        if dist.is_initialized():
            dist.barrier(device_ids=[self._torch.cuda.current_device()])
        batch_s = self._record(batch_graph.replay, 1, every_call=False)[-1] / iters
        stamps = self._record(one_graph.replay, iters, every_call=True)
        del batch_graph, one_graph
        self.synchronize()
        return batch_s, _batch_and_samples(stamps, iters)[1]

    def _capture(self, run: Callable[[], None], count: int) -> Any:
        cuda = self._torch.cuda
        graph = cuda.CUDAGraph()
        with cuda.graph(graph):
            for _ in range(count):
                run()
        return graph


def make_timer(torch: Any, device: Any, spec: SweepSpec) -> Any:
    """The timer a rank's sweep rows use: CUDA events on a GPU, the graph timer with
    spec.cuda_graph (SpecError on a CPU rank, e.g. --backend auto that found no GPU),
    perf_counter on CPU."""
    if device.type != "cuda":
        if spec.cuda_graph:
            raise SpecError(
                "--cuda-graph", True, f"needs a GPU backend; this rank runs {device.type}"
            )
        return CpuTimer()
    return CudaGraphTimer(torch) if spec.cuda_graph else CudaEventTimer(torch)


def _batch_and_samples(stamps: list[float], iters: int) -> tuple[float, list[float]]:
    samples = [stamps[i + 1] - stamps[i] for i in range(iters)]
    return (stamps[-1] - stamps[0]) / iters, samples
