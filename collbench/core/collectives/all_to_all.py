"""all_to_all: rank r sends its chunk j to rank j and receives rank j's chunk r."""

from __future__ import annotations

from typing import Any

from collbench.core.collectives.base import (
    OUT_OF_PLACE,
    Block,
    Collective,
    Geometry,
    ring_factor,
)


def _geometry(size_bytes: int, elem_bytes: int, world_size: int, rank: int) -> Geometry:
    per_peer = size_bytes // elem_bytes // world_size
    total = per_peer * world_size
    return Geometry(total * elem_bytes, per_peer, total, total)


def _bind(send, recv, ctx):
    all_to_all = ctx.dist.all_to_all_single

    def run(async_op: bool = False) -> Any:
        return all_to_all(recv, send, async_op=async_op)

    return run


def _expected(geometry: Geometry, rank: int, world_size: int) -> list[Block]:
    chunk = geometry.count
    return [Block(peer * chunk, chunk, rank * chunk, peer) for peer in range(world_size)]


COLLECTIVE = Collective(
    name="all_to_all",
    bus_factor=ring_factor,
    geometry=_geometry,
    reduces=False,
    root=-1,
    placements=(OUT_OF_PLACE,),
    bind=_bind,
    expected=_expected,
    placement_note="all_to_all_single with the same tensor as input and output is not "
    "safe on every backend, so only out_of_place is measured",
    nccl_tests_names=("alltoall",),
    traffic="all_to_all",
)
