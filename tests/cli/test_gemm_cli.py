"""`collbench gemm` end to end on this machine's CPU (real torch matmuls, small shapes), and
`collbench mfu --gemm RUN` reading what it measured."""

from __future__ import annotations

import json
import signal
import subprocess

import pytest

from collbench.analysis.mfu.compute import workload_gemms
from collbench.analysis.mfu.workload import Model, Parallelism, Training, Workload
from collbench.store.gemm_rows import GEMM_FILE, load_gemm_rows
from tests.helpers import collbench, start

TINY = ["--layers", "1", "--hidden", "64", "--heads", "2", "--vocab", "128", "--seq", "32"]
QUICK = ["--device", "cpu", "-w", "1", "-n", "3"]


def tiny_workload(tp: int = 1) -> Workload:
    return Workload(
        Model("custom", layers=1, hidden=64, heads=2, vocab=128),
        Training(seq=32, global_batch=1),
        Parallelism(tp=tp),
    )


@pytest.fixture(scope="module")
def gemm_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("gemm") / "run"
    done = collbench("gemm", *TINY, *QUICK, "-T", "cpu-local", "--out", str(out))
    assert done.returncode == 0, done.stderr
    return out, done


@pytest.mark.slow
def test_a_workload_s_shapes_are_measured_for_real(gemm_run):
    out, done = gemm_run
    rows = load_gemm_rows(out)
    assert [row.shape for row in rows] == [g.shape for g in workload_gemms(tiny_workload())]
    for row in rows:
        assert row.kind == "gemm" and row.device == "cpu" and row.timing == "perf_counter"
        assert row.tflops == pytest.approx(row.flops / (row.time_us * 1e-6) / 1e12)
        assert len(row.time_us_samples) == 3
        assert row.time_us_min <= row.time_us_p50 <= row.time_us_max
    meta = json.loads((out / "meta.json").read_text())
    assert meta["state"] == "completed" and meta["kind"] == "gemm"
    assert meta["versions"]["torch"] and meta["gemm"]["accelerator"] == rows[0].accelerator
    assert "TFLOP/s" in done.stdout and "measured/model" in done.stdout
    assert "qkv fwd" in done.stderr  # progress, one line per shape


def test_mfu_takes_the_measured_rates(gemm_run):
    out, _ = gemm_run
    base = [
        "mfu", "-T", "cpu-local", *TINY, "--global-batch", "2", "--dp", "2", "--json",
        "--explain",
    ]  # fmt: skip
    done = collbench(*base, "--gemm", str(out))
    assert done.returncode == 0, done.stderr
    fabric = json.loads(done.stdout)["fabrics"][0]
    assert {gemm["bound"] for gemm in fabric["gemms"]} == {"measured"}
    rows = {row.shape: row for row in load_gemm_rows(out)}
    for gemm in fabric["gemms"]:  # each priced at its own measured rate
        row = rows[gemm["shape"]]
        assert gemm["time_us"] * 1e-6 == pytest.approx(row.flops / (row.tflops * 1e12))
    assert any("measured rate (--gemm)" in text for text in fabric["assumptions"])


def test_other_shapes_and_accelerators_are_warned_not_used_silently(gemm_run):
    out, _ = gemm_run
    base = ["mfu", *TINY, "--global-batch", "2", "--gemm", str(out)]
    other_tp = collbench(*base, "-T", "cpu-local", "--tp", "2", "--dp", "1")
    assert other_tp.returncode == 0, other_tp.stderr
    assert "did not measure" in other_tp.stderr and "the workload does not run" in other_tp.stderr
    gpu = collbench(*base, "-T", "dgx-h100", "--dp", "2", "--allow-oversubscribed-memory")
    assert gpu.returncode == 0, gpu.stderr
    assert "not on dgx-h100's NVIDIA H100" in gpu.stderr and "not used there" in gpu.stderr


@pytest.mark.slow
def test_a_shape_sweep(tmp_path):
    out = tmp_path / "sweep"
    done = collbench("gemm", "--square", "16:64", "--shape", "2x8x16x32", *QUICK, "--out", str(out))
    assert done.returncode == 0, done.stderr
    shapes = [row.shape for row in load_gemm_rows(out)]
    assert shapes == ["2x8x16x32", "16x16x16", "32x32x32", "64x64x64"]


def test_other_commands_refuse_a_gemm_run_in_one_line(gemm_run):
    out, _ = gemm_run
    for command in (["fit", str(out)], ["report", str(out)], ["compare", str(out), str(out)]):
        done = collbench(*command)
        assert done.returncode == 2, command
        assert "holds collbench gemm rows" in done.stderr and "Traceback" not in done.stderr


def test_status_and_finalize_read_a_gemm_run(gemm_run, tmp_path):
    out, _ = gemm_run
    done = collbench("status", str(out))
    assert done.returncode == 0, done.stderr
    shapes = len(workload_gemms(tiny_workload()))
    assert f"shapes: {shapes} of {shapes} in gemm.jsonl; state: completed" in done.stdout
    killed = tmp_path / "killed"  # SIGKILLed: meta.json still says running
    killed.mkdir()
    (killed / GEMM_FILE).write_text((out / GEMM_FILE).read_text())
    meta = json.loads((out / "meta.json").read_text())
    # the run measured in this process, which is alive: running
    (killed / "meta.json").write_text(json.dumps({**meta, "state": "running"}))
    assert collbench("status", str(killed)).stdout.rstrip().endswith("state: running")
    gone = subprocess.Popen(["true"])  # a process that has ended (and been reaped)
    gone.wait()
    meta["gemm"]["pid"] = gone.pid
    (killed / "meta.json").write_text(json.dumps({**meta, "state": "running"}))
    said = collbench("status", str(killed)).stdout
    assert "state: dead" in said and f"collbench finalize {killed}" in said
    done = collbench("finalize", str(killed))
    assert done.returncode == 0, done.stderr
    assert f"state orphaned; {shapes} row(s) kept in gemm.jsonl" in done.stdout
    assert json.loads((killed / "meta.json").read_text())["state"] == "orphaned"


@pytest.mark.slow  # ~10 s: sizing, then one shape of four before the Ctrl-C
def test_ctrl_c_says_interrupted_exits_130_and_keeps_the_finished_shapes(tmp_path):
    # typer turns a KeyboardInterrupt into a silent Exit(130): the run ended without a word.
    out = tmp_path / "stopped"
    process = start("gemm", "--square", "1024:8192", "--out", str(out))
    for line in process.stderr:  # the first finished shape, then Ctrl-C
        if "1024x1024x1024" in line:
            break
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130
    assert stderr.strip().splitlines()[-1] == "collbench: error: interrupted", stderr
    assert json.loads((out / "meta.json").read_text())["state"] == "interrupted"
    assert len(load_gemm_rows(out)) >= 1


def test_a_killed_run_keeps_its_finished_shapes(tmp_path):
    out = tmp_path / "cut"
    done = collbench("gemm", "--square", "16:32", *QUICK, "--out", str(out))
    assert done.returncode == 0, done.stderr
    path = out / GEMM_FILE
    text = path.read_text()
    path.write_text(text + text.splitlines()[0][:30])  # a last row cut short by a kill
    assert len(load_gemm_rows(out)) == 2


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--shape", "12Q"], "--shape: '12Q' must be MxNxK"),
        (["--square", "64:16"], "--square: '64:16' must be MIN:MAX"),
        ([*TINY, "--shape", "8x8x8"], "not both"),
        ([], "give a workload"),
        (["--shape", "8x8x8", "--dtype", "fp8"], "--dtype: 'fp8' is not measured yet"),
        (["--shape", "8x8x8", "--dtype", "int4"], "--dtype: 'int4' must be one of"),
        (["--shape", "8x8x8", "--iters", "0"], "--iters: 0 must be >= 1"),
        (["--shape", "8x8x8", "--device", "tpu"], "--device: 'tpu' must be cuda or cpu"),
        (["--shape", "4096x4096x4096", "--max-seconds", "0.01"], "--max-seconds: 0.01 is less"),
        (["--shape", "200000x200000x200000"], "GiB of operands"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, args, message):
    device = [] if "--device" in args else ["--device", "cpu"]
    done = collbench("gemm", *args, *device, "--out", str(tmp_path / "x"))
    assert done.returncode == 2, (args, done.stdout, done.stderr)
    assert message in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "x" / GEMM_FILE).exists()


@pytest.mark.gpu
def test_cuda_events_time_the_gpu(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    out = tmp_path / "gpu"
    done = collbench("gemm", "--square", "1024:4096", "--device", "cuda", "--out", str(out))
    assert done.returncode == 0, done.stderr
    rows = load_gemm_rows(out)
    assert {row.timing for row in rows} == {"cuda_events"}
    assert rows[-1].tflops > rows[0].tflops  # a bigger square fills the GPU better
