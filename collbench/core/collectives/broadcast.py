"""broadcast: every rank ends with the root's input (root 0, as nccl-tests' default)."""

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
    broadcast = ctx.dist.broadcast

    def run(async_op: bool = False) -> Any:
        return broadcast(recv, src=ROOT, async_op=async_op)

    return run


def _expected(geometry: Geometry, rank: int, world_size: int) -> list[Block]:
    return [Block(0, geometry.recv_elems, 0, ROOT)]


COLLECTIVE = Collective(
    name="broadcast",
    bus_factor=unit_factor,
    geometry=flat_geometry,
    reduces=False,
    root=ROOT,
    placements=(IN_PLACE,),
    bind=_bind,
    expected=_expected,
    placement_note="torch.distributed.broadcast works in place only (one tensor)",
    nccl_tests_names=("broadcast", "bcast"),
    traffic="chain",
)
