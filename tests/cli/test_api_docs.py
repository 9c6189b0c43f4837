"""The Python examples of docs/api.md run as written: each block in a fresh namespace, in a
scratch directory (the Slurm one in tests/launchers/test_slurm.py, on the test cluster)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def python_blocks() -> list[str]:
    """docs/api.md's ```python blocks, in order."""
    return re.findall(r"^```python\n(.*?)^```", DOC.read_text(encoding="utf-8"), re.M | re.S)


def run_block(code: str, folder: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run one block in `folder`; what it printed."""
    import contextlib
    import io

    monkeypatch.chdir(folder)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, str(DOC), "exec"), {"__name__": "docs_api"})
    return printed.getvalue()


def test_the_page_has_its_three_examples():
    blocks = python_blocks()
    assert len(blocks) == 3 and "api.submit" in blocks[2]


@pytest.mark.slow  # two sweeps of real gloo ranks
def test_measure_fit_and_compare(tmp_path, monkeypatch):
    printed = run_block(python_blocks()[0], tmp_path, monkeypatch)
    assert len(printed.splitlines()) == 7  # one line a size, 1 KiB to 64 KiB
    assert (tmp_path / "api-before" / "rows.jsonl").is_file()


def test_mfu(tmp_path, monkeypatch):
    printed = run_block(python_blocks()[1], tmp_path, monkeypatch)
    assert printed.startswith("dgx-h100 MFU ")
