"""The doctor at fleet scale: the pair plan's round counts (all / sampled / auto), the slow
node still named among hundreds of synthetic nodes, and the summary that replaces the text
matrix and the dense doctor.json matrix above MATRIX_DENSE_MAX_HOSTS hosts. Correctness
only: benchmarks/doctor_scale.py measures the time and memory."""

from __future__ import annotations

import json
import random
from itertools import combinations

import pytest

from collbench.analysis.doctor.verdicts import diagnose
from collbench.core.doctor_plan import (
    DEFAULT_SAMPLED_ROUNDS,
    SAMPLE_ABOVE_NODES,
    CircleRounds,
    pair_plan,
)
from collbench.core.doctor_spec import DoctorSpec
from collbench.core.errors import SpecError
from collbench.render.doctor_text import DoctorConsole, render_doctor
from collbench.store.doctor_report import MATRIX_DENSE_MAX_HOSTS, DoctorReport
from collbench.store.meta import RunMeta
from tests.unit.analysis.doctor.test_doctor_analysis import FLEET_EXPECTATION, doctor_row, repeated
from tests.unit.render.test_doctor_render import doctor_json

PER_NODE = 2


def fleet(count: int, pairs: str, slow_host: int | None, slow_link: tuple[int, int] | None):
    """Rows of every stage but bisect on `count` nodes of PER_NODE ranks, 3 repeats, pair
    busbw 40 GB/s with 3% noise; pairs with `slow_host` or along `slow_link` at 4."""
    rng = random.Random(7)
    hosts = [f"n{index:04d}" for index in range(count)]
    ranks = {host: [PER_NODE * i + r for r in range(PER_NODE)] for i, host in enumerate(hosts)}
    rows = [doctor_row("intra", f"node {h}", 100.0, [h], ranks[h]) for h in hosts]
    plan = pair_plan(count, DoctorSpec(pairs=pairs))
    for stage, rounds in (("pair", plan.circle), ("shuffle", plan.shuffle)):
        for index, node_pairs in enumerate(rounds):
            for a, b in node_pairs:
                slow = slow_host in (a, b) or (a, b) == slow_link
                gbps = (4.0 if slow else 40.0) * rng.uniform(0.97, 1.03)
                pair = [hosts[a], hosts[b]]
                rows.append(
                    doctor_row(
                        stage,
                        "<->".join(pair),
                        gbps,
                        pair,
                        ranks[hosts[a]] + ranks[hosts[b]],
                        round_index=index,
                    )
                )
    nodes = {"hosts": hosts, "ranks_per_host": ranks}
    return repeated(rows), nodes


@pytest.mark.parametrize("count", [2, 3, 4, 9, 10, 33])
def test_the_lazy_circle_pairs_every_node_pair_once(count):
    rounds = CircleRounds(count)
    assert len(rounds) == (count - 1 if count % 2 == 0 else count)
    seen = [pair for one in rounds for pair in one]
    assert sorted(seen) == list(combinations(range(count), 2))
    for one in rounds:
        nodes = [node for pair in one for node in pair]
        assert len(nodes) == len(set(nodes)) == 2 * (count // 2)


def test_what_each_mode_costs_in_rounds():
    assert pair_plan(1, DoctorSpec()).rounds == 0
    assert pair_plan(SAMPLE_ABOVE_NODES, DoctorSpec()).mode == "all"
    assert pair_plan(SAMPLE_ABOVE_NODES, DoctorSpec()).rounds == SAMPLE_ABOVE_NODES - 1
    large = pair_plan(SAMPLE_ABOVE_NODES + 1, DoctorSpec())
    assert (large.mode, len(large.circle), large.rounds) == ("sampled", 0, DEFAULT_SAMPLED_ROUNDS)
    assert pair_plan(4096, DoctorSpec(pairs="all")).rounds == 4095
    assert pair_plan(4096, DoctorSpec(pairs="all", shuffle_rounds=5)).rounds == 4100
    assert pair_plan(11, DoctorSpec(pairs="sampled", shuffle_rounds=4)).rounds == 4
    every = pair_plan(4096, DoctorSpec())
    assert all(len(one) == 2048 for one in every.shuffle)  # every node in every round


def test_a_pairs_mode_collbench_does_not_know_is_refused():
    with pytest.raises(SpecError, match="--pairs"):
        DoctorSpec(pairs="some")
    assert DoctorSpec.from_dict({"seed": 1}).pairs == "all"  # written before --pairs
    assert "--pairs sampled" in " ".join(DoctorSpec(pairs="sampled").to_args())


@pytest.mark.slow
def test_the_slow_node_is_named_among_512_sampled_nodes_and_summarised():
    rows, nodes = fleet(512, "auto", slow_host=300, slow_link=None)
    spec = DoctorSpec()
    diagnosis = diagnose(rows, spec, FLEET_EXPECTATION, nodes)
    assert [(item.kind, item.hosts) for item in diagnosis.findings] == [("node", ("n0300",))]
    assert diagnosis.matrix_gbps == ()  # above MATRIX_DENSE_MAX_HOSTS: the pairs only
    assert 0 < len(diagnosis.pair_gbps) <= DEFAULT_SAMPLED_ROUNDS * 256  # K rounds of 256
    assert all(first < second for first, second, _ in diagnosis.pair_gbps)
    text = render_doctor(diagnosis, FLEET_EXPECTATION)
    assert "# pair matrix: 512 nodes" in text
    assert "# node n0300:" in text  # the flagged node is among the nodes shown
    assert len(text.splitlines()) < 40
    content = doctor_json(diagnosis, "scale", FLEET_EXPECTATION)
    assert "gbps" not in content["matrix"]
    assert len(content["matrix"]["pairs"]) == len(diagnosis.pair_gbps)
    back = DoctorReport.from_dict(json.loads(json.dumps(content)), "doctor.json")
    assert back.pairs == diagnosis.pair_gbps and back.to_dict() == content


def test_every_pair_mode_finds_a_slow_link_among_96_nodes():
    rows, nodes = fleet(96, "all", slow_host=None, slow_link=(10, 70))
    diagnosis = diagnose(rows, DoctorSpec(pairs="all"), FLEET_EXPECTATION, nodes)
    assert [(item.kind, item.hosts) for item in diagnosis.findings] == [
        ("link", ("n0010", "n0070"))
    ]
    assert len(diagnosis.pair_gbps) == 96 * 95 // 2
    text = render_doctor(diagnosis, FLEET_EXPECTATION)
    assert "4560 of 4560 pairs measured" in text
    assert "slowest 10 pairs (GB/s): n0010<->n0070 " in text


@pytest.mark.slow
def test_small_fleets_keep_the_whole_matrix():
    rows, nodes = fleet(MATRIX_DENSE_MAX_HOSTS, "auto", slow_host=5, slow_link=None)
    diagnosis = diagnose(rows, DoctorSpec(), FLEET_EXPECTATION, nodes)
    assert len(diagnosis.matrix_gbps) == MATRIX_DENSE_MAX_HOSTS
    content = doctor_json(diagnosis, "small", FLEET_EXPECTATION)
    assert "pairs" not in content["matrix"] and len(content["matrix"]["gbps"]) == 64


def test_progress_counts_the_sampled_rounds():
    hosts = [f"n{index}" for index in range(SAMPLE_ABOVE_NODES + 1)]
    meta = {"doctor": {"hosts": hosts}, "spec": {"doctor": {"pairs": "auto"}}}
    console = DoctorConsole("table")
    console.start(RunMeta.from_dict(meta))
    row = doctor_row("shuffle", "n0<->n1", 1.0, ["n0", "n1"], [0, 1], round_index=2)
    assert f"shuffle round 3/{DEFAULT_SAMPLED_ROUNDS} " in console.progress_line(row)
