"""What `collbench import` prints: the rows it wrote and the peak busbw per collective."""

from __future__ import annotations

from collections import Counter

from collbench.core.units import format_size
from collbench.run.import_logs import ImportResult


def describe_import(result: ImportResult) -> list[str]:
    """The short summary `collbench import` prints: rows and peak busbw per collective (the
    first row of the highest busbw, in file order)."""
    meta = result.meta
    where = f"{meta.world_size} ranks" + (f" on {meta.nodes} node(s)" if meta.nodes else "")
    counts: Counter[str] = Counter()
    sizes: dict[str, set[int]] = {}
    peaks: dict[str, tuple[float, int, str]] = {}  # the first row of the highest busbw
    for block in result.blocks:  # a column at a time: no row objects
        names = ("collective", "busbw_gbps", "size_bytes", "placement")
        for collective, busbw, size, placement in zip(*map(block.column, names), strict=True):
            counts[collective] += 1
            sizes.setdefault(collective, set()).add(size)
            if collective not in peaks or busbw > peaks[collective][0]:
                peaks[collective] = (busbw, size, placement)
    lines = [
        f"imported {counts.total()} row(s) from {len(meta.imported_from)} "
        f"{meta.source} log(s): {meta.backend}, {where}"
    ]
    for collective, count in counts.items():
        busbw, size, placement = peaks[collective]
        lines.append(
            f"  {collective}: {count} row(s), {len(sizes[collective])} size(s), peak busbw "
            f"{busbw:.2f} GB/s at {size} B ({format_size(size)}, {placement})"
        )
    if meta.warnings:
        lines.append(f"  {len(meta.warnings)} warning(s), also in meta.json")
    lines.append(f"run directory: {result.run_dir}")
    return lines
