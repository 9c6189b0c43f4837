"""Geometry, bus factors and data-check blocks of every collective (nccl-tests conventions)."""

import pytest

from collbench.core.bandwidth import algbw_gbps, bus_factor, busbw_gbps
from collbench.core.collectives import REGISTRY


@pytest.mark.parametrize(
    "name, n, factor",
    [
        ("all_reduce", 2, 1.0),
        ("all_reduce", 3, 4 / 3),
        ("all_reduce", 8, 1.75),
        ("all_reduce", 1, 0.0),
        ("all_gather", 2, 0.5),
        ("all_gather", 3, 2 / 3),
        ("reduce_scatter", 8, 0.875),
        ("all_to_all", 4, 0.75),
        ("broadcast", 8, 1.0),
        ("reduce", 3, 1.0),
        ("sendrecv", 5, 1.0),
    ],
)
def test_bus_factors_match_nccl_tests(name, n, factor):
    assert bus_factor(name, n) == pytest.approx(factor)


def test_bandwidth_reproduces_an_nccl_tests_line():
    # 8-rank all_reduce, 8 GiB in 63896 us: nccl-tests printed algbw 134.44, busbw 235.26.
    assert algbw_gbps(8589934592, 63896) == pytest.approx(134.44, abs=0.005)
    assert busbw_gbps("all_reduce", 8, 8589934592, 63896) == pytest.approx(235.26, abs=0.01)
    assert algbw_gbps(0, 30.0) == 0.0
    assert algbw_gbps(100, 0.0) == 0.0


@pytest.mark.parametrize("name", sorted(REGISTRY))
@pytest.mark.parametrize("n", [1, 2, 3, 8])
@pytest.mark.parametrize("size, elem", [(0, 4), (8, 4), (1000, 2), (1 << 20, 4), (12345, 8)])
def test_geometry_follows_nccl_tests(name, n, size, elem):
    coll = REGISTRY[name]
    geometry = coll.geometry(size, elem, n, n - 1)
    assert geometry.size_bytes <= size
    assert geometry.size_bytes == max(geometry.send_elems, geometry.recv_elems) * elem
    if name in ("all_gather", "reduce_scatter", "all_to_all"):
        # aligned down to a multiple of world size x element size; count is per rank/peer
        assert geometry.size_bytes % (n * elem) == 0
        assert geometry.count * n * elem == geometry.size_bytes
        assert size - geometry.size_bytes < n * elem
    else:
        assert geometry.count == size // elem
    buffer = max(geometry.send_elems, geometry.recv_elems)
    assert geometry.inplace_send_offset + geometry.send_elems <= buffer
    assert geometry.inplace_recv_offset + geometry.recv_elems <= buffer


@pytest.mark.parametrize("name", sorted(REGISTRY))
@pytest.mark.parametrize("n", [1, 2, 3])
def test_expected_blocks_tile_the_output_once(name, n):
    coll = REGISTRY[name]
    for rank in range(n):
        geometry = coll.geometry(4096 * 3, 4, n, rank)
        blocks = coll.expected(geometry, rank, n)
        covered = sorted((b.out_start, b.out_start + b.length) for b in blocks)
        if name == "reduce" and rank != 0:
            assert covered == []
            continue
        assert covered[0][0] == 0 and covered[-1][1] == geometry.recv_elems
        assert all(a[1] == b[0] for a, b in zip(covered, covered[1:], strict=False))
        for block in blocks:
            assert block.in_offset + block.length <= geometry.send_elems


def test_registry_slots_are_consistent():
    for name, coll in REGISTRY.items():
        assert coll.name == name
        assert coll.placements and set(coll.placements) <= {"out_of_place", "in_place"}
        assert coll.root in (-1, 0)
        if len(coll.placements) < 2:
            assert coll.placement_note, f"{name} must say why a placement is missing"


def test_every_collective_fills_the_slots_import_and_the_cost_model_read():
    """Adding a collective is one module: nothing else keeps a list of them."""
    from collbench.analysis.imports.nccl_rows import PROGRAMS
    from collbench.analysis.model.costmodel import AUTO_CHOICES, MODELS, TRAFFIC_MODELS

    for name, collective in REGISTRY.items():
        assert collective.traffic in TRAFFIC_MODELS, name
        assert set(AUTO_CHOICES[name]) <= set(MODELS[name]), name
        assert collective.nccl_tests_names, name
        assert all(PROGRAMS[alias] == name for alias in collective.nccl_tests_names)
