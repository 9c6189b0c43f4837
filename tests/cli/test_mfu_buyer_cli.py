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
