"""Test rows and run directories, built with the store's own types (collbench.store).

`make_row(**columns)` is a complete sweep row (a probe row with kind="overlap") whose
columns a test overrides by name; `write_run` writes rows and meta.json the way a sweep does.
A column the store does not know is a TypeError, as it should be in a test.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from collbench.store.load import Run
from collbench.store.meta import RunMeta
from collbench.store.rows import ALL_COLUMNS, ResultRow, row_from_dict
from collbench.store.rundir import append_rows, write_meta

# A 1 MiB all-reduce on 2 gloo ranks of one host, checked clean.
SWEEP_DEFAULTS: dict[str, Any] = {
    "run_id": "run-a",
    "timestamp_utc": "2025-01-01T00:00:00.000000Z",
    "collective": "all_reduce",
    "backend": "gloo",
    "dtype": "float32",
    "op": "sum",
    "root": -1,
    "size_bytes": 1 << 20,
    "count": None,
    "world_size": 2,
    "nodes": 1,
    "ranks_per_node": None,
    "placement": "out_of_place",
    "warmup": 5,
    "iters": 20,
    "time_us": 100.0,
    "n_wrong": 0,
    "topology": None,
    "knobs": {"env": {}},
    "time_us_samples": [],
}


def make_row(**columns: Any) -> ResultRow:
    """A typed row: SWEEP_DEFAULTS with `columns` over them. algbw/busbw follow from the
    size and time unless given; probe columns not given are None."""
    unknown = set(columns) - set(ALL_COLUMNS)
    if unknown:
        raise TypeError(f"make_row: no column {', '.join(sorted(unknown))}")
    data = {**SWEEP_DEFAULTS, **columns}
    if "ranks_per_node" not in columns and data["world_size"] and data["nodes"]:
        data["ranks_per_node"] = data["world_size"] // data["nodes"]
    algbw = data["size_bytes"] / data["time_us"] / 1e3 if data["time_us"] else 0.0
    data.setdefault("algbw_gbps", algbw)
    data.setdefault("busbw_gbps", algbw * _bus_factor(data["collective"], data["world_size"]))
    return row_from_dict(data)


def make_run(path: str, rows: Iterable[ResultRow], **meta: Any) -> Run:
    """A loaded run (as store.load.load_run gives it) from rows and meta.json keys."""
    return Run(path, RunMeta.from_dict(meta), list(rows))


def write_run(path: Path, rows: Iterable[ResultRow], meta: dict[str, Any] | None = None) -> Path:
    """A run directory holding `rows` (rows.jsonl) and, if given, meta.json."""
    path = Path(path)
    path.mkdir(parents=True)
    append_rows(path, rows)
    if meta is not None:
        write_meta(path, RunMeta.from_dict(meta))
    return path


def _bus_factor(collective: str, world_size: int) -> float:
    from collbench.core.bandwidth import bus_factor

    try:
        return bus_factor(collective, world_size)
    except (KeyError, ValueError, ZeroDivisionError):  # a made-up collective in a test
        return 1.0
