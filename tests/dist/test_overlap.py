"""Overlap probes on real gloo ranks: what holds on any machine, however noisy.

On CPU the collective's own thread and the matmul share the cores, so how much overlaps
depends on the host; these tests check what must hold whatever it is: the figures follow
from the times, the overlapped span contains both parts, exposure is explained by the
contention the probe itself measured, and the collective alone matches a plain sweep.
"""

import json
import statistics

import pandas as pd
import pytest

from collbench.core.overlap import overlap_figures
from collbench.store.rows import ALL_COLUMNS, ROW_COLUMNS
from tests.helpers import collbench_process as collbench
from tests.helpers import meta_of, rows_of

pytestmark = pytest.mark.slow  # real gloo ranks running matmuls beside the collectives

SIZES = (256 * 1024, 1024 * 1024, 4 * 1024 * 1024)


@pytest.fixture(scope="module")
def probe_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("overlap") / "run"
    done = collbench(
        "overlap",
        "-c",
        "all_reduce,all_gather",
        "-b",
        "256K",
        "-e",
        "4M",
        "-f",
        "4",
        "--compute-ratio",
        "0.25,2",
        "-w",
        "2",
        "-n",
        "8",
        "--repeats",
        "1",
        "--out",
        str(out),
        timeout=280,
    )
    assert done.returncode == 0, done.stderr
    return out, done.stdout


def test_probe_rows_are_complete_and_checked(probe_run):
    out, stdout = probe_run
    rows = rows_of(out)
    assert len(rows) == 2 * len(SIZES) * 2
    assert {row["kind"] for row in rows} == {"overlap"}
    for row in rows:
        assert tuple(row) == ALL_COLUMNS
        assert row["n_wrong"] == 0, row  # checked with compute running
        assert row["compute_ratio"] in (0.25, 2.0)
        assert row["compute_dtype"] == "float32" and row["compute_streams"] == 1
        assert row["probe_timing"] == "perf_counter+future_callback"
        assert row["matmul_reps"] >= 1 and row["compute_tflop"] > 0
        assert row["placement"] == (
            "in_place" if row["collective"] == "all_reduce" else "out_of_place"
        )
        assert len(row["probe_samples_us"]["t_both"]) == 8
        # the base columns describe the collective alone
        assert row["time_us"] == row["t_comm_us"]
        assert row["algbw_gbps"] == pytest.approx(row["size_bytes"] / row["t_comm_us"] / 1e3)
    assert "# Overlap probes: all_reduce (in_place) vs float32 matmul" in stdout
    assert "# ratio 2: median overlap" in stdout
    frame = pd.read_parquet(out / "rows.parquet")
    assert len(frame) == len(rows) and set(ALL_COLUMNS) <= set(frame.columns)
    meta = meta_of(out)
    assert meta["state"] == "completed" and meta["spec"]["sweep_rows"] is False
    assert meta["spec"]["overlap"]["ratios"] == [0.25, 2.0]


def test_figures_follow_from_the_times(probe_run):
    for row in rows_of(probe_run[0]):
        figures = overlap_figures(
            row["t_comm_us"],
            row["t_comp_us"],
            row["t_both_us"],
            row["t_comp_during_us"],
            row["t_comm_during_us"],
        )
        assert 0.0 <= row["overlap_pct"] <= 100.0
        assert row["overlap_pct"] == pytest.approx(figures.overlap_pct)
        assert row["exposed_comm_us"] == pytest.approx(figures.exposed_comm_us)
        assert row["compute_slowdown"] == pytest.approx(figures.compute_slowdown)
        assert row["comm_slowdown"] == pytest.approx(figures.comm_slowdown)
        assert row["compute_ratio_actual"] == pytest.approx(row["t_comp_us"] / row["t_comm_us"])


def test_the_overlapped_span_holds_both_parts(probe_run):
    for row in rows_of(probe_run[0]):
        samples = row["probe_samples_us"]
        # per iteration the compute's span lies inside the overlapped one (same clock)
        assert all(
            both >= comp
            for both, comp in zip(samples["t_both"], samples["t_comp_during"], strict=True)
        )
        # the collective's span ends when its completion callback runs: at most a little
        # after the overlapped run saw it done
        assert row["t_comm_during_us"] <= row["t_both_us"] * 1.1 + 200
        # launched together, the pair takes about as long as the longer part alone, or more.
        # Loopback gloo on a VM is erratic (0.6-8 ms per call), and the collective alone can
        # even be slower than beside a matmul: its threads then wake idle vCPUs (seen: the
        # fastest 4 MiB all-reduce took 3.1 ms alone and under 2.3 ms with compute). So the
        # fastest iterations are compared, with room for that: a probe that forgot to wait
        # for the collective would still fail at ratio 0.25.
        assert min(samples["t_both"]) >= 0.5 * max(
            min(samples["t_comp"]), min(samples["t_comm"])
        ), row


def test_exposure_is_explained_by_measured_contention(probe_run):
    for row in rows_of(probe_run[0]):
        # t_both - t_comp can exceed t_comm only by how much the pair slowed each other
        contention = max(0.0, row["t_comm_during_us"] - row["t_comm_us"]) + max(
            0.0, row["t_comp_during_us"] - row["t_comp_us"]
        )
        assert row["exposed_comm_us"] <= row["t_comm_us"] * 1.1 + contention + 200, row


def test_compute_is_sized_by_the_ratio(probe_run):
    rows = rows_of(probe_run[0])
    # sized from a handful of calls whose time swings up to 10x on this kind of host (one
    # row of 8 reached 11x under a full test run): each row within 20x, and the rows
    # together where they were aimed
    misses = []
    for row in rows:
        ratio = row["compute_ratio"]
        reached = row["t_comp_us_p50"] / row["t_comm_us_p50"]
        assert ratio / 20 <= reached <= ratio * 20, row
        misses.append(reached / ratio)
    assert 1 / 3 <= statistics.median(misses) <= 3, misses
    for collective in ("all_reduce", "all_gather"):
        for size in SIZES:
            small, large = (
                next(
                    r
                    for r in rows
                    if r["collective"] == collective
                    and r["size_bytes"] == size
                    and r["compute_ratio"] == ratio
                )
                for ratio in (0.25, 2.0)
            )
            # the compute time follows the work: 8x the ratio, about 8x the matmuls
            assert large["matmul_reps"] > small["matmul_reps"]
            assert large["t_comp_us_p50"] > small["t_comp_us_p50"]
            if large["matmul_shape"] == small["matmul_shape"]:
                reps = large["matmul_reps"] / small["matmul_reps"]
                took = large["t_comp_us_p50"] / small["t_comp_us_p50"]
                assert reps / 3 <= took <= reps * 3, (small, large)


def test_collective_alone_matches_a_plain_sweep(probe_run, tmp_path):
    out = tmp_path / "sweep"
    done = collbench(
        "sweep",
        "-c",
        "all_reduce",
        "-b",
        "1M",
        "-e",
        "4M",
        "-f",
        "4",
        "-w",
        "2",
        "-n",
        "20",
        "--repeats",
        "1",
        "--out",
        str(out),
        "--quiet",
    )
    assert done.returncode == 0, done.stderr
    plain = {row["size_bytes"]: row["time_us_min"] for row in rows_of(out)}
    compared = 0
    for row in rows_of(probe_run[0]):
        if row["collective"] == "all_reduce" and row["size_bytes"] in plain:
            # Fastest iterations, at sizes where the transfer outweighs this VM's wake-up
            # stalls (a 256 KiB call swings 0.3-3 ms, so its minimum over 8 calls does too).
            ratio = min(row["probe_samples_us"]["t_comm"]) / plain[row["size_bytes"]]
            assert 1 / 4 <= ratio <= 4, (row["size_bytes"], ratio)
            compared += 1
    assert compared == 4  # 1 MiB and 4 MiB, two ratios each


def test_sweep_with_overlap_adds_probe_rows_and_passes_knobs(tmp_path):
    out = tmp_path / "run"
    done = collbench(
        "sweep",
        "-c",
        "all_reduce",
        "-b",
        "64K",
        "-e",
        "64K",
        "-w",
        "1",
        "-n",
        "3",
        "--overlap",
        "--compute-ratio",
        "1",
        "--knob",
        "NCCL_MAX_NCHANNELS=4",
        "--repeats",
        "1",
        "--out",
        str(out),
        "--json",
    )
    assert done.returncode == 0, done.stderr
    rows = rows_of(out)
    assert [row["kind"] for row in rows] == ["sweep", "overlap"]
    assert tuple(rows[0]) == ROW_COLUMNS  # sweep rows do not carry the probe columns
    printed = [json.loads(line) for line in done.stdout.splitlines()]
    assert [row["kind"] for row in printed] == ["sweep", "overlap"]
    for row in rows:
        assert row["knobs"]["env"]["NCCL_MAX_NCHANNELS"] == "4"
        # the local launcher's OMP_NUM_THREADS is collbench's setting, never a knob
        assert "OMP_NUM_THREADS" not in row["knobs"]["env"]
        assert "OMP_NUM_THREADS" in row["knobs"]["settings"]["collbench_env"]
    assert meta_of(out)["knobs"]["NCCL_MAX_NCHANNELS"] == "4"


def test_fixed_compute_runs_the_work_asked_for(tmp_path):
    out = tmp_path / "run"
    done = collbench(
        "overlap",
        "-c",
        "all_reduce",
        "-b",
        "1M",
        "-e",
        "1M",
        "-w",
        "1",
        "-n",
        "3",
        "--compute-tflop",
        "0.001",
        "--matmul-shape",
        "128x128x128",
        "--compute-dtype",
        "bfloat16",
        "--repeats",
        "1",
        "--out",
        str(out),
        "--quiet",
    )
    assert done.returncode == 0, done.stderr
    (row,) = rows_of(out)
    assert row["compute_ratio"] is None and row["compute_dtype"] == "bfloat16"
    assert row["matmul_shape"] == "128x128x128"
    assert row["matmul_reps"] == round(1e9 / (2 * 128**3))
    assert row["compute_tflop"] == pytest.approx(0.001, rel=0.01)
    assert row["compute_tflops"] == pytest.approx(row["compute_tflop"] / row["t_comp_us"] * 1e6)


def test_a_wrong_result_under_compute_fails_the_run(tmp_path):
    out = tmp_path / "run"
    done = collbench(
        "overlap",
        "-c",
        "all_reduce",
        "-b",
        "64K",
        "-e",
        "64K",
        "-w",
        "1",
        "-n",
        "2",
        "--compute-ratio",
        "1",
        "--repeats",
        "1",
        "--out",
        str(out),
        "--quiet",
        env={"COLLBENCH_TEST_CORRUPT_RANK": "1"},
    )
    assert done.returncode == 3, done.stderr
    (row,) = rows_of(out)
    assert row["n_wrong"] == 1


def test_compute_streams_need_a_gpu(tmp_path):
    done = collbench(
        "overlap",
        "-c",
        "all_reduce",
        "-b",
        "1K",
        "-e",
        "1K",
        "--compute-streams",
        "2",
        "--out",
        str(tmp_path / "run"),
    )
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .startswith("collbench: error: --compute-streams: 2 needs a GPU")
    ), done.stderr
    assert "Traceback" not in done.stderr


def test_median_overlap_is_reported_per_ratio(probe_run):
    rows = [row for row in rows_of(probe_run[0]) if row["collective"] == "all_reduce"]
    for ratio in (0.25, 2.0):
        values = [row["overlap_pct"] for row in rows if row["compute_ratio"] == ratio]
        median = statistics.median_low(values)
        assert f"# ratio {ratio:g}: median overlap {median:.1f}%" in probe_run[1]


# One rank whose clock stands in for a GPU's (a CPU has no StreamHold): every span of every
# round it times comes out short, warm-up rounds included.
_SHORT_HOLDS = """
import sys, types
from collbench.bench.overlap import clock

class HeldClock(clock.CpuProbeClock):
    def __init__(self, torch):
        super().__init__(torch)
        self.hold = types.SimpleNamespace(short=0)

    def rounds(self, launch, kernel, reps, iters, align):
        self.hold.short += 3 * iters  # comm, comp and both: one held span each
        return super().rounds(launch, kernel, reps, iters, align)

clock.CpuProbeClock = HeldClock
from collbench.cli import main
main(sys.argv[1:])
"""


def test_short_holds_of_the_timed_rounds_are_recorded_and_said(tmp_path):
    """A probe whose holds came out short (its spans then include the host's launch cost)
    says so in its row and under its table: StreamHold counted them for no one to see
    (issue 40 item 8). The warm-up rounds size the hold: their shorts are not counted."""
    import os
    import subprocess
    import sys

    from collbench.launchers.local import free_port

    rank = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"}
    env = {**os.environ, **rank, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    args = ["overlap", "--launcher", "none", "-c", "all_reduce", "-b", "1K", "-e", "1K"]
    args += ["--compute-ratio", "1", "-w", "2", "-n", "3", "--repeats", "1"]
    args += ["--out", str(tmp_path / "run")]
    done = subprocess.run(
        [sys.executable, "-c", _SHORT_HOLDS, *args], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert [row["short_holds"] for row in rows_of(tmp_path / "run")] == [3 * 3]
    assert "# Short holds: 9 timed span(s) include the launch cost" in done.stdout
