"""Collective prices from measured bus bandwidth by size: what `collbench tune --workload`
prices a step with under each measured setting.

A table gives one setting's busbw (GB/s) per measured size of a collective. At a size
between two measured ones the busbw is interpolated linearly in log(size); outside the
measured sizes it is the nearest measured size's busbw, and the price is flagged
(`outside`). The time of a call of `size_bytes` on a group of `ranks` is nccl-tests' own
definition read backwards: algbw = busbw / bus factor(ranks), time = size / algbw. busbw is
the size-normalised figure (it takes out the group size's factor), so a busbw measured on
one rank count prices a group of another only on that assumption, which the caller says.
A collective the table lacks goes to the fallback pricer (the cost model).

Pure: no I/O.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping

from collbench.analysis.mfu.estimate import Priced, Pricer
from collbench.core.bandwidth import bus_factor

# {collective: {size_bytes: busbw_gbps}}
BusbwTables = Mapping[str, Mapping[int, float]]


def busbw_at(table: Mapping[int, float], size_bytes: float) -> tuple[float, bool]:
    """(busbw, whether `size_bytes` lies within the measured sizes) from a size -> busbw
    table with at least one entry."""
    sizes = sorted(table)
    if size_bytes <= sizes[0] or size_bytes >= sizes[-1]:
        nearest = sizes[0] if size_bytes <= sizes[0] else sizes[-1]
        return table[nearest], sizes[0] <= size_bytes <= sizes[-1]
    index = bisect.bisect_right(sizes, size_bytes)
    low, high = sizes[index - 1], sizes[index]
    share = (math.log(size_bytes) - math.log(low)) / (math.log(high) - math.log(low))
    return table[low] + share * (table[high] - table[low]), True


class BusbwPricer:
    """A Pricer from one setting's busbw tables, the fallback for collectives they lack.

    It remembers what it priced outside the measured sizes (`outside`: (collective,
    size_bytes)) and the collectives it had to hand to the fallback (`unmeasured`)."""

    def __init__(self, tables: BusbwTables, fallback: Pricer, name: str) -> None:
        self.tables = {name: dict(table) for name, table in tables.items() if table}
        self.fallback = fallback
        self.name = name
        self.outside: set[tuple[str, float]] = set()
        self.unmeasured: set[str] = set()

    def __call__(self, collective: str, size_bytes: float, ranks: int, stride: int) -> Priced:
        table = self.tables.get(collective)
        if table is None:
            self.unmeasured.add(collective)
            return self.fallback(collective, size_bytes, ranks, stride)
        busbw, inside = busbw_at(table, size_bytes)
        tag = "" if inside else ", outside the measured sizes"
        if not inside:
            self.outside.add((collective, size_bytes))
        time_s = size_bytes * bus_factor(collective, ranks) / (busbw * 1e9)
        return Priced(time_s, f"busbw of {self.name}{tag}", measured=True)
