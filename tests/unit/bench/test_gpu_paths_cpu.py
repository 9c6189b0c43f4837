"""Issue 27, items 1, 2, 10 and 12, on what runs here: the environment that forbids overlap,
the GPU_* knobs, the probe's matmul operands in the memory check, --cuda-graph's refusals,
and the stream hold's sizing (the one fake here stands for a GPU, which this host has not;
tests/dist/test_gpu_paths.py runs the real one where a GPU is lent)."""

from __future__ import annotations

import pytest

from collbench.bench.capacity import check_memory, probe_operand_bytes
from collbench.bench.overlap.clock import StreamHold
from collbench.core.errors import SpecError
from collbench.core.knobs import (
    is_setting_knob,
    knob_env,
    knob_mismatch,
    reads_knob,
)
from collbench.core.overlap import (
    ALLOW_BLOCKING_FLAG,
    MAX_COMPUTE_STREAMS,
    OverlapSpec,
    blocking_env,
    check_blocking_env,
)
from collbench.core.spec import SweepSpec

# --- item 2: environment that makes overlap impossible ----------------------------------


@pytest.mark.parametrize(
    ("environ", "found"),
    [
        ({}, []),
        ({"TORCH_NCCL_BLOCKING_WAIT": "0", "CUDA_LAUNCH_BLOCKING": "false"}, []),
        ({"TORCH_NCCL_BLOCKING_WAIT": "1"}, ["TORCH_NCCL_BLOCKING_WAIT"]),
        ({"CUDA_LAUNCH_BLOCKING": "1", "NCCL_BLOCKING_WAIT": "True"}, ["NCCL_BLOCKING_WAIT", "CUDA_LAUNCH_BLOCKING"]),
        ({"AMD_SERIALIZE_KERNEL": "3", "HIP_LAUNCH_BLOCKING": "1"}, ["HIP_LAUNCH_BLOCKING", "AMD_SERIALIZE_KERNEL"]),
    ],
)  # fmt: skip
def test_blocking_env_finds_the_variables_switched_on(environ, found):
    assert blocking_env(environ) == found


def test_overlap_probes_are_refused_naming_the_variable_and_the_flag():
    environ = {"TORCH_NCCL_BLOCKING_WAIT": "1", "CUDA_LAUNCH_BLOCKING": "1"}
    with pytest.raises(SpecError) as error:
        check_blocking_env(environ, OverlapSpec())
    text = str(error.value)
    assert error.value.field == "TORCH_NCCL_BLOCKING_WAIT" and "\n" not in text
    assert ALLOW_BLOCKING_FLAG in text and "~0%" in text


def test_allowed_or_a_sweep_is_warned_naming_every_variable():
    environ = {"TORCH_NCCL_BLOCKING_WAIT": "1", "CUDA_LAUNCH_BLOCKING": "1"}
    for overlap in (None, OverlapSpec(allow_blocking_env=True)):
        line = check_blocking_env(environ, overlap)
        assert "TORCH_NCCL_BLOCKING_WAIT=1" in line and "CUDA_LAUNCH_BLOCKING=1" in line
    assert check_blocking_env({"CUDA_LAUNCH_BLOCKING": "0"}, OverlapSpec()) == ""


def test_the_allow_flag_round_trips_through_the_overlap_args():
    spec = OverlapSpec(allow_blocking_env=True)
    assert spec.to_args()[-1] == ALLOW_BLOCKING_FLAG
    assert ALLOW_BLOCKING_FLAG not in OverlapSpec().to_args()


def test_rocm_concurrency_variables_are_recorded_for_rccl():
    environ = {
        "GPU_MAX_HW_QUEUES": "8",
        "AMD_SERIALIZE_KERNEL": "3",
        "GPU_DEVICE_ORDINAL": "0,1",
        "HOME": "/root",
    }
    assert set(knob_env(environ)) == {
        "GPU_MAX_HW_QUEUES",
        "AMD_SERIALIZE_KERNEL",
        "GPU_DEVICE_ORDINAL",
    }
    assert reads_knob("GPU_MAX_HW_QUEUES") == ("rccl",)
    assert knob_mismatch("GPU_MAX_HW_QUEUES", "gloo") and not knob_mismatch(
        "GPU_MAX_HW_QUEUES", "rccl"
    )
    assert is_setting_knob("GPU_MAX_HW_QUEUES")  # a tuning: tune from keeps it apart
    assert not is_setting_knob("GPU_DEVICE_ORDINAL")  # placement, as CUDA_VISIBLE_DEVICES


# --- item 10: the probe's matmul operands, up to 32 streams, in the memory check -------


def test_thirty_two_compute_streams_each_count_an_output():
    overlap = OverlapSpec(compute_streams=MAX_COMPUTE_STREAMS, compute_dtype="bfloat16")
    spec = SweepSpec(collectives=("all_reduce",), max_bytes=1024, overlap=overlap)
    side = 8192  # the largest square an automatic GPU probe tries
    assert probe_operand_bytes(spec, "cuda") == (2 + MAX_COMPUTE_STREAMS) * side * side * 2
    # 34 x 128 MiB = 4.25 GiB: refused on a 4 GiB GPU, where one stream (384 MiB) fits
    with pytest.raises(SpecError) as error:
        check_memory(spec, 8, 1, 4 << 30, "GPU")
    assert error.value.field == "--matmul-shape" and "matmul operands" in str(error.value)
    one = SweepSpec(
        collectives=("all_reduce",), max_bytes=1024, overlap=OverlapSpec(compute_dtype="bfloat16")
    )
    check_memory(one, 8, 1, 4 << 30, "GPU")


def test_the_kernel_keeps_one_set_of_operands_when_it_changes_shape():
    torch = pytest.importorskip("torch")
    from collbench.bench.overlap.matmul import MatmulKernel

    kernel = MatmulKernel(torch, torch.device("cpu"), "float32")
    kernel.set_shape((64, 32, 16))
    kernel.set_shape((8, 4, 2))
    assert tuple(kernel._a.shape) == (8, 2) and tuple(kernel._b.shape) == (2, 4)
    assert [tuple(out.shape) for out in kernel._out] == [(8, 4)]


# --- item 12: --cuda-graph ---------------------------------------------------------------


def test_cuda_graph_is_refused_on_gloo_and_for_probes_only():
    with pytest.raises(SpecError, match="needs a GPU backend") as error:
        SweepSpec(backend="gloo", cuda_graph=True)
    assert error.value.field == "--cuda-graph"
    with pytest.raises(SpecError, match="needs a GPU backend"):
        SweepSpec(cuda_graph=True).with_backend("gloo")  # --backend auto that found no GPU
    with pytest.raises(SpecError, match="overlap probes"):
        SweepSpec(cuda_graph=True, overlap=OverlapSpec(), sweep_rows=False)


def test_cuda_graph_is_in_the_printed_arguments_only_when_asked():
    assert "--cuda-graph" in SweepSpec(backend="nccl", cuda_graph=True).to_args()
    assert "--cuda-graph" not in SweepSpec().to_args()


def test_a_cpu_rank_refuses_the_graph_timer():
    torch = pytest.importorskip("torch")
    from collbench.bench.timing import CpuTimer, make_timer

    cpu = torch.device("cpu")
    assert isinstance(make_timer(torch, cpu, SweepSpec()), CpuTimer)
    spec = SweepSpec(backend="nccl", cuda_graph=True)
    with pytest.raises(SpecError, match="needs a GPU backend; this rank runs cpu"):
        make_timer(torch, cpu, spec)


# --- item 1: the stream hold's sizing (a stand-in for the CUDA runtime) ------------------


class _Event:
    def __init__(self, done: bool = False) -> None:
        self.done = done

    def query(self) -> bool:
        return self.done


class _Cuda:
    """Records what StreamHold asks of torch.cuda: the spins it queues."""

    def __init__(self) -> None:
        self.sleeps: list[int] = []

    def stream(self, stream):
        import contextlib

        return contextlib.nullcontext()

    def _sleep(self, cycles: int) -> None:
        self.sleeps.append(cycles)


def test_the_hold_doubles_while_the_gpu_catches_up_and_stays_once_it_does_not():
    cuda = _Cuda()
    hold = StreamHold(cuda, None)
    hold._cycles_per_s = 1e9  # a 1 GHz clock: 1 cycle per ns
    hold.hold(None)
    assert cuda.sleeps == [round(StreamHold.HOLD_START_S * 1e9)]
    hold.enqueued(_Event(done=True))  # the start event had run: the hold was too short
    hold.enqueued(_Event(done=True))
    assert hold.seconds == pytest.approx(4 * StreamHold.HOLD_START_S)
    hold.enqueued(_Event(done=False))
    assert hold.seconds == pytest.approx(4 * StreamHold.HOLD_START_S)
    for _ in range(40):
        hold.enqueued(_Event(done=True))
    assert hold.seconds == StreamHold.HOLD_MAX_S


def test_auto_on_a_gpu_host_without_a_cuda_torch_says_it_runs_gloo(tmp_path, monkeypatch, capsys):
    """A CPU-only torch on a GPU node: auto resolves to gloo with one warning line, not in
    silence (issue 40 item 8); a host without NVIDIA devices stays quiet."""
    from collbench.bench import distributed

    monkeypatch.setattr(distributed, "NVIDIA_DEVICES", str(tmp_path / "nvidia[0-9]*"))
    assert distributed.resolve_backend("auto") == "gloo"
    assert capsys.readouterr().err == ""
    (tmp_path / "nvidia0").write_text("")
    assert distributed.resolve_backend("auto") == "gloo"
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "torch sees none" in err and "runs gloo" in err
    assert distributed.resolve_backend("gloo") == "gloo" and capsys.readouterr().err == ""
