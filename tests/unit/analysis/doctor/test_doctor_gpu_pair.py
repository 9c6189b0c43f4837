"""The doctor's gpu-pair stage on synthetic matrices (issue 38 item 4): send/recv between each
pair of local ranks names the one slow pair, with its evidence, and nothing on a noisy
healthy node; its matrix is in the diagnosis, doctor.json and the text output."""

from __future__ import annotations

from itertools import combinations

from collbench.analysis.doctor.findings import doctor_report
from collbench.analysis.doctor.verdicts import diagnose
from collbench.core.doctor_spec import GPU_PAIR
from collbench.render.doctor_text import render_doctor
from tests.unit.analysis.doctor.test_doctor_analysis import (
    FLEET_EXPECTATION,
    REPEATS,
    SPEC,
    doctor_row,
    layout,
)


def gpu_pair_rows(nodes: dict, gbps) -> list:
    """Every pair of local ranks on every host, each repeat: busbw gbps(a, b, repeat)."""
    rows = []
    for repeat in range(REPEATS):
        for host, ranks in nodes["ranks_per_host"].items():
            for a, b in combinations(ranks, 2):
                group = f"{host} {a}<->{b}"
                value = gbps(a, b, repeat)
                rows.append(doctor_row(GPU_PAIR, group, value, [host], [a, b], repeat=repeat))
    return rows


def test_the_one_slow_pair_of_local_ranks_is_named_with_its_evidence():
    nodes = layout(2, per_host=4)  # h0: ranks 0-3, h1: ranks 4-7

    def gbps(a: int, b: int, repeat: int) -> float:
        noise = 1 + 0.15 * ((a * 7 + b * 3 + repeat) % 5 - 2) / 2  # within +-15%
        return (4.0 if (a, b) == (1, 3) else 20.0) * noise

    diagnosis = diagnose(gpu_pair_rows(nodes, gbps), SPEC, FLEET_EXPECTATION, nodes)
    assert [(f.kind, f.hosts, f.ranks) for f in diagnosis.findings] == [(GPU_PAIR, ("h0",), (1, 3))]
    evidence = diagnosis.findings[0].evidence
    assert evidence.startswith("rank 1<->rank 3 send/recv, both ways at once (the slower way")
    assert "sets it): 4 GB/s over 3 round(s)" in evidence and "3 of 3 repeats below" in evidence
    assert "with their other partners rank 1 " in evidence and "pairs 21.5 GB/s (-81%" in evidence
    assert GPU_PAIR in diagnosis.judged and diagnosis.healthy is False
    grid = diagnosis.gpu_pairs["h0"]
    assert grid["ranks"] == [0, 1, 2, 3] and grid["gbps"][1][3] == grid["gbps"][3][1] < 5
    assert grid["gbps"][0][0] is None and diagnosis.gpu_pairs["h1"]["ranks"] == [4, 5, 6, 7]
    report = doctor_report(diagnosis, "run", FLEET_EXPECTATION).to_dict()
    assert report["gpu_pairs"]["h0"]["gbps"][1][3] < 5
    assert "# gpu-pair busbw (GB/s) h0  rank 0  rank 1" in render_doctor(diagnosis)


def test_three_noisy_ranks_name_the_slow_pair_and_a_healthy_node_nothing():
    # This 2-core box measured: two healthy pairs 0.13-0.69 GB/s, the shaped one 0.023;
    # with three pairs a fleet's MAD is the healthy two's gap, which would hide it.
    nodes = layout(1, per_host=3)
    healthy = {(0, 1): (0.44, 0.69, 0.13), (1, 2): (0.14, 0.31, 0.13)}
    measured = {**healthy, (0, 2): (0.023, 0.024, 0.024)}
    slow = diagnose(
        gpu_pair_rows(nodes, lambda a, b, r: measured[(a, b)][r]), SPEC, FLEET_EXPECTATION, nodes
    )
    assert [(f.kind, f.ranks) for f in slow.findings] == [(GPU_PAIR, (0, 2))]
    calm = {**healthy, (0, 2): (0.30, 0.40, 0.20)}
    fine = diagnose(
        gpu_pair_rows(nodes, lambda a, b, r: calm[(a, b)][r]), SPEC, FLEET_EXPECTATION, nodes
    )
    assert fine.findings == () and fine.healthy is True


def test_two_ranks_are_one_pair_unjudged_without_an_expectation():
    nodes = layout(1, per_host=2)
    diagnosis = diagnose(gpu_pair_rows(nodes, lambda a, b, r: 1.0), SPEC, FLEET_EXPECTATION, nodes)
    assert diagnosis.healthy is None and diagnosis.gpu_pairs["h0"]["gbps"][0][1] == 1.0
    assert diagnosis.unjudged[GPU_PAIR] == (
        "a fleet median needs 3 pairs of local ranks, this run has 1; 3 or more ranks per "
        "node, or --expect-busbw or --baseline"
    )
