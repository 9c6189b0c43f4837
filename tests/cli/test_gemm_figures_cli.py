"""`collbench gemm` on this machine's CPU (real matmuls, tiny shapes): the headline is the
median of the timed chunks and says so, fp32 runs with -T get the model columns against the
fp32 peak (or one line saying the topology has none), and the runtime estimate is said with
its basis (issue 30, item 5)."""

from __future__ import annotations

import json
import statistics

import pytest

from collbench.store.gemm_rows import load_gemm_rows
from tests.helpers import collbench

QUICK = ["--square", "16:32", "--device", "cpu", "--dtype", "fp32", "-w", "1", "-n", "5"]
NO_WARMUP = ["--warmup-seconds", "0"]


@pytest.fixture(scope="module")
def fp32_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("gemm") / "fp32"
    done = collbench("gemm", *QUICK, *NO_WARMUP, "-T", "cpu-local", "--out", str(out))
    assert done.returncode == 0, done.stderr
    return out, done


def test_the_headline_is_the_chunks_median_and_is_named(fp32_run):
    out, done = fp32_run
    for row in load_gemm_rows(out):
        assert len(row.time_us_chunks) == 5 and row.schema_version == 2
        assert row.time_us == pytest.approx(statistics.median(row.time_us_chunks))
        assert row.time_us_mean == pytest.approx(statistics.mean(row.time_us_chunks))
        assert row.tflops == pytest.approx(row.flops / (row.time_us * 1e-6) / 1e12)
        assert row.time_stat == "median of 5 timed chunks of the batch, per matmul"
    assert "# median us: median of 5 timed chunks of the batch, per matmul" in done.stdout
    assert "median us" in done.stdout and "mean us" in done.stdout


def test_fp32_with_a_topology_gets_the_model_columns(fp32_run):
    _, done = fp32_run
    assert "measured/model" in done.stdout
    assert "of cpu-local's dense fp32 peak, 0.08 TFLOP/s" in done.stdout


def test_the_estimate_is_said_with_its_basis(fp32_run):
    _, done = fp32_run
    said = [line for line in done.stderr.splitlines() if "of measuring on" in line]
    assert len(said) == 1 and said[0].startswith("collbench: 2 shapes, about ")
    assert "(estimated from matmuls timed here: " in said[0] and " us a call, " in said[0]
    assert "TFLOP/s at 32x32x32; 0 s warm-up a shape)" in said[0]


def test_a_topology_without_an_fp32_peak_says_so_in_one_line(tmp_path):
    catalog = collbench("topo", "show", "cpu-local", "--format", "json")
    assert catalog.returncode == 0, catalog.stderr
    data = json.loads(catalog.stdout)
    del data["accelerator"]["peak_fp32_tflops"], data["sources"]["accelerator.peak_fp32_tflops"]
    path = tmp_path / "no-fp32.json"
    path.write_text(json.dumps(data))
    done = collbench("gemm", *QUICK, *NO_WARMUP, "-T", str(path), "--out", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stdout.splitlines() if line.startswith("# no model columns")]
    assert notes == [
        "# no model columns: cpu-local's CPU (one vCPU of an AMD EPYC VM) gives no fp32 peak "
        "(accelerator.peak_fp32_tflops)"
    ]
    assert "measured/model" not in done.stdout


def test_json_names_the_headline(tmp_path):
    done = collbench("gemm", *QUICK, *NO_WARMUP, "--json", "--out", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["time_us"] == "median of 5 timed chunks of the batch, per matmul"
    assert [row["shape"] for row in data["rows"]] == ["16x16x16", "32x32x32"]
    assert all(row["time_us_mean"] > 0 for row in data["rows"])
