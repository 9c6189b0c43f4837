"""reduce_scatter: rank r ends with chunk r of the reduction of all inputs."""

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
    return Geometry(total * elem_bytes, per_rank, total, per_rank, 0, rank * per_rank)


def _bind(send, recv, ctx):
    scatter = getattr(ctx.dist, "reduce_scatter_single", None) or ctx.dist.reduce_scatter_tensor
    op = ctx.reduce_op

    def run(async_op: bool = False) -> Any:
        return scatter(recv, send, op=op, async_op=async_op)

    return run


def _expected(geometry: Geometry, rank: int, world_size: int) -> list[Block]:
    chunk = geometry.recv_elems
    return [Block(0, chunk, rank * chunk, None)]


COLLECTIVE = Collective(
    name="reduce_scatter",
    bus_factor=ring_factor,
    geometry=_geometry,
    reduces=True,
    root=-1,
    placements=PLACEMENTS,
    bind=_bind,
    expected=_expected,
    nccl_tests_names=("reducescatter",),
    traffic="gather",
)
