"""What `collbench import` prints: the rows it wrote and the peak busbw per collective."""

from __future__ import annotations

from collections import Counter

from collbench.core.units import format_size
from collbench.run.import_logs import ImportResult


def describe_import(result: ImportResult) -> list[str]:
    """The short summary `collbench import` prints: rows and peak busbw per collective."""
    meta = result.meta
    nodes = meta.nodes
    where = f"{meta.world_size} ranks" + (f" on {nodes} node(s)" if nodes else "")
    lines = [
        f"imported {len(result.rows)} row(s) from {len(meta.imported_from)} "
        f"{meta.source} log(s): {meta.backend}, {where}"
    ]
    for collective, count in Counter(row.collective for row in result.rows).items():
        rows = [row for row in result.rows if row.collective == collective]
        peak = max(rows, key=lambda row: row.busbw_gbps)
        sizes = len({row.size_bytes for row in rows})
        lines.append(
            f"  {collective}: {count} row(s), {sizes} size(s), peak busbw "
            f"{peak.busbw_gbps:.2f} GB/s at {peak.size_bytes} B "
            f"({format_size(peak.size_bytes)}, {peak.placement})"
        )
    if meta.warnings:
        lines.append(f"  {len(meta.warnings)} warning(s), also in meta.json")
    lines.append(f"run directory: {result.run_dir}")
    return lines
