"""The results store: one tidy row per measurement, streamed to rows.jsonl as it finishes.

The method, in full: docs/run-directory.md#collbench-store-rundir-py.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from collbench.core.errors import SpecError
from collbench.core.limits import INT64_MAX
from collbench.store.meta import RunMeta
from collbench.store.outputs import (
    CLAIM_MARKER,
    check_output_dir,
    fsync_path,
    is_disk_full,
    path_error,
)
from collbench.store.reading import count_json_lines, json_lines, read_json_file
from collbench.store.row_values import Samples
from collbench.store.rows import (
    ALL_COLUMNS,
    DOCTOR_COLUMNS,
    ROW_COLUMNS,
    DoctorRow,
    ProbeRow,
    ResultRow,
    check_collective,
    row_from_dict,
)

ROWS_FILE = "rows.jsonl"
PARQUET_FILE = "rows.parquet"
META_FILE = "meta.json"


def new_run_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def prepare_run_dir(out: Path | None, run_id: str, allowed: frozenset[str] = frozenset()) -> Path:
    """Create and claim the run directory; refuse one that already holds anything (but
    `allowed`), that another run has claimed, or that cannot be written (store/outputs.py:
    one line, exit 2; a full disk exit 1).

    The claim is the exclusive creation of CLAIM_MARKER inside it: of two runs started on the
    same --out at the same moment, exactly one creates it, and the other is refused as if it
    had come second (a check of the directory's entries alone would let both through).
    """
    run_dir = Path(out) if out is not None else Path("results") / run_id
    check_output_dir("--out", run_dir, allowed=allowed)
    existed = run_dir.is_dir()
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        os.close(os.open(run_dir / CLAIM_MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    except FileExistsError:
        raise SpecError(
            "--out",
            str(run_dir),
            "is not an empty directory; choose a new one (collbench never mixes two runs)",
        ) from None
    except OSError as error:
        if not existed:
            unclaim_run_dir(run_dir, remove_dir=True)
        raise path_error("--out", run_dir, error, folder=True) from None
    return run_dir


def unclaim_run_dir(run_dir: Path, made: Iterable[str] = (), remove_dir: bool = False) -> None:
    """Undo prepare_run_dir for a run that never started (a submission the scheduler
    refused): remove the claim and the entries `made` for it, then the directory itself when
    `remove_dir` (this run created it) and nothing else is left. A later run may use it."""
    import shutil

    run_dir = Path(run_dir)
    for name in (CLAIM_MARKER, *made):
        entry = run_dir / name
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
    if remove_dir:
        with contextlib.suppress(OSError):  # something else is in it: leave it
            run_dir.rmdir()


# One encoder for every row (json.dumps with separators builds a new one per call).
JSON_ENCODER = json.JSONEncoder(separators=(",", ":"))
# Group commit: rows appended without a sync of their own are synced once this many have
# gathered, or this long after the last sync (an fsync per row was 40 of 66 s of a 100k-row
# import, and minutes of a 1,024-node doctor's ~525k rows).
SYNC_ROWS = 1000
SYNC_SECONDS = 1.0


class ResultWriter:
    """Appends rows to rows.jsonl with group commit (see the module docstring)."""

    def __init__(
        self, run_dir: Path, sync_rows: int = SYNC_ROWS, sync_seconds: float = SYNC_SECONDS
    ) -> None:
        self._file = open(Path(run_dir) / ROWS_FILE, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self.sync_rows, self.sync_seconds = sync_rows, sync_seconds
        self._unsynced = 0  # rows appended since the last sync
        self._synced_at = time.monotonic()

    def append(self, row: ResultRow, sync: bool | None = None) -> None:
        """Write one row. sync: True syncs it to disk now (a sweep's finished size); None
        writes it through to the operating system and syncs when the group is due; False
        leaves it buffered (a writer of rows it already has whole, that syncs at the end)."""
        self._file.write(JSON_ENCODER.encode(row.to_dict()) + "\n")
        self._unsynced += 1
        if sync is False:
            return
        due = self._unsynced >= self.sync_rows
        if sync or due or time.monotonic() - self._synced_at >= self.sync_seconds:
            self.sync()
        else:
            self._file.flush()  # a killed process loses nothing written through

    def sync(self) -> None:
        """Everything appended, on disk."""
        self._file.flush()
        os.fsync(self._file.fileno())
        self._unsynced, self._synced_at = 0, time.monotonic()

    def close(self) -> None:
        """Sync what is left, then close (the file is closed even if the sync fails)."""
        try:
            if self._unsynced and not self._file.closed:
                self.sync()
        finally:
            self._file.close()


def append_rows(run_dir: Path, rows: Iterable[ResultRow]) -> None:
    """Append rows that already exist as a whole (a test's run) to rows.jsonl, as
    ResultWriter writes them, synced to disk once at the end."""
    append_lines(run_dir, (JSON_ENCODER.encode(row.to_dict()) + "\n" for row in rows))


def append_lines(run_dir: Path, chunks: Iterable[str], name: str = ROWS_FILE) -> None:
    """Append ready rows.jsonl (or `name`) text (whole lines, each row as ResultWriter writes
    it; an import's a block at a time, store.row_block) and sync it to disk once at the end (a
    sync per row costs minutes for a 200k-row import)."""
    with open(Path(run_dir) / name, "a", encoding="utf-8") as file:
        for chunk in chunks:
            file.write(chunk)
        file.flush()
        os.fsync(file.fileno())


def load_rows(run_dir: Path, warn: bool = True) -> list[ResultRow]:
    """Rows of a run, typed and checked against the row schema. A last line cut short by a
    crash (no newline at its end) is skipped with a warning, never half-read; any other line
    that is not a row is a SpecError naming its file and line."""
    return list(iter_rows(run_dir, warn))


def iter_rows(run_dir: Path, warn: bool = True) -> Iterator[ResultRow]:
    """load_rows one row at a time, in file order: what a reader that streams (export) uses."""
    for data, where in json_lines(Path(run_dir) / ROWS_FILE, warn):
        yield check_collective(row_from_dict(data, where), where)


def count_rows(run_dir: Path, warn: bool = True) -> int:
    """How many rows rows.jsonl holds (0: none yet), counted the way `load_rows` reads them
    but without decoding a line that looks like a JSON object (a row's samples are most of
    it): what `collbench status` shows, in a fraction of a second for a 10k-row run of 2,000
    samples a row. A line that is not UTF-8 or not JSON is refused as load_rows refuses it."""
    return count_json_lines(
        Path(run_dir) / ROWS_FILE,
        warn,
        lambda data, where: check_collective(row_from_dict(data, where), where),
    )


def write_parquet(run_dir: Path, rows: list[ResultRow] | None = None) -> Path | None:
    """rows.parquet from rows.jsonl, or from its `rows` already loaded (knobs kept as a JSON
    string column). Its metadata records rows.jsonl's stamp (`rows_stamp`), taken before the
    rows are read, so that a reader can tell a copy of what rows.jsonl holds now from a stale
    one (store/columns.py); given `rows`, they are what rows.jsonl holds now."""
    stamp = rows_stamp(run_dir)  # before the rows are read: a row appended later shows
    rows = load_rows(run_dir) if rows is None else rows
    if not rows:
        return None
    probes = any(isinstance(row, ProbeRow) for row in rows)
    names = list(ALL_COLUMNS if probes else ROW_COLUMNS)
    if any(isinstance(row, DoctorRow) for row in rows):
        names += DOCTOR_COLUMNS
    nan = float("nan")  # a column a row lacks (a sweep row among probe rows), as pandas fills it
    columns = {name: [row.__dict__.get(name, nan) for row in rows] for name in names}
    return write_columns(run_dir, names, {}, columns, stamp)


def write_columns(
    run_dir: Path,
    names: Sequence[str],
    shared: Mapping[str, Any],
    columns: Mapping[str, Sequence[Any]],
    stamp: str | None,
) -> Path:
    """rows.parquet of rows' fields, `names` in column order: each in `shared` (one value
    every row has) or `columns` (one value per row), stamped `stamp`. Every column is of the
    type pandas infers from its rows' values, made without that inference where its outcome
    is known (plain floats are float64; plain ints within int64, int64)."""
    import numpy as np
    import pandas as pd

    count = len(next(iter(columns.values()))) if columns else 1
    data = {}
    for name in names:
        values = columns.get(name)
        kinds = set(map(type, values)) if values is not None else set()
        if values is None:
            data[name] = pd.Series([shared[name]]).repeat(count).reset_index(drop=True)
        elif kinds == {float}:
            data[name] = np.array(values, dtype=np.float64)
        elif kinds == {int} and -INT64_MAX - 1 <= min(values) and max(values) <= INT64_MAX:
            data[name] = np.array(values, dtype=np.int64)
        else:
            data[name] = values
    frame = pd.DataFrame(data, columns=list(names))
    frame["time_us_samples"] = [
        samples.tolist() if isinstance(samples, Samples) else samples  # as_plain, inlined
        for samples in frame["time_us_samples"]
    ]
    for column in ("knobs", "probe_samples_us") if "probe_samples_us" in names else ("knobs",):
        frame[column] = _as_json(list(frame[column]))  # nested values, kept as JSON strings
    path = Path(run_dir) / PARQUET_FILE
    if stamp is not None:
        frame.attrs[COPY_OF] = stamp  # pandas keeps attrs in the file's metadata (PANDAS_ATTRS)
    write_atomically(
        path, lambda tmp: frame.to_parquet(tmp, index=False, row_group_size=PARQUET_GROUP_ROWS)
    )
    return path


# The frame attribute (in rows.parquet's metadata) holding the stamp of the rows.jsonl it copies.
COPY_OF = "collbench.copy_of"
# Rows per row group of rows.parquet: a reader a group at a time holds this many rows'
# samples (16 MB at 2,000 a row), not the whole file's.
PARQUET_GROUP_ROWS = 1024


def rows_stamp(run_dir: Path) -> str | None:
    """rows.jsonl's size and modification time, "BYTES:MTIME_NS" (None: missing): any append
    or rewrite changes it."""
    try:
        info = os.stat(Path(run_dir) / ROWS_FILE)
    except OSError:
        return None
    return f"{info.st_size}:{info.st_mtime_ns}"


def _as_json(values: list[Any]) -> list[str]:
    """Each value as a JSON string (sorted keys), a value the rows share encoded once (an
    import's rows share one knobs dict)."""
    distinct = {id(value): value for value in values}  # (held here: an id stays unique)
    encoded = {key: json.dumps(value, sort_keys=True) for key, value in distinct.items()}
    return list(map(encoded.__getitem__, map(id, values)))


def read_meta(run_dir: Path, field: str | None = None) -> RunMeta | None:
    """A run's meta.json (None when it is missing or unreadable; with `field`, one that is
    there but not a JSON object is a SpecError naming `field` and the run)."""
    data = _read_meta_file(run_dir)
    if data is None and field is not None and (Path(run_dir) / META_FILE).exists():
        raise SpecError(field, str(run_dir), "has a damaged meta.json: not a JSON object")
    return RunMeta.from_dict(data) if data is not None else None


def _read_meta_file(run_dir: Path) -> dict[str, Any] | None:
    # None when missing or not JSON; a FIFO, a device or JSON nested too deep: SpecError.
    data = read_json_file(Path(run_dir) / META_FILE, META_FILE)
    return data if isinstance(data, dict) else None


def write_meta(run_dir: Path, meta: RunMeta) -> None:
    """Write meta.json atomically (readers never see half a file)."""
    write_json_atomic(Path(run_dir) / META_FILE, meta.to_dict())


def update_meta(run_dir: Path, **fields: Any) -> None:
    """Set some meta.json keys; the others, and the order of the file's keys, stay.

    On a full disk there is no room for the atomic copy; the new content is then written over
    the file's own blocks, when it fits in them (a final state matters more than atomicity).
    """
    meta = _read_meta_file(run_dir) or {}
    meta.update(fields)
    path = Path(run_dir) / META_FILE
    try:
        write_json_atomic(path, meta)
    except OSError as error:
        data = (json.dumps(meta, indent=2, default=str) + "\n").encode()
        if not is_disk_full(error) or not path.exists():
            raise
        if len(data) > path.stat().st_blocks * 512:
            raise
        with open(path, "r+b") as file:
            file.write(data)
            file.truncate()
            file.flush()
            os.fsync(file.fileno())


# Writes of one temporary file: another node finalizing the same shared run directory
# (remove_temp_files) may take it between its write and its rename.
TEMP_ATTEMPTS = 3


def write_atomically(path: Path, write: Callable[[Path], object]) -> None:
    """Write `path` through a temporary file beside it, then rename it into place: a reader
    (or a kill) never meets half a file. `write` writes the temporary file it is given,
    again if another process's clean-up took it first (TEMP_ATTEMPTS)."""
    path = Path(path)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}-{threading.get_ident()}")
    for attempt in range(TEMP_ATTEMPTS):
        try:
            write(tmp)
            fsync_path(tmp, os.O_RDONLY)  # the data is on disk before the name points at it
            os.replace(tmp, path)
            break
        except FileNotFoundError:
            tmp.unlink(missing_ok=True)
            if attempt + 1 == TEMP_ATTEMPTS or not path.parent.is_dir():
                raise
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    # ... and so is the rename: a power loss cannot leave an empty or missing file.
    fsync_path(path.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))


def remove_temp_files(run_dir: Path) -> None:
    """Temporary files of atomic writes that a killed process left in a run directory."""
    for folder in (Path(run_dir), Path(run_dir) / "ranks"):
        for tmp in folder.glob("*.tmp*"):
            if tmp.is_file():
                tmp.unlink(missing_ok=True)


def write_json_atomic(path: Path, data: dict[str, Any], indent: int | None = 2) -> None:
    """A JSON file, written atomically (indented, one trailing newline; compact without
    `indent`)."""
    text = json.dumps(data, indent=indent, sort_keys=False, default=str)
    if indent is not None:
        text += "\n"
    write_atomically(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
