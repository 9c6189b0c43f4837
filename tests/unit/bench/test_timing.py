"""Timer bookkeeping. The CUDA timer runs here against a stand-in event clock (no GPU on
this machine); the real CUDA path runs in tests/dist/test_gpu.py where a GPU is lent."""

import types

import pytest

from collbench.bench import timing
from collbench.bench.timing import CpuTimer, CudaEventTimer


class _Clock:
    """A GPU stream clock that advances by a known cost per collective."""

    def __init__(self, costs_ms):
        self.now_ms = 0.0
        self.costs_ms = list(costs_ms)
        self.records = 0

    def run(self):
        self.now_ms += self.costs_ms.pop(0)


def _fake_torch(clock):
    class Event:
        def __init__(self, enable_timing=False):
            assert enable_timing
            self.at = None

        def record(self, stream):
            clock.records += 1
            self.at = clock.now_ms

        def synchronize(self):
            assert self.at is not None

        def elapsed_time(self, other):
            return other.at - self.at

    cuda = types.SimpleNamespace(
        Event=Event, current_stream=lambda: "stream", synchronize=lambda: None
    )
    return types.SimpleNamespace(cuda=cuda)


def test_cuda_timer_batch_has_two_events_and_samples_one_per_call():
    clock = _Clock([1.0, 2.0, 3.0, 4.0] + [1.5, 2.5, 3.5, 4.5])
    batch_s, samples = CudaEventTimer(_fake_torch(clock)).time_batch(clock.run, 4)
    assert batch_s == pytest.approx(10e-3 / 4)  # first, uninstrumented batch
    assert samples == pytest.approx([1.5e-3, 2.5e-3, 3.5e-3, 4.5e-3])  # second batch
    assert clock.records == 2 + 5


class _PerfCounter:
    """A perf_counter stand-in that only moves when a collective runs, by a known cost."""

    def __init__(self, start_s, costs_s):
        self.now_s = start_s
        self.costs_s = list(costs_s)
        self.calls = 0

    def read(self):
        return self.now_s

    def run(self):
        self.calls += 1
        self.now_s += self.costs_s.pop(0)


def test_cpu_timer_samples_are_the_calls_and_the_batch_is_their_mean(monkeypatch):
    costs_s = [1e-3, 2e-3, 4e-3, 8e-3, 16e-3]
    # a clock that does not start at zero: the figures are differences, not raw readings
    clock = _PerfCounter(start_s=1234.5, costs_s=costs_s)
    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=clock.read))
    batch_s, samples = CpuTimer().time_batch(clock.run, len(costs_s))
    assert clock.calls == len(costs_s) and clock.costs_s == []
    # one sample per call, in order: a stamp read before its call would shift them by one
    assert samples == pytest.approx(costs_s, abs=1e-12)
    assert batch_s == pytest.approx(sum(costs_s) / len(costs_s), abs=1e-12)


def test_cpu_timer_on_the_real_clock_samples_add_up_to_the_batch():
    calls = []
    batch_s, samples = CpuTimer().time_batch(lambda: calls.append(1), 50)
    assert len(calls) == 50 and len(samples) == 50
    assert sum(samples) / 50 == pytest.approx(batch_s)
