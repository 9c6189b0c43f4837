"""Faults, second round (issue 29): every fault ends in a final state and the right exit code.

- the launcher SIGKILLed while its ranks go on: `finalize` completes the --csv / -J files
  from rows.jsonl (the launcher records them in RUN/exports.json);
- Ctrl-C twice: the second does not undo the clean-up of the first;
- SIGHUP (a closed terminal, a dropped ssh session): handled like SIGTERM, exit 129;
- a rank killed at the rendezvous: the launcher writes meta.json (failed, naming the rank).

One real `collbench` process per fault (slow); the mechanisms under them in-process.
"""

import csv
import json
import os
import signal
import time
from dataclasses import replace

import pandas as pd
import pytest

from collbench.core.errors import EXIT_HANGUP, EXIT_INTERRUPTED
from collbench.launchers.supervise import Stopped, StopSignals, write_launcher_meta
from collbench.render.export import complete_side_files, csv_columns
from collbench.store.rundir import remove_temp_files
from collbench.store.side_files import SIDE_FILES, SideFiles, read_side_files
from tests.helpers import collbench, meta_of, rank_pid, rows_of, start, wait_for_rows
from tests.rows import make_row, write_run

LONG_SWEEP = ["-c", "all_reduce,all_gather", "-b", "1K", "-e", "4M", "-n", "40", "-w", "2"]
LONG_SWEEP += ["--repeats", "1"]


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _final_with_parquet(out, state):
    meta = meta_of(out)
    assert meta["state"] == state, meta
    rows = rows_of(out)
    assert rows and len(pd.read_parquet(out / "rows.parquet")) == len(rows)
    assert not list(out.rglob("*.tmp*"))
    return meta


# -- real processes ----------------------------------------------------------------------


@pytest.mark.slow
def test_finalize_completes_the_side_files_of_a_killed_launcher(tmp_path):
    out, csv_file, json_file = tmp_path / "run", tmp_path / "r.csv", tmp_path / "r.json"
    process = start(
        "sweep", *LONG_SWEEP, "--out", str(out), "--csv", str(csv_file), "-J", str(json_file)
    )
    wait_for_rows(out, 2)
    pids = [rank_pid(out, rank) for rank in range(2)]
    process.kill()  # SIGKILL: the launcher cannot finish its files
    process.communicate(timeout=30)
    deadline = time.time() + 30
    while time.time() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(0.2)
    record = read_side_files(out)
    assert record is not None and not record.complete and record.csv == str(csv_file)
    done = collbench("finalize", str(out))
    assert done.returncode == 0, done.stderr
    assert "side file(s) completed from rows.jsonl" in done.stdout
    rows = rows_of(out)
    with open(csv_file, newline="") as stream:
        assert len(list(csv.reader(stream))) == len(rows) + 1  # the header, every row
    documents = [json.loads(path.read_text()) for path in tmp_path.glob("r.*.json")]
    assert sum(len(document["results"]) for document in documents) == len(
        {(row["collective"], row["size_bytes"]) for row in rows}
    )
    assert read_side_files(out).complete
    again = collbench("finalize", str(out))
    assert again.returncode == 2 and "nothing to do" in again.stderr


@pytest.mark.slow
def test_ctrl_c_twice_keeps_the_clean_up_of_the_first(tmp_path):
    out = tmp_path / "run"
    process = start("sweep", *LONG_SWEEP, "--out", str(out))
    wait_for_rows(out, 3)
    process.send_signal(signal.SIGINT)
    time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == EXIT_INTERRUPTED, stderr
    assert "Traceback" not in stderr and "interrupted (Ctrl-C)" in stderr.splitlines()[-1]
    _final_with_parquet(out, "interrupted")


@pytest.mark.slow
def test_sighup_stops_the_run_like_sigterm(tmp_path):
    out = tmp_path / "run"
    process = start("sweep", *LONG_SWEEP, "--out", str(out))
    wait_for_rows(out, 3)
    pids = [rank_pid(out, rank) for rank in range(2)]
    process.send_signal(signal.SIGHUP)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == EXIT_HANGUP, stderr
    assert "terminated (SIGHUP" in stderr.splitlines()[-1] and "Traceback" not in stderr
    _final_with_parquet(out, "interrupted")
    assert not any(_alive(pid) for pid in pids)


@pytest.mark.slow
def test_ranks_stop_even_when_started_with_sigterm_ignored(tmp_path):
    """nohup, a CI runner or a stopping launcher may hand collbench SIGTERM/SIGHUP ignored,
    which exec keeps: the ranks must still end on their launcher's SIGTERM, not measure on
    and call the run completed."""
    import subprocess
    import sys

    def ignore_stops():
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)

    out = tmp_path / "run"
    process = subprocess.Popen(
        [sys.executable, "-m", "collbench", "sweep", *LONG_SWEEP, "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=ignore_stops,
    )
    wait_for_rows(out, 3)
    pids = [rank_pid(out, rank) for rank in range(2)]
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == EXIT_INTERRUPTED, stderr
    _final_with_parquet(out, "interrupted")
    assert len(rows_of(out)) < 52  # stopped, not run to its end
    assert not any(_alive(pid) for pid in pids)


@pytest.mark.slow
def test_a_rank_killed_at_the_rendezvous_leaves_a_failed_meta(tmp_path):
    out = tmp_path / "run"
    # rank 1 is killed as soon as its status file exists: before the group is up
    process = start("sweep", *LONG_SWEEP, "--out", str(out), "--timeout", "30")
    status = out / "ranks" / "rank-00001.json"
    deadline = time.time() + 60
    while time.time() < deadline and not status.exists():
        time.sleep(0.01)
    pid = rank_pid(out, 1)
    os.kill(pid, signal.SIGKILL)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 1, stderr
    meta = meta_of(out)
    assert meta["state"] == "failed", meta
    assert meta["written_by"].startswith("launcher")  # rank 0 never got to write one
    assert f"rank 1 (pid {pid})" in meta["error"] and "SIGKILL" in meta["error"]
    assert collbench("status", str(out)).returncode == 0


# -- in-process --------------------------------------------------------------------------


def test_the_first_stop_signal_raises_and_the_next_are_ignored():
    cases = [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)]
    for signum, code in cases:
        # a stop leaves all three ignored (the process is on its way out): put them back
        saved = {other: signal.getsignal(other) for other, _ in cases}
        before = saved[signum]
        with pytest.raises(Stopped) as raised, StopSignals() as stops:
            os.kill(os.getpid(), signum)
            time.sleep(1)  # the handler runs before this ends
        assert raised.value.code == code
        os.kill(os.getpid(), signum)  # after a stop: ignored to the exit
        assert signal.getsignal(signum) == signal.SIG_IGN
        signal.signal(signum, before)
        with StopSignals() as stops:
            stops.shield()
            os.kill(os.getpid(), signum)
            time.sleep(0.1)
        assert signal.getsignal(signum) == before  # and the shielded process lives on
        for other, handler in saved.items():
            signal.signal(other, handler)


def test_the_launcher_writes_meta_only_where_rank_0_wrote_none(tmp_path):
    from collbench.core.spec import SweepSpec
    from collbench.store.job import Job

    job = Job(SweepSpec(), tmp_path, "run-x", "local", 2, ["collbench", "sweep"])
    write_launcher_meta(job, "failed", "rank 1 (pid 9) was killed by SIGKILL during start-up")
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["state"] == "failed" and "rank 1 (pid 9)" in meta["error"]
    assert meta["run_id"] == "run-x" and meta["spec"] == SweepSpec().to_dict()
    write_launcher_meta(job, "interrupted", "later")  # never over an existing meta.json
    assert json.loads((tmp_path / "meta.json").read_text())["state"] == "failed"
    assert not list(tmp_path.glob("*.tmp*"))


def test_the_launcher_meta_is_written_though_another_node_takes_its_temp_file(
    tmp_path, monkeypatch
):
    """Each node's launcher finalizes a shared run directory whose rank 0 wrote no meta.json
    (a multi-node torchrun tune's failing setting): one node's remove_temp_files took the
    other's temporary meta.json before it was linked into place (a traceback, exit 1)."""
    from collbench.core.spec import SweepSpec
    from collbench.store.job import Job

    real_link, taken = os.link, []

    def link(source, target):
        if not taken:
            taken.append(source)
            remove_temp_files(tmp_path)  # the other node's clean-up, at the worst moment
        return real_link(source, target)

    monkeypatch.setattr(os, "link", link)
    job = Job(SweepSpec(), tmp_path, "run-x", "torchrun", 2, ["collbench", "sweep"])
    write_launcher_meta(job, "failed", "GLOO_SOCKET_IFNAME=nosuch")
    assert taken and json.loads((tmp_path / "meta.json").read_text())["state"] == "failed"
    assert not list(tmp_path.glob("*.tmp*"))


def _run_with_side_files(tmp_path, rows_written):
    rows = [make_row(size_bytes=1024 << i) for i in range(4)]
    meta = {"run_id": "run-a", "state": "orphaned", "spec": {"collectives": ["all_reduce"]}}
    out = write_run(tmp_path / "run", rows, meta)
    csv_file, json_file = tmp_path / "r.csv", tmp_path / "r.json"
    header = ",".join(csv_columns(False)) + "\r\n"
    csv_file.write_text(header + "x\r\n" * rows_written, newline="")
    json_file.write_text('{"version": 3, "start_time": null, "results": [')
    record = SideFiles.of_launcher(csv_file, json_file, ("all_reduce",))
    replace(record, pid=None).save(out)
    return out, csv_file, json_file


@pytest.mark.parametrize(
    ("change", "written", "left"),
    [
        (None, 2, 0),  # cut short: both rewritten
        ("csv-replaced", 1, 1),  # someone else's file now: left alone, said
        ("complete", 0, 0),  # the launcher finished them: nothing to do
        ("no-record", 0, 0),
        ("junk-record", 0, 0),
    ],
)
def test_side_files_are_completed_only_when_cut_short_and_ours(tmp_path, change, written, left):
    out, csv_file, json_file = _run_with_side_files(tmp_path, 1)
    if change == "csv-replaced":
        csv_file.write_text("name,value\n")
    elif change == "complete":
        read_side_files(out).completed().save(out)
    elif change == "no-record":
        (out / SIDE_FILES).unlink()
    elif change == "junk-record":
        (out / SIDE_FILES).write_text('{"csv": 5, "collectives": "all_reduce"}')
    done = complete_side_files(out)
    assert (len(done.written), len(done.left)) == (written, left), done
    if change is None:
        with open(csv_file, newline="") as stream:
            assert len(list(csv.reader(stream))) == 5
        document = json.loads(json_file.read_text())
        assert [entry["size"] for entry in document["results"]] == [1024 << i for i in range(4)]
        assert read_side_files(out).complete and not complete_side_files(out)
    if change == "csv-replaced":
        assert csv_file.read_text() == "name,value\n"
