"""The doctor's process groups and straggler data with real gloo ranks: one group set made
per round and destroyed after it, its setup time in meta.json and the output, and a rank
that reaches its collectives late named as a straggler from the arrival timing (the data a
GPU's back-to-back batch cannot give)."""

import json

import pytest

from tests.helpers import collbench_process as collbench
from tests.helpers import meta_of, rows_of

pytestmark = pytest.mark.slow  # a doctor with real gloo ranks

NODE_SIZE_VAR = "COLLBENCH_TEST_DOCTOR_NODE_SIZE"
LATE_RANK_VAR = "COLLBENCH_TEST_DOCTOR_LATE_RANK"
ITERS = 10


def test_a_late_rank_is_the_straggler_and_group_setup_is_recorded(tmp_path):
    out = tmp_path / "doctor"
    result = collbench(
        "doctor", "-g", "4", "--size", "64K", "--iters", str(ITERS), "--warmup", "1",
        "--out", str(out), env={NODE_SIZE_VAR: "2", LATE_RANK_VAR: "2:0.03"},
    )  # fmt: skip
    assert result.returncode == 5, result.stdout + result.stderr  # flagged: a straggler
    document = json.loads((out / "doctor.json").read_text())
    stragglers = [item for item in document["findings"] if item["kind"] == "rank"]
    assert [item["ranks"] for item in stragglers] == [[2]], document["findings"]
    for row in rows_of(out):
        if row["stage"] == "full":  # rank 2 came last in every arrival-timed iteration
            assert row["rank_last_count"] == [0, 0, ITERS, 0], row
            times = dict(zip(row["group_ranks"], row["rank_time_us"], strict=True))
            assert times[2] < 0.5 * min(times[r] for r in (0, 1, 3)), times  # it waited least
        if row["collective"] == "all_reduce":
            assert sum(row["rank_last_count"]) == ITERS
    setup = meta_of(out)["doctor"]["group_setup"]
    # gloo cannot split: new_group per group; intra (2 nodes) and rail (2 rails), each made
    # again in each of the 3 passes (destroyed after its round); full uses the world
    assert setup["method"] == "new_group"
    assert setup["groups"] == {"intra": 6, "rail": 6}
    assert set(setup["seconds"]) == {"intra", "rail"} and setup["total_s"] > 0
    lines = result.stdout.splitlines()
    setup_line = next(i for i, line in enumerate(lines) if line.startswith("# process groups"))
    assert "(intra " in lines[setup_line] and "6 groups" in lines[setup_line], lines
    assert 0 < setup_line < len(lines) - 1  # after the verdict, before where the results are
