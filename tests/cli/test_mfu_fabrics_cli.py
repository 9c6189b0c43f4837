"""`mfu -T A -T B` compares one job on each fabric: one dp for all, chosen and said when it
is not given; a fabric the job does not fit gets a "does not fit" column, not an error that
removes every column; a fabric without scale-out is named when the job needs more nodes."""

from __future__ import annotations

import json

import pytest

from tests.cli.test_mfu_cli import write_fabric
from tests.helpers import collbench

LLAMA = ["--model", "llama3-8b", "--seq", "4096", "--tp", "2"]


def test_dp_not_given_is_the_most_every_fabric_holds_that_divides_the_batch(tmp_path):
    big = write_fabric(tmp_path, "big")  # 4 nodes x 8
    small = write_fabric(tmp_path, "small", nodes=3)  # 24 accelerators: 12 x tp 2
    done = collbench("mfu", "-T", big, "-T", small, *LLAMA, "--global-batch", "64", "--json")
    assert done.returncode == 0, done.stderr
    workload = json.loads(done.stdout)["workload"]
    # small holds 12 data-parallel replicas; 8 is the most up to 12 that divides 64 steps
    assert workload["dp"] == 8
    assert "up to small's 12" in workload["dp_origin"]
    done = collbench("mfu", "-T", big, "-T", small, *LLAMA, "--global-batch", "64")
    assert "# dp 8 on every fabric: not given" in done.stdout
    given = collbench("mfu", "-T", big, "-T", small, *LLAMA, "--global-batch", "64", "--dp", "4",
                      "--json")  # fmt: skip
    assert json.loads(given.stdout)["workload"]["dp_origin"] == "given"


def test_expert_parallelism_is_checked_against_the_dp_chosen_not_dp_1():
    """--ep 32 at tp 2 without --dp was refused against dp 1 (2 x 1 x 1 ranks), though the
    dp chosen, 16 (256 accelerators / tp 2 x pp 8), holds it; a dp that does not is named."""
    qwen = ["-T", "dgx-h100", "--model", "qwen3-235b-a22b", "--seq", "4096", "--tp", "2",
            "--pp", "8", "--etp", "1", "--sequence-parallel", "--json"]  # fmt: skip
    done = collbench("mfu", *qwen, "--global-batch", "8192", "--ep", "32")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["workload"]["dp"] == 16
    done = collbench("mfu", *qwen, "--global-batch", "24", "--ep", "32")  # dp 12: 24 ranks
    assert done.returncode == 2 and "(2 x 12 x 1)" in done.stderr


def test_a_fabric_the_job_does_not_fit_gets_its_column_and_the_rest_are_estimated(tmp_path):
    roomy = write_fabric(tmp_path, "roomy", accelerator__memory_gib=192)
    tight = write_fabric(tmp_path, "tight", accelerator__memory_gib=8)
    args = ["-T", tight, "-T", roomy, *LLAMA, "--global-batch", "64", "--dp", "4"]
    done = collbench("mfu", *args)
    assert done.returncode == 0, done.stderr
    assert "--topology tight is too small" in done.stderr and "does not fit" in done.stderr
    mfu_line = next(line for line in done.stdout.splitlines() if line.startswith("MFU "))
    assert "does not fit" in mfu_line and "%" in mfu_line  # tight says so, roomy has a figure
    fabrics = json.loads(collbench("mfu", *args, "--json").stdout)["fabrics"]
    assert [f["does_not_fit"] for f in fabrics] == [True, False]
    # no figure a script would rank the unfit fabric by (issue 42): mfu, step, rates null
    unfit = {key: fabrics[0][key] for key in ("mfu", "hfu", "step_time_s", "tokens_per_s")}
    assert unfit == dict.fromkeys(unfit) and fabrics[0]["what_if_mfu"] is None
    priced = collbench("mfu", *args, "--json", "--price", "tight=2", "--price", "roomy=3")
    unfit_cost, fit_cost = (f.get("cost", 0) for f in json.loads(priced.stdout)["fabrics"])
    assert unfit_cost is None and fit_cost["usd_per_million_tokens"] > 0
    assert fabrics[1]["mfu"] > 0
    # no fabric fits: the usual one-line refusal
    alone = collbench("mfu", "-T", tight, *LLAMA, "--global-batch", "64", "--dp", "4")
    assert alone.returncode == 2 and "'tight' is too small" in alone.stderr


def test_a_fabric_without_scale_out_is_named_when_the_job_needs_more_nodes(tmp_path):
    done = collbench("mfu", "-T", "cpu-local", *LLAMA, "--dp", "4", "--global-batch", "64")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "collbench: error: --topology: 'cpu-local' has no scale-out fabric, so at most 2 "
        "accelerators (one scale-up domain); tp 2 x pp 1 x dp 4 = 8 need 4 nodes"
    )


TINY = ["--layers", "1", "--hidden", "64", "--heads", "2", "--vocab", "128", "--seq", "32"]


@pytest.mark.slow
def test_a_measured_rate_above_the_peak_is_said_and_no_mfu_above_100_is_printed(tmp_path):
    gemm = collbench("gemm", *TINY, "--dtype", "bf16", "--device", "cpu", "--iters", "3",
                     "--warmup", "1", "--out", str(tmp_path / "gemm"))  # fmt: skip
    assert gemm.returncode == 0, gemm.stderr
    # this device, with a peak far below anything a CPU measures
    fabric = write_fabric(
        tmp_path, "tiny-peak", nodes=1, accelerators_per_node=2, scale_out=None,
        accelerator={"name": "CPU (one vCPU of an AMD EPYC VM)", "peak_bf16_tflops": 1e-7,
                     "memory_gib": 8},
        scale_up={"kind": "shm", "bandwidth_gbytes_s": 1.3, "latency_us": 20, "domain_size": 2},
    )  # fmt: skip
    args = ["--gemm", str(tmp_path / "gemm"), "-T", fabric, *TINY, "--global-batch", "2"]
    done = collbench("mfu", *args)
    assert done.returncode == 0, done.stderr
    assert "above tiny-peak's bf16 peak of 1e-07 TFLOP/s" in done.stderr
    figures = [line for line in done.stdout.splitlines() if line.startswith(("MFU  ", "HFU (with"))]
    assert len(figures) == 2 and all("over 100%: peak too low" in line for line in figures)
    assert "over 100%: peak too low" in done.stdout
    assert "peak TFLOP/s" in done.stdout and " 1e-07" in done.stdout  # not "0"
    fabric_json = json.loads(collbench("mfu", *args, "--json").stdout)["fabrics"][0]
    assert fabric_json["mfu"] is None and fabric_json["above_peak"] is True
