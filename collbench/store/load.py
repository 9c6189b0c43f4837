"""One way to read a finished (or running) run directory: `load_run`, used by every command."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collbench.core.errors import SpecError
from collbench.store.gemm_rows import GEMM_FILE
from collbench.store.meta import RunMeta
from collbench.store.rows import DOCTOR, OVERLAP, SWEEP, DoctorRow, ProbeRow, ResultRow, rows_of
from collbench.store.rundir import load_rows, read_meta


@dataclass(frozen=True)
class Run:
    """One run as loaded from its directory: its meta.json and its typed rows."""

    path: str
    meta: RunMeta  # empty (every field unknown) when the directory has no meta.json
    rows: Sequence[ResultRow]

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

    @property
    def doctor_rows(self) -> list[DoctorRow]:
        """The doctor's rows (kind DOCTOR), in file order."""
        return self.rows_of(DOCTOR)


def load_run(path: Path | str, field: str | None = None, hint: str = "") -> Run:
    """A run directory's meta and rows (none yet: empty rows, an empty RunMeta).

    With `field`, a path that holds no result rows is a SpecError naming that field and the
    path: "holds no result rows (no rows.jsonl)" followed by the caller's `hint`. A row
    collbench cannot read is a SpecError naming its file and line.
    """
    rows = load_rows(Path(path)) if Path(path).is_dir() else []
    if field is not None and not rows and (Path(path) / GEMM_FILE).exists():
        raise SpecError(
            field,
            str(path),
            "holds collbench gemm rows (gemm.jsonl), not result rows: collbench mfu --gemm "
            "reads them",
        )
    if field is not None and not rows:
        raise SpecError(field, str(path), f"holds no result rows (no rows.jsonl){hint}")
    return Run(str(path), read_meta(Path(path)) or RunMeta(), rows)
