"""Each rank's log (logs/rank-NNNNN.log) says where the rank ran and what it did."""

import re

import pytest

from tests.helpers import collbench_process as collbench

pytestmark = pytest.mark.slow  # real gloo ranks


def test_local_ranks_fill_their_logs(tmp_path):
    out = tmp_path / "run"
    done = collbench(
        "sweep",
        "--nproc",
        "2",
        "-c",
        "all_reduce",
        "-b",
        "1K",
        "-e",
        "4K",
        "-n",
        "2",
        "-w",
        "1",
        "--repeats",
        "1",
        "--out",
        str(out),
        "--quiet",
    )
    assert done.returncode == 0, done.stderr
    logs = sorted(path.name for path in (out / "logs").iterdir())
    assert logs == ["rank-00000.log", "rank-00001.log"]  # five digits, as the docs say
    for rank in (0, 1):
        text = (out / "logs" / f"rank-{rank:05d}.log").read_text()
        lines = text.splitlines()
        assert f"collbench rank {rank}: 2 rank(s), backend gloo on cpu" in lines[0]
        steps = [line for line in lines if re.search(r"step \d+/3 all_reduce \d+ B", line)]
        assert len(steps) == 3, text
        assert lines[-1].endswith("done: 3 step(s), 0 wrong element(s)")
