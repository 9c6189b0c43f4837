"""A tiny reader of nccl-tests / rccl-tests text tables, for the fitter's tests only.

It takes the out-of-place (size, time, busbw) columns, finding the time column from the
header (current tables have a root column, legacy ones do not), and skips every line that
is not a table row (banners, `NCCL INFO` lines, summaries). The real importer lives
elsewhere; this one exists so the fitter's tests do not depend on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class NcclTable:
    """Out-of-place columns of one nccl-tests log."""

    world_size: int
    sizes_bytes: tuple[int, ...]
    times_us: tuple[float, ...]
    busbw_gbps: tuple[float, ...]


def read_nccl_table(path: Path) -> NcclTable:
    time_column, ranks = None, 0
    sizes, times, busbw = [], [], []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        words = line.split()
        if line.startswith("#"):
            words = line.lstrip("#").split()
            if words[:1] == ["Rank"]:
                ranks += 1
            elif words[:2] == ["size", "count"] and "time" in words:
                time_column = words.index("time")
            continue
        if time_column is None or len(words) <= time_column + 2:
            continue
        if not (words[0].isdigit() and words[1].isdigit()):
            continue
        sizes.append(int(words[0]))
        times.append(float(words[time_column]))
        busbw.append(float(words[time_column + 2]))
    if not sizes:
        raise ValueError(f"{path}: no nccl-tests table rows")
    return NcclTable(ranks, tuple(sizes), tuple(times), tuple(busbw))
