"""The slots every collective fills (as nccl-tests does, one small unit per collective).

Nothing here imports torch: the CLI reads the registry to validate input before any rank
starts. `bind` receives the torch objects through `RankContext`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

OUT_OF_PLACE = "out_of_place"
IN_PLACE = "in_place"
PLACEMENTS = (OUT_OF_PLACE, IN_PLACE)


@dataclass(frozen=True)
class Geometry:
    """Buffer sizes for one requested size, following nccl-tests' conventions.

    `size_bytes` is nccl-tests' "size": max(send, recv) bytes per rank. `count` is the
    element count nccl-tests prints (per-rank send count for all-gather, per-rank receive
    count for reduce-scatter, per-peer count for all-to-all).
    """

    size_bytes: int
    count: int
    send_elems: int
    recv_elems: int
    # In-place layout (nccl-tests' send/recvInplaceOffset, in elements): where the send and
    # receive regions sit inside one shared buffer of max(send, recv) elements.
    inplace_send_offset: int = 0
    inplace_recv_offset: int = 0


@dataclass(frozen=True)
class Block:
    """What `recv[out_start : out_start + length]` must hold after one operation.

    `source_rank` set: that rank's input elements starting at `in_offset`.
    `source_rank` None: the reduction over all ranks of their inputs at `in_offset`.
    """

    out_start: int
    length: int
    in_offset: int
    source_rank: int | None


@dataclass(frozen=True)
class RankContext:
    """What a bound operation needs at run time (torch objects live here, not in modules)."""

    dist: Any  # the torch.distributed module
    rank: int
    world_size: int
    reduce_op: Any  # a torch.distributed.ReduceOp, or None for data-movement collectives


@dataclass(frozen=True, kw_only=True)
class Collective:
    """One collective: everything the shared sweep machinery needs to know about it."""

    name: str
    # nccl-tests' busbw correction factor for world size n.
    bus_factor: Callable[[int], float]
    # (requested size in bytes, element size, world size, rank) -> Geometry.
    geometry: Callable[[int, int, int, int], Geometry]
    reduces: bool = False
    root: int = -1  # -1 when the collective has no root (printed as nccl-tests does)
    placements: tuple[str, ...]
    # (send tensor, recv tensor, context) -> a closure `run(async_op=False)` that runs
    # exactly one operation: synchronously (returns None), or with async_op=True started in
    # the background (returns its torch Work, or a list of Works for point-to-point pairs).
    bind: Callable[[Any, Any, RankContext], Callable[..., Any]]
    # (geometry, rank, world size) -> the blocks of recv that the data check verifies.
    expected: Callable[[Geometry, int, int], list[Block]]
    min_world_size: int = 1
    # Why a placement is missing, shown when a user asks for it explicitly.
    placement_note: str = ""
    # nccl-tests' program names for it, lower case without `_perf` or underscores
    # (all_reduce_perf -> "allreduce"): how an imported log or its file name is recognized.
    nccl_tests_names: tuple[str, ...] = ()
    # How its bytes move, which picks its cost model (analysis/model/costmodel.py TRAFFIC_MODELS):
    # all_reduce, gather (all-gather, reduce-scatter), chain (broadcast, reduce), all_to_all,
    # point_to_point.
    traffic: str = ""


def ring_factor(world_size: int) -> float:
    """(n-1)/n: all-gather, reduce-scatter, all-to-all."""
    return (world_size - 1) / world_size


def unit_factor(world_size: int) -> float:
    """1: broadcast, reduce, send/recv."""
    return 1.0


def flat_geometry(size_bytes: int, elem_bytes: int, world_size: int, rank: int) -> Geometry:
    """Same count on send and receive: all-reduce, broadcast, reduce, send/recv."""
    count = size_bytes // elem_bytes
    return Geometry(count * elem_bytes, count, count, count)
