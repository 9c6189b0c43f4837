"""A log table's rows column by column, and the lines of a text table parsed into columns.

The method, in full: docs/import.md#analysis-imports-log-columns-py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from collbench.store.rows import int_bounds


@dataclass(frozen=True)
class LogColumns:
    """A table's rows (nccl_logs.LogRow's fields), one list per field, all of one length."""

    size_bytes: list[int] = field(default_factory=list)
    count: list[int] = field(default_factory=list)
    nccl_type: list[str] = field(default_factory=list)
    redop: list[str] = field(default_factory=list)
    root: list[int] = field(default_factory=list)
    placement: list[str] = field(default_factory=list)
    time_us: list[float] = field(default_factory=list)
    algbw_gbps: list[float] = field(default_factory=list)
    busbw_gbps: list[float] = field(default_factory=list)
    n_wrong: list[int | None] = field(default_factory=list)
    max_error: list[float | None] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.size_bytes)

    @classmethod
    def from_rows(cls, rows: Sequence[Any]) -> LogColumns:
        """The columns of LogRows (or anything with their fields)."""
        return cls(*([getattr(row, name) for row in rows] for name in _NAMES))

    def extend(self, other: LogColumns) -> None:
        """Append another table's columns (the lists are this object's own)."""
        for name in _NAMES:
            getattr(self, name).extend(getattr(other, name))

    def take(self, keep: Sequence[bool]) -> LogColumns:
        """The rows whose `keep` entry is true."""
        return LogColumns(
            *(
                [value for value, kept in zip(getattr(self, name), keep, strict=True) if kept]
                for name in _NAMES
            )
        )


_NAMES = tuple(column.name for column in fields(LogColumns))
_FIGURES = ("time", "algbw", "busbw")


def whole_lines_columns(
    lines: Sequence[list[str]], prefix: tuple[str, ...], groups: tuple[tuple[str, Any], ...]
) -> LogColumns | None:
    """The columns of table lines that each hold every field of the layout (`prefix`, then
    `groups` of (placement, column names)), or None when one field is not what parse_row
    reads at once (then the caller parses those lines one by one, for its exact outcome)."""
    if not lines or any(set(_FIGURES) - set(names) for _, names in groups):
        return None
    if any("error" in names for _, names in groups):
        return None
    fields_by_column = list(zip(*lines, strict=True))
    try:
        by_name = dict(zip(prefix, fields_by_column, strict=False))
        size, count = _integers(by_name.get("size")), _integers(by_name.get("count"))
        root = _integers(by_name["root"]) if "root" in by_name else [-1] * len(lines)
        offset = len(prefix)
        placements = []
        for placement, names in groups:
            group = dict(zip(names, fields_by_column[offset : offset + len(names)], strict=True))
            offset += len(names)
            placements.append((placement, group))
        figures = [
            (placement, *(list(map(float, group[name])) for name in _FIGURES), group.get("wrong"))
            for placement, group in placements
        ]
        wrong = [None if column is None else _integers(column) for *_, column in figures]
    except (ValueError, KeyError):  # a field that is not a plain number: line by line
        return None
    # out of a row's range (check_integers): line by line, to name it; wrong: None where a
    # group has no #wrong
    named = (("size_bytes", size), ("count", count), ("root", root))
    for name, column in (*named, *(("n_wrong", column) for column in wrong)):
        least, most = int_bounds(name)
        if column and not least <= min(column) <= max(column) <= most:
            return None
    n_lines, n_groups = len(lines), len(groups)
    type_column = by_name.get("type") or ("float",) * n_lines
    redop_column = by_name.get("redop") or ("none",) * n_lines
    return LogColumns(
        size_bytes=_repeat_each(size, n_groups),
        count=_repeat_each(count, n_groups),
        nccl_type=_repeat_each(list(type_column), n_groups),
        redop=_repeat_each(list(redop_column), n_groups),
        root=_repeat_each(root, n_groups),
        placement=[placement for placement, _ in groups] * n_lines,
        time_us=_interleave([time for _, time, _, _, _ in figures]),
        algbw_gbps=_interleave([algbw for _, _, algbw, _, _ in figures]),
        busbw_gbps=_interleave([busbw for _, _, _, busbw, _ in figures]),
        n_wrong=_interleave([column or [None] * n_lines for column in wrong]),
        max_error=[None] * (n_lines * n_groups),
    )


def _integers(column: Sequence[str] | None) -> list[int]:
    """int() of every field (ValueError: one is not a plain integer, or there is none)."""
    if column is None:
        raise ValueError("no such column")
    return list(map(int, column))


def _repeat_each(values: list[Any], times: int) -> list[Any]:
    return _interleave([values] * times)


def _interleave(columns: list[list[Any]]) -> list[Any]:
    """[a0, b0, a1, b1, ...] of columns [a, b] (one column: itself)."""
    if len(columns) == 1:
        return list(columns[0])
    merged: list[Any] = [None] * (len(columns[0]) * len(columns))
    for index, column in enumerate(columns):
        merged[index :: len(columns)] = column
    return merged
