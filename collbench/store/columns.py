"""A run's rows with their per-iteration samples apart, for a reader that never holds them all.

The method, in full: docs/run-directory.md#collbench-store-columns-py.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from collbench.core.errors import SpecError
from collbench.core.limits import ROWS_MAX_BYTES
from collbench.store.reading import open_regular
from collbench.store.row_values import Samples
from collbench.store.rows import COLUMN_TYPES, ResultRow, check_collective, row_from_dict
from collbench.store.rundir import (
    COPY_OF,
    PARQUET_FILE,
    PARQUET_GROUP_ROWS,
    ROWS_FILE,
    iter_rows,
    rows_stamp,
)

Made = TypeVar("Made")
SAMPLES = "time_us_samples"
# Columns write_parquet keeps as JSON strings (nested values).
_JSON_COLUMNS = ("knobs", "probe_samples_us")
# Integer columns: a copy holds one that has nulls as doubles (pandas), read back as integers.
_INT_COLUMNS = frozenset(
    name for name, annotation in COLUMN_TYPES.items() if annotation.removesuffix(" | None") == "int"
)
_EXACT_INT = 2**53  # a double holds every integer up to this exactly
_BUFFER_BYTES = 1 << 20


class _NotFaithful(Exception):
    """The parquet copy cannot stand for rows.jsonl: read rows.jsonl instead."""


def read_rows_apart(
    run_dir: Path, reduce: Callable[[ResultRow, Any], Made]
) -> list[tuple[ResultRow, Made]]:
    """Every row of a run in file order, each beside what `reduce(row, samples)` made of its
    per-iteration samples (a float64 numpy array, empty when it has none, valid during the
    call only). The rows hold no samples (time_us_samples empty). Refuses what load_rows
    refuses, as it does."""
    pairs = read_copy(Path(run_dir), reduce)
    return pairs if pairs is not None else [_apart(row, reduce) for row in iter_rows(Path(run_dir))]


def read_copy(
    run_dir: Path, reduce: Callable[[ResultRow, Any], Made]
) -> list[tuple[ResultRow, Made]] | None:
    """read_rows_apart from rows.parquet alone; None when it is not a faithful copy of
    rows.jsonl or holds anything the row checks refuse (rows.jsonl then says what)."""
    run_dir = Path(run_dir)
    stamp = rows_stamp(run_dir)
    if stamp is None or not (run_dir / PARQUET_FILE).is_file() or _cut_short(run_dir):
        return None
    try:
        pairs = _from_copy(run_dir, stamp, reduce)
    except (_NotFaithful, SpecError, OSError, ValueError, TypeError):
        return None
    return pairs if rows_stamp(run_dir) == stamp else None  # unchanged while it was read


def _cut_short(run_dir: Path) -> bool:
    """Whether rows.jsonl's last line lacks its newline (a write cut short): reading rows.jsonl
    says so with a warning, as every reader of it does."""
    try:
        with open(run_dir / ROWS_FILE, "rb") as rows:
            rows.seek(-1, os.SEEK_END)
            return rows.read(1) != b"\n"
    except OSError:  # empty, or gone: rows.jsonl says which
        return True


def _apart(row: ResultRow, reduce: Callable[[ResultRow, Any], Made]) -> tuple[ResultRow, Made]:
    import numpy as np

    samples = row.time_us_samples
    times = np.array(samples if samples is not None else [], dtype=np.float64)
    lean = replace(row, time_us_samples=Samples())
    return lean, reduce(lean, times)


def _from_copy(
    run_dir: Path, stamp: str, reduce: Callable[[ResultRow, Any], Made]
) -> list[tuple[ResultRow, Made]]:
    """The rows from rows.parquet, when its recorded stamp is `stamp` (else _NotFaithful)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = run_dir / PARQUET_FILE
    pairs: list[tuple[ResultRow, Made]] = []
    with open_regular(path, PARQUET_FILE, ROWS_MAX_BYTES) as file:
        try:
            # Read a buffer at a time: pre-buffering whole column chunks took 150 MB more.
            copy = pq.ParquetFile(file, pre_buffer=False, buffer_size=_BUFFER_BYTES)
            if _recorded_stamp(copy.schema_arrow.metadata) != stamp:
                raise _NotFaithful("a copy of another rows.jsonl")
            names = [name for name in copy.schema_arrow.names if name in COLUMN_TYPES]
            batches = copy.iter_batches(PARQUET_GROUP_ROWS, columns=names, use_threads=False)
            for batch in batches:
                for row, times in _batch_rows(batch, path, len(pairs)):
                    pairs.append((row, reduce(row, times)))
        except pa.ArrowException as error:
            raise _NotFaithful(str(error)) from None
    return pairs


def _recorded_stamp(metadata: dict[bytes, bytes] | None) -> str | None:
    """The stamp write_parquet recorded (in the frame's attrs, which pandas keeps)."""
    try:
        attrs = json.loads((metadata or {}).get(b"PANDAS_ATTRS", b"{}"))
    except ValueError:
        return None
    return attrs.get(COPY_OF) if isinstance(attrs, dict) else None


def _batch_rows(batch: Any, path: Path, before: int) -> Iterator[tuple[ResultRow, Any]]:
    """Each row of a record batch, checked as row_from_dict checks a line, with its samples."""
    values, offsets = _samples(batch)
    names = [name for name in batch.schema.names if name != SAMPLES]
    if not {"collective", "size_bytes"} <= set(names):  # every row would be refused
        raise _NotFaithful("a copy without the columns every row has")
    columns = [_column_values(name, batch.column(name)) for name in names]
    for index, items in enumerate(zip(*columns, strict=True)):
        where = f"{path} row {before + index + 1}"
        data = dict(zip(names, items, strict=True))
        data[SAMPLES] = []
        row = check_collective(row_from_dict(data, where), where)
        yield row, values[offsets[index] : offsets[index + 1]]


def _samples(batch: Any) -> tuple[Any, Any]:
    """The batch's samples, flat (float64), and each row's [start, end) offsets into them;
    _NotFaithful where a sample is not a finite number >= 0 (what the row check refuses)."""
    import numpy as np
    import pyarrow as pa

    if SAMPLES not in batch.schema.names:
        return np.empty(0), np.zeros(batch.num_rows + 1, dtype=np.int64)
    column = batch.column(SAMPLES)
    if not pa.types.is_list(column.type) and not pa.types.is_large_list(column.type):
        raise _NotFaithful(f"{SAMPLES} is {column.type}")
    item = column.type.value_type
    if not (pa.types.is_floating(item) or pa.types.is_integer(item) or pa.types.is_null(item)):
        raise _NotFaithful(f"{SAMPLES} holds {item}")
    flat = column.values
    if flat.null_count:
        raise _NotFaithful(f"{SAMPLES} holds nulls")
    values = _view(flat.cast(pa.float64()), np.float64)
    offsets = _view(column.offsets, np.int64 if pa.types.is_large_list(column.type) else np.int32)
    if column.null_count:
        nulls = np.array(column.is_null().to_pylist(), dtype=bool)
        if np.diff(offsets)[nulls].any():
            raise _NotFaithful(f"{SAMPLES}: a null holds values")
    used = values[offsets[0] : offsets[-1]]
    if not (np.isfinite(used).all() and (used >= 0).all()):
        raise _NotFaithful(f"{SAMPLES} holds a value the row check refuses")
    return values, offsets


def _view(array: Any, dtype: Any) -> Any:
    """A null-free arrow array of fixed-width numbers as a numpy view of its buffer (arrow's
    to_numpy imports pandas: 0.7 s)."""
    import numpy as np

    if not len(array):
        return np.empty(0, dtype=dtype)
    data = array.buffers()[1]
    width = np.dtype(dtype).itemsize
    return np.frombuffer(data, dtype=dtype, count=len(array), offset=array.offset * width)


def _column_values(name: str, column: Any) -> list[Any]:
    """A column's values as rows.jsonl holds them: JSON columns decoded, integers that the
    copy holds as doubles (a column with nulls) as integers."""
    import pyarrow as pa

    items = column.to_pylist()
    if name in _JSON_COLUMNS:
        return _decoded(items)
    if name in _INT_COLUMNS and pa.types.is_floating(column.type):
        return [_as_int(item) for item in items]
    return items


def _decoded(texts: list[Any]) -> list[Any]:
    """Each JSON string decoded, a text the rows share once (the rows share one knobs)."""
    decoded: dict[str, Any] = {}
    values = []
    for text in texts:
        if not isinstance(text, str):
            raise _NotFaithful("a JSON column holds something else than JSON text")
        if text not in decoded:
            decoded[text] = json.loads(text)
        values.append(decoded[text])
    return values


def _as_int(value: Any) -> Any:
    """An integral double as the integer it stands for; a null as None; anything else as it
    is (for the row check to refuse)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, float) and value.is_integer() and abs(value) <= _EXACT_INT:
        return int(value)
    return value
