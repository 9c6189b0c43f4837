"""Shared helpers: run the real `collbench` command in a subprocess and read its results."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
# Every skip for missing shared data starts with this; tests/conftest.py counts them in the summary.
SHARED_DATA_ABSENT = "shared/data absent"


def require_shared_data(path: Path) -> Path:
    """`path` (under SHARED_DATA) when it exists; otherwise skip the test, saying what is missing.

    The real logs live beside the checkout (../shared/data), not in it, so a fresh clone skips
    these tests; the skip is listed by `-ra` and counted at the end of every run.
    """
    __tracebackhide__ = True  # `-ra` then names the test that skipped, not this line
    if not path.exists():
        pytest.skip(f"{SHARED_DATA_ABSENT}: {path} is missing (expected beside the checkout)")
    return path


def collbench(
    *args: str, env: dict[str, str] | None = None, timeout: float = 180
) -> subprocess.CompletedProcess:
    """Run `python -m collbench ARGS` to completion, capturing its output."""
    return subprocess.run(
        [sys.executable, "-m", "collbench", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def start(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start `python -m collbench ARGS` in the background."""
    return subprocess.Popen(
        [sys.executable, "-m", "collbench", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def rows_of(run_dir: Path) -> list[dict[str, Any]]:
    path = Path(run_dir) / "rows.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def meta_of(run_dir: Path) -> dict[str, Any]:
    return json.loads((Path(run_dir) / "meta.json").read_text())


def wait_for_rows(run_dir: Path, count: int, timeout: float = 60) -> None:
    """Block until the run has at least `count` rows on disk."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if len(rows_of(run_dir)) >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"{run_dir} did not reach {count} rows in {timeout} s")


def rank_pid(run_dir: Path, rank: int) -> int:
    status = json.loads((Path(run_dir) / "ranks" / f"rank-{rank:05d}.json").read_text())
    return status["pid"]
