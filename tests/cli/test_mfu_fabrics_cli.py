"""`mfu -T A -T B` compares one job on each fabric: one dp for all, chosen and said when it
is not given; a fabric the job does not fit gets a "does not fit" column, not an error that
removes every column; a fabric without scale-out is named when the job needs more nodes."""

from __future__ import annotations

import json

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
