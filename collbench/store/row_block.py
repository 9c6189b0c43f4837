"""Rows held column by column: a block of rows of one type that share most of their values
(an import's table: one run, collective and system), written without a row object each.

The method, in full: docs/run-directory.md#collbench-store-row-block-py.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import MISSING, dataclass, fields
from json.encoder import encode_basestring_ascii
from pathlib import Path
from typing import Any

from collbench.store.row_values import as_plain
from collbench.store.rows import ROW_COLUMNS
from collbench.store.rundir import JSON_ENCODER, rows_stamp, write_columns

# Rows formatted into one string before it is written: bounds the text held at once.
CHUNK_ROWS = 4096


@dataclass(frozen=True)
class RowBlock:
    """Rows of `row_type`: each field in `shared` (one value) or `columns` (one per row)."""

    row_type: type
    shared: Mapping[str, Any]
    columns: Mapping[str, Sequence[Any]]

    def __post_init__(self) -> None:
        names = [column.name for column in fields(self.row_type)]
        defaults = {
            column.name: column.default
            for column in fields(self.row_type)
            if column.default is not MISSING
        }
        shared = {**{k: v for k, v in defaults.items() if k not in self.columns}, **self.shared}
        given = [*shared, *self.columns]
        if sorted(given) != sorted(names):
            raise TypeError(
                f"{self.row_type.__name__} block: fields {sorted(set(names) ^ set(given))} are "
                "missing, unknown or given twice"
            )
        if len({len(column) for column in self.columns.values()}) != 1:
            raise ValueError(
                f"{self.row_type.__name__} block: no column, or columns of different lengths"
            )
        object.__setattr__(self, "shared", shared)

    def __len__(self) -> int:
        return len(next(iter(self.columns.values())))

    def values(self, name: str) -> Sequence[Any]:
        """The column `name`, or its shared value as a list of one (for checks of values)."""
        return self.columns[name] if name in self.columns else [self.shared[name]]

    def column(self, name: str) -> Sequence[Any]:
        """The column `name`, one value per row (a shared value repeated)."""
        return self.columns[name] if name in self.columns else [self.shared[name]] * len(self)


def block_lines(block: RowBlock) -> Iterator[str]:
    """rows.jsonl's lines for the block's rows, CHUNK_ROWS rows to a string."""
    pieces, slots = [], []
    for index, name in enumerate(field.name for field in fields(block.row_type)):
        key = ("{" if index == 0 else ",") + encode_basestring_ascii(name) + ":"
        if name in block.shared:
            pieces.append(
                (key + JSON_ENCODER.encode(as_plain(block.shared[name]))).replace("%", "%%")
            )
        else:
            pieces.append(key.replace("%", "%%") + "%s")
            slots.append(name)
    line = "".join(pieces) + "}\n"
    encoded = [_encoded(block.columns[name]) for name in slots]
    for start in range(0, len(block), CHUNK_ROWS):
        parts = zip(*(column[start : start + CHUNK_ROWS] for column in encoded), strict=True)
        yield "".join(map(line.__mod__, parts))


def _encoded(values: Sequence[Any]) -> list[str]:
    """Each value as JSON_ENCODER writes it, a column at a time where its type allows."""
    kinds = set(map(type, values))
    if kinds == {float} and all(map(math.isfinite, values)):
        return list(map(float.__repr__, values))
    if kinds == {int}:
        return list(map(int.__repr__, values))
    if kinds <= {str, type(None)}:  # few distinct values (types, placements): each once
        text = {value: JSON_ENCODER.encode(value) for value in set(values)}
        return list(map(text.__getitem__, values))
    return list(map(JSON_ENCODER.encode, map(as_plain, values)))


def write_blocks_parquet(run_dir: Path, blocks: Sequence[RowBlock]) -> Path | None:
    """rows.parquet of ResultRow blocks' rows, as rundir.write_parquet writes those rows
    (None when there are none); rows.jsonl holds them already."""
    stamp = rows_stamp(run_dir)
    blocks = [block for block in blocks if len(block)]
    if not blocks:
        return None
    shared, columns = {}, {}
    for name in ROW_COLUMNS:  # one value every row shares is typed once
        values = [block.shared[name] for block in blocks if name in block.shared]
        first = values[0] if values else None
        if len(values) == len(blocks) and all(
            value is first or (type(value) is type(first) and value == first) for value in values
        ):
            shared[name] = first
        else:
            columns[name] = [value for block in blocks for value in block.column(name)]
    return write_columns(run_dir, ROW_COLUMNS, shared, columns, stamp)
