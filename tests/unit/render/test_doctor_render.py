"""The doctor as text and JSON (render/doctor_text.py) and the report's Doctor pieces
(render/report/doctor_section.py), from Diagnosis objects and doctor rows built here by hand."""

from __future__ import annotations

import json

import numpy as np
import pytest

from collbench.analysis.doctor.expect import Expectation
from collbench.analysis.doctor.findings import Diagnosis, Finding, doctor_report
from collbench.render.doctor_text import (
    HEALTHY,
    VERDICT_HEADER,
    DoctorConsole,
    format_ranks,
    matrix_table,
    node_lines,
    render_doctor,
    verdict_table,
)
from collbench.render.report.doctor_section import (
    flagged,
    heatmap_chart,
    node_bars_chart,
    pair_array,
    stage_busbw_by_host,
)
from collbench.store.meta import RunMeta
from collbench.store.rows import DoctorRow, row_from_dict
from tests.rows import SWEEP_DEFAULTS

HOSTS = ("cbnode0", "cbnode1", "cbnode2", "cbnode3")
PNG = b"\x89PNG"
SIZE_BYTES = 16 * 1024**2


def doctor_json(diagnosis, run_id, expectation):
    """doctor.json's content as the store saves it."""
    return doctor_report(diagnosis, run_id, expectation).to_dict()


def doctor_row(
    stage: str,
    group: str,
    hosts: list[str],
    ranks: list[int],
    busbw_gbps: float,
    round_index: int = 0,
) -> DoctorRow:
    """A doctor row as the ranks write it (pair rows: sendrecv, busbw = algbw)."""
    collective = "sendrecv" if stage in ("pair", "shuffle") else "all_reduce"
    time_us = SIZE_BYTES / busbw_gbps / 1e3
    data = {
        **SWEEP_DEFAULTS,
        "kind": "doctor",
        "collective": collective,
        "size_bytes": SIZE_BYTES,
        "world_size": len(ranks),
        "nodes": len(hosts),
        "time_us": time_us,
        "algbw_gbps": busbw_gbps,
        "busbw_gbps": busbw_gbps,
        "stage": stage,
        "group": group,
        "round_index": round_index,
        "group_hosts": hosts,
        "group_ranks": ranks,
        "rank_time_us": [time_us] * len(ranks),
        "rank_last_count": [0] * (len(ranks) - 1) + [15],
    }
    return row_from_dict(data)


# The circle method's 3 rounds on 4 nodes.
ROUNDS = (((0, 3), (1, 2)), ((0, 2), (3, 1)), ((0, 1), (2, 3)))


def doctor_rows(slow_host: int | None = 2, slow_pair: tuple[int, int] | None = None):
    """full, intra and pair rows for HOSTS, two ranks per node: `slow_host` 10x slower in
    its node and with every partner, `slow_pair` 10x slower in that pair only."""
    rows = [doctor_row("full", "all", list(HOSTS), list(range(8)), 1.0)]
    for index, host in enumerate(HOSTS):
        busbw = 0.3 if index == slow_host else 3.0
        rows.append(doctor_row("intra", f"node {host}", [host], [2 * index, 2 * index + 1], busbw))
    for round_index, pairs in enumerate(ROUNDS):
        for first, second in pairs:
            slow = slow_host in (first, second) or {first, second} == set(slow_pair or ())
            rows.append(
                doctor_row(
                    "pair",
                    f"{HOSTS[first]}<->{HOSTS[second]}",
                    [HOSTS[first], HOSTS[second]],
                    [2 * first, 2 * second],
                    0.1 if slow else 1.0,
                    round_index,
                )
            )
    return rows


def doctor_meta(**extra) -> dict:
    """meta.json of a doctor run over HOSTS (its "doctor" entry as the contract says)."""
    return {
        "run_id": "doctor-1",
        "backend": "gloo",
        "hosts": list(HOSTS),
        "command_line": ["collbench", "doctor"],
        "doctor": {
            "hosts": list(HOSTS),
            "addresses": {host: f"10.0.0.{index + 1}" for index, host in enumerate(HOSTS)},
            "ranks_per_host": {host: [2 * i, 2 * i + 1] for i, host in enumerate(HOSTS)},
            "skipped": {"bisect": "not asked for (--bisect)"},
        },
        **extra,
    }


NODE = Finding(
    kind="node",
    hosts=("cbnode2",),
    ranks=(4, 5),
    addresses=("10.0.0.3",),
    measured_gbps=0.1,
    expected_gbps=1.0,
    expected_from="fleet median",
    rounds=3,
    evidence="0.1 GB/s vs fleet median 1 GB/s in 3 of 3 pairs",
    action="drain the node",
)
LINK = Finding(
    kind="link",
    hosts=("cbnode0", "cbnode1"),
    ranks=(0, 1, 2, 3),
    addresses=("10.0.0.1", "10.0.0.2"),
    measured_gbps=0.1,
    expected_gbps=1.0,
    expected_from="fleet median",
    rounds=1,
    evidence="0.1 GB/s vs 1 GB/s; both nodes fine with every other partner",
    action="reseat or replace the cable",
)
FLEET = Expectation(source="fleet median", busbw_gbps={}, tolerance_pct=25.0)


def matrix(slow: float | None = 0.1234) -> tuple[tuple[float | None, ...], ...]:
    """4 x 4 pair busbw: every pair 1.0 GB/s except cbnode0<->cbnode1 (`slow`; None: not
    measured), None on the diagonal."""
    cells = [[None if row == column else 1.0 for column in range(4)] for row in range(4)]
    cells[0][1] = cells[1][0] = slow
    return tuple(tuple(row) for row in cells)


def diagnosis(findings=(), **changes) -> Diagnosis:
    fields = {
        "healthy": not findings,
        "findings": tuple(findings),
        "hosts": HOSTS,
        "matrix_gbps": matrix(),
        "node_busbw_gbps": {host: 3.0 for host in HOSTS},
        "rail_busbw_gbps": {0: 1.5, 1: 1.25},
        "pass_ratio": {},
        "full_busbw_gbps": 1.0,
        "notes": ("shuffle stage not run (--shuffle-rounds 0)",),
    }
    return Diagnosis(**{**fields, **changes})


# --- the verdict table ---


def test_healthy_is_one_line_naming_the_expectation_source():
    text = verdict_table(diagnosis(), FLEET)
    assert text == f"{HEALTHY} (expectation source: fleet median)"
    assert text.startswith("healthy: no node, rail, link or rank below expectation")


def test_findings_one_aligned_line_each():
    lines = verdict_table(diagnosis([NODE, LINK]), FLEET).splitlines()
    assert len(lines) == 3  # header and one line per finding
    assert lines[0].startswith("# kind")
    for name in VERDICT_HEADER:
        assert name in lines[0]
    node, link = lines[1], lines[2]
    assert node.split()[:4] == ["node", "cbnode2", "4-5", "10.0.0.3"]
    assert link.split()[:4] == ["link", "cbnode0<->cbnode1", "0-3", "10.0.0.1,10.0.0.2"]
    assert node.rstrip().endswith("drain the node")
    assert link.rstrip().endswith("reseat or replace the cable")
    # aligned: each column starts at the same place on every line
    for column in ("evidence", "action"):
        start = lines[0].index(column)
        value = NODE.evidence if column == "evidence" else NODE.action
        assert node.index(value) == start
        value = LINK.evidence if column == "evidence" else LINK.action
        assert link.index(value) == start


def test_unhealthy_without_findings_says_so():
    text = verdict_table(diagnosis(healthy=False))
    assert text.startswith("not healthy")


@pytest.mark.parametrize(
    ("ranks", "text"),
    [((), "-"), ((3,), "3"), ((0, 1, 2, 3), "0-3"), ((8, 0, 1, 2, 3), "0-3,8"), ((1, 3), "1,3")],
)
def test_format_ranks(ranks, text):
    assert format_ranks(ranks) == text


def test_matrix_table_hosts_by_hosts_with_dashes():
    lines = matrix_table(diagnosis()).splitlines()
    assert len(lines) == 1 + len(HOSTS)
    assert lines[0].split()[-4:] == list(HOSTS)
    cells = lines[1].split()
    assert cells == ["cbnode0", "-", "0.123", "1", "1"]  # 3 significant digits
    assert lines[2].split()[1] == "0.123"
    assert matrix_table(diagnosis(matrix_gbps=matrix(None))).splitlines()[1].split()[2] == "-"


def test_matrix_table_empty_for_one_node():
    one = diagnosis(hosts=("cbnode0",), matrix_gbps=((None,),))
    assert matrix_table(one) == ""


def test_node_lines_rails_full_and_render_with_notes():
    lines = node_lines(diagnosis(pass_ratio={"cbnode0": 0.5}))
    assert "# node cbnode0: intra-node busbw 3 GB/s, median pair busbw 1 GB/s" in lines[0]
    assert "pass ratio 50%" in lines[0]
    assert "# rail 0: busbw 1.5 GB/s" in lines
    assert "# full all-reduce: busbw 1 GB/s" in lines
    text = render_doctor(diagnosis([NODE]), FLEET)
    assert text.splitlines()[0].startswith("# kind")
    assert "# note: shuffle stage not run (--shuffle-rounds 0)" in text
    assert "pair busbw (GB/s)" in text


# --- doctor.json ---


def test_doctor_json_shape_and_json_safe():
    document = doctor_json(
        diagnosis([NODE, LINK], rail_busbw_gbps={0: float("nan")}), "doctor-1", FLEET
    )
    text = json.dumps(document, allow_nan=False)  # no NaN or inf anywhere
    assert json.loads(text) == document
    assert document["healthy"] is False
    assert document["run_id"] == "doctor-1"
    first = document["findings"][0]
    assert set(first) == {
        "kind",
        "hosts",
        "ranks",
        "addresses",
        "evidence",
        "measured_gbps",
        "expected_gbps",
        "expected_from",
        "rounds",
        "action",
    }
    assert first["kind"] == "node" and first["hosts"] == ["cbnode2"] and first["ranks"] == [4, 5]
    assert document["matrix"]["hosts"] == list(HOSTS)
    assert document["matrix"]["gbps"][0] == [None, 0.1234, 1.0, 1.0]
    assert document["nodes"] == {host: 3.0 for host in HOSTS}
    assert document["rails"] == {"0": None}  # not finite: null
    assert document["pass_ratio"] == {}
    assert document["full_busbw_gbps"] == 1.0
    assert document["notes"] == ["shuffle stage not run (--shuffle-rounds 0)"]
    assert document["expectation"] == {
        "source": "fleet median",
        "busbw_gbps": {},
        "tolerance_pct": 25.0,
        "spread_pct": {},
        "noise_floor_pct": None,
        "noise_floor_source": None,
    }
    assert document["verdict"] == "flagged" and document["reason"] is None


def test_unjudged_is_its_own_verdict_in_text_and_json():
    reason = "no stage could be judged (intra: a fleet median needs 3 nodes, this run has 1)"
    unjudged = diagnosis(healthy=None, reason=reason, unjudged={"intra": "..."})
    text = verdict_table(unjudged, FLEET)
    assert (
        text.startswith("unjudged (no health check): ") and reason in text and "healthy" not in text
    )
    document = doctor_json(unjudged, "doctor-3", FLEET)
    assert document["healthy"] is None and document["verdict"] == "unjudged"
    assert document["reason"] == reason and document["unjudged"] == {"intra": "..."}


def test_doctor_json_healthy_has_no_findings():
    expectation = Expectation("--expect-busbw", {"intra": 2.0, "pair": 0.9}, 5.0)
    document = doctor_json(diagnosis(), "doctor-2", expectation)
    assert document["healthy"] is True and document["findings"] == []
    assert document["expectation"]["busbw_gbps"] == {"intra": 2.0, "pair": 0.9}


def test_doctor_json_records_the_noise_floor_it_held_against():
    from dataclasses import replace

    from collbench.core.noise import NoiseFloor

    floor = NoiseFloor({"large": 12.0}, "floor.json", runs=5)
    expectation = replace(
        Expectation("--expect-busbw", {"intra": 2.0}, 5.0), noise_floor=floor, floor_pct=12.0
    )
    document = doctor_json(diagnosis(), "doctor-4", expectation)
    assert document["expectation"]["noise_floor_pct"] == 12.0
    assert document["expectation"]["noise_floor_source"] == "floor.json"


# --- progress while the rounds run ---


class _Clock:
    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


def _console(mode: str = "table"):
    clock = _Clock()
    return DoctorConsole(mode, clock=clock), clock


def test_console_one_progress_line_per_row_with_pair_rounds(capsys):
    console, clock = _console()
    console.start(RunMeta.from_dict(doctor_meta()))
    rows = doctor_rows(slow_host=None)
    clock.now_s = 101.2
    for row in rows:
        console.row(row)
    console.finish()
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == ""
    assert lines[0] == "doctor: 4 node(s): cbnode0, cbnode1, cbnode2, cbnode3"
    assert lines[1] == "doctor: bisect stage skipped (not asked for (--bisect))"
    progress = lines[2:]
    assert len(progress) == len(rows)
    assert progress[0] == "doctor: full  all  1 GB/s  (1.2 s)"
    assert progress[1] == "doctor: intra  node cbnode0  3 GB/s  (1.2 s)"
    pair = [line for line in progress if " pair " in line]
    assert pair[0] == "doctor: pair round 1/3  cbnode0<->cbnode3  1 GB/s  (1.2 s)"
    assert pair[-1].startswith("doctor: pair round 3/3  cbnode2<->cbnode3")


def test_console_pair_rounds_unknown_without_meta_and_stopped_line(capsys):
    console, _ = _console()
    console.row(doctor_row("pair", "a<->b", ["a", "b"], [0, 1], 0.412, 1))
    console.finish("interrupted")
    assert capsys.readouterr().err.splitlines() == [
        "doctor: pair round 2  a<->b  0.412 GB/s  (0.0 s)",
        "doctor: stopped (interrupted)",
    ]


def test_console_quiet_prints_nothing(capsys):
    console, _ = _console("quiet")
    console.start(RunMeta.from_dict(doctor_meta()))
    for row in doctor_rows():
        console.row(row)
    console.finish("failed")
    out, err = capsys.readouterr()
    assert out == err == ""


def test_console_json_prints_rows_on_stdout(capsys):
    console, _ = _console("json")
    rows = doctor_rows()
    for row in rows:
        console.row(row)
    out, err = capsys.readouterr()
    printed = [json.loads(line) for line in out.splitlines()]
    assert printed == [json.loads(json.dumps(row.to_dict())) for row in rows]
    assert printed[0]["kind"] == "doctor" and printed[0]["stage"] == "full"
    assert len(err.splitlines()) == len(rows)  # progress stays on stderr


# --- the report's pieces ---


def test_pair_matrix_medians_symmetric_with_shuffle_rounds():
    rows = doctor_rows(slow_host=None, slow_pair=(0, 1))
    rows.append(doctor_row("shuffle", "cbnode1<->cbnode0", ["cbnode1", "cbnode0"], [2, 0], 0.2))
    rows.append(doctor_row("shuffle", "cbnode0<->cbnode1", ["cbnode0", "cbnode1"], [0, 2], 0.3))
    cells = pair_array(rows, HOSTS)
    assert cells[0][1] == cells[1][0] == pytest.approx(0.2)  # median of 0.1, 0.2, 0.3
    assert cells[2][3] == 1.0
    assert np.isnan(np.diag(cells)).all()
    partial = pair_array(rows[:6], HOSTS)  # full, intra x4, first pair only
    assert partial[0][3] == 1.0 and np.isnan(partial[1][2])


def test_stage_busbw_by_host_and_flagged():
    intra = stage_busbw_by_host(doctor_rows(slow_host=1))
    assert intra == {"cbnode0": 3.0, "cbnode1": 0.3, "cbnode2": 3.0, "cbnode3": 3.0}
    document = doctor_report(diagnosis([NODE, LINK]), "doctor-1", FLEET)
    assert flagged(document) == ({"cbnode2"}, {frozenset({"cbnode0", "cbnode1"})})
    assert flagged(None) == (set(), set())


def test_heatmap_and_bars_are_pngs():
    rows = doctor_rows()
    cells = pair_array(rows, HOSTS)
    png = heatmap_chart("pairs", HOSTS, cells, {"cbnode2"}, {frozenset({"cbnode0", "cbnode1"})})
    assert png.startswith(PNG)
    assert heatmap_chart("pairs", HOSTS, [[None] * 4] * 4) is None
    intra = stage_busbw_by_host(rows)
    bars = node_bars_chart("nodes", HOSTS, [("intra", intra, 2.0)], {"cbnode2"})
    assert bars.startswith(PNG)
    assert node_bars_chart("nodes", HOSTS, [("intra", {}, None)]) is None
