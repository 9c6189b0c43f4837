"""collbench doctor with real gloo ranks on this host: every stage runs and leaves its rows,
doctor.json and an exit code; a hung rank is named. The ranks count as nodes of a few ranks
each through the doctor's test hook (the namespace tests in test_doctor_netns.py run real
nodes over real, shaped links)."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.helpers import collbench_process as collbench
from tests.helpers import meta_of, rank_pid, rows_of, start, wait_for_rows

pytestmark = pytest.mark.slow  # several doctors with real gloo ranks

NODE_SIZE_VAR = "COLLBENCH_TEST_DOCTOR_NODE_SIZE"
FAST = ["--size", "256K", "--iters", "5", "--warmup", "1"]
REPEATS = 3  # DoctorSpec's default


def test_every_stage_on_three_nodes_of_two_ranks(tmp_path):
    out = tmp_path / "doctor"
    result = collbench(
        "doctor", "-g", "6", *FAST, "--shuffle-rounds", "2", "--out", str(out),
        env={NODE_SIZE_VAR: "2"},
    )  # fmt: skip
    assert result.returncode in (0, 5), result.stderr
    rows = rows_of(out)
    assert all(row["kind"] == "doctor" and row["n_wrong"] == 0 for row in rows)
    stages = [row["stage"] for row in rows]
    assert stages.count("full") == REPEATS and stages.count("intra") == 3 * REPEATS
    assert stages.count("rail") == 2 * REPEATS
    assert stages.count("shuffle") == 2 * REPEATS  # one sits out per round
    # in passes: every round of repeat 0, then of repeat 1, ...
    assert [row["repeat"] for row in rows] == sorted(row["repeat"] for row in rows)
    first = [row for row in rows if row["repeat"] == 0]
    pairs = [tuple(row["group_hosts"]) for row in first if row["stage"] == "pair"]
    hosts = meta_of(out)["doctor"]["hosts"]
    assert len(hosts) == 3 and len(pairs) == 3  # the circle method: every pair exactly once
    assert {frozenset(pair) for pair in pairs} == {
        frozenset((a, b)) for i, a in enumerate(hosts) for b in hosts[i + 1 :]
    }
    for row in rows:
        if row["stage"] == "pair":
            assert row["collective"] == "sendrecv" and row["world_size"] == 4
            assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"])
        assert len(row["rank_time_us"]) == len(row["group_ranks"]) == row["world_size"]
        assert sum(row["rank_last_count"]) == 5
    document = json.loads((out / "doctor.json").read_text())
    assert document["healthy"] is (result.returncode == 0)
    assert document["repeats"] == REPEATS
    assert document["matrix"]["hosts"] == hosts
    matrix = document["matrix"]["gbps"]
    assert all(matrix[i][j] is not None for i in range(3) for j in range(3) if i != j)
    assert "doctor: pair round 3/3 repeat 3/3" in result.stderr  # progress, one line per group


def test_one_node_with_only_the_fleet_is_unjudged_exit_6_and_says_why(tmp_path):
    """A Slurm prolog must not pass a node that was never checked: one node has no fleet
    to compare with, so without an expectation nothing is judged."""
    out = tmp_path / "doctor"
    result = collbench("doctor", "-g", "2", *FAST, "--out", str(out))
    assert result.returncode == 6, result.stderr
    assert "one node" in result.stdout + result.stderr
    first_line = result.stdout.splitlines()[0]
    assert first_line.startswith("unjudged (no health check): no stage could be"), result.stdout
    assert "a fleet median needs 3 nodes, this run has 1" in first_line
    # one node: the full stage is the intra group, measured once; then its one pair of ranks
    assert [row["stage"] for row in rows_of(out)] == ["intra", "gpu-pair"] * REPEATS
    assert "# note: gemm stage skipped: no GPU: the burn-in loads GPUs" in result.stdout
    document = json.loads((out / "doctor.json").read_text())
    assert document["healthy"] is None and document["verdict"] == "unjudged"
    assert "fleet median needs 3 nodes" in document["reason"]
    status = collbench("status", str(out))
    assert f"rows: {2 * REPEATS}; state: completed" in status.stdout, status.stdout + status.stderr


def test_one_node_against_an_expectation_is_healthy(tmp_path):
    out = tmp_path / "doctor"
    result = collbench("doctor", "-g", "2", *FAST, "--expect-busbw", "0.001", "--out", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("healthy: "), result.stdout
    document = json.loads((out / "doctor.json").read_text())
    assert document["healthy"] is True and "intra" in document["judged"]


def test_one_rank_times_its_local_all_reduce(tmp_path):
    """World size 1 (one GPU on a GPU box): the intra-node stage's all-reduce is a local copy,
    timed and recorded; nothing is judged against a busbw that is 0 by definition."""
    out = tmp_path / "doctor"
    result = collbench("doctor", "-g", "1", *FAST, "--expect-busbw", "1", "--out", str(out))
    assert result.returncode == 6, result.stderr  # busbw 0 by definition: nothing judged
    rows = rows_of(out)
    assert len(rows) == REPEATS
    row = rows[0]
    assert (row["stage"], row["world_size"], row["busbw_gbps"]) == ("intra", 1, 0)
    assert "one rank" in json.loads((out / "doctor.json").read_text())["reason"]
    assert row["algbw_gbps"] > 0 and "(one rank)" in result.stderr


def test_a_size_too_small_for_bandwidth_is_warned_about(tmp_path):
    out = tmp_path / "doctor"
    result = collbench("doctor", "-g", "2", "--size", "4K", "--iters", "3", "--out", str(out))
    assert result.returncode == 6, result.stderr  # one node, no expectation: unjudged
    assert "collbench: warning: --size 4K measures latency" in result.stderr


def test_a_hung_rank_is_named_and_the_doctor_exits_1(tmp_path):
    out = tmp_path / "doctor"
    process = start(
        "doctor", "-g", "3", "--size", "4M", "--iters", "100", "--timeout", "10",
        "--out", str(out), env={NODE_SIZE_VAR: "1"},
    )  # fmt: skip
    wait_for_rows(out, 1)  # the full all-reduce is done; the pair rounds are long
    pid = rank_pid(out, 2)
    os.kill(pid, signal.SIGSTOP)
    stopped_at = time.time()
    try:
        _, stderr = process.communicate(timeout=90)
    finally:
        _continue(pid)
    assert time.time() - stopped_at < 10 + 20
    assert process.returncode == 1, stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("collbench: error: ") and f"rank 2 (pid {pid}) on " in last
    assert "stopped responding" in last
    assert not (out / "doctor.json").exists()  # no verdict from a run that did not finish
    assert rows_of(out)  # the finished rounds are kept


def _continue(pid):
    try:
        os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
        pass  # the doctor stopped it for good


def test_a_verdict_under_torchrun_comes_from_the_launching_collbench(tmp_path):
    """Rank 0 under torchrun must not exit 5 itself: torchrun would call that a failed rank."""
    out = tmp_path / "doctor"
    result = collbench(
        "doctor", "--launcher", "torchrun", "--nproc-per-node", "2", *FAST,
        "--expect-busbw", "1000", "--master-port", str(_free_port()), "--out", str(out),
    )  # fmt: skip
    assert result.returncode == 5, result.stderr
    findings = json.loads((out / "doctor.json").read_text())["findings"]
    assert [finding["kind"] for finding in findings] == ["node", "gpu-pair"]
    assert "expected 1000 GB/s from --expect-busbw" in findings[0]["evidence"]
    assert findings[1]["ranks"] == [0, 1], findings


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_requeued_doctor_keeps_the_whole_rounds_it_wrote_and_measures_the_rest(tmp_path):
    """A requeued Slurm doctor (SLURM_RESTART_COUNT) keeps the earlier attempt's whole rounds,
    bisection's levels too (their results read back from the rows), and measures only the
    rest: here its ranks are started by hand, as srun starts them on the new attempt."""
    out = tmp_path / "doctor"
    argv = ["doctor", "--bisect", *FAST, "--out", str(out)]
    first = collbench(*argv, "-g", "4", env={NODE_SIZE_VAR: "1"})
    assert first.returncode in (0, 5), first.stderr
    written = (out / "rows.jsonl").read_text().splitlines(keepends=True)
    assert [json.loads(line)["stage"] for line in written[-6:]] == ["bisect"] * 6  # 3 repeats
    (out / "rows.jsonl").write_text("".join(written[:-3]) + written[-3][:40])  # killed mid-round
    launch = {"run_id": meta_of(out)["run_id"], "launcher": "local", "world_size": 4}
    env = {**os.environ, NODE_SIZE_VAR: "1", "SLURM_RESTART_COUNT": "1", "WORLD_SIZE": "4"}
    env.update(COLLBENCH_LAUNCH=json.dumps({**launch, "command_line": []}), LOCAL_WORLD_SIZE="4")
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    ranks = [
        subprocess.Popen(
            [sys.executable, "-m", "collbench", *argv, "--launcher", "none"],
            env={**env, "RANK": str(rank), "LOCAL_RANK": str(rank)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(4)
    ]
    for rank in ranks:
        assert rank.wait(timeout=120) in (0, 5), rank.stderr.read()
    kept, rows = [json.loads(line) for line in written[:-4]], rows_of(out)
    assert [row["timestamp_utc"] for row in rows[: len(kept)]] == [
        row["timestamp_utc"] for row in kept
    ]  # not measured again: the partial round after them is, whole
    assert [(r["group"], r["repeat"]) for r in rows[len(kept) :]] == [
        ("bisect L1 a", 1), ("bisect L1 b", 1), ("bisect L1 a", 2), ("bisect L1 b", 2),
    ]  # fmt: skip
    assert all(row["run_id"] == launch["run_id"] for row in rows)
    meta = meta_of(out)
    assert meta["state"] == "completed" and meta["rows"] == len(rows) == len(written)
    assert [(a["attempt"], a.get("rows_kept")) for a in meta["attempts"]] == [(0, None), (1, 23)]
    assert (out / "rows-attempt-0.jsonl").read_text().startswith(written[0])
