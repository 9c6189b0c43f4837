"""`collbench tune run --repeats` for real: every repeat of every setting a fresh local spawn of 2
gloo ranks, the settings interleaved (A B A B: read from each run directory's start time),
every repeat kept in its own run directory and pooled into the setting's result.

GLOO_SOCKET_IFNAME=lo is a working value that changes nothing on one host, so this is an A/A
tune: the mechanics are checked here, the winner calls in tests/unit/tune/test_tune_select.py.
"""

import json

import pytest

from tests.helpers import collbench_process as collbench
from tests.helpers import meta_of, rows_of

pytestmark = pytest.mark.slow  # real ranks per setting and repeat

SWEEP = ["-c", "all_reduce", "-b", "1K", "-e", "256K", "-f", "16", "-n", "4", "-w", "1"]
SWEEP += ["--nproc", "2", "--timeout", "60"]


def test_repeats_run_interleaved_in_fresh_processes_and_are_pooled(tmp_path):
    out = tmp_path / "tuned"
    done = collbench(
        "tune", "run", "--knob", "GLOO_SOCKET_IFNAME=lo", "--repeats", "2", *SWEEP, "--out", str(out),
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    document = json.loads((out / "tune.json").read_text())
    assert document["repeats"] == 2
    started, pids = [], set()
    for index, entry in enumerate(document["settings"]):
        folders = [f"settings/{index:02d}-{entry['id']}-r{repeat}" for repeat in (1, 2)]
        assert entry["run_dirs"] == folders and entry["run_dir"] == folders[0]
        assert entry["repeats"] == 2 and entry["rows"] == 2 * len(rows_of(out / folders[0]))
        for repeat, folder in enumerate(folders):
            meta = meta_of(out / folder)
            started.append((meta["started_utc"], entry["label"], repeat))
            pids |= {rank["pid"] for rank in meta["ranks"]}
            assert all(row["n_wrong"] == 0 for row in rows_of(out / folder))
    order = [(label, repeat) for _, label, repeat in sorted(started)]
    lo = "GLOO_SOCKET_IFNAME=lo"
    assert order == [("baseline", 0), (lo, 0), ("baseline", 1), (lo, 1)]  # A B A B
    assert len(pids) == 8  # every repeat of every setting in fresh processes
    assert "setting 2/2 (repeat 2/2) GLOO_SOCKET_IFNAME=lo: ok" in done.stderr
    for record in document["best"]:  # the decision read both repeats of each side
        evidence = record["evidence"]
        assert (evidence["baseline_repeats"], evidence["candidate_repeats"]) == (2, 2)
        assert evidence["basis"] == "noise floor" and evidence["p_holm"] is None
    assert "2v2 repeats" in done.stdout
    # report reads a setting's repeats as the tune pooled them: repeat K's rows at K
    from collbench.run.run_dirs import load_tune_dir

    source, _ = load_tune_dir(out)
    for label, rows in source.setting_rows.items():
        assert sorted({row.repeat_index for row in rows}) == [0, 1], label
