"""The GPU probe clock's stream choreography, against a stand-in for CUDA streams (no GPU
here): streams are timelines, an event reads its stream's time, waits join timelines.
With unlimited parallelism between streams, a correct choreography measures together =
max(alone), not the sum. The real CUDA path runs in tests/dist/test_gpu.py on a lent GPU."""

import contextlib
import types

import pytest

from collbench.bench.overlap.clock import CudaProbeClock

COMM_MS, MATMUL_MS = 3.0, 2.0
CYCLES_PER_MS = 1e6


class _Stream:
    def __init__(self, sim, name):
        self.sim, self.name, self.t_ms = sim, name, 0.0

    def wait_stream(self, other):
        self.t_ms = max(self.t_ms, other.t_ms)


class _Sim:
    """Timelines of the default stream, side streams and the backend's internal stream."""

    def __init__(self):
        self.default = _Stream(self, "default")
        self.internal = _Stream(self, "nccl")
        self.current = self.default
        self.side = []

    def torch(self):
        sim = self

        class Event:
            def __init__(self, enable_timing=False):
                assert enable_timing
                self.at_ms = None

            def record(self, stream):
                self.at_ms = stream.t_ms

            def synchronize(self):
                assert self.at_ms is not None

            def elapsed_time(self, other):
                return other.at_ms - self.at_ms

            def query(self):
                return False  # the host always enqueues the span before the spin ends

        def spin(cycles):
            """torch.cuda._sleep: the current stream busy for `cycles` at 1 GHz."""
            sim.current.t_ms += cycles / CYCLES_PER_MS

        def new_stream(device=None):
            stream = _Stream(sim, f"side{len(sim.side)}")
            sim.side.append(stream)
            return stream

        @contextlib.contextmanager
        def use(stream):
            previous, sim.current = sim.current, stream
            try:
                yield
            finally:
                sim.current = previous

        cuda = types.SimpleNamespace(
            Event=Event,
            Stream=new_stream,
            stream=use,
            current_stream=lambda device=None: sim.current,
            synchronize=lambda device=None: None,
            _sleep=spin,
        )
        return types.SimpleNamespace(cuda=cuda)

    def launch(self):
        """An async collective as ProcessGroupNCCL runs it: on its internal stream, after
        the issuing stream; wait() makes the then-current stream wait for it."""
        self.internal.wait_stream(self.current)
        self.internal.t_ms += COMM_MS
        sim = self
        return types.SimpleNamespace(wait=lambda: sim.current.wait_stream(sim.internal))


class _Kernel:
    def __init__(self, sim):
        self.sim = sim

    def run(self, reps):
        self.sim.current.t_ms += MATMUL_MS * reps


@pytest.mark.parametrize("reps", [1, 3])
def test_collective_and_compute_run_on_different_streams(reps):
    sim = _Sim()
    clock = CudaProbeClock(sim.torch(), device="cuda:0")
    aligned = []
    series = clock.rounds(sim.launch, _Kernel(sim), reps, 4, lambda: aligned.append(1))
    compute_ms = MATMUL_MS * reps
    expected_ms = {
        "comm": COMM_MS,
        "comp": compute_ms,
        "both": max(COMM_MS, compute_ms),
        "comp_during": compute_ms,
        "comm_during": COMM_MS,
    }
    for name, value_ms in expected_ms.items():
        assert series[name] == pytest.approx([value_ms * 1e-3] * 4), name
    assert len(aligned) == 3 * 4  # a barrier before every span
    # nothing was left running on the compute stream behind the collective's back
    assert sim.default.t_ms >= sim.internal.t_ms


def test_time_of_a_single_call():
    sim = _Sim()
    clock = CudaProbeClock(sim.torch(), device="cuda:0")
    assert clock.time(lambda: _Kernel(sim).run(2)) == pytest.approx(2 * MATMUL_MS * 1e-3)


class _RampingCuda:
    """A stand-in for torch.cuda whose spin runs `rate` cycles a millisecond, a rate that
    rises as the GPU warms: enough to test StreamHold's arithmetic without a GPU."""

    def __init__(self, rates):
        self.rates, self.slept = list(rates), []

    def current_stream(self, device):
        return None

    def stream(self, stream):
        return contextlib.nullcontext()

    def _sleep(self, cycles):
        self.slept.append(cycles)

    def Event(self, enable_timing=False):  # noqa: N802 (torch's name)
        cuda = self

        class _Event:
            def record(self, stream):
                self.at = len(cuda.slept)

            def synchronize(self):
                pass

            def elapsed_time(self, end):
                return cuda.slept[self.at] / cuda.rates.pop(0)  # ms of the timed spin

        return _Event()


def test_a_hold_found_short_measures_the_spin_rate_again():
    """Issue 40 item 8: the spin's rate measured while the clocks ramp (345 MHz) makes a
    hold meant for 20 ms spin 3.5 ms at 1980 MHz; a span that caught up re-measures it."""
    from collbench.bench.overlap.clock import StreamHold

    cuda = _RampingCuda([345e3, 1980e3])  # cycles a ms: first while ramping, then warm
    hold = StreamHold(cuda, None)
    hold.seconds = 0.02
    hold.hold(None)
    assert cuda.slept[-1] == round(0.02 * 345e6)  # what the ramping clock said
    caught_up = type("Start", (), {"query": lambda self: True})()
    hold.enqueued(caught_up)
    assert hold.short == 1 and hold.seconds == 0.04
    hold.hold(None)
    assert cuda.slept[-1] == round(0.04 * 1980e6)  # measured again, at the warm clock
    hold.enqueued(type("Start", (), {"query": lambda self: False})())
    assert hold.short == 1
