"""`collbench import nccl-tests`: read nccl-tests / rccl-tests logs and write them as a run
(rows.jsonl, meta.json and rows.parquet, as a sweep's); parsing and building the rows are
analysis/imports' (pure)."""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import islice
from operator import attrgetter
from pathlib import Path
from typing import Any

from collbench.analysis.imports.nccl_logs import LOG_FIELD, ParsedLog, parse_text_lines
from collbench.analysis.imports.nccl_rows import (
    block_rows,
    build_import,
    parse_log,
    resolve_collective,
)
from collbench.core.errors import SpecError
from collbench.core.knobs import check_knob_name, parse_knob_settings
from collbench.core.limits import INT64_MAX, LOG_MAX_BYTES, LOG_MAX_LINE_BYTES
from collbench.store.meta import RunMeta
from collbench.store.outputs import path_error
from collbench.store.reading import iter_lines, open_regular, read_bytes
from collbench.store.row_block import RowBlock, block_lines, write_blocks_parquet
from collbench.store.rows import ResultRow, utc_now
from collbench.store.rundir import (
    META_FILE,
    PARQUET_FILE,
    ROWS_FILE,
    append_lines,
    new_run_id,
    prepare_run_dir,
    remove_temp_files,
    unclaim_run_dir,
    write_meta,
)


@dataclass(frozen=True)
class ImportResult:
    """A written import: where it went, its rows (a RowBlock per table) and its meta."""

    run_dir: Path
    blocks: tuple[RowBlock, ...]
    meta: RunMeta

    @property
    def warnings(self) -> list[str]:
        return list(self.meta.warnings)

    @functools.cached_property
    def rows(self) -> tuple[ResultRow, ...]:
        """The rows as ResultRows, made when first asked for (the CLI never asks)."""
        return tuple(row for block in self.blocks for row in block_rows(block))


def import_logs(
    paths: Sequence[Path | str],
    out: Path | None = None,
    collective: str | None = None,
    knobs: Mapping[str, str] | None = None,
    *,
    run_id: str | None = None,
    imported_utc: str | None = None,
) -> ImportResult:
    """Import logs of one system (same world size and backend) into a new run directory
    (`out`, new or empty); `knobs` (`--knob NAME=VALUE`) label what they were measured with;
    `run_id` and `imported_utc` are new unless given (tests pin them)."""
    if not paths:
        raise SpecError(LOG_FIELD, "", "is missing: give at least one log file")
    override = resolve_collective(collective) if collective is not None else None
    with _cycle_collection_paused():
        logs = [read_log(Path(path)) for path in paths]
        run_id = run_id or new_run_id()
        blocks, meta = build_import(logs, run_id, override, imported_utc=imported_utc or utc_now())
        return _write_import(blocks, meta, out, knobs)


@contextlib.contextmanager
def _cycle_collection_paused() -> Iterator[None]:
    """Python's cycle collector off while an import runs: a 100k-row log makes millions of
    objects and no cycles, and the collector's passes over them were a fifth of its time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _write_import(
    blocks: list[RowBlock], meta: RunMeta, out: Path | None, knobs: Mapping[str, str] | None
) -> ImportResult:
    """Label, check and write an import's rows and meta (all or nothing)."""
    if knobs:  # the labels win over what the log printed
        blocks = [
            replace(
                block, shared={**block.shared, "knobs": _labelled(block.shared["knobs"], knobs)}
            )
            for block in blocks
        ]
        unknown = [w for n, v in knobs.items() for w in check_knob_name(n, f"{n}={v}")]
        meta = replace(
            meta, knobs=_labelled(meta.knobs, knobs), warnings=[*meta.warnings, *unknown]
        )
    # meta.json names each log by its absolute path: the run may be read from elsewhere.
    meta = replace(meta, imported_from=[str(Path(path).resolve()) for path in meta.imported_from])
    _refuse_unstorable(blocks, meta)
    made = out is None or not os.path.isdir(out)  # (isdir: a name too long is refused below)
    run_dir = prepare_run_dir(out, meta.run_id)
    try:
        append_lines(run_dir, (text for block in blocks for text in block_lines(block)))
        write_meta(run_dir, meta)
        write_blocks_parquet(run_dir, blocks)  # the rows in hand: not read back and checked
    except BaseException as error:
        # All or nothing: an import cut short (a full disk) leaves no run behind.
        remove_temp_files(run_dir)
        unclaim_run_dir(run_dir, (ROWS_FILE, META_FILE, PARQUET_FILE), remove_dir=made)
        if isinstance(error, OSError):
            raise path_error("--out", run_dir, error) from None
        raise
    return ImportResult(run_dir=run_dir, blocks=tuple(blocks), meta=meta)


def _labelled(knobs: Mapping[str, Any], labels: Mapping[str, str]) -> dict[str, Any]:
    """`knobs` with `labels` in its `env`, named in `settings.knob_labels`."""
    settings = {**(knobs.get("settings") or {}), "knob_labels": sorted(labels)}
    return {**knobs, "env": {**(knobs.get("env") or {}), **labels}, "settings": settings}


# Integer columns: rows.parquet stores them as int64 (a size beyond it is an OverflowError).
_INTEGER_COLUMNS = tuple(
    "size_bytes count root world_size nodes ranks_per_node warmup iters n_wrong".split()
)


def _refuse_unstorable(blocks: Sequence[RowBlock], meta: RunMeta) -> None:
    """SpecError before anything is written if an integer column holds what is not a 64-bit
    integer, or meta a NaN or infinite figure (JSON has no such numbers; the rows' figures
    are finite: analysis/imports drops the rows that are no measurement)."""
    logs = ", ".join(meta.imported_from)
    for block in blocks:  # column by column, fast; the row loop names the first
        if not _all_storable(block):
            _refuse_first(block_rows(block), logs)
    try:
        json.dumps(meta.to_dict(), allow_nan=False, default=str)
    except ValueError:
        raise SpecError(LOG_FIELD, logs, _NON_FINITE) from None


def _all_storable(block: RowBlock) -> bool:
    """Every integer column a 64-bit int (or None)?"""
    for name in _INTEGER_COLUMNS:
        values = [value for value in block.values(name) if value is not None]
        if values and not (
            set(map(type, values)) == {int}  # bool, float, str: not int
            and -INT64_MAX - 1 <= min(values)
            and max(values) <= INT64_MAX
        ):
            return False
    return True


def _refuse_first(rows: Sequence[ResultRow], logs: str) -> None:
    """SpecError for the first row, in order, that _all_storable found unstorable."""
    integers = attrgetter(*_INTEGER_COLUMNS)
    for row in rows:
        for name, value in zip(_INTEGER_COLUMNS, integers(row), strict=True):
            if value is not None and (
                type(value) is not int or not -INT64_MAX - 1 <= value <= INT64_MAX
            ):
                raise SpecError(
                    LOG_FIELD,
                    logs,
                    f"gives {name} {str(value)[:40]!r}, not an integer within the 64-bit range "
                    "collbench stores; nothing was written",
                )


_NON_FINITE = "holds a NaN or infinite figure that JSON cannot store; nothing was written"


def read_log(path: Path) -> ParsedLog:
    """Parse one log file (text, or -J JSON), read as a stream within core.limits: a regular
    file of at most LOG_MAX_BYTES, lines of at most LOG_MAX_LINE_BYTES (SpecError otherwise)."""
    path = Path(path)
    if _starts_json(path):  # -J output: one document, possibly on one line
        text = read_bytes(path, LOG_FIELD, LOG_MAX_BYTES).decode("utf-8", errors="replace")
        return parse_log(text, str(path))
    lines = iter_lines(path, LOG_FIELD, LOG_MAX_LINE_BYTES, LOG_MAX_BYTES)
    return parse_text_lines(_decoded(raw for _, raw in lines), str(path))


def _decoded(lines: Iterator[bytes], batch: int = 1024) -> Iterator[str]:
    """Whole lines as text, `batch` lines decoded at once (no UTF-8 sequence holds b"\n")."""
    while chunk := b"".join(islice(lines, batch)):
        yield chunk.decode("utf-8", errors="replace")


def _starts_json(path: Path) -> bool:
    """Is the log's first non-blank character "{" (-J output)? Reads at most a line's limit."""
    with open_regular(path, LOG_FIELD, LOG_MAX_BYTES) as file:
        for _ in range(LOG_MAX_LINE_BYTES // 4096 + 1):
            try:
                chunk = file.read(4096).lstrip()
            except OSError as error:
                raise SpecError(LOG_FIELD, str(path), f"cannot be read: {error.strerror}") from None
            if chunk:
                return chunk.startswith(b"{")
            if file.tell() >= LOG_MAX_BYTES or not file.peek(1):
                return False
    return False


@dataclass(frozen=True)
class ImportRequest:
    """What `collbench import nccl-tests` was asked for."""

    logs: tuple[Path, ...] = ()
    out: Path | None = None  # None: a new run directory under results/
    collective: str | None = None  # the collective measured, when the logs do not say
    knobs: tuple[str, ...] = ()  # NAME=VALUE labels of what the logs were measured with


def import_request(request: ImportRequest) -> ImportResult:
    """`import_logs` for what the command line asked (SpecError on bad input); the --knob
    labels checked as a sweep's are, their warnings recorded in meta.json by import_logs."""
    labels = dict(parse_knob_settings(request.knobs)[0])
    return import_logs(request.logs, out=request.out, collective=request.collective, knobs=labels)
