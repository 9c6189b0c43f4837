"""Which groups each doctor round runs (pure): the node layout, the circle method's pairs,
random pairings and bisection halves. Every rank computes the same plan from the same
inputs, so no rank has to tell another what comes next. What each `--pairs` choice costs
per repeat: docs/doctor.md, "Large fleets"."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from collbench.core.doctor_spec import DoctorSpec

# `--pairs auto` measures every node pair (the circle method, N-1 rounds) up to this many
# nodes and samples above it: 256 nodes are 255 rounds a pass, 4,096 nodes would be 4,095
# rounds and 8.4 million pair rows a pass.
SAMPLE_ABOVE_NODES = 256
# Random rounds of a sampled pair stage when --shuffle-rounds is not given: each node meets
# 16 partners a pass, enough for the median over them to name a slow node.
DEFAULT_SAMPLED_ROUNDS = 16


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

    @cached_property
    def host_of(self) -> dict[int, str]:
        """rank -> its host, built once (a scan of every host per rank is slow at 1k nodes)."""
        return {rank: host for host, ranks in self.ranks_per_host.items() for rank in ranks}

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


class CircleRounds(Sequence[list[tuple[int, int]]]):
    """Round-robin pairings of `count` items (the circle method): count-1 rounds (count
    rounds when odd, one item sitting out each), every pair exactly once, every item in at
    most one pair per round. Each round is worked out when asked for, so a
    fleet of thousands does not hold its N^2/2 pairs at once."""

    def __init__(self, count: int) -> None:
        self.count = count

    def __len__(self) -> int:
        return 0 if self.count < 2 else self.count - 1 + self.count % 2

    def __getitem__(self, index):  # type: ignore[override]
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        # Item 0 stays, the others (and a stand-in that makes an odd count even) turn `index`
        # places; position k faces position size-1-k.
        size, turn = self.count + self.count % 2, index % len(self)
        seat = [0, *(1 + (position - 1 - turn) % (size - 1) for position in range(1, size))]
        faces = [(seat[position], seat[size - 1 - position]) for position in range(size // 2)]
        return sorted(  # the stand-in (count, when odd) sits one item out
            (min(pair), max(pair)) for pair in faces if max(pair) < self.count
        )


@dataclass(frozen=True)
class PairPlan:
    """The pair stage's rounds of one pass: the circle method's (every node pair once) and
    random ones (shuffle rows). Sampled, the random rounds replace the circle's."""

    mode: str  # "all" or "sampled" ("auto" resolved by the node count)
    circle: Sequence[list[tuple[int, int]]]
    shuffle: Sequence[list[tuple[int, int]]]

    @property
    def rounds(self) -> int:
        """Pair rounds per pass (each repeat runs them all again)."""
        return len(self.circle) + len(self.shuffle)


def pair_mode(nodes: int, pairs: str) -> str:
    """ "all" or "sampled": `pairs` as given, or ("auto") sampled above SAMPLE_ABOVE_NODES."""
    return ("sampled" if nodes > SAMPLE_ABOVE_NODES else "all") if pairs == "auto" else pairs


def sampled_rounds(shuffle_rounds: int) -> int:
    """Random rounds of a sampled pair stage: --shuffle-rounds, else DEFAULT_SAMPLED_ROUNDS."""
    return shuffle_rounds or DEFAULT_SAMPLED_ROUNDS


def pair_plan(nodes: int, spec: DoctorSpec) -> PairPlan:
    """The pair stage's rounds for `nodes` nodes under `spec` (pairs, shuffle_rounds, seed).
    All: N-1 circle rounds (N when odd) of floor(N/2) pairs, every pair measured, then
    --shuffle-rounds random ones. Sampled: K random rounds only (K = --shuffle-rounds, or
    DEFAULT_SAMPLED_ROUNDS): every node meets K partners, so a slow node still stands out,
    but a link is measured only when drawn (about K/(N-1) of them)."""
    if nodes < 2:
        return PairPlan("all", [], [])
    mode = pair_mode(nodes, spec.pairs)
    if mode == "sampled":
        shuffle = random_rounds(nodes, sampled_rounds(spec.shuffle_rounds), spec.seed)
        return PairPlan(mode, [], shuffle)
    shuffle = random_rounds(nodes, spec.shuffle_rounds, spec.seed)
    return PairPlan(mode, CircleRounds(nodes), shuffle)


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
