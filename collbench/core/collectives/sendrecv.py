"""sendrecv: each rank sends to its ring successor and receives from its predecessor."""

from __future__ import annotations

from typing import Any

from collbench.core.collectives.base import (
    OUT_OF_PLACE,
    Block,
    Collective,
    Geometry,
    flat_geometry,
    unit_factor,
)


def _bind(send, recv, ctx):
    dist = ctx.dist
    successor = (ctx.rank + 1) % ctx.world_size
    predecessor = (ctx.rank - 1) % ctx.world_size
    # Batched so NCCL posts both sides together; posting them one by one can deadlock.
    ops = [dist.P2POp(dist.isend, send, successor), dist.P2POp(dist.irecv, recv, predecessor)]

    batch = dist.batch_isend_irecv

    def run(async_op: bool = False) -> Any:
        works = batch(ops)
        if async_op:
            return works
        for work in works:
            work.wait()
        return None

    return run


def _expected(geometry: Geometry, rank: int, world_size: int) -> list[Block]:
    return [Block(0, geometry.recv_elems, 0, (rank - 1) % world_size)]


COLLECTIVE = Collective(
    name="sendrecv",
    bus_factor=unit_factor,
    geometry=flat_geometry,
    reduces=False,
    root=-1,
    placements=(OUT_OF_PLACE,),
    bind=_bind,
    expected=_expected,
    min_world_size=2,
    placement_note="sending and receiving through one buffer races, so only out_of_place "
    "is measured",
    nccl_tests_names=("sendrecv",),
    traffic="point_to_point",
)
