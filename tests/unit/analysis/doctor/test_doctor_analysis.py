"""Doctor verdicts on synthetic doctor rows: the slow node, link, rail, rank or segment, and
no false alarm on a healthy fleet with realistic noise."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from collbench.analysis.doctor.expect import FLEET, Expectation
from collbench.analysis.doctor.findings import Diagnosis
from collbench.analysis.doctor.verdicts import diagnose
from collbench.core.bandwidth import bus_factor
from collbench.core.doctor_plan import CircleRounds, random_rounds
from collbench.core.doctor_spec import DoctorSpec
from collbench.store.rows import DoctorRow

MIB = 1024**2
SPEC = DoctorSpec()
FLEET_EXPECTATION = Expectation(FLEET, {}, SPEC.tolerance_pct)


def doctor_row(stage: str, group: str, busbw_gbps: float, hosts, ranks, **columns) -> DoctorRow:
    """A doctor row of one group: sendrecv for pair/shuffle, all-reduce otherwise; the time
    follows from the busbw. `columns` override (iters, round_index, rank_time_us, ...)."""
    collective = "sendrecv" if stage in ("pair", "shuffle") else "all_reduce"
    size_bytes = columns.pop("size_bytes", 16 * MIB)
    factor = bus_factor(collective, len(ranks)) or 1.0
    algbw = busbw_gbps / factor
    time_us = size_bytes / algbw / 1e3 if algbw > 0 else 0.0
    values = dict(
        run_id="doctor-test",
        timestamp_utc="2025-01-01T00:00:00.000000Z",
        collective=collective,
        backend="gloo",
        dtype="float32",
        op=None if collective == "sendrecv" else "sum",
        root=-1,
        size_bytes=size_bytes,
        count=size_bytes // 4,
        world_size=len(ranks),
        nodes=len(hosts),
        ranks_per_node=max(1, len(ranks) // max(1, len(hosts))),
        placement="out_of_place",
        warmup=2,
        iters=20,
        time_us=time_us,
        time_us_p50=None,
        time_us_p95=None,
        time_us_min=None,
        time_us_max=None,
        time_cv=None,
        algbw_gbps=algbw,
        busbw_gbps=busbw_gbps,
        n_wrong=0,
        topology=None,
        knobs={},
        time_us_samples=[],
        stage=stage,
        group=group,
        round_index=0,
        group_hosts=list(hosts),
        group_ranks=list(ranks),
        rank_time_us=None,
        rank_last_count=None,
    )
    return DoctorRow(**{**values, **columns})


REPEATS = 3  # DoctorSpec's default: a finding needs a majority of at least 3 repeats


def repeated(rows: list, repeats: int = REPEATS) -> list:
    """Every row once per repeat, in passes (all rows of repeat 0, then of repeat 1, ...)."""
    return [
        DoctorRow(**{**row.to_dict(), "repeat": repeat})
        for repeat in range(repeats)
        for row in rows
    ]


def layout(count: int, per_host: int = 1) -> dict:
    """meta.json extra["doctor"] for `count` hosts h0.. with `per_host` ranks each."""
    hosts = [f"h{index}" for index in range(count)]
    return {
        "hosts": hosts,
        "addresses": {host: f"10.0.0.{index + 1}" for index, host in enumerate(hosts)},
        "ranks_per_host": {
            host: list(range(index * per_host, (index + 1) * per_host))
            for index, host in enumerate(hosts)
        },
        "skipped": {},
    }


def pair_rows(
    nodes: dict, pair_gbps: Callable[[str, str], float], shuffle: int = 0, repeats: int = REPEATS
) -> list:
    """Circle-method rounds (and `shuffle` random ones), busbw from pair_gbps(a, b) (called
    again for every repeat)."""
    hosts, ranks = nodes["hosts"], nodes["ranks_per_host"]
    rows = []
    rounds = [("pair", r) for r in CircleRounds(len(hosts))]
    rounds += [("shuffle", r) for r in random_rounds(len(hosts), shuffle, seed=1)]
    passes = [(repeat, item) for repeat in range(repeats) for item in enumerate(rounds)]
    for repeat, (index, (stage, pairs)) in passes:
        for a, b in pairs:
            host_a, host_b = hosts[a], hosts[b]
            rows.append(
                doctor_row(
                    stage,
                    f"{host_a}<->{host_b}",
                    pair_gbps(host_a, host_b),
                    [host_a, host_b],
                    [*ranks[host_a], *ranks[host_b]],
                    round_index=index,
                    repeat=repeat,
                )
            )
    return rows


def all_reduce_rows(
    nodes: dict, stage: str, busbw: Callable[[str], float], repeats: int = REPEATS, **columns
) -> list:
    """intra rows (a group per host) or rail rows (a group per local index), each repeat."""
    hosts, ranks = nodes["hosts"], nodes["ranks_per_host"]
    if stage == "intra":
        groups = [(f"node {host}", [host], ranks[host]) for host in hosts]
    else:
        per_host = len(ranks[hosts[0]])
        groups = [(f"rail {i}", hosts, [ranks[host][i] for host in hosts]) for i in range(per_host)]
    return [
        doctor_row(stage, group, busbw(group), group_hosts, group_ranks, repeat=repeat, **columns)
        for repeat in range(repeats)
        for group, group_hosts, group_ranks in groups
    ]


def kinds(diagnosis: Diagnosis) -> list[tuple[str, tuple[str, ...]]]:
    return [(finding.kind, finding.hosts) for finding in diagnosis.findings]


# --- pair-wise: a node, a link ----------------------------------------------------------


def test_one_slow_node_among_four_is_named_alone():
    nodes = layout(4)
    rows = pair_rows(nodes, lambda a, b: 0.05 if "h2" in (a, b) else 0.41)
    diagnosis = diagnose(rows, SPEC, FLEET_EXPECTATION, nodes)
    assert kinds(diagnosis) == [("node", ("h2",))]
    finding = diagnosis.findings[0]
    assert finding.addresses == ("10.0.0.3",) and finding.ranks == (2,)
    assert finding.expected_from == FLEET and finding.rounds == 3 * REPEATS
    assert finding.evidence.startswith("slow with every partner: pair busbw 0.05 GB/s")
    assert "3 of 3 repeats below the bar" in finding.evidence
    assert "fleet median of 4 nodes 0.41 GB/s (-88%" in finding.evidence
    assert "drain the node" in finding.action and "ethtool" in finding.action
    assert not diagnosis.healthy
    assert diagnosis.pass_ratio["h2"] == 0.0 and diagnosis.pass_ratio["h0"] == pytest.approx(2 / 3)


def test_one_slow_pair_is_a_link_not_a_node():
    nodes = layout(4)
    rows = pair_rows(nodes, lambda a, b: 0.04 if {a, b} == {"h0", "h3"} else 0.4)
    diagnosis = diagnose(rows, SPEC, FLEET_EXPECTATION, nodes)
    assert kinds(diagnosis) == [("link", ("h0", "h3"))]
    finding = diagnosis.findings[0]
    assert finding.addresses == ("10.0.0.1", "10.0.0.4")
    assert finding.ranks == (0, 3) and finding.measured_gbps == pytest.approx(0.04)
    assert "with their other partners h0 0.4 GB/s, h3 0.4 GB/s" in finding.evidence
    assert "cable" in finding.action


def test_matrix_is_symmetric_in_host_order_with_the_median_over_rounds():
    nodes = layout(4)
    rows = pair_rows(nodes, lambda a, b: 1.0, shuffle=6)
    rows += pair_rows(nodes, lambda a, b: 3.0)[:1]  # one more round of the first pair
    diagnosis = diagnose(rows, SPEC, FLEET_EXPECTATION, nodes)
    matrix = diagnosis.matrix_gbps
    assert diagnosis.hosts == ("h0", "h1", "h2", "h3")
    assert all(matrix[i][i] is None for i in range(4))
    assert all(matrix[i][j] == matrix[j][i] for i in range(4) for j in range(4))
    assert all(matrix[i][j] == 1.0 for i in range(4) for j in range(4) if i != j)
    assert diagnosis.healthy and set(diagnosis.pass_ratio.values()) == {1.0}


def test_slow_node_and_unrelated_slow_link_both_found():
    nodes = layout(8)

    def pair(a: str, b: str) -> float:
        if "h5" in (a, b):
            return 0.1
        return 0.2 if {a, b} == {"h0", "h1"} else 1.0

    diagnosis = diagnose(pair_rows(nodes, pair), SPEC, FLEET_EXPECTATION, nodes)
    assert kinds(diagnosis) == [("node", ("h5",)), ("link", ("h0", "h1"))]


def test_two_nodes_in_fleet_mode_are_not_judged_and_say_why():
    nodes = layout(2)
    diagnosis = diagnose(pair_rows(nodes, lambda a, b: 0.01), SPEC, FLEET_EXPECTATION, nodes)
    assert diagnosis.healthy is None and diagnosis.verdict == "unjudged"
    assert "a fleet median needs 3 node pairs" in diagnosis.reason
    assert any(
        "pair stage not judged: a fleet median needs 3 node pairs, this run has 1" in note
        for note in diagnosis.notes
    )


def test_two_nodes_below_an_expectation_are_a_link_that_says_it_could_be_a_node():
    nodes = layout(2)
    expectation = Expectation("--expect-busbw", {"pair": 1.0}, 5.0)
    diagnosis = diagnose(pair_rows(nodes, lambda a, b: 0.5), SPEC, expectation, nodes)
    assert kinds(diagnosis) == [("link", ("h0", "h1"))]
    assert (
        "no other partner: a slow end and a slow link look alike" in diagnosis.findings[0].evidence
    )
    assert "expected 1 GB/s from --expect-busbw (-50%" in diagnosis.findings[0].evidence


# --- intra-node and rails ---------------------------------------------------------------


def test_slow_intra_node_merges_with_the_same_nodes_pair_finding():
    nodes = layout(4, per_host=2)
    rows = pair_rows(nodes, lambda a, b: 0.1 if "h1" in (a, b) else 1.0)
    rows += all_reduce_rows(nodes, "intra", lambda group: 0.5 if group == "node h1" else 3.0)
    diagnosis = diagnose(rows, SPEC, FLEET_EXPECTATION, nodes)
    assert kinds(diagnosis) == [("node", ("h1",))]
    finding = diagnosis.findings[0]
    assert "pair busbw 0.1 GB/s" in finding.evidence
    assert "intra-node all-reduce 0.5 GB/s over 2 ranks" in finding.evidence
    assert "ethtool" in finding.action and "numactl" in finding.action  # gloo: CPU checks
    assert finding.ranks == (2, 3) and finding.rounds == (3 + 1) * REPEATS
    assert diagnosis.node_busbw_gbps == {"h0": 3.0, "h1": 0.5, "h2": 3.0, "h3": 3.0}


def test_intra_only_slow_node_is_a_node_finding():
    nodes = layout(4, per_host=2)
    rows = all_reduce_rows(nodes, "intra", lambda group: 0.5 if group == "node h3" else 3.0)
    diagnosis = diagnose(rows, SPEC, FLEET_EXPECTATION, nodes)
    assert kinds(diagnosis) == [("node", ("h3",))]


def test_a_slow_rail_is_named_with_every_node_on_it():
    nodes = layout(4, per_host=4)
    rows = pair_rows(nodes, lambda a, b: 1.0)
    rows += all_reduce_rows(nodes, "rail", lambda group: 0.2 if group == "rail 2" else 1.0)
    diagnosis = diagnose(rows, SPEC, FLEET_EXPECTATION, nodes)
    assert kinds(diagnosis) == [("rail", ("h0", "h1", "h2", "h3"))]
    finding = diagnosis.findings[0]
    assert finding.ranks == (2, 6, 10, 14)
    assert "rail 2 all-reduce 0.2 GB/s across 4 nodes" in finding.evidence
    assert "switch plane" in finding.action
    assert diagnosis.rail_busbw_gbps == {0: 1.0, 1: 1.0, 2: 0.2, 3: 1.0}


def test_two_rails_need_an_expectation():
    nodes = layout(4, per_host=2)
    rows = all_reduce_rows(nodes, "rail", lambda group: 0.2 if group == "rail 1" else 1.0)
    assert diagnose(rows, SPEC, FLEET_EXPECTATION, nodes).healthy is None  # nothing judged
    expectation = Expectation("baseline runs/a", {"rail": 1.0}, 5.0)
    diagnosis = diagnose(rows, SPEC, expectation, nodes)
    assert kinds(diagnosis) == [("rail", ("h0", "h1", "h2", "h3"))]
    assert diagnosis.findings[0].expected_from == "baseline runs/a"


# --- a healthy, noisy fleet: no false alarm -----------------------------------------------


def noisy_fleet(seed: int, count: int, per_host: int, sigma: float) -> tuple[list, dict]:
    """Every stage of a healthy fleet with lognormal noise per row (cv ~ sigma); in every
    all-reduce the ranks come last at random and their own times are noisy too."""
    rng = np.random.default_rng(seed)
    nodes = layout(count, per_host)

    def noisy(value: float) -> float:
        return float(value * rng.lognormal(0.0, sigma))

    rows = pair_rows(nodes, lambda a, b: noisy(0.4), shuffle=3)
    rows += all_reduce_rows(nodes, "intra", lambda group: noisy(2.0)) if per_host > 1 else []
    rows += all_reduce_rows(nodes, "rail", lambda group: noisy(0.3))
    ranks = [rank for host in nodes["hosts"] for rank in nodes["ranks_per_host"][host]]
    rows.append(doctor_row("full", "all", noisy(0.35), nodes["hosts"], ranks))
    return [with_rank_noise(row, rng, sigma) for row in rows], nodes


def with_rank_noise(row: DoctorRow, rng, sigma: float) -> DoctorRow:
    """An all-reduce row whose ranks came last at random, each rank's time noisy."""
    if row.stage in ("pair", "shuffle"):
        return row
    size = len(row.group_ranks)
    last = rng.multinomial(row.iters, [1 / size] * size)
    times = row.time_us * rng.lognormal(0.0, sigma, size)
    extra = {"rank_time_us": [float(t) for t in times], "rank_last_count": [int(n) for n in last]}
    return DoctorRow(**{**row.to_dict(), **extra})


@pytest.mark.parametrize(
    ("count", "per_host", "sigma", "fleet_tolerance_pct"),
    [
        (4, 1, 0.05, SPEC.fleet_tolerance_pct),  # the default: a cluster's 5% noise
        (8, 2, 0.05, SPEC.fleet_tolerance_pct),
        (16, 1, 0.05, SPEC.fleet_tolerance_pct),
        (4, 1, 0.1, 40.0),  # the VM's 10% noise: a wider fleet tolerance
        (8, 2, 0.1, 40.0),
    ],
)
@pytest.mark.parametrize(
    "seeds",
    [  # the fast loop checks the first 60 seeds; the other 240 are slow (~9 s in all)
        pytest.param(range(0, 60), id="seeds0-59"),
        pytest.param(range(60, 300), id="seeds60-299", marks=pytest.mark.slow),
    ],
)
@pytest.mark.slow
def test_a_healthy_noisy_fleet_is_healthy_over_many_seeds(
    count, per_host, sigma, fleet_tolerance_pct, seeds
):
    spec = DoctorSpec(fleet_tolerance_pct=fleet_tolerance_pct)
    false_alarms = []
    for seed in seeds:
        rows, nodes = noisy_fleet(seed, count, per_host, sigma)
        diagnosis = diagnose(rows, spec, FLEET_EXPECTATION, nodes)
        if not diagnosis.healthy:
            false_alarms.append((seed, [f.evidence for f in diagnosis.findings]))
    assert false_alarms == []


def test_the_fleet_bar_is_a_factor_so_a_very_noisy_fleet_still_flags_a_tenfold_drop():
    # Pairs spread 0.6-1.4 GB/s (a MAD of 0.2 GB/s: 4 scaled MADs in GB/s reach below 0).
    nodes = layout(6)
    spread = iter([0.6, 0.8, 1.0, 1.2, 1.4] * 3)
    values = {
        pair: next(spread)
        for pair in sorted((f"h{a}", f"h{b}") for a in range(6) for b in range(a + 1, 6))
    }
    values[("h1", "h4")] = 0.1
    diagnosis = diagnose(
        pair_rows(nodes, lambda a, b: values[(a, b)]), SPEC, FLEET_EXPECTATION, nodes
    )
    assert kinds(diagnosis) == [("link", ("h1", "h4"))]


# A healthy doctor run on the 2-core VM: 4 network-namespace nodes of 2 gloo ranks, 1 MiB,
# 5 iterations (pair busbw from 0.36 to 0.93 GB/s, one node's intra-node all-reduce -62%).
VM_RUN = {
    "intra": {"n0": 0.9396, "n1": 0.3156, "n2": 0.9721, "n3": 0.7331},
    "pair": {
        ("n0", "n3"): [0.3625],
        ("n1", "n2"): [0.3766],
        ("n0", "n2"): [0.3828, 0.5987],
        ("n1", "n3"): [0.7497, 0.4128],
        ("n0", "n1"): [0.9336, 0.3586],
        ("n2", "n3"): [0.4675, 0.6642],
    },
}


def vm_rows(slow_host: str | None = None) -> tuple[list, dict]:
    """VM_RUN as rows; `slow_host`'s pairs at 100 Mbit/s (tc tbf on its uplink)."""
    nodes = {**layout(0), "hosts": ["n0", "n1", "n2", "n3"]}
    rows = [
        doctor_row("intra", f"node {host}", busbw, [host], [0, 1])
        for host, busbw in VM_RUN["intra"].items()
    ]
    for (host_a, host_b), values in VM_RUN["pair"].items():
        for index, busbw in enumerate(values):
            slow = 0.0125 if slow_host in (host_a, host_b) else busbw
            stage = "pair" if index == 0 else "shuffle"
            rows.append(doctor_row(stage, f"{host_a}<->{host_b}", slow, [host_a, host_b], [0, 1]))
    return repeated(rows), nodes


def test_the_vms_real_noise_is_healthy_and_a_shaped_node_still_stands_out():
    rows, nodes = vm_rows()
    assert diagnose(rows, SPEC, FLEET_EXPECTATION, nodes).healthy
    rows, nodes = vm_rows(slow_host="n2")
    assert kinds(diagnose(rows, SPEC, FLEET_EXPECTATION, nodes)) == [("node", ("n2",))]


@pytest.mark.parametrize("pair", list(VM_RUN["pair"]))
def test_on_the_vms_real_noise_a_shaped_pair_is_a_link(pair):
    rows, nodes = vm_rows()
    group = f"{pair[0]}<->{pair[1]}"
    rows = [
        DoctorRow(**{**row.to_dict(), "busbw_gbps": 0.0125}) if row.group == group else row
        for row in rows
    ]
    assert kinds(diagnose(rows, SPEC, FLEET_EXPECTATION, nodes)) == [("link", pair)]


# --- stragglers -------------------------------------------------------------------------


def straggler_rows(last_share: float, short_by: float, rows: int = 3) -> tuple[list, dict]:
    """`rows` full all-reduces over 4 hosts x 2 ranks where rank 5 comes last in
    `last_share` of the iterations and its own time is `short_by` below the others'."""
    nodes = layout(4, per_host=2)
    ranks = list(range(8))
    iters = 20
    result = []
    for repeat in range(rows):
        last = [0] * 8
        last[5] = round(last_share * iters)
        last[0] += iters - last[5]
        times = [1000.0] * 8
        times[5] = 1000.0 * (1 - short_by)
        result.append(
            doctor_row(
                "full",
                "all",
                0.3,
                nodes["hosts"],
                ranks,
                rank_time_us=times,
                rank_last_count=last,
                repeat=repeat,
            )
        )
    return result, nodes


def test_a_rank_clearly_and_consistently_last_is_a_straggler():
    rows, nodes = straggler_rows(last_share=0.95, short_by=0.5)  # beyond fleet tolerance, 40%
    diagnosis = diagnose(rows, SPEC, FLEET_EXPECTATION, nodes)
    assert kinds(diagnosis) == [("rank", ("h2",))]
    finding = diagnosis.findings[0]
    assert finding.ranks == (5,) and finding.addresses == ("10.0.0.3",) and finding.rounds == 3
    assert "came last in 57 of 60 timed iterations" in finding.evidence
    assert "throttling" in finding.action


@pytest.mark.parametrize(
    ("last_share", "short_by"),
    [(0.95, 0.05), (0.6, 0.4)],  # last, but barely shorter / much shorter, not often last
)
def test_a_rank_that_is_not_clearly_or_not_consistently_last_is_no_straggler(last_share, short_by):
    rows, nodes = straggler_rows(last_share, short_by)
    assert diagnose(rows, SPEC, FLEET_EXPECTATION, nodes).findings == ()


def test_stragglers_ignore_groups_of_two_and_too_few_iterations():
    nodes = layout(2)
    rows = [
        doctor_row(
            "full",
            "all",
            0.3,
            ["h0", "h1"],
            [0, 1],
            rank_time_us=[500.0, 1000.0],
            rank_last_count=[20, 0],
        )
    ]
    assert diagnose(repeated(rows), SPEC, FLEET_EXPECTATION, nodes).findings == ()
    few, nodes = straggler_rows(last_share=1.0, short_by=0.5)
    few = [row.__class__(**{**row.to_dict(), "iters": 3}) for row in few]  # 9 in all
    assert diagnose(few, SPEC, FLEET_EXPECTATION, nodes).findings == ()


def test_a_straggler_needs_three_repeats():
    rows, nodes = straggler_rows(last_share=0.95, short_by=0.5, rows=2)
    assert diagnose(rows, SPEC, FLEET_EXPECTATION, nodes).findings == ()


# --- the full all-reduce and bisection --------------------------------------------------


def test_full_below_expectation_with_nothing_to_explain_it_asks_for_bisect():
    nodes = layout(4)
    rows = pair_rows(nodes, lambda a, b: 1.0)
    rows += repeated([doctor_row("full", "all", 0.5, nodes["hosts"], [0, 1, 2, 3])])
    expectation = Expectation("--expect-busbw", {"full": 1.0, "pair": 1.0}, 5.0)
    diagnosis = diagnose(rows, SPEC, expectation, nodes)
    assert kinds(diagnosis) == [("segment", ("h0", "h1", "h2", "h3"))]
    assert "--bisect" in diagnosis.findings[0].action
    assert diagnosis.full_busbw_gbps == 0.5


@pytest.mark.parametrize("count", [1, 2, 3])
def test_no_bisect_advice_where_bisection_cannot_run(count):
    # one node (a full row of an older run), or 2-3 nodes of one rank: --bisect needs two
    # nodes and two ranks a half, so it is skipped there; the advice must not ask for it
    nodes = layout(count, per_host=2 if count == 1 else 1)
    rows = pair_rows(nodes, lambda a, b: 1.0) if count > 1 else []
    ranks = list(range(max(count, 2)))
    rows += repeated([doctor_row("full", "all", 0.5, nodes["hosts"], ranks)])
    expectation = Expectation("--expect-busbw", {"full": 1.0, "pair": 1.0}, 5.0)
    diagnosis = diagnose(rows, SPEC, expectation, nodes)
    assert [finding.kind for finding in diagnosis.findings] == ["segment"]
    assert "--bisect" not in diagnosis.findings[0].action, diagnosis.findings[0].action


def test_bisect_rows_name_the_slower_half_at_the_deepest_level_that_differs():
    nodes = layout(8)
    hosts = nodes["hosts"]
    rows = pair_rows(nodes, lambda a, b: 1.0)
    rows += repeated([doctor_row("full", "all", 0.5, hosts, list(range(8)))])
    halves = [
        (1, "a", hosts[:4], 1.0),
        (1, "b", hosts[4:], 0.5),
        (2, "a", hosts[4:6], 1.0),
        (2, "b", hosts[6:], 0.5),
        (3, "a", hosts[6:7], 0.0),  # one node per half: a one-rank all-reduce, no figure
        (3, "b", hosts[7:], 0.0),
    ]
    for level, side, group_hosts, busbw in halves:
        ranks = [int(host[1:]) for host in group_hosts]
        rows += repeated(
            [
                doctor_row(
                    "bisect",
                    f"bisect L{level} {side}",
                    busbw,
                    group_hosts,
                    ranks,
                    round_index=level,
                )
            ]
        )
    expectation = Expectation("--expect-busbw", {"full": 1.0, "pair": 1.0}, 5.0)
    diagnosis = diagnose(rows, SPEC, expectation, nodes)
    assert kinds(diagnosis) == [("segment", ("h6", "h7"))]
    assert "bisect level 2: the half h6, h7 reaches 0.5 GB/s" in diagnosis.findings[0].evidence


def test_full_below_expectation_explained_by_a_node_is_a_note_not_a_segment():
    nodes = layout(4)
    rows = pair_rows(nodes, lambda a, b: 0.1 if "h0" in (a, b) else 1.0)
    rows += repeated([doctor_row("full", "all", 0.1, nodes["hosts"], [0, 1, 2, 3])])
    expectation = Expectation("--expect-busbw", {"full": 1.0, "pair": 1.0}, 5.0)
    diagnosis = diagnose(rows, SPEC, expectation, nodes)
    assert kinds(diagnosis) == [("node", ("h0",))]
    assert any("full all-reduce 0.1 GB/s" in note for note in diagnosis.notes)


def test_the_full_all_reduce_is_not_judged_against_the_fleet():
    nodes = layout(4)
    rows = pair_rows(nodes, lambda a, b: 1.0)
    rows += repeated([doctor_row("full", "all", 0.01, nodes["hosts"], [0, 1, 2, 3])])
    assert diagnose(rows, SPEC, FLEET_EXPECTATION, nodes).healthy


# --- notes ------------------------------------------------------------------------------


def test_one_node_says_so_and_judges_the_intra_node_stage_against_an_expectation():
    nodes = layout(1, per_host=4)
    rows = all_reduce_rows(nodes, "intra", lambda group: 2.0)
    diagnosis = diagnose(rows, SPEC, FLEET_EXPECTATION, nodes)
    assert diagnosis.healthy is None and diagnosis.matrix_gbps == ((None,),)
    assert diagnosis.reason.startswith(
        "no stage could be judged (intra: a fleet median needs 3 nodes"
    )
    assert any(
        note.startswith("intra stage not judged: a fleet median needs 3 nodes, this run has 1")
        for note in diagnosis.notes
    )
    slow = diagnose(rows, SPEC, Expectation("--expect-busbw", {"intra": 5.0}, 5.0), nodes)
    assert kinds(slow) == [("node", ("h0",))]
    fine = diagnose(rows, SPEC, Expectation("--expect-busbw", {"intra": 2.0}, 5.0), nodes)
    assert fine.healthy is True and fine.judged == ("intra",)


def test_skipped_stages_become_notes():
    nodes = {**layout(1), "skipped": {"pair": "one node", "rail": "one node"}}
    diagnosis = diagnose([], SPEC, FLEET_EXPECTATION, nodes)
    assert diagnosis.notes == ("pair stage skipped: one node", "rail stage skipped: one node")


def test_a_small_size_warns_that_it_measures_latency():
    nodes = layout(4)
    rows = pair_rows(nodes, lambda a, b: 1.0)
    rows = [row.__class__(**{**row.to_dict(), "size_bytes": 64 * 1024}) for row in rows]
    notes = diagnose(rows, SPEC, FLEET_EXPECTATION, nodes).notes
    assert "size 64 KiB measures latency more than bandwidth: use --size 1M or more" in notes
