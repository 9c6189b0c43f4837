"""Limits on what collbench reads back: file sizes, line lengths, nesting depth and integers.

The method, in full: docs/architecture.md#collbench-core-limits-py.
"""

from __future__ import annotations

import re
from itertools import accumulate

MIB = 1024 * 1024

# nccl-tests / rccl-tests logs (`collbench import`): a 200k-row log is about 25 MiB.
LOG_MAX_BYTES = 64 * MIB
LOG_MAX_LINE_BYTES = 64 * 1024  # a table row is ~150 bytes; NCCL INFO lines a few hundred
# A run's rows.jsonl: a row with every iteration's sample can be long, but not endless.
ROWS_MAX_BYTES = 1024 * MIB
ROWS_MAX_LINE_BYTES = 16 * MIB
# A JSON file collbench wrote is parsed whole, into up to ~20x its size in memory (200 MiB
# took 2.2 GiB): each is held to what a real one needs, most to 1 MiB (they hold a few KiB).
JSON_MAX_BYTES = 1 * MIB
JSON_MAX_BYTES_OF = {
    "meta.json": 16 * MIB,  # ~250 bytes a rank: 64k ranks
    "doctor.json": 32 * MIB,  # ~80 bytes a measured node pair: --pairs all on ~900 nodes
    "tune.json": 8 * MIB,  # each setting's runs and each best choice
}
TOPOLOGY_MAX_BYTES = 1 * MIB  # the catalog's largest file is a few KiB
CONFIG_MAX_BYTES = 1 * MIB  # a --config file: a few hundred bytes of options
# Brackets or YAML collections inside one another; collbench's own files nest fewer than 10.
MAX_NESTING_DEPTH = 100
# An integer a row stores (sizes, counts): rows.parquet holds them as int64.
INT64_MAX = 2**63 - 1

_JSON_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*"'
_JSON_SKIPPED = re.compile(_JSON_STRING)
# TOML adds literal strings and comments (multi-line strings are sequences of these).
_TOML_SKIPPED = re.compile(_JSON_STRING + r"|'[^'\n]*'|#[^\n]*")
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def nesting_depth(text: str, toml: bool = False) -> int:
    """How deep `text`'s brackets nest ([ and {, outside strings; with `toml`, outside
    literal strings and comments too). Linear in the text and never recursive: it decides
    whether a parser may be given the text (`too_deep`)."""
    skipped = (_TOML_SKIPPED if toml else _JSON_SKIPPED).sub("", text)
    brackets = _NOT_BRACKET.sub("", skipped)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def too_deep(text: str, toml: bool = False) -> bool:
    """True when `text` nests more than MAX_NESTING_DEPTH brackets deep (see nesting_depth)."""
    if text.count("[") + text.count("{") <= MAX_NESTING_DEPTH:  # cannot nest deeper than it opens
        return False
    return nesting_depth(text, toml) > MAX_NESTING_DEPTH


def size_text(n_bytes: int) -> str:
    """A limit as docs/errors.md states it: 64 MiB, 64 KiB, 100 bytes."""
    for unit, scale in (("GiB", 1024**3), ("MiB", MIB), ("KiB", 1024)):
        if n_bytes >= scale and n_bytes % scale == 0:
            return f"{n_bytes // scale} {unit}"
    return f"{n_bytes} bytes"
