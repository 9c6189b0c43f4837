"""`collbench doctor` over real slow links: four "nodes" (network namespaces, each under its own
hostname) joined as a full mesh of veths, one per node pair (tests/netns_mesh.py), one
torchrun node (one rank) in each. tbf at 200 Mbit/s on all of one node's links must give
exactly one `node` finding naming that node, in a majority of its 3 repeats; on one pair's
link (100 Mbit/s), one `link` finding naming both ends and no node; an unshaped mesh no finding at all,
three runs in a row; a node whose
rank is stopped mid-run (SIGSTOP) must end the others within the timeout, exit 1, named.
Needs root, `ip`, `unshare` and `tc`; skipped elsewhere, with the reason.

Measured on the 2-core box before the doctor existed (`collbench sweep -c all_reduce -b 4M
-e 4M -n 10`, 4 nodes): 23 ms / 0.27 GB/s busbw unshaped, 523 ms / 0.012 GB/s with one node
shaped, 518 ms / 0.012 GB/s with one pair shaped (gloo's ring crosses it): one collective
over every rank says "slow" but not where. About 50 s wall per 4-node run, most of it four
torchruns importing torch on two cores. The doctor itself (--size 4M, default iterations):
pair busbw 0.35-0.83 GB/s unshaped, 0.006 GB/s over a shaped pair (both directions at
once through tbf); ~30 s a healthy run, ~100 s with one node shaped (its three pair rounds
and the full all-reduce crawl), ~50 s with one pair shaped.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from dataclasses import replace
from pathlib import Path

import pytest

from tests.helpers import rows_of
from tests.netns import reason_to_skip
from tests.netns_mesh import mesh, run_nodes, start_nodes

pytestmark = pytest.mark.slow  # four torchrun nodes in network namespaces, 40-90 s a run

SHAPED_MBIT = 100.0  # ~12 MB/s against ~300-600 MB/s unshaped: a 25x gap
# A slow node's links at twice that (still a 12x gap) halve the test's wall time: 100 s -> 56 s.
# Not four times: at 400 Mbit/s its pairs (0.024 GB/s) sat above the per-repeat bar in one
# repeat of three (bars 0.113, 0.036, 0.0135 GB/s: the fleet's spread sets them), "2 of 3".
SLOW_NODE_MBIT = 2 * SHAPED_MBIT
SIZE = ["--size", "4M"]
# Over a shaped link 1 MiB is already 80 ms a transfer against ~3 ms unshaped: the slow-pair
# test holds at 1 MiB in a third of its wall time (CI time, issue 37). The slow-node test
# keeps 4 MiB and times fewer operations instead: at 1 MiB, on a loaded box, one repeat in
# two runs of three had a second node slow enough that the 4-node fleet bar fell under the
# shaped node ("2 of 3 repeats").
SHAPED_SIZE = ["--size", "1M"]
SHAPED_NODE = [*SIZE, "-n", "8", "-w", "2"]
HUNG_TIMEOUT_S = 10  # --timeout of the hung-node test
TIMEOUT_S = 600  # a whole doctor run, four nodes, shaped links, 3 repeats of every round


@pytest.fixture(autouse=True)
def _needs_namespaces():
    reason = reason_to_skip(shaping=True)
    if reason:
        pytest.skip(reason)


def _doctor(nodes, out: Path, port: int, size=SIZE):
    """One doctor across the mesh; each node's (exit code, stdout, stderr) and doctor.json."""
    results = run_nodes(nodes, ["doctor", *size, "--out", str(out)], port, TIMEOUT_S)
    document = out / "doctor.json"
    return results, json.loads(document.read_text()) if document.exists() else None


def _all_exit(results, code: int) -> None:
    """The first node (rank 0's rows) gives the verdict's code; the others end 0."""
    for index, (exit_code, stdout, stderr) in enumerate(results):
        expected = code if index == 0 else 0
        assert exit_code == expected, f"node {index} exit {exit_code}, not {expected}:\n{stderr}"
        if index:
            assert "comes from the first node" in stdout, stdout


def test_a_node_with_every_link_slow_is_named_and_only_it(tmp_path):
    with mesh(4, node_mbit={2: SLOW_NODE_MBIT}) as nodes:
        results, document = _doctor(nodes, tmp_path / "run", 29701, SHAPED_NODE)
    _all_exit(results, 5)
    assert document is not None and document["healthy"] is False
    findings = document["findings"]
    assert [(f["kind"], f["hosts"]) for f in findings] == [("node", ["cbmesh2"])], findings
    # every repeat, or all but one where 4 namespaces on 2 cores starved a whole repeat
    assert re.search(r"\b[23] of 3 repeats below the bar", findings[0]["evidence"]), findings
    assert "nvidia-smi" not in findings[0]["action"]  # gloo on CPUs: no GPU advice
    _assert_matrix_slow_where(
        document, {("cbmesh2", peer) for peer in ("cbmesh0", "cbmesh1", "cbmesh3")}
    )


def test_one_slow_pair_is_a_link_not_a_node(tmp_path):
    with mesh(4, pair_mbit={(1, 3): SHAPED_MBIT}) as nodes:
        results, document = _doctor(nodes, tmp_path / "run", 29702, SHAPED_SIZE)
    _all_exit(results, 5)
    assert document is not None and document["healthy"] is False
    findings = document["findings"]
    assert len(findings) == 1, findings
    assert findings[0]["kind"] == "link"
    assert sorted(findings[0]["hosts"]) == ["cbmesh1", "cbmesh3"]
    _assert_matrix_slow_where(document, {("cbmesh1", "cbmesh3")})


def test_the_gpu_pair_stage_names_the_one_slow_pair_of_local_ranks(tmp_path):
    # Three ranks of one "node" (issue 38 item 4): each rank in its own namespace with its own
    # /32, but all under one hostname, so the doctor sees one node of three local ranks; tbf
    # on the veth between ranks 0 and 2 (both ends) slows exactly that pair's traffic.
    with mesh(3, pair_mbit={(0, 2): 400.0}) as nodes:
        nodes = [replace(node, host="cbgpu") for node in nodes]
        args = [*SHAPED_SIZE, "-n", "5", "-w", "1"]  # ~12 s of the ~24 is starting ranks
        results, document = _doctor(nodes, tmp_path / "run", 29731, args)
    _all_exit(results, 5)
    assert document is not None, results[0][2]
    findings = document["findings"]
    assert [(f["kind"], f["ranks"]) for f in findings] == [("gpu-pair", [0, 2])], findings
    assert "rank 0<->rank 2 send/recv" in findings[0]["evidence"], findings
    grid = document["gpu_pairs"]["cbgpu"]
    assert grid["ranks"] == [0, 1, 2], grid
    assert grid["gbps"][0][2] * 2 < min(grid["gbps"][0][1], grid["gbps"][1][2]), grid
    assert "# gpu-pair busbw (GB/s) cbgpu" in results[0][1]


def test_a_healthy_mesh_raises_no_alarm_three_runs_in_a_row(tmp_path):
    # Three runs, each a fresh mesh and fresh torchruns: a threshold that trips on this
    # box's noise (2 cores, 4 ranks) shows up here as a false alarm in one of them. (Five
    # took 70 s of CI; the false-alarm rate itself is measured over many seeded noisy fleets
    # in tests/unit/analysis/doctor/test_doctor_analysis.py.)
    for attempt in range(3):
        with mesh(4) as nodes:
            results, document = _doctor(nodes, tmp_path / f"run{attempt}", 29710 + attempt)
        _all_exit(results, 0)
        assert document is not None, results[0][2]
        assert document["healthy"] is True and document["findings"] == [], (attempt, document)
        assert document["repeats"] == 3 and "pair" in document["judged"], document


def test_a_hung_node_ends_the_run_within_the_timeout_and_is_named(tmp_path):
    out = tmp_path / "run"
    # Enough iterations that the pair rounds are still running when the node is stopped. 1 MiB,
    # not 4: the first row (the full all-reduce, 200 times) comes ~3 s sooner, and a hang is a
    # hang at any size. --timeout 10 as in the one-node hung-rank test (tests/dist/test_doctor.py),
    # not 20: the others end ~10 s sooner, with the same 40 s of slack (the default is 300 s).
    args = ["doctor", "--size", "1M", "-n", "200", "--timeout", str(HUNG_TIMEOUT_S)]
    args += ["--out", str(out)]
    with mesh(4) as nodes, start_nodes(nodes, args, 29720) as run:
        pid = run.rank_pid(2)
        _wait_for_rows(out, 1, run)
        os.kill(pid, signal.SIGSTOP)
        stopped_at = time.monotonic()
        results = run.wait(120, skip=frozenset({2}))
    for index in (0, 1, 3):
        code, _, stderr = results[index]
        assert code == 1, f"node {index} exit {code}:\n{stderr}"
        ended = run.ended_at[index] - stopped_at
        assert ended < HUNG_TIMEOUT_S + 40, (index, ended)
    message = results[0][2].strip().splitlines()[-1]
    assert "cbmesh2" in message, results[0][2]
    assert "Traceback" not in results[0][2]


def _wait_for_rows(out: Path, count: int, run, timeout_s: float = 180) -> None:
    """Until rank 0 has written `count` rows (the doctor is measuring, not starting)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if len(rows_of(out)) >= count:
            return
        for index, proc in enumerate(run.procs):
            assert proc.poll() is None, f"node {index} ended first: {run.output(index)[1]}"
        time.sleep(0.05)
    raise AssertionError(f"no {count} rows in {out} after {timeout_s} s")


def _assert_matrix_slow_where(document: dict, slow_pairs: set[tuple[str, str]]) -> None:
    """The pair matrix has every pair measured, and the shaped ones well below the rest."""
    hosts, gbps = document["matrix"]["hosts"], document["matrix"]["gbps"]
    assert sorted(hosts) == ["cbmesh0", "cbmesh1", "cbmesh2", "cbmesh3"]
    slow = {frozenset(pair) for pair in slow_pairs}
    fast_values, slow_values = [], []
    for i, first in enumerate(hosts):
        for j, second in enumerate(hosts):
            if i == j:
                continue
            assert gbps[i][j] is not None, (first, second, gbps)
            (slow_values if frozenset((first, second)) in slow else fast_values).append(gbps[i][j])
    assert max(slow_values) * 5 < min(fast_values), gbps
