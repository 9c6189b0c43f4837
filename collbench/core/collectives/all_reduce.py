"""all_reduce: every rank ends with the reduction of all inputs."""

from __future__ import annotations

from typing import Any

from collbench.core.collectives.base import IN_PLACE, Block, Collective, Geometry, flat_geometry


def _bus_factor(world_size: int) -> float:
    return 2 * (world_size - 1) / world_size


def _bind(send, recv, ctx):
    all_reduce, op = ctx.dist.all_reduce, ctx.reduce_op  # looked up once, not per call

    def run(async_op: bool = False) -> Any:
        return all_reduce(recv, op=op, async_op=async_op)

    return run


def _expected(geometry: Geometry, rank: int, world_size: int) -> list[Block]:
    return [Block(0, geometry.recv_elems, 0, None)]


COLLECTIVE = Collective(
    name="all_reduce",
    bus_factor=_bus_factor,
    geometry=flat_geometry,
    reduces=True,
    root=-1,
    placements=(IN_PLACE,),
    bind=_bind,
    expected=_expected,
    placement_note="torch.distributed.all_reduce works in place only (one tensor), so "
    "collbench does not fake an out-of-place variant with an extra copy",
    nccl_tests_names=("allreduce",),
    traffic="all_reduce",
)
