"""Run-directory arguments shared by the commands that read finished runs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collbench.store.load import Run


def load_run_dir(path: Path) -> Run:
    """A run directory's meta and rows, or SpecError naming the path."""
    from collbench.core.errors import SpecError
    from collbench.store.load import load_run

    if not Path(path).is_dir():
        raise SpecError("RUN", str(path), "is not a run directory")
    return load_run(
        path, "RUN", ": pass a directory written by collbench sweep or collbench import"
    )
