"""all_gather: every rank ends with all ranks' inputs, in rank order."""

from __future__ import annotations

from typing import Any

from collbench.core.collectives.base import (
    PLACEMENTS,
    Block,
    Collective,
    Geometry,
    ring_factor,
)


def _geometry(size_bytes: int, elem_bytes: int, world_size: int, rank: int) -> Geometry:
    per_rank = size_bytes // elem_bytes // world_size
    total = per_rank * world_size
    return Geometry(total * elem_bytes, per_rank, per_rank, total, rank * per_rank, 0)


def _bind(send, recv, ctx):
    gather = getattr(ctx.dist, "all_gather_single", None) or ctx.dist.all_gather_into_tensor

    def run(async_op: bool = False) -> Any:
        return gather(recv, send, async_op=async_op)

    return run


def _expected(geometry: Geometry, rank: int, world_size: int) -> list[Block]:
    chunk = geometry.send_elems
    return [Block(peer * chunk, chunk, 0, peer) for peer in range(world_size)]


COLLECTIVE = Collective(
    name="all_gather",
    bus_factor=ring_factor,
    geometry=_geometry,
    reduces=False,
    root=-1,
    placements=PLACEMENTS,
    bind=_bind,
    expected=_expected,
    nccl_tests_names=("allgather",),
    traffic="gather",
)
