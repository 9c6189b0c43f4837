"""The doctor's process groups: one split per stage, destroyed after it, and what making
them cost.

A round's all-reduce groups are disjoint (one per node, per rail, per half), so one call
makes them all: torch.distributed.split_group, one ncclCommSplit over the world with every
rank giving its colour, where the backend can split (NCCL with a device bound to the world
group, which bench/distributed.py binds). Elsewhere (gloo; a torch without split_group)
every rank calls new_group for every group in the same order, as torch requires: for gloo a
rank outside a group only takes a name, and only the members connect. (NCCL without
split_group: each new_group is a split of the world that every rank joins, one per group,
the cost a single split avoids at a thousand GPUs.)

A round's groups live while its steps run back to back (a bisection level's repeats) and
are destroyed before the next round's are made: left alive, every node's, rail's and
half's communicator would hold GPU memory to the end. The seconds each stage spent making
groups (rank 0's wall time; the split returns once every rank has joined) go to meta.json
(doctor.group_setup) and the doctor's output.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

SPLIT_GROUP, NEW_GROUP = "split_group", "new_group"


class StageGroups:
    """This rank's group of the round that runs now, made when a round needs one and
    destroyed when another round starts (or at close)."""

    def __init__(self, dist: Any, rank: int) -> None:
        self.dist, self.rank = dist, rank
        self.method: str | None = None
        self.seconds: dict[str, float] = {}  # stage -> seconds spent making its groups
        self.made: dict[str, int] = {}  # stage -> groups made (every time they were made)
        self._key: tuple[str, int] | None = None
        self._pg: Any = None

    def enter(self, stage: str, round_index: int, members: Sequence[Sequence[int]]) -> Any:
        """This rank's group among `members` (None: the rank is in none of them), made
        once for consecutive steps of the same round."""
        key = (stage, round_index)
        if key == self._key:
            return self._pg
        self.close()
        started = time.perf_counter()
        self._pg, self.method = make_groups(self.dist, self.rank, members)
        elapsed = time.perf_counter() - started
        self.seconds[stage] = self.seconds.get(stage, 0.0) + elapsed
        self.made[stage] = self.made.get(stage, 0) + len(members)
        self._key = key
        return self._pg

    def close(self) -> None:
        """Destroy the current round's group (every member does so at the same step)."""
        if self._pg is not None:
            self.dist.destroy_process_group(self._pg)
        self._key, self._pg = None, None

    def record(self) -> dict[str, Any]:
        """What meta.json keeps (doctor.group_setup)."""
        return {
            "method": self.method,
            "seconds": {stage: round(value, 6) for stage, value in self.seconds.items()},
            "groups": dict(self.made),
            "total_s": round(sum(self.seconds.values()), 6),
        }


def make_groups(dist: Any, rank: int, members: Sequence[Sequence[int]]) -> tuple[Any, str]:
    """This rank's process group among the disjoint `members` lists (None when it is in
    none) and how they were made (SPLIT_GROUP or NEW_GROUP). Every rank must call it."""
    lists = [list(group) for group in members]
    if _can_split(dist):
        try:
            return dist.split_group(split_ranks=lists), SPLIT_GROUP
        except RuntimeError:
            # raised alike on every rank before any communication: the backend cannot
            # split (an RCCL or a plugin without ncclCommSplit)
            pass
    mine = None
    for group in lists:
        made = dist.new_group(group)
        if rank in group:
            mine = made
    return mine, NEW_GROUP


def _can_split(dist: Any) -> bool:
    """split_group exists and the world group has a bound device (it refuses otherwise)."""
    if not hasattr(dist, "split_group"):
        return False
    try:
        default = dist.distributed_c10d._get_default_group()
    except (AttributeError, RuntimeError, ValueError):
        return False
    return getattr(default, "bound_device_id", None) is not None
