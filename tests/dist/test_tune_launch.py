"""`collbench tune run --knob ...` for real: every setting a fresh local spawn of 2 gloo ranks.

gloo reads one knob, GLOO_SOCKET_IFNAME: `lo` is a working value, `nosuch` a failing one
(gloo refuses an interface it cannot find at start-up), which is what a setting NCCL rejects
at init looks like to the tune. The bandwidth-picking test over real links is
test_tune_netns.py; these check the mechanics: fresh processes per setting, failures kept,
the searches, --budget, --verify, and the files.
"""

import json

import pytest

from tests.helpers import collbench_process as collbench
from tests.helpers import meta_of, rows_of

pytestmark = pytest.mark.slow  # real ranks per setting

SWEEP = ["-c", "all_reduce", "-b", "1K", "-e", "256K", "-f", "16", "-n", "4", "-w", "1"]
SWEEP += ["--nproc", "2", "--timeout", "60", "--repeats", "1"]  # mechanics: one run each


def _tune(out, *args, env=None):
    return collbench("tune", "run", *args, *SWEEP, "--out", str(out), env=env, timeout=300)


def _document(out):
    return json.loads((out / "tune.json").read_text())


def test_grid_records_every_setting_and_keeps_going_past_a_failure(tmp_path):
    out = tmp_path / "tuned"
    done = _tune(out, "--knob", "GLOO_SOCKET_IFNAME=lo,nosuch")
    assert done.returncode == 0, done.stderr
    document = _document(out)
    settings = document["settings"]
    assert [entry["label"] for entry in settings] == [
        "baseline",
        "GLOO_SOCKET_IFNAME=lo",
        "GLOO_SOCKET_IFNAME=nosuch",
    ]
    assert [entry["status"] for entry in settings] == ["ok", "ok", "failed"]
    assert "nosuch" in settings[2]["error"]
    assert document["kind"] == "tune" and document["search"] == "grid"
    pids = set()
    for entry in settings[:2]:  # each setting its own run directory, its knobs recorded
        run_dir = out / entry["run_dir"]
        rows = rows_of(run_dir)
        assert rows and all(row["n_wrong"] == 0 for row in rows)
        meta = meta_of(run_dir)
        assert meta["knobs"].get("GLOO_SOCKET_IFNAME") == entry["knobs"].get("GLOO_SOCKET_IFNAME")
        pids |= {rank["pid"] for rank in meta["ranks"]}
    assert len(pids) == 4  # fresh processes: no rank served two settings
    assert document["best"] and {record["collective"] for record in document["best"]} == {
        "all_reduce"
    }
    assert (out / "best.env").read_text().startswith("# collbench tune")
    assert not (out / "nccl_tuner.conf").exists()  # gloo has no tuner plugin: said, not written
    assert "nccl_tuner.conf not written" in done.stderr
    assert "tune: setting 3/3 GLOO_SOCKET_IFNAME=nosuch: FAILED" in done.stderr
    assert "# collective" in done.stdout and f"# Wrote: {out / 'tune.json'}" in done.stdout
    compared = collbench("compare", str(out))  # a tune directory: each setting vs the default
    assert compared.returncode == 0, compared.stderr
    assert f"baseline {out / settings[0]['run_dir']}" in compared.stdout
    assert f"candidate {out / settings[1]['run_dir']}" in compared.stdout


def test_a_failed_baseline_is_exit_1_and_the_rest_is_still_written(tmp_path):
    """The baseline is the environment as given: a broken one cannot give gains."""
    out = tmp_path / "tuned"
    done = _tune(out, "--knob", "GLOO_SOCKET_IFNAME=lo", env={"GLOO_SOCKET_IFNAME": "nosuch"})
    assert done.returncode == 1
    assert "the baseline failed" in done.stderr
    statuses = [entry["status"] for entry in _document(out)["settings"]]
    assert statuses == ["failed", "ok"]


def test_halving_probes_first_and_drops_the_failed(tmp_path):
    out = tmp_path / "tuned"
    done = _tune(out, "--search", "halving", "--knob", "GLOO_SOCKET_IFNAME=lo,nosuch")
    assert done.returncode == 0, done.stderr
    settings = {entry["label"]: entry for entry in _document(out)["settings"]}
    failed = settings["GLOO_SOCKET_IFNAME=nosuch"]
    assert failed["status"] == "failed" and failed["dropped"].startswith("round 1: failed")
    assert failed["run_dir"] is None and failed["probes"]
    for label in ("baseline", "GLOO_SOCKET_IFNAME=lo"):  # survivors: probes, then a full sweep
        entry = settings[label]
        assert entry["probes"] and entry["run_dir"].startswith("settings/")
        probe_sizes = {row["size_bytes"] for row in rows_of(out / entry["probes"][0])}
        full_sizes = {row["size_bytes"] for row in rows_of(out / entry["run_dir"])}
        assert probe_sizes < full_sizes
    assert "round 1:" in done.stderr


def test_coordinate_walks_a_numeric_knob_from_its_middle(tmp_path):
    """gloo ignores NCCL_MAX_NCHANNELS (said in a warning), which makes it a fair numeric
    axis for the search's mechanics: the start is the middle value, then neighbours."""
    out = tmp_path / "tuned"
    done = _tune(out, "--search", "coordinate", "--knob", "NCCL_MAX_NCHANNELS=2,4,8,16,32")
    assert done.returncode == 0, done.stderr
    labels = [entry["label"] for entry in _document(out)["settings"]]
    assert labels[:2] == ["baseline", "NCCL_MAX_NCHANNELS=8"]
    assert set(labels[2:4]) == {"NCCL_MAX_NCHANNELS=4", "NCCL_MAX_NCHANNELS=16"}
    assert "descent stopped" in done.stderr
    assert "does not apply to --backend gloo" in done.stderr


def test_budget_stops_starting_settings(tmp_path):
    out = tmp_path / "tuned"
    done = _tune(out, "--budget", "1s", "--knob", "GLOO_SOCKET_IFNAME=lo,nosuch")
    assert done.returncode == 0, done.stderr
    document = _document(out)
    assert [entry["label"] for entry in document["settings"]] == ["baseline"]
    assert [item["label"] for item in document["not_run"]] == [
        "GLOO_SOCKET_IFNAME=lo",
        "GLOO_SOCKET_IFNAME=nosuch",
    ]
    assert "--budget spent; 2 settings not run" in done.stderr


def test_verify_measures_the_default_and_best_env_side_by_side(tmp_path):
    tuned = tmp_path / "tuned"
    tuned.mkdir()
    spec = {"collectives": ["all_reduce"], "min_bytes": 1024, "max_bytes": 262144, "factor": 16.0}
    best = {
        "collective": "all_reduce",
        "min_bytes": 0,
        "max_bytes": 65535,
        "band": "small",
        "knobs": {"GLOO_SOCKET_IFNAME": "lo"},
        "setting": "GLOO_SOCKET_IFNAME=lo",
        "gain": 0.1,
    }
    document = {"kind": "tune", "settings": [], "best": [best]}
    document["env"] = {"knobs": {"GLOO_SOCKET_IFNAME": "lo"}}
    (tuned / "tune.json").write_text(json.dumps({**document, "spec": spec}))
    (tuned / "best.env").write_text("# chosen\nexport GLOO_SOCKET_IFNAME=lo\n")  # as tune writes
    out = tmp_path / "verified"
    done = collbench(
        "tune", "verify", str(tuned), "--out", str(out), "-n", "4", "-w", "1", "--nproc", "2"
    )
    assert done.returncode == 0, done.stderr
    verify = json.loads((out / "verify.json").read_text())
    assert [entry["label"] for entry in verify["settings"]] == [
        "baseline",
        "GLOO_SOCKET_IFNAME=lo",
    ]
    assert all(entry["status"] == "ok" for entry in verify["settings"])
    small = next(line for line in verify["lines"] if line["band"] == "small")
    assert small["predicted_gain"] == 0.1 and small["realised_gain"] is not None
    assert "realised" in done.stdout and "+10.0%" in done.stdout
