"""One way to read a finished (or running) run directory: `load_run`, used by every command."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collbench.core.errors import SpecError
from collbench.core.safe_text import escape_control
from collbench.store.columns import read_rows_apart
from collbench.store.gemm_rows import GEMM_FILE
from collbench.store.meta import RunMeta
from collbench.store.rows import OVERLAP, SWEEP, ProbeRow, ResultRow, rows_of
from collbench.store.rundir import load_rows, read_meta


@dataclass(frozen=True)
class Run:
    """One run as loaded from its directory: its meta.json and its typed rows."""

    path: str
    meta: RunMeta  # empty (every field unknown) when the directory has no meta.json
    rows: Sequence[ResultRow]
    # Loaded with its samples apart (load_run's `reduce`): per row, what `reduce` made of its
    # samples, and the rows hold none (time_us_samples empty). None: the rows hold them.
    reduced: tuple[Any, ...] | None = None

    @property
    def run_id(self) -> str:
        return str(self.meta.run_id or self.path)

    def rows_of(self, kind: str) -> list[Any]:
        """The rows of one kind (store.rows: SWEEP, OVERLAP, DOCTOR), in file order."""
        return rows_of(self.rows, kind)

    @property
    def sweep_rows(self) -> list[ResultRow]:
        """The rows a sweep measured (kind SWEEP), in file order."""
        return self.rows_of(SWEEP)

    @property
    def probe_rows(self) -> list[ProbeRow]:
        """The overlap-probe rows (kind OVERLAP), in file order."""
        return self.rows_of(OVERLAP)


# What a reader keeps of one row's samples: reduce(row, samples as a float64 numpy array).
Reduce = Callable[[ResultRow, Any], Any]


def load_run(
    path: Path | str, field: str | None = None, hint: str = "", reduce: Reduce | None = None
) -> Run:
    """A run directory's meta and rows (none yet: empty rows, an empty RunMeta).

    With `field`, a path that holds no result rows is a SpecError naming that field and the
    path: "holds no result rows (no rows.jsonl)" followed by the caller's `hint`. A row
    collbench cannot read is a SpecError naming its file and line.

    With `reduce`, the rows are read with their samples apart (store.columns: column-wise
    from a faithful rows.parquet), and the Run keeps what `reduce` made of each row's.
    """
    rows, reduced = [], None
    if Path(path).is_dir() and reduce is None:
        rows = load_rows(Path(path))
    elif Path(path).is_dir():  # with its samples apart
        pairs = read_rows_apart(Path(path), reduce)
        rows, reduced = [row for row, _ in pairs], tuple(made for _, made in pairs)
    if field is not None and not rows and (Path(path) / GEMM_FILE).exists():
        raise SpecError(
            field,
            str(path),
            "holds collbench gemm rows (gemm.jsonl), not result rows: collbench mfu --gemm "
            "reads them",
        )
    if field is not None and not rows:
        raise SpecError(field, str(path), f"holds no result rows {_why_no_rows(Path(path), hint)}")
    return Run(str(path), read_meta(Path(path), field) or RunMeta(), rows, reduced)


def _why_no_rows(run_dir: Path, hint: str) -> str:
    """Why a directory holds no rows: the end its meta.json records, state and error (a run
    cancelled or failed before it measured, e.g. a Slurm job that could never start), else
    "(no rows.jsonl)" and the caller's `hint`."""
    meta = read_meta(run_dir) if run_dir.is_dir() else None
    error = meta.extra.get("error") if meta is not None else None
    if meta is None or meta.state in (None, "running", "completed") or not error:
        return f"(no rows.jsonl){hint}"
    return f"(the run ended {meta.state} before measuring any: {escape_control(str(error))})"
