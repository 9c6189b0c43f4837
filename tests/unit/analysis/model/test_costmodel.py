"""The collective cost model: hand-computed tables, physical invariants, the real logs."""

from __future__ import annotations

import math

import pytest

from collbench.analysis.fit.vs_topology import compare_rows, run_placement
from collbench.analysis.model.costmodel import (
    AUTO_CHOICES,
    MODELS,
    Efficiency,
    Group,
    group_for,
    predict,
)
from collbench.core.bandwidth import bus_factor
from collbench.core.errors import EXIT_USAGE, SpecError
from collbench.topologies.schema import Topology, TopologyError, topology_from_dict
from tests.helpers import SHARED_DATA, require_shared_data
from tests.nccl_table import read_nccl_table
from tests.rows import make_row

COLLECTIVES = tuple(MODELS)
KIB, MIB, GIB = 1024, 1024**2, 1024**3
SIZES = [8, 4 * KIB, 256 * KIB, 16 * MIB, GIB, 16 * GIB]
REAL_LOGS = SHARED_DATA / "nccl-tests"


def _topology(
    nodes: int = 2,
    per_node: int = 8,
    up_gbytes_s: float = 450.0,
    domain: int | None = None,
    fabric: str = "switch",
    nics: int | None = 8,
    nic_gbits_s: float = 200.0,
    **scale_out,
) -> Topology:
    """An HGX-like fabric; `nics=None` drops the scale-out network."""
    data = {
        "name": "test",
        "nodes": nodes,
        "accelerators_per_node": per_node,
        "accelerator": {"name": "gpu", "peak_bf16_tflops": 100.0},
        "scale_up": {
            "kind": "nvlink",
            "bandwidth_gbytes_s": up_gbytes_s,
            "latency_us": 1.0,
            "domain_size": domain or per_node,
            "fabric": fabric,
        },
    }
    if nics is not None:
        data["scale_out"] = {
            "kind": "infiniband",
            "nics_per_node": nics,
            "nic_gbits_s": nic_gbits_s,
            "latency_us": 5.0,
            **scale_out,
        }
    return topology_from_dict(data)


# The three systems of the real logs in shared/data/nccl-tests, with their datasheet figures.
A100 = _topology(nodes=1, up_gbytes_s=300.0, nics=None)  # NVLink3: 12 links x 25 GB/s
MI300X = _topology(nodes=1, up_gbytes_s=448.0, fabric="mesh", nics=None)  # 7 xGMI x 64 GB/s
A3_MEGA = _topology(nodes=2, up_gbytes_s=450.0, nics=8, nic_gbits_s=200.0)  # TCPXO 8 x 200
NVL72 = _topology(nodes=36, per_node=4, up_gbytes_s=900.0, domain=72, nics=4, nic_gbits_s=400.0)
TOPOLOGIES = {
    "a100": A100,
    "mi300x": MI300X,
    "a3-mega": A3_MEGA,
    "nvl72": NVL72,
    "4-nics": _topology(nodes=4, nics=4, nic_gbits_s=400.0),
    "tapered": _topology(nodes=4, oversubscription=2.0),
}


def _groups(topology: Topology) -> list[Group]:
    """One rank, part of a domain, one domain, strided, and everything."""
    world = topology.world_size
    shapes = [(1, 1), (2, 1), (topology.scale_up.domain_size, 1), (world, 1)]
    if topology.nodes > 1:
        shapes.append((topology.nodes, topology.accelerators_per_node))
    return [group_for(topology, min(ranks, world), stride) for ranks, stride in shapes]


def _cases():
    for name, topology in TOPOLOGIES.items():
        for group in _groups(topology):
            for collective in COLLECTIVES:
                yield pytest.param(
                    topology,
                    group,
                    collective,
                    id=f"{name}-{group.ranks}x{group.ranks_per_domain}-{collective}",
                )


# ---------------------------------------------------------------- hand-computed values


@pytest.mark.parametrize(
    "topology, collective, size, algorithm, time_us, busbw_gbps",
    [
        # ring all-reduce in one node: 2(p-1) hops of 1 us, 2(p-1)/p S at 300 GB/s
        (
            A100,
            "all_reduce",
            GIB,
            "ring",
            14 + 1.75 * GIB / 300e3,
            300 * GIB / (GIB + 14 * 300e3 / 1.75),
        ),
        # across 2 nodes the ring is NIC-bound: 16 hops inside, 2 across (5 us), 1.875 S at 200
        (A3_MEGA, "all_reduce", GIB, "ring", 28 + 10 + 1.875 * GIB / 200e3, None),
        # the tree: 2 x (7 hops inside + 1 across); each node's NICs carry S: algbw 200
        (A3_MEGA, "all_reduce", GIB, "tree", 2 * (7 + 5) + GIB / 200e3, None),
        (A3_MEGA, "all_gather", GIB, "ring", 14 + 5 + 15 / 16 * GIB / 200e3, None),
        # one rail (200 Gb/s = 25 GB/s) carries the half that crosses to the other node
        (A3_MEGA, "all_to_all", GIB, "pairwise", 1 + 5 + GIB / 2 / 25e3, None),
        (A3_MEGA, "sendrecv", GIB, "direct", 5 + GIB / 25e3, None),
        # a mesh: one xGMI link (448 / 7 = 64 GB/s) between two peers
        (MI300X, "sendrecv", GIB, "direct", 1 + GIB / 64e3, 64 * GIB / (GIB + 64e3)),
        (MI300X, "broadcast", GIB, "ring", 7 + GIB / 448e3, None),
    ],
)
def test_hand_computed_predictions(topology, collective, size, algorithm, time_us, busbw_gbps):
    prediction = predict(topology, collective, size, algorithm=algorithm)
    assert prediction.algorithm == algorithm
    assert prediction.time_s * 1e6 == pytest.approx(time_us, rel=1e-9)
    expected_busbw = size / (time_us * 1e3) * bus_factor(collective, topology.world_size)
    assert prediction.busbw_gbps == pytest.approx(busbw_gbps or expected_busbw, rel=1e-9)


@pytest.mark.parametrize(
    "topology, collective, algorithm, peak_busbw_gbps",
    [
        (A100, "all_reduce", "ring", 300.0),
        (MI300X, "all_reduce", "ring", 448.0),  # the mesh's aggregate: RCCL's several rings
        (A3_MEGA, "all_reduce", "ring", 200.0),  # the node's NICs: 8 x 200 Gb/s
        (A3_MEGA, "all_reduce", "tree", 2 * 15 / 16 * 200.0),  # 375: twice the ring on 2 nodes
        (A3_MEGA, "all_reduce", "hierarchical", 375.0),
        (A3_MEGA, "reduce_scatter", "ring", 200.0),
        (A3_MEGA, "broadcast", "ring", 200.0),
        (TOPOLOGIES["tapered"], "all_reduce", "ring", 100.0),  # 2:1 oversubscription
        (TOPOLOGIES["4-nics"], "all_reduce", "ring", 200.0),  # 4 x 400 Gb/s
        (NVL72, "all_reduce", "ring", 900.0),  # 2 racks: 18 x 4 x 400 Gb/s per rack > NVLink
    ],
)
def test_peak_busbw_is_the_level_bound(topology, collective, algorithm, peak_busbw_gbps):
    prediction = predict(topology, collective, 4 * GIB, algorithm=algorithm)
    assert prediction.peak_busbw_gbps == pytest.approx(peak_busbw_gbps, rel=1e-9)


@pytest.mark.parametrize(
    "ranks, stride, per_domain, per_node",
    [
        (None, 1, 8, 8),  # the whole topology (4 nodes)
        (8, 1, 8, 8),  # TP 8: one node
        (4, 1, 4, 4),
        (4, 8, 1, 1),  # DP ranks tp=8 apart: one per node
        (4, 2, 4, 4),  # tp=2: four DP ranks share a node
        (16, 2, 4, 4),
    ],
)
def test_group_for_places_ranks_every_stride(ranks, stride, per_domain, per_node):
    group = group_for(_topology(nodes=4), ranks, stride)
    assert (group.ranks_per_domain, group.ranks_per_node) == (per_domain, per_node)
    assert group.ranks == (ranks or 32)


def test_group_for_a_rack_scale_domain():
    group = group_for(NVL72, 144, stride=1)
    assert (group.ranks_per_domain, group.domains, group.ranks_per_node) == (72, 2, 4)
    assert group_for(NVL72, 16, stride=8).ranks_per_domain == 9  # 72 // 8 in one rack


@pytest.mark.parametrize(
    "make, field",
    [
        (lambda: Group(0, 1), "group.ranks"),
        (lambda: Group(4, 5), "group.ranks_per_domain"),
        (lambda: Group(4, 2, 0), "group.ranks_per_node"),
        (lambda: group_for(A100, 4, 0), "stride"),
        (lambda: Efficiency(scale_up=0.0), "efficiency.scale_up"),
        (lambda: Efficiency(scale_out=1.5), "efficiency.scale_out"),
        (lambda: predict(A100, "all_reduce", -1), "size_bytes"),
        (lambda: predict(A100, "gather", 8), "collective"),
        (lambda: predict(A100, "all_gather", 8, algorithm="tree"), "algorithm"),
    ],
)
def test_bad_input_names_the_field(make, field):
    with pytest.raises(SpecError) as error:
        make()
    assert error.value.field == field and error.value.exit_code == EXIT_USAGE


# ---------------------------------------------------------------- invariants


@pytest.mark.parametrize("topology, group, collective", list(_cases()))
def test_time_increases_with_size(topology, group, collective):
    if group.ranks == 1:
        return
    times = [predict(topology, collective, size, group).time_s for size in SIZES]
    assert all(later > earlier for earlier, later in zip(times, times[1:], strict=False))


def _least_bytes_out(collective: str, group: Group) -> float:
    """The fewest bytes per S that one domain must send out, whatever the algorithm."""
    p, d, k = group.ranks, group.ranks_per_domain, group.domains
    return {
        "all_reduce": 2 * (k - 1) / k,
        "all_gather": (k - 1) / k,
        "reduce_scatter": (k - 1) / k,
        "broadcast": 1.0,
        "reduce": 1.0,
        "all_to_all": d * (p - d) / p,
        "sendrecv": 1.0,
    }[collective]


def _least_bytes_up(collective: str, group: Group) -> float:
    """The fewest bytes per S that one accelerator must send to its domain's peers."""
    d = group.ranks_per_domain
    return {
        "all_reduce": 2 * (d - 1) / d,
        "all_gather": (d - 1) / d,
        "reduce_scatter": (d - 1) / d,
        "broadcast": 1.0,
        "reduce": 1.0,
        "all_to_all": (d - 1) / group.ranks,
        "sendrecv": 1.0,
    }[collective]


@pytest.mark.parametrize(
    "topology, group, collective", [case for case in _cases() if case.values[1].ranks > 1]
)  # one rank crosses no level: nothing to bound
def test_no_algorithm_beats_the_bound_of_a_level_it_crosses(topology, group, collective):
    """algbw <= level bandwidth / the bytes per S that must cross it, for every algorithm."""
    up = topology.scale_up.bandwidth_gbytes_s
    rail = topology.node_scale_out_gbytes_s / topology.accelerators_per_node
    domain_out = (
        rail
        * group.ranks_per_domain
        / (topology.scale_out.oversubscription if topology.scale_out else 1.0)
    )
    for algorithm in MODELS[collective]:
        algbw = predict(topology, collective, 64 * GIB, group, algorithm).algbw_gbps
        if group.ranks_per_domain > 1:
            assert algbw <= up / _least_bytes_up(collective, group) * (1 + 1e-9)
        if group.domains > 1:
            if collective == "sendrecv":  # one rank's rail, not the whole domain
                domain_out = rail
            assert algbw <= domain_out / _least_bytes_out(collective, group) * (1 + 1e-9)


@pytest.mark.parametrize("name", ["a3-mega", "4-nics", "tapered", "nvl72"])
@pytest.mark.parametrize(
    "collective", ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"]
)
def test_ring_busbw_across_nodes_stays_under_the_node_nics(name, collective):
    topology = TOPOLOGIES[name]
    group = group_for(topology, topology.world_size)
    prediction = predict(topology, collective, 64 * GIB, group, "ring")
    oversubscription = topology.scale_out.oversubscription
    per_domain = topology.node_scale_out_gbytes_s * topology.nodes_per_domain / oversubscription
    assert group.domains > 1 and prediction.busbw_gbps <= per_domain * (1 + 1e-9)


@pytest.mark.parametrize("collective", COLLECTIVES)
@pytest.mark.parametrize("size", SIZES)
def test_a_group_inside_one_domain_never_touches_scale_out(collective, size):
    slow = _topology(nodes=4, nic_gbits_s=1.0, latency_us=1e6)
    fast = _topology(nodes=4, nic_gbits_s=3200.0, latency_us=0.0)
    for group in (group_for(slow, 8), group_for(NVL72, 72, 1)):
        topologies = (slow, fast) if group.ranks == 8 else (NVL72, NVL72)
        first, second = (predict(topology, collective, size, group) for topology in topologies)
        assert first.scale_out_s == 0 and first.bottleneck != "scale_out"
        assert first.time_s == second.time_s


@pytest.mark.parametrize(
    "topology, group, collective",
    [case for case in _cases() if case.values[0].scale_out is not None],
)  # without scale-out there is no bandwidth to double
def test_twice_the_scale_out_bandwidth_is_never_slower(topology, group, collective):
    faster = topology.with_nodes(topology.nodes)
    faster = topology_from_dict(
        {
            **_as_dict(faster),
            "scale_out": {
                **_as_dict(faster)["scale_out"],
                "nic_gbits_s": 2 * topology.scale_out.nic_gbits_s,
            },
        }
    )
    for size in SIZES:
        assert (
            predict(faster, collective, size, group).time_s
            <= predict(topology, collective, size, group).time_s
        )


def _as_dict(topology: Topology) -> dict:
    from collbench.topologies.schema import to_dict

    return to_dict(topology)


@pytest.mark.parametrize(
    "nodes, speedup",
    [
        (2, (2 / 450) / (1 / 200)),  # the tree's chain (2S at 450 GB/s) now limits, not S at 200
        (4, 0.5),  # still NIC bound: half the time (latency aside)
    ],
)
def test_twice_the_scale_out_bandwidth_speeds_up_large_multi_node_all_reduce(nodes, speedup):
    topology = A3_MEGA.with_nodes(nodes)
    data = _as_dict(topology)
    doubled = topology_from_dict({**data, "scale_out": {**data["scale_out"], "nic_gbits_s": 400.0}})
    before, after = (predict(fabric, "all_reduce", 4 * GIB) for fabric in (topology, doubled))
    assert before.bottleneck == "scale_out"
    assert after.time_s / before.time_s == pytest.approx(speedup, rel=5e-3)


@pytest.mark.parametrize("topology, group, collective", list(_cases()))
def test_tiny_sizes_are_latency_bound(topology, group, collective):
    if group.ranks == 1:
        return
    prediction = predict(topology, collective, 8, group)
    assert prediction.bottleneck == "latency"
    assert prediction.time_s == pytest.approx(prediction.latency_s, rel=1e-3)


@pytest.mark.parametrize("size", [256 * MIB, GIB, 16 * GIB])
def test_tree_beats_ring_at_large_sizes_across_two_nodes(size):
    prediction = predict(A3_MEGA, "all_reduce", size)
    ring, tree = (
        predict(A3_MEGA, "all_reduce", size, algorithm=name).time_s for name in ("ring", "tree")
    )
    assert prediction.algorithm == "tree"
    assert tree < 0.6 * ring


@pytest.mark.parametrize("topology", [A100, MI300X, A3_MEGA])
@pytest.mark.parametrize("size", SIZES)
def test_ring_is_not_slower_than_tree_inside_one_node(topology, size):
    group = group_for(topology, 8)
    ring, tree = (
        predict(topology, "all_reduce", size, group, name).time_s for name in ("ring", "tree")
    )
    assert ring <= tree and predict(topology, "all_reduce", size, group).algorithm == "ring"


@pytest.mark.parametrize("collective", COLLECTIVES)
def test_auto_is_the_fastest_of_what_nccl_chooses_from(collective):
    for size in SIZES:
        prediction = predict(A3_MEGA, collective, size)
        choices = AUTO_CHOICES[collective]
        times = [predict(A3_MEGA, collective, size, algorithm=name).time_s for name in choices]
        assert prediction.algorithm in choices
        assert prediction.time_s == min(times)


@pytest.mark.parametrize("collective", COLLECTIVES)
def test_one_rank_moves_nothing(collective):
    prediction = predict(A3_MEGA, collective, GIB, Group(1, 1))
    assert (prediction.time_s, prediction.algorithm, prediction.busbw_gbps) == (0.0, "local", 0.0)


def test_spanning_domains_without_scale_out_is_one_line_exit_2():
    with pytest.raises(TopologyError) as error:
        predict(A100, "all_reduce", GIB, Group(16, 8))
    message = str(error.value)
    assert error.value.exit_code == EXIT_USAGE and "\n" not in message
    assert message.startswith("scale_out:") and "2 scale-up domains" in message


def test_efficiency_scales_the_bandwidth_terms_only():
    full = predict(A3_MEGA, "all_reduce", GIB)
    part = predict(A3_MEGA, "all_reduce", GIB, efficiency=Efficiency.uniform(0.5))
    assert part.latency_s == full.latency_s
    assert part.scale_out_s == pytest.approx(2 * full.scale_out_s, rel=1e-12)
    assert part.peak_busbw_gbps == pytest.approx(full.peak_busbw_gbps / 2, rel=1e-12)
    assert predict(A3_MEGA, "all_reduce", GIB, efficiency=Efficiency()) == full


def test_a_mesh_gives_one_link_per_pair_and_the_aggregate_to_collectives():
    switch = _topology(nodes=1, up_gbytes_s=448.0, nics=None)
    for collective in ("all_reduce", "all_gather", "all_to_all"):
        assert predict(MI300X, collective, GIB).time_s == pytest.approx(
            predict(switch, collective, GIB).time_s, rel=1e-12
        )
    assert predict(MI300X, "sendrecv", GIB).peak_busbw_gbps == pytest.approx(64.0)
    # four of the eight: the links to 3 peers of the 7
    assert predict(
        MI300X, "all_reduce", GIB, group_for(MI300X, 4), "ring"
    ).peak_busbw_gbps == pytest.approx(3 * 64.0)


def test_strided_groups_share_the_node_nics():
    """DP ranks one per node (tp=8 beside them) get one rail each, not the whole node."""
    topology = _topology(nodes=4)
    prediction = predict(topology, "all_reduce", 16 * GIB, group_for(topology, 4, 8), "ring")
    assert prediction.peak_busbw_gbps == pytest.approx(25.0)


# ---------------------------------------------------------------- the real logs


@pytest.mark.parametrize(
    "log, topology, peak_busbw_gbps",
    [
        ("nccl_legacy_a100_1node_allreduce.txt", A100, 300.0),
        ("rccl_mi300x_1node_xgmi_allreduce.txt", MI300X, 448.0),
        ("nccl_h100_a3mega_2node_tcpxo_allreduce.txt", A3_MEGA, 375.0),
    ],
)
def test_real_logs_reach_70_to_100_percent_of_the_bound(log, topology, peak_busbw_gbps):
    require_shared_data(REAL_LOGS)
    table = read_nccl_table(REAL_LOGS / log)
    group = run_placement(topology, table.world_size, topology.nodes, None).group
    measured, size, time_us = max(
        zip(table.busbw_gbps, table.sizes_bytes, table.times_us, strict=True)
    )
    prediction = predict(topology, "all_reduce", size, group)
    assert prediction.peak_busbw_gbps == pytest.approx(peak_busbw_gbps)
    assert 0.70 <= measured / prediction.busbw_gbps <= 1.0
    assert prediction.time_s * 1e6 / time_us == pytest.approx(
        measured / prediction.busbw_gbps, rel=0.01
    )  # the time ratio is the busbw ratio


@pytest.mark.parametrize(
    "log, name",
    [
        ("nccl_legacy_a100_1node_allreduce.txt", "dgx-a100"),
        ("rccl_mi300x_1node_xgmi_allreduce.txt", "mi300x"),
        ("nccl_h100_a3mega_2node_tcpxo_allreduce.txt", "a3-mega"),
    ],
)
def test_real_logs_against_the_catalog(log, name):
    from collbench.topologies.loader import catalog_names, load_topology

    require_shared_data(REAL_LOGS)
    assert name in catalog_names(), f"topology {name!r} left the catalog"
    table = read_nccl_table(REAL_LOGS / log)
    nodes = 2 if table.world_size == 16 else 1
    rows = [
        make_row(world_size=table.world_size, nodes=nodes, size_bytes=size, time_us=time)
        for size, time in zip(table.sizes_bytes, table.times_us, strict=True)
    ]
    comparison = compare_rows(load_topology(name), rows)
    large = comparison.bands[-1]
    assert large.band == "large" and 0.65 <= large.largest.ratio <= 1.0


# ---------------------------------------------------------------- placement of a run


@pytest.mark.parametrize(
    "world, nodes, per_node, expect_domain, expect_notes",
    [
        (16, 2, 8, 8, 0),
        (8, 1, 8, 8, 0),
        (64, 8, 8, 8, 1),  # bigger than the 2-node topology: compared on 8 nodes, with a note
        (16, 1, 16, 16, 1),  # 16 ranks packed on an 8-accelerator node share it
        (16, None, None, 8, 0),  # placement unknown: nodes filled in order
    ],
)
def test_run_placement(world, nodes, per_node, expect_domain, expect_notes):
    placement = run_placement(A3_MEGA, world, nodes, per_node)
    assert placement.group.ranks == world and placement.group.ranks_per_domain == expect_domain
    assert len(placement.notes) == expect_notes
    assert placement.topology.world_size >= math.ceil(world / placement.ranks_per_node) * min(
        placement.ranks_per_node, 8
    )


def test_compare_rows_ratio_is_predicted_over_measured_time():
    model = predict(A3_MEGA, "all_reduce", GIB)
    rows = [
        make_row(world_size=16, nodes=2, size_bytes=GIB, time_us=model.time_s * 1e6 * factor)
        for factor in (2, 2, 9)
    ]
    comparison = compare_rows(A3_MEGA, rows)
    (item,) = comparison.sizes
    assert item.ratio == pytest.approx(0.5) and comparison.bands[0].band == "large"
    assert item.measured_busbw_gbps == pytest.approx(model.busbw_gbps / 2)
    data = comparison.to_dict()
    assert data["measure"].startswith("% of model speed = predicted time / measured time")
    assert data["bands"][0]["pct_of_model_speed_geomean"] == pytest.approx(50.0)
