"""Bounded reads of the files collbench reads back: regular files only, within core.limits.

The method, in full: docs/run-directory.md#collbench-store-reading-py.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from collbench.core.errors import SpecError
from collbench.core.limits import (
    JSON_MAX_BYTES,
    JSON_MAX_BYTES_OF,
    MAX_NESTING_DEPTH,
    ROWS_MAX_BYTES,
    ROWS_MAX_LINE_BYTES,
    size_text,
    too_deep,
)
from collbench.store.row_values import short

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def open_regular(path: Path, field: str, max_bytes: int) -> BinaryIO:
    """`path` opened for binary reading when it is a regular file of at most `max_bytes`;
    a SpecError naming `field` and the path otherwise (missing, unreadable, a device, a FIFO,
    too large). A FIFO is never opened for reading; a device is never read."""
    path = Path(path)
    try:
        _check_regular(path, os.stat(path), field, max_bytes)
        # O_NONBLOCK: should the path become a FIFO between the stat and the open, the open
        # returns at once (and the fstat below refuses it) instead of waiting for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as error:
        raise SpecError(field, str(path), f"cannot be read: {_reason(error)}") from None
    try:
        _check_regular(path, os.fstat(fd), field, max_bytes)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _check_regular(path: Path, info: os.stat_result, field: str, max_bytes: int) -> None:
    kind = next((name for test, name in _KINDS if test(info.st_mode)), None)
    if kind is not None or not stat.S_ISREG(info.st_mode):
        raise SpecError(
            field,
            str(path),
            f"cannot be read: it is {kind or 'not a regular file'}, and collbench reads only "
            "regular files",
        )
    if info.st_size > max_bytes:
        raise SpecError(field, str(path), _over_limit(info.st_size, max_bytes))


def _over_limit(n_bytes: int | None, max_bytes: int) -> str:
    size = f"is {n_bytes} bytes" if n_bytes is not None else "grew while it was read"
    return f"{size}, over collbench's limit of {size_text(max_bytes)} for this file"


def _reason(error: OSError) -> str:
    return error.strerror or str(error)


def _read(read: Callable[[int], bytes], size: int, field: str, path: Path) -> bytes:
    """read(size) of an open file; an OSError is the SpecError naming `field` and the path."""
    try:
        return read(size)
    except OSError as error:
        raise SpecError(field, str(path), f"cannot be read: {_reason(error)}") from None


def read_bytes(path: Path, field: str, max_bytes: int) -> bytes:
    """A regular file's bytes, at most `max_bytes` of them (SpecError otherwise)."""
    with open_regular(path, field, max_bytes) as file:
        data = _read(file.read, max_bytes + 1, field, path)
    if len(data) > max_bytes:  # it grew after the size was checked
        raise SpecError(field, str(path), _over_limit(None, max_bytes))
    return data


def read_text(path: Path, field: str, max_bytes: int) -> str:
    """A regular file's UTF-8 text, at most `max_bytes` long (SpecError otherwise)."""
    data = read_bytes(path, field, max_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise SpecError(
            field, str(path), f"is not UTF-8 text ({error.reason} at byte {error.start})"
        ) from None


def iter_lines(
    path: Path, field: str, max_line_bytes: int, max_bytes: int
) -> Iterator[tuple[int, bytes]]:
    """(line number, the line's bytes with its b"\\n" if it has one) of a regular file, one
    line read at a time: a line longer than `max_line_bytes` or a file larger than
    `max_bytes` is a SpecError naming the file and line, found without reading further."""
    with open_regular(path, field, max_bytes) as file:
        total, number = 0, 0
        while True:
            line = _read(file.readline, max_line_bytes + 1, field, path)
            if not line:
                return
            number += 1
            total += len(line)
            if len(line) > max_line_bytes and not line.endswith(b"\n"):
                raise SpecError(
                    field,
                    str(path),
                    f"line {number} is longer than {size_text(max_line_bytes)}, collbench's "
                    "limit for a line of this file",
                )
            if total > max_bytes:
                raise SpecError(field, str(path), _over_limit(None, max_bytes))
            yield number, line


def check_depth(text: str, field: str, where: str) -> None:
    """SpecError naming `where` when `text` nests deeper than MAX_NESTING_DEPTH (a parser
    would recurse that deep)."""
    if too_deep(text):
        raise SpecError(
            field,
            where,
            f"nests deeper than {MAX_NESTING_DEPTH} levels, collbench's limit: "
            "not a file it wrote or reads",
        )


LONG_NUMBER = "is JSON with a number too long to read (over Python's 4,300 digits)"


def load_json(path: Path, field: str) -> Any:
    """A JSON file collbench wrote (meta.json, job.json, tune.json, doctor.json), read within
    its limit (core.limits, by `field`: its name), its depth checked before it is parsed;
    SpecError naming `field` and the path for anything else (too large, too deep, not JSON)."""
    text, where = read_text(path, field, JSON_MAX_BYTES_OF.get(field, JSON_MAX_BYTES)), str(path)
    check_depth(text, field, where)
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise SpecError(field, where, f"is not JSON (line {error.lineno}: {error.msg})") from None
    except (ValueError, RecursionError):  # an integer of thousands of digits
        raise SpecError(field, where, LONG_NUMBER) from None


def read_json_file(path: Path, field: str) -> Any | None:
    """A JSON file that may be missing or cut short (a run's meta.json): None when it is
    missing or its content is not JSON; a SpecError naming `field` when it cannot be read
    within the limits (a FIFO, a device, larger than load_json's limit, nested too deep)."""
    path = Path(path)
    if not path.exists():
        return None
    limit = JSON_MAX_BYTES_OF.get(field, JSON_MAX_BYTES)
    text = read_bytes(path, field, limit).decode("utf-8", errors="replace")
    check_depth(text, field, str(path))
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None
    except ValueError:  # JSON, but not what Python reads
        raise SpecError(field, str(path), LONG_NUMBER) from None


def load_json_object(path: Path, field: str) -> dict[str, Any]:
    """load_json for a file that holds one JSON object (SpecError for a list, a number...)."""
    data = load_json(path, field)
    if not isinstance(data, dict):
        kinds = ((list, "list"), (str, "string"), (bool, "boolean"), ((int, float), "number"))
        kind = next((name for types, name in kinds if isinstance(data, types)), "null")
        raise SpecError(field, str(path), f"holds a JSON {kind}, not an object")
    return data


def json_lines(path: Path, warn: bool = True) -> Iterator[tuple[Any, str]]:
    """(decoded line, "FILE line N") for each line of a JSON-lines file that rows are
    appended to (rows.jsonl, gemm.jsonl; none when it is missing), read a line at a time
    within ROWS_MAX_LINE_BYTES and ROWS_MAX_BYTES. The unterminated last line of a write cut
    short is skipped, with a warning; any other line that is not JSON is a SpecError."""
    path = Path(path)
    if not path.exists():
        return
    for number, raw in iter_lines(path, path.name, ROWS_MAX_LINE_BYTES, ROWS_MAX_BYTES):
        decoded = _decoded(path, number, raw, warn)
        if decoded is not None:
            yield decoded


def _decoded(path: Path, number: int, raw: bytes, warn: bool) -> tuple[Any, str] | None:
    """Line `number` of `path` as json_lines reads it: (its JSON, "FILE line N"); None for a
    blank line, or for the cut-short last line of a write (with a warning) that is not whole
    UTF-8 or JSON; a SpecError for any other line that is not JSON."""
    where = f"{path} line {number}"
    cut_short = not raw.endswith(b"\n")  # only the last line can lack its newline
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError:
        if cut_short:  # cut inside a character
            _warn_truncated(path, warn)
            return None
        raise SpecError("row", f"{len(raw)} bytes", f"in {where} are not UTF-8 text") from None
    if not line.strip():
        return None
    check_depth(line, "row", where)
    try:
        return json.loads(line), where
    except json.JSONDecodeError as error:
        if cut_short:
            _warn_truncated(path, warn)
            return None
        raise SpecError(
            "row", short(line.rstrip("\n")), f"in {where} is not JSON ({error.msg})"
        ) from None
    except ValueError as error:  # an integer of thousands of digits
        raise SpecError("row", short(line.rstrip("\n")), f"in {where}: {error}") from None


def _warn_truncated(path: Path, warn: bool) -> None:
    """A last line without its newline: a write cut short, skipped (never half-read)."""
    if warn:
        print(f"collbench: warning: skipped a truncated row in {path}", file=sys.stderr)


def count_json_lines(path: Path, warn: bool, check: Check) -> int:
    """How many lines `json_lines` would yield (0 when the file is missing), without decoding
    the whole lines that look like JSON objects: what a status line counts. Refused as
    json_lines refuses it (naming the file and line) where a line is not UTF-8 text or, when
    it does not look like an object, not JSON (json_lines decodes those to say so, and
    `check(data, where)` may refuse them too). The unterminated last line of a write cut
    short counts only when it is whole JSON."""
    path = Path(path)
    if not path.exists():
        return 0
    count = 0
    for number, raw in iter_lines(path, path.name, ROWS_MAX_LINE_BYTES, ROWS_MAX_BYTES):
        text = raw.strip()
        if raw.endswith(b"\n") and text[:1] == b"{" and text[-1:] == b"}" and _utf8(raw):
            count += 1
        elif (decoded := _decoded(path, number, raw, warn)) is not None:
            check(*decoded)
            count += 1
    return count


# Checks a decoded line (the data, "FILE line N"): raises SpecError when it is not a row.
Check = Callable[[Any, str], Any]


def _utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False  # _decoded refuses it, naming the line
    return True
