"""`collbench tune` keeps what a setting completed: a setting that fails in one of its
collectives keeps the rows of the others, and tune.json names the pairing that failed.

Real gloo ranks, a fresh local spawn per setting. gloo ignores NCCL_ALGO, so the rank's test
hook stands in for NCCL: COLLBENCH_TEST_REFUSE_COLLECTIVE=all_gather:NCCL_ALGO=Tree makes
every rank refuse the all-gather while NCCL_ALGO=Tree is set, worded as NCCL's enqueue
refuses it ("No algorithm/protocol available for function ..."). The baseline runs without
the knob and measures both collectives.
"""

import json

import pytest

from tests.helpers import collbench_process as collbench
from tests.helpers import rows_of

pytestmark = pytest.mark.slow  # real ranks per setting

SWEEP = ["-c", "all_reduce,all_gather", "-b", "1K", "-e", "4K", "-f", "4", "-n", "4", "-w", "1"]
SWEEP += ["--nproc", "2", "--timeout", "60", "--backend", "gloo"]
HOOK = {"COLLBENCH_TEST_REFUSE_COLLECTIVE": "all_gather:NCCL_ALGO=Tree"}


def _tune(out, *args):
    return collbench("tune", "run", "--knob", "NCCL_ALGO=Tree", *args, *SWEEP, "--out", str(out),
                     env=HOOK, timeout=300)  # fmt: skip


def test_a_setting_failing_in_one_collective_keeps_the_others_rows(tmp_path):
    out = tmp_path / "tuned"
    done = _tune(out, "--repeats", "1")
    assert done.returncode == 0, done.stderr  # the baseline ran; one setting failing is not
    document = json.loads((out / "tune.json").read_text())
    baseline, tree = document["settings"]
    assert baseline["status"] == "ok" and "failed_in" not in baseline  # only where one failed
    assert {row["collective"] for row in rows_of(out / baseline["run_dir"])} == {
        "all_reduce",
        "all_gather",
    }
    assert tree["label"] == "NCCL_ALGO=Tree" and tree["status"] == "failed"
    kept = rows_of(out / tree["run_dir"])
    assert {row["collective"] for row in kept} == {"all_reduce"}  # every all-reduce size
    assert {row["size_bytes"] for row in kept} == {1024, 4096}
    assert tree["rows"] == len(kept) == 2  # tune.json counts the rows it kept
    failed = tree["failed_in"]
    assert failed["collective"] == "all_gather"
    assert "No algorithm/protocol available for function all_gather" in failed["error"]
    assert "skipped" not in tree  # on gloo nothing is judged before launching
    assert "setting 2/2 NCCL_ALGO=Tree: FAILED" in done.stderr


def test_later_repeats_measure_only_what_the_setting_finished(tmp_path):
    out = tmp_path / "tuned"
    done = _tune(out, "--repeats", "2")
    assert done.returncode == 0, done.stderr
    tree = json.loads((out / "tune.json").read_text())["settings"][1]
    assert tree["status"] == "failed" and tree["failed_in"]["collective"] == "all_gather"
    first, second = (rows_of(out / folder) for folder in tree["run_dirs"])
    assert {row["collective"] for row in first} == {"all_reduce"}
    assert {row["collective"] for row in second} == {"all_reduce"}  # no all-gather relaunched
    assert tree["repeats"] == 2 and tree["rows"] == len(first) + len(second)
    assert tree["repeat_errors"] == []
