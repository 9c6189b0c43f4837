"""The pair stage folded once (pure): each node pair's busbw per repeat, the nodes' scores,
their partners and the rounds behind each figure, from the pair and shuffle rows.

The method, in full: docs/doctor.md#analysis-doctor-pairs-py.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import cached_property

from collbench.analysis.doctor.expect import median_of
from collbench.analysis.doctor.findings import row_hosts
from collbench.store.rows import DoctorRow

Pair = tuple[str, str]  # two hosts in the fleet's host order


@dataclass(frozen=True)
class PairFold:
    """The pair and shuffle rows by node pair (keys in host order, pairs in row order)."""

    hosts: tuple[str, ...]
    # pair -> repeat -> the median busbw over that repeat's rounds of the pair
    values: dict[Pair, dict[int, float]]
    rounds: Counter[Pair]  # rows behind each pair (every repeat)
    host_rounds: Counter[str]  # rows each host took part in

    @cached_property
    def medians(self) -> dict[Pair, float]:
        """Each pair's figure: the median over its repeats."""
        return {pair: median_of(list(by.values())) for pair, by in self.values.items()}

    def node_scores(self) -> tuple[dict[str, dict[int, float]], dict[str, float]]:
        """Per host and repeat the median over its partners: those with two partners or more
        (what a node is judged by), and every host's median over its repeats."""
        partners: dict[tuple[str, int], list[float]] = {}
        for (host_a, host_b), by_repeat in self.values.items():
            for repeat, value in by_repeat.items():
                partners.setdefault((host_a, repeat), []).append(value)
                partners.setdefault((host_b, repeat), []).append(value)
        by_host: dict[str, dict[int, tuple[float, int]]] = {}
        for (host, repeat), values in partners.items():
            by_host.setdefault(host, {})[repeat] = (median_of(values), len(values))
        table: dict[str, dict[int, float]] = {}
        scores: dict[str, float] = {}
        for host in self.hosts:  # the fleet's order, as findings list them
            if host not in by_host:
                continue
            mine = dict(sorted(by_host[host].items()))
            scores[host] = median_of([score for score, _ in mine.values()])
            judged = {repeat: score for repeat, (score, count) in mine.items() if count >= 2}
            if judged:
                table[host] = judged
        return table, scores

    def partners(self, hosts: Collection[str]) -> dict[str, dict[str, float]]:
        """For each of `hosts`, its partners' pair figures (one pass over the pairs)."""
        wanted = set(hosts)
        found: dict[str, dict[str, float]] = {host: {} for host in hosts}
        for (host_a, host_b), value in self.medians.items():
            if host_a in wanted:
                found[host_a][host_b] = value
            if host_b in wanted:
                found[host_b][host_a] = value
        return found

    def sparse(self) -> tuple[tuple[int, int, float], ...]:
        """Every measured pair as (i, j, GB/s), host indices i < j, in that order."""
        index = {host: position for position, host in enumerate(self.hosts)}
        cells = [(index[a], index[b], value) for (a, b), value in self.medians.items()]
        return tuple(sorted(cells))


def fold_pairs(rows: Sequence[DoctorRow], hosts: Sequence[str]) -> PairFold:
    """The pair and shuffle `rows` by node pair; a row whose hosts are not two distinct
    hosts of `hosts` is left out."""
    index = {host: position for position, host in enumerate(hosts)}
    samples: dict[Pair, dict[int, list[float]]] = {}
    host_rounds: Counter[str] = Counter()
    for row in rows:
        pair = row.group_hosts or row_hosts(row)
        if len(pair) != 2:
            continue
        first, second = index.get(pair[0], -1), index.get(pair[1], -1)
        if first < 0 or second < 0 or first == second:
            continue
        key = (pair[0], pair[1]) if first < second else (pair[1], pair[0])
        by_repeat = samples.get(key)
        if by_repeat is None:
            by_repeat = samples[key] = {}
        by_repeat.setdefault(row.repeat_index, []).append(float(row.busbw_gbps))
    rounds: Counter[Pair] = Counter()
    values: dict[Pair, dict[int, float]] = {}
    for pair, by_repeat in samples.items():
        count = sum(len(v) for v in by_repeat.values())
        rounds[pair] = count
        host_rounds[pair[0]] += count
        host_rounds[pair[1]] += count
        values[pair] = {
            repeat: v[0] if len(v) == 1 else median_of(v) for repeat, v in by_repeat.items()
        }
    return PairFold(tuple(hosts), values, rounds, host_rounds)
