"""`collbench mfu`'s options of issue 42, through the command line: --fsdp alone, the
matmul efficiency per fabric, the reduction and gather dtypes, and the headline that says
whether a fabric's estimate is validated."""

from __future__ import annotations

import json

from tests.helpers import collbench

MFU = ("mfu", "-T", "dgx-h100", "-m", "llama3-8b", "--global-batch", "64", "--dp", "8")


def test_fsdp_alone_is_zero_3():
    done = collbench(*MFU, "--fsdp", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["workload"]["zero"] == 3


def test_matmul_efficiency_by_name_prices_only_that_fabric():
    args = ("mfu", "-T", "dgx-h100", "-T", "mi300x", "-m", "llama3-8b", "--global-batch", "64",
            "--dp", "8", "--fsdp", "--matmul-efficiency", "mi300x=0.5", "--json")  # fmt: skip
    done = collbench(*args)
    assert done.returncode == 0, done.stderr
    h100, mi300x = (f["assumptions"][0] for f in json.loads(done.stdout)["fabrics"])
    assert mi300x == "every GEMM at 50% of peak (--matmul-efficiency)"
    assert h100.startswith("GEMMs priced by shape")


def test_bad_values_of_the_new_options_exit_2_in_one_line():
    for args, words in (
        (("--matmul-efficiency", "b200=0.4"), "--matmul-efficiency: 'b200' names no fabric"),
        (("--matmul-efficiency", "h100=x"), "--matmul-efficiency: 'h100=x' is not [NAME=]X"),
        (("--dp-dtypes", "fp8"), "--dp-dtypes: 'fp8' is not A[,B]"),
    ):
        done = collbench(*MFU, *args)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert done.stderr.startswith(f"collbench: error: {words}"), done.stderr


def test_the_headline_and_the_cost_table_say_whether_each_fabric_is_validated():
    from collbench.analysis.mfu.accuracy import DEMONSTRATED

    h100 = DEMONSTRATED["H100 3-D parallel"]  # the workload's regime on H100
    h100_band = f"[{h100.low:+.1%} to {h100.high:+.1%}]"
    args = ("mfu", "-T", "dgx-h100", "-T", "mi300x", "-m", "llama3-70b", "--global-batch", "64",
            "--tp", "8", "--pp", "4", "--price", "dgx-h100=3", "--price", "mi300x=2")  # fmt: skip
    done = collbench(*args)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    mfu = next(line for line in lines if line.startswith("MFU "))
    assert mfu.index(h100_band) < mfu.index("[not validated]")  # H100 first, then MI300X
    cost = next(line for line in lines if line.startswith("MFU validated"))
    assert cost.split()[2:] == [*h100_band.strip("[]").split(), "not", "validated"]
