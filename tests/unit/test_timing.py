"""Timer bookkeeping. The CUDA timer runs here against a stand-in event clock (no GPU on
this machine); the real CUDA path runs in tests/dist/test_gpu.py where a GPU is lent."""

import types

import pytest

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


def test_cpu_timer_samples_add_up_to_the_batch():
    calls = []
    batch_s, samples = CpuTimer().time_batch(lambda: calls.append(1), 50)
    assert len(calls) == 50 and len(samples) == 50
    assert sum(samples) / 50 == pytest.approx(batch_s)
    assert all(sample >= 0 for sample in samples)
