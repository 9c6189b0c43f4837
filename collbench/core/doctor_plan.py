"""Which groups each doctor round runs (pure): the node layout, the circle method's pairs,
random pairings and bisection halves. Every rank computes the same plan from the same
inputs, so no rank has to tell another what comes next."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Layout:
    """Ranks by host: hosts in the order of their lowest rank, and each host's ranks."""

    hosts: tuple[str, ...]
    ranks_per_host: dict[str, tuple[int, ...]]

    @classmethod
    def from_hosts(cls, rank_hosts: Sequence[str]) -> Layout:
        """rank_hosts[r]: the host of rank r."""
        ranks: dict[str, list[int]] = {}
        for rank, host in enumerate(rank_hosts):
            ranks.setdefault(host, []).append(rank)
        return cls(tuple(ranks), {host: tuple(members) for host, members in ranks.items()})

    @property
    def nodes(self) -> int:
        return len(self.hosts)

    @property
    def max_local(self) -> int:
        """Most ranks on one host."""
        return max(len(ranks) for ranks in self.ranks_per_host.values())

    def rail(self, local_index: int) -> tuple[int, ...]:
        """The ranks with this local index, one per host that has it (nccl-tests' MOD)."""
        return tuple(
            ranks[local_index]
            for ranks in (self.ranks_per_host[host] for host in self.hosts)
            if local_index < len(ranks)
        )

    def pair_ranks(self, host_a: str, host_b: str) -> list[tuple[int, int]]:
        """Rank pairs of two hosts: local rank i of one with local rank i of the other."""
        return list(zip(self.ranks_per_host[host_a], self.ranks_per_host[host_b], strict=False))

    def ranks_of(self, hosts: Sequence[str]) -> tuple[int, ...]:
        return tuple(sorted(rank for host in hosts for rank in self.ranks_per_host[host]))


def circle_rounds(count: int) -> list[list[tuple[int, int]]]:
    """Round-robin pairings of `count` items (the circle method): count-1 rounds (count
    rounds when odd, one item sitting out each), every pair exactly once, every item in at
    most one pair per round."""
    if count < 2:
        return []
    items: list[int | None] = list(range(count))
    if count % 2:
        items.append(None)  # the one paired with None sits the round out
    size = len(items)
    rounds = []
    for _ in range(size - 1):
        pairs = []
        for i in range(size // 2):
            a, b = items[i], items[size - 1 - i]
            if a is not None and b is not None:
                pairs.append((min(a, b), max(a, b)))
        rounds.append(sorted(pairs))
        items = [items[0], items[-1], *items[1:-1]]  # keep the first, rotate the rest
    return rounds


def random_rounds(count: int, rounds: int, seed: int) -> list[list[tuple[int, int]]]:
    """`rounds` random perfect pairings of `count` items (one sits out when odd), the same
    for every caller with the same seed."""
    generator = random.Random(seed)
    result = []
    for _ in range(rounds):
        order = list(range(count))
        generator.shuffle(order)
        pairs = [
            (min(order[i], order[i + 1]), max(order[i], order[i + 1]))
            for i in range(0, count - 1, 2)
        ]
        result.append(sorted(pairs))
    return result


def halves(items: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The first and second half (the first gets the extra one when odd)."""
    middle = (len(items) + 1) // 2
    return tuple(items[:middle]), tuple(items[middle:])
