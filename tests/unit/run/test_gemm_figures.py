"""gemm's figures (issue 30, item 5): the headline is a median a stall cannot move, fp32 rows
are read against the catalog's fp32 or tf32 peak (or one line says there is none), and the
job's runtime estimate comes from a calibration that counts what a run spends (real CPU
matmuls where a run is involved)."""

from __future__ import annotations

import math
import re
import time

import pytest
import torch

from collbench.analysis.model.gemm_model import Gemm
from collbench.bench.gemm import GemmBench, batch_figures, chunk_sizes, next_warmup_chunk
from collbench.render.gemm import model_peak, render_gemm_table
from collbench.run.gemm import Calibration, GemmJob, RatePoint, job_seconds, run_gemm
from collbench.store.gemm_rows import GemmRow
from collbench.topologies.loader import load_topology


def test_one_stalled_chunk_moves_the_mean_not_the_headline():
    # five chunks of 4 matmuls, 1 ms each; the third stalled 10x (a busy machine)
    time_us, mean_us, chunks_us = batch_figures([0.004, 0.004, 0.040, 0.004, 0.004], (4,) * 5)
    assert chunks_us == pytest.approx((1000, 1000, 10000, 1000, 1000))
    assert time_us == pytest.approx(1000)
    assert mean_us == pytest.approx(2800)


@pytest.mark.parametrize(
    ("iters", "sizes"), [(20, (4, 4, 4, 4, 4)), (7, (2, 2, 1, 1, 1)), (3, (1, 1, 1)), (1, (1,))]
)
def test_the_batch_splits_into_even_chunks(iters, sizes):
    assert chunk_sizes(iters, 5) == sizes


@pytest.mark.parametrize(
    ("name", "dtype", "tf32", "tflops"),
    [
        ("dgx-h100", "bf16", False, 989),
        ("dgx-h100", "fp16", True, 989),
        ("dgx-h100", "fp32", False, 67),
        ("dgx-h100", "fp32", True, 494.5),
        ("mi300x", "fp32", True, 653.7),
        ("mi355x", "fp32", False, 157.3),
        ("mi355x", "fp32", True, None),  # AMD lists no TF32 figure for it
    ],
)
def test_the_peak_a_row_is_read_against(name, dtype, tf32, tflops):
    peak = model_peak(load_topology(name), dtype, tf32)
    assert peak.flops == (None if tflops is None else pytest.approx(tflops * 1e12))


def gpu_row(dtype: str, tflops: float = 40.0) -> GemmRow:
    m = n = k = 4096
    time_us = 2 * m * n * k / (tflops * 1e12) * 1e6
    return GemmRow(
        run_id="r", timestamp_utc="t", op="sweep", pass_name="-", m=m, n=n, k=k,
        shape="4096x4096x4096", dtype=dtype, device="cuda",
        accelerator="NVIDIA H100 80GB HBM3", time_us=time_us, tflops=tflops,
        timing="cuda_events", warmup=5, iters=20, time_stat="median of 5 timed chunks",
        time_us_mean=time_us * 3,
    )  # fmt: skip


def test_fp32_rows_get_the_model_columns_against_the_fp32_or_tf32_peak():
    h100 = load_topology("dgx-h100")
    fp32 = render_gemm_table([gpu_row("fp32")], h100, "sweep", tf32=False)
    assert "measured/model" in fp32 and "dense fp32 peak, 67 TFLOP/s" in fp32
    assert "59.7%" in fp32  # 40 of 67 TFLOP/s
    tf32 = render_gemm_table([gpu_row("fp32", 400.0)], h100, "sweep", tf32=True)
    assert "dense tf32 peak, 494.5 TFLOP/s" in tf32 and "80.9%" in tf32


def test_a_topology_without_the_peak_says_so_in_one_line():
    text = render_gemm_table([gpu_row("fp32")], load_topology("mi355x"), "sweep", tf32=True)
    notes = [line for line in text.splitlines() if "no model columns" in line]
    assert notes == [
        "# no model columns: mi355x's AMD Instinct MI355X gives no tf32 peak "
        "(accelerator.peak_tf32_tflops) (torch allowed TF32 matmuls)"
    ]
    assert "measured/model" not in text


def test_the_headline_and_the_mean_are_named_in_the_table():
    text = render_gemm_table([gpu_row("bf16")], None, "sweep")
    assert "# median us: median of 5 timed chunks (TFLOP/s is from it)" in text
    assert "median us" in text.splitlines()[2] and "mean us" in text.splitlines()[2]


def test_the_estimate_adds_draws_warm_up_and_both_batches():
    square = Gemm("sweep", "-", 512, 512, 512)
    calibration = Calibration(1e-5, (RatePoint(square.shape, square.flops, 1e11),), 1e9)
    small = Gemm("sweep", "-", 64, 64, 64)
    job = GemmJob((small, square), dtype="fp32", warmup=5, iters=20, warmup_s=0.1)
    # 512^3: 10 us + 268.4 MFLOP / 100 GFLOP/s = 2.694 ms a matmul; warm-up max(5 x, 0.1 s);
    # 40 timed matmuls; 1 set of 3 MiB (3 x 512^2 x 4 B, over twice a 1 MiB cache) drawn at 1 GB/s
    big_s = 1e-5 + square.flops / 1e11
    small_s = 1e-5 + small.flops / 1e11
    small_sets = math.ceil(2 * 2**20 / (3 * 64 * 64 * 4))
    expected = (
        (3 * 512 * 512 * 4) / 1e9 + 0.1 + 40 * big_s
        + min(small_sets, 4) * 3 * 64 * 64 * 4 / 1e9 + 0.1 + 40 * small_s
    )  # fmt: skip
    assert job_seconds(job, calibration, 2**20, 4) == pytest.approx(expected)


def test_between_two_probes_the_rate_is_interpolated_on_log_flops():
    low, high = RatePoint("a", 1e6, 1e10), RatePoint("b", 1e10, 1e12)
    calibration = Calibration(0.0, (low, high), 1e9)
    assert calibration.rate_flops_s(1e8) == pytest.approx(1e11)  # halfway: the geometric mean
    assert calibration.rate_flops_s(1e3) == 1e10 and calibration.rate_flops_s(1e13) == 1e12


@pytest.mark.parametrize(
    ("chunk", "spent_s", "left_s", "following"),
    [
        (64, 0.090, 0.099, 7),  # 9 ms left after it at 1.4 ms a matmul: 7 fit, not 128
        (64, 0.032, 0.2, 128),  # plenty left: it doubles
        (8, 0.001, 10.0, 16),
        (1024, 0.001, 10.0, 1024),  # at most MAX_WARMUP_CHUNK
        (4, 0.5, 0.3, 1),  # past the time already: the loop ends; never under one
    ],
)
def test_a_warm_up_chunk_never_runs_far_past_the_time_left(chunk, spent_s, left_s, following):
    assert next_warmup_chunk(chunk, spent_s, left_s) == following


def test_the_warm_up_stops_near_its_time_not_a_doubled_chunk_past_it():
    bench = GemmBench("cpu", "fp32")
    timing = bench.measure((384, 384, 384), 1, warmup=1, iters=3, warmup_s=0.3)
    one_s = max(timing.samples_us) * 1e-6
    assert 0.3 <= timing.warmup_s <= 0.3 + 4 * one_s + 0.05, (timing.warmup_s, one_s)


@pytest.mark.slow
def test_the_estimate_said_is_within_3x_of_the_run_it_sizes(tmp_path):
    gemms = tuple(Gemm("sweep", "-", side, side, side) for side in (32, 128, 256, 512))
    job = GemmJob(gemms, dtype="fp32", device="cpu", iters=20, out=tmp_path / "run")
    said: list[tuple[float, str]] = []
    # One thread: on a shared 2-vCPU box a two-thread matmul waits tens of ms whenever its
    # second thread is descheduled, in bursts no short calibration can foresee.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        run_gemm(job, said=lambda text: said.append((time.perf_counter(), text)))
    finally:
        torch.set_num_threads(threads)
    actual_s = time.perf_counter() - said[0][0]  # measuring starts once the estimate is said
    estimate = re.search(
        r"about ([\d.,]+) s of measuring on .* \(estimated from matmuls timed here: .* a call, ",
        said[0][1],
    )
    assert estimate, said
    estimate_s = float(estimate.group(1).replace(",", ""))
    assert estimate_s / 3 <= actual_s <= estimate_s * 3, (said[0][1], actual_s)
