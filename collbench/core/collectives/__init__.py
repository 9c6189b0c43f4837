"""Registry of collectives: each one fills the slots of `Collective` (base.py), as nccl-tests
does, and adding one means adding one entry here."""

from __future__ import annotations

from functools import partial
from typing import Any

from collbench.core.collectives.base import (
    IN_PLACE,
    OUT_OF_PLACE,
    PLACEMENTS,
    Block,
    Collective,
    Geometry,
    RankContext,
    flat_geometry,
    ring_factor,
    unit_factor,
)

ROOT = 0  # broadcast's and reduce's root, as nccl-tests' default

# Each bind looks the torch function up once, not per call, and returns `run(async_op=False)`.


def _gather_geometry(size_bytes: int, elem_bytes: int, world_size: int, rank: int) -> Geometry:
    per_rank = size_bytes // elem_bytes // world_size
    total = per_rank * world_size
    return Geometry(total * elem_bytes, per_rank, per_rank, total, rank * per_rank, 0)


def _scatter_geometry(size_bytes: int, elem_bytes: int, world_size: int, rank: int) -> Geometry:
    per_rank = size_bytes // elem_bytes // world_size
    total = per_rank * world_size
    return Geometry(total * elem_bytes, per_rank, total, per_rank, 0, rank * per_rank)


def _all_to_all_geometry(size_bytes: int, elem_bytes: int, world_size: int, rank: int) -> Geometry:
    per_peer = size_bytes // elem_bytes // world_size
    total = per_peer * world_size
    return Geometry(total * elem_bytes, per_peer, total, total)


def _bind_all_gather(send, recv, ctx):
    gather = getattr(ctx.dist, "all_gather_single", None) or ctx.dist.all_gather_into_tensor
    return partial(gather, recv, send)


def _bind_reduce_scatter(send, recv, ctx):
    scatter = getattr(ctx.dist, "reduce_scatter_single", None) or ctx.dist.reduce_scatter_tensor
    return partial(scatter, recv, send, op=ctx.reduce_op)


def _bind_sendrecv(send, recv, ctx):
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


def _whole(geometry: Geometry, source_rank: int | None) -> list[Block]:
    """All of recv holds `source_rank`'s input (None: the reduction of all inputs)."""
    return [Block(0, geometry.recv_elems, 0, source_rank)]


_COLLECTIVES = (
    # all_reduce: every rank ends with the reduction of all inputs.
    Collective(
        name="all_reduce",
        bus_factor=lambda world_size: 2 * (world_size - 1) / world_size,
        geometry=flat_geometry,
        reduces=True,
        placements=(IN_PLACE,),
        bind=lambda send, recv, ctx: partial(ctx.dist.all_reduce, recv, op=ctx.reduce_op),
        expected=lambda geometry, rank, world_size: _whole(geometry, None),
        placement_note="torch.distributed.all_reduce works in place only (one tensor), so "
        "collbench does not fake an out-of-place variant with an extra copy",
        nccl_tests_names=("allreduce",),
        traffic="all_reduce",
    ),
    # all_gather: every rank ends with all ranks' inputs, in rank order.
    Collective(
        name="all_gather",
        bus_factor=ring_factor,
        geometry=_gather_geometry,
        placements=PLACEMENTS,
        bind=_bind_all_gather,
        expected=lambda geometry, rank, world_size: [
            Block(peer * geometry.send_elems, geometry.send_elems, 0, peer)
            for peer in range(world_size)
        ],
        nccl_tests_names=("allgather",),
        traffic="gather",
    ),
    # reduce_scatter: rank r ends with chunk r of the reduction of all inputs.
    Collective(
        name="reduce_scatter",
        bus_factor=ring_factor,
        geometry=_scatter_geometry,
        reduces=True,
        placements=PLACEMENTS,
        bind=_bind_reduce_scatter,
        expected=lambda geometry, rank, world_size: [
            Block(0, geometry.recv_elems, rank * geometry.recv_elems, None)
        ],
        nccl_tests_names=("reducescatter",),
        traffic="gather",
    ),
    # broadcast: every rank ends with the root's input.
    Collective(
        name="broadcast",
        bus_factor=unit_factor,
        geometry=flat_geometry,
        root=ROOT,
        placements=(IN_PLACE,),
        bind=lambda send, recv, ctx: partial(ctx.dist.broadcast, recv, src=ROOT),
        expected=lambda geometry, rank, world_size: _whole(geometry, ROOT),
        placement_note="torch.distributed.broadcast works in place only (one tensor)",
        nccl_tests_names=("broadcast", "bcast"),
        traffic="chain",
    ),
    # reduce: the root ends with the reduction of all inputs.
    Collective(
        name="reduce",
        bus_factor=unit_factor,
        geometry=flat_geometry,
        reduces=True,
        root=ROOT,
        placements=(IN_PLACE,),
        bind=lambda send, recv, ctx: partial(ctx.dist.reduce, recv, dst=ROOT, op=ctx.reduce_op),
        # Only the root's buffer is defined after a reduce.
        expected=lambda geometry, rank, world_size: _whole(geometry, None) if rank == ROOT else [],
        placement_note="torch.distributed.reduce works in place only (one tensor)",
        nccl_tests_names=("reduce",),
        traffic="chain",
    ),
    # all_to_all: rank r sends its chunk j to rank j and receives rank j's chunk r.
    Collective(
        name="all_to_all",
        bus_factor=ring_factor,
        geometry=_all_to_all_geometry,
        placements=(OUT_OF_PLACE,),
        bind=lambda send, recv, ctx: partial(ctx.dist.all_to_all_single, recv, send),
        expected=lambda geometry, rank, world_size: [
            Block(peer * geometry.count, geometry.count, rank * geometry.count, peer)
            for peer in range(world_size)
        ],
        placement_note="all_to_all_single with the same tensor as input and output is not "
        "safe on every backend, so only out_of_place is measured",
        nccl_tests_names=("alltoall",),
        traffic="all_to_all",
    ),
    # sendrecv: each rank sends to its ring successor and receives from its predecessor.
    Collective(
        name="sendrecv",
        bus_factor=unit_factor,
        geometry=flat_geometry,
        placements=(OUT_OF_PLACE,),
        bind=_bind_sendrecv,
        expected=lambda geometry, rank, world_size: _whole(geometry, (rank - 1) % world_size),
        min_world_size=2,
        placement_note="sending and receiving through one buffer races, so only out_of_place "
        "is measured",
        nccl_tests_names=("sendrecv",),
        traffic="point_to_point",
    ),
)

REGISTRY: dict[str, Collective] = {collective.name: collective for collective in _COLLECTIVES}

DEFAULT_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")

__all__ = ["REGISTRY", "DEFAULT_COLLECTIVES", "Block", "Collective", "Geometry", "RankContext"]
