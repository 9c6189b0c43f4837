"""The results store: one tidy row per measurement, streamed to rows.jsonl as it finishes.

rows.jsonl is appended and flushed (and fsynced) after every row, so a crash loses
nothing already measured; rows.parquet is a copy written at the end; meta.json holds the
run-level provenance.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from collbench.core.errors import SpecError
from collbench.store.meta import RunMeta
from collbench.store.rows import (
    ALL_COLUMNS,
    ROW_COLUMNS,
    ProbeRow,
    ResultRow,
    row_from_dict,
)

ROWS_FILE = "rows.jsonl"
PARQUET_FILE = "rows.parquet"
META_FILE = "meta.json"


def new_run_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def prepare_run_dir(out: Path | None, run_id: str, allowed: frozenset[str] = frozenset()) -> Path:
    """Create the run directory; refuse one that already holds anything (but `allowed`)."""
    run_dir = Path(out) if out is not None else Path("results") / run_id
    if run_dir.exists() and (
        not run_dir.is_dir() or any(entry.name not in allowed for entry in run_dir.iterdir())
    ):
        raise SpecError(
            "--out",
            str(run_dir),
            "is not an empty directory; choose a new one (collbench never mixes two runs)",
        )
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise SpecError("--out", str(run_dir), f"cannot be created: {error.strerror}") from None
    return run_dir


class ResultWriter:
    """Appends rows to rows.jsonl, each one flushed to disk before the next step."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / ROWS_FILE
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()

    def append(self, row: ResultRow) -> None:
        self._file.write(json.dumps(row.to_dict(), separators=(",", ":")) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()


def load_rows(run_dir: Path) -> list[ResultRow]:
    """Rows of a run, typed. A last line cut short by a crash is skipped, never half-read;
    a row of a kind collbench does not know is a SpecError naming its file and line."""
    path = Path(run_dir) / ROWS_FILE
    if not path.exists():
        return []
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            print(f"collbench: warning: skipped a truncated row in {path}", file=sys.stderr)
            continue
        rows.append(row_from_dict(data, f"{path} line {number}"))
    return rows


def write_parquet(run_dir: Path) -> Path | None:
    """rows.parquet from rows.jsonl (knobs kept as a JSON string column)."""
    import pandas as pd

    rows = load_rows(run_dir)
    if not rows:
        return None
    probes = any(isinstance(row, ProbeRow) for row in rows)
    frame = pd.DataFrame(
        [row.to_dict() for row in rows], columns=list(ALL_COLUMNS if probes else ROW_COLUMNS)
    )
    as_json = ("knobs", "probe_samples_us") if probes else ("knobs",)
    for column in as_json:  # nested values, kept as JSON strings
        frame[column] = frame[column].map(lambda value: json.dumps(value, sort_keys=True))
    path = Path(run_dir) / PARQUET_FILE
    write_atomically(path, lambda tmp: frame.to_parquet(tmp, index=False))
    return path


def read_meta(run_dir: Path) -> RunMeta | None:
    """A run's meta.json (None when it is missing or unreadable)."""
    data = _read_meta_file(run_dir)
    return RunMeta.from_dict(data) if data is not None else None


def _read_meta_file(run_dir: Path) -> dict[str, Any] | None:
    path = Path(run_dir) / META_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def write_meta(run_dir: Path, meta: RunMeta) -> None:
    """Write meta.json atomically (readers never see half a file)."""
    write_json_atomic(Path(run_dir) / META_FILE, meta.to_dict())


def update_meta(run_dir: Path, **fields: Any) -> None:
    """Set some meta.json keys; the others, and the order of the file's keys, stay."""
    meta = _read_meta_file(run_dir) or {}
    meta.update(fields)
    write_json_atomic(Path(run_dir) / META_FILE, meta)


def write_atomically(path: Path, write: Callable[[Path], object]) -> None:
    """Write `path` through a temporary file beside it, then rename it into place: a reader
    (or a kill) never meets half a file. `write` writes the temporary file it is given."""
    path = Path(path)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: dict[str, Any], indent: int | None = 2) -> None:
    """A JSON file, written atomically (indented, one trailing newline; compact without
    `indent`)."""
    text = json.dumps(data, indent=indent, sort_keys=False, default=str)
    if indent is not None:
        text += "\n"
    write_atomically(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
