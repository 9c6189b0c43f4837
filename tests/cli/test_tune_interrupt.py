"""A tune cut short by Ctrl-C, SIGTERM or SIGHUP: exit 130/143/129, tune.json says
`interrupted` and which settings ran, and `report` on it says so. A full disk under a tune is
one line and a documented exit code, with nothing half-written.

One real `collbench tune` per signal (slow); the typed file and the report's words in-process.
"""

import json
import signal
import subprocess
import time

import pytest

from collbench.core.errors import EXIT_HANGUP, EXIT_INTERRUPTED, EXIT_TERMINATED
from collbench.store.tune_result import TuneResult
from tests.helpers import collbench, start

SWEEP = ["-c", "all_reduce", "-b", "1K", "-e", "64K", "-n", "30", "-w", "1"]
SWEEP += ["--nproc", "2", "--timeout", "60", "--repeats", "1"]
KNOB = ["--knob", "NCCL_MAX_NCHANNELS=2,4,8,16,32"]  # 6 settings: the baseline first


def _wait_for_settings(out, count, process, timeout=120):
    """Until `count` setting directories hold rows (the tune is in its next setting)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert process.poll() is None, process.communicate()
        done = [d for d in (out / "settings").glob("*") if (d / "rows.jsonl").exists()]
        if len(done) >= count:
            return
        time.sleep(0.1)
    raise AssertionError(f"{count} setting(s) did not start within {timeout} s")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("signum", "code", "words"),
    [
        (signal.SIGINT, EXIT_INTERRUPTED, "interrupted (Ctrl-C)"),
        (signal.SIGTERM, EXIT_TERMINATED, "terminated (SIGTERM)"),
        (signal.SIGHUP, EXIT_HANGUP, "terminated (SIGHUP"),
    ],
)
def test_a_tune_cut_short_says_so_and_exits_with_the_signal(tmp_path, signum, code, words):
    out = tmp_path / "tune"
    process = start("tune", "run", *KNOB, *SWEEP, "--out", str(out))
    _wait_for_settings(out, 2, process)
    process.send_signal(signum)
    if signum == signal.SIGINT:  # Ctrl-C twice: the second waits for tune.json
        time.sleep(0.2)
        process.send_signal(signum)
    _, stderr = process.communicate(timeout=90)
    assert process.returncode == code, stderr
    assert "Traceback" not in stderr
    document = json.loads((out / "tune.json").read_text())
    assert document["interrupted"].startswith(words), document.get("interrupted")
    settings = document["settings"]
    assert settings[0]["baseline"] and settings[0]["status"] == "ok"
    assert 2 <= len(settings) < 6, settings  # what ran, the one cut short included
    # The one cut short is not counted as a full sweep (it was: "2 setting(s) ran a full sweep").
    finished = sum(setting["status"] == "ok" for setting in settings)
    assert finished < len(settings), settings
    noun = "setting" if finished == 1 else "settings"
    assert f": {finished} {noun} finished a full sweep; the result is chosen" in stderr, stderr
    listed = len(settings) + len(document["not_run"])
    assert listed == 6, document["not_run"]  # every setting: ran, cut short or never started
    assert all("before it ran" in item["reason"] for item in document["not_run"])
    assert (out / "best.env").exists() and not list(out.rglob("*.tmp*"))
    for setting in settings:  # every setting directory that exists is final
        for run_dir in setting.get("run_dirs") or []:
            meta = json.loads((out / run_dir / "meta.json").read_text())
            assert meta["state"] in ("completed", "interrupted"), meta["state"]
    report = collbench("report", str(out), "--out", str(tmp_path / "report.md"))
    assert report.returncode == 0, report.stderr
    assert "This tune was interrupted (" in (tmp_path / "report.md").read_text()


def test_interrupted_reads_back_and_old_files_read_as_not_interrupted():
    old = {"settings": [], "best": []}
    assert TuneResult.from_dict(old).interrupted is None
    assert "interrupted" not in TuneResult.from_dict(old).to_dict()  # old layout unchanged
    cut = TuneResult.from_dict({**old, "interrupted": "interrupted (Ctrl-C)"})
    assert cut.interrupted == "interrupted (Ctrl-C)"
    assert cut.to_dict()["interrupted"] == "interrupted (Ctrl-C)"
    assert "interrupted" not in cut.extra


@pytest.fixture
def small_disk(tmp_path):
    """A 64 KiB tmpfs: a tune's first setting fills it."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)])


@pytest.mark.slow
def test_a_full_disk_ends_the_tune_in_one_line_with_nothing_half_written(small_disk):
    out = small_disk / "tune"
    done = collbench("tune", "run", *KNOB, *SWEEP, "--out", str(out))
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    full = sum("disk full" in line or "the disk is full" in line for line in lines)
    # the setting that hit it, the tune's end, and (when even tune.json cannot be written,
    # which depends on how many bytes the tmpfs had left) the error that says so
    assert full <= (2 if (out / "tune.json").exists() else 3), lines
    for setting in (out / "settings").glob("*"):  # every setting directory left is final
        assert json.loads((setting / "meta.json").read_text())["state"] in ("completed", "failed")
    assert not list(small_disk.rglob("*.tmp*"))
    if (out / "tune.json").exists():
        document = json.loads((out / "tune.json").read_text())
        assert document["interrupted"].startswith("disk full"), document.get("interrupted")
        assert any(line.startswith("tune: disk full: ") for line in lines), lines
    else:
        assert lines[-1].startswith("collbench: error: ") and "disk is full" in lines[-1], lines
