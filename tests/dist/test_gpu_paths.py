"""Issue 27 items 1, 2 and 12 on a real GPU (skipped without one): every visible GPU as a
rank where the test says so. The CPU side of the same rules: tests/unit/bench/test_gpu_paths_cpu.py
and tests/cli/test_gpu_flags_cli.py; the whole node: benchmarks/gpu_acceptance.py."""

from __future__ import annotations

import time

import pytest

from tests.helpers import collbench_process as collbench
from tests.helpers import meta_of, rows_of

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.slow,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm GPU"),
]


def _gpus() -> int:
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def test_the_hold_keeps_the_start_event_pending_while_the_host_enqueues():
    from collbench.bench.overlap.clock import StreamHold

    device = torch.device("cuda", 0)
    hold = StreamHold(torch.cuda, device)
    hold.seconds = 0.02
    stream = torch.cuda.current_stream(device)
    before, start = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    before.record(stream)
    hold.hold(stream)
    start.record(stream)
    time.sleep(0.005)  # the host's "enqueue": a quarter of the hold
    assert not start.query(), "the spin ended before the host was done"
    hold.enqueued(start)
    assert hold.seconds == 0.02  # not doubled: the spin outlasted the enqueue
    start.synchronize()
    held_s = before.elapsed_time(start) * 1e-3
    assert 0.015 <= held_s <= 0.06, held_s  # the clock calibration: 20 ms asked


def test_cuda_graph_sweep_on_every_gpu(tmp_path):
    out = tmp_path / "run"
    done = collbench(
        "sweep",
        "--nproc",
        str(_gpus()),
        "--cuda-graph",
        "-c",
        "all_reduce,all_gather,reduce_scatter",
        "-b",
        "8",
        "-e",
        "64M",
        "-f",
        "8",
        "--repeats",
        "1",
        "--out",
        str(out),
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    print(done.stdout)
    assert meta_of(out)["timing_method"] == "cuda_graph"
    rows = rows_of(out)
    assert rows and all(row["n_wrong"] == 0 and row["time_us"] > 0 for row in rows)


def test_blocking_wait_refuses_the_probe_and_is_warned_when_allowed(tmp_path):
    args = ("overlap", "--nproc", "1", "-c", "all_reduce", "-b", "1M", "-e", "1M", "--repeats", "1")
    env = {"TORCH_NCCL_BLOCKING_WAIT": "1"}
    refused = collbench(*args, "--out", str(tmp_path / "a"), env=env)
    assert refused.returncode == 2 and "--allow-blocking-env" in refused.stderr
    allowed = collbench(*args, "--allow-blocking-env", "--out", str(tmp_path / "b"), env=env)
    assert allowed.returncode == 0, allowed.stderr
    assert "TORCH_NCCL_BLOCKING_WAIT=1 makes every wait()" in allowed.stderr
    assert rows_of(tmp_path / "b")


def test_a_one_node_doctor_burns_every_gpu_in_with_gemm(tmp_path):
    """Issue 39 item 3: a node check on GPUs ends with a gemm burn-in on each (meta.json)."""
    out = tmp_path / "doctor"
    done = collbench("doctor", "--nproc", str(_gpus()), "--size", "1M", "--out", str(out))
    assert done.returncode in (0, 5, 6), done.stderr
    burn = meta_of(out)["doctor"]["gemm"]
    assert burn["shape"] == "8192x8192x8192 bf16" and len(burn["tflops"]) == _gpus()
    assert min(burn["tflops"]) > 1 and "gemm" not in meta_of(out)["doctor"]["skipped"]
