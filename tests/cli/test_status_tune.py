"""`collbench status` on a tune directory: each setting run's rows and state, and how the tune
ended (issue 29: a killed tune must say what ran)."""

import json

import pytest

from tests.helpers import collbench

pytestmark = pytest.mark.slow  # real two-rank sweeps

SWEEP = ["-c", "all_reduce", "-b", "1K", "-e", "2K", "-n", "2", "-w", "0", "--repeats", "1"]


def test_a_tune_directory_lists_its_setting_runs_and_says_it_has_not_chosen(tmp_path):
    tune = tmp_path / "tune"
    for name, knob in (("00-baseline", []), ("01-lo", ["--knob", "GLOO_SOCKET_IFNAME=lo"])):
        done = collbench("sweep", *SWEEP, *knob, "--out", str(tune / "settings" / name), "-q")
        assert done.returncode == 0, done.stderr
    meta = tune / "settings" / "01-lo" / "meta.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "state": "running"}))
    said = collbench("status", str(tune))
    assert said.returncode == 0, said.stderr
    lines = said.stdout.splitlines()
    assert lines[0] == f"tune {tune}: 2 setting run(s)"
    assert lines[1] == "  settings/00-baseline: 2 row(s); state: completed"
    # killed with its ranks: no rank is alive, so it is dead, not running
    assert lines[2].startswith("  settings/01-lo: 2 row(s); state: dead")
    assert "no tune.json" in lines[-1]


def test_a_chosen_tune_says_how_it_ended(tmp_path):
    runs = []
    for name, knob in (("a", []), ("b", ["--knob", "GLOO_SOCKET_IFNAME=lo"])):
        runs.append(tmp_path / name)
        done = collbench("sweep", *SWEEP, *knob, "--out", str(runs[-1]), "-q")
        assert done.returncode == 0, done.stderr
    tuned = tmp_path / "tuned"
    done = collbench("tune", "from", *map(str, runs), "--out", str(tuned))
    assert done.returncode == 0, done.stderr
    said = collbench("status", str(tuned))
    assert said.returncode == 0, said.stderr
    assert said.stdout.splitlines()[-1] == "tune.json: 2 setting(s); completed"
