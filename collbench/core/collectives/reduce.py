"""reduce: the root (rank 0) ends with the reduction of all inputs."""

from __future__ import annotations

from typing import Any

from collbench.core.collectives.base import (
    IN_PLACE,
    Block,
    Collective,
    Geometry,
    flat_geometry,
    unit_factor,
)

ROOT = 0


def _bind(send, recv, ctx):
    reduce, op = ctx.dist.reduce, ctx.reduce_op

    def run(async_op: bool = False) -> Any:
        return reduce(recv, dst=ROOT, op=op, async_op=async_op)

    return run


def _expected(geometry: Geometry, rank: int, world_size: int) -> list[Block]:
    # Only the root's buffer is defined after a reduce.
    return [Block(0, geometry.recv_elems, 0, None)] if rank == ROOT else []


COLLECTIVE = Collective(
    name="reduce",
    bus_factor=unit_factor,
    geometry=flat_geometry,
    reduces=True,
    root=ROOT,
    placements=(IN_PLACE,),
    bind=_bind,
    expected=_expected,
    placement_note="torch.distributed.reduce works in place only (one tensor)",
    nccl_tests_names=("reduce",),
    traffic="chain",
)
