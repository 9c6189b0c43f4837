"""A log table's rows column by column (nccl_logs.LogRow's fields, a list each): what an
import does with a table (checks, warnings, rows.jsonl, rows.parquet) reads it a column at
a time, and `rows()` gives the same table as LogRows, for a reader that wants them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any


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

    def take(self, keep: Sequence[bool]) -> LogColumns:
        """The rows whose `keep` entry is true."""
        return LogColumns(
            *(
                [value for value, kept in zip(getattr(self, name), keep, strict=True) if kept]
                for name in _NAMES
            )
        )

    def rows(self, make: Callable[..., Any]) -> tuple[Any, ...]:
        """The rows as `make(**fields)` builds them (nccl_logs.LogRow), in order."""
        columns = [getattr(self, name) for name in _NAMES]
        return tuple(
            make(**dict(zip(_NAMES, values, strict=True))) for values in zip(*columns, strict=True)
        )


_NAMES = tuple(column.name for column in fields(LogColumns))
