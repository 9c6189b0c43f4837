"""A requeued Slurm job (preempted, or `scontrol requeue`) runs its batch script again, and
its ranks find in the run directory what the earlier attempt wrote. Rank 0 writes one row per
step, in the order of SweepSpec.steps(), each synced before the next step starts, so the rows
kept are the first steps: the new attempt starts at the first step without a row and measures
nothing twice. meta.json lists every attempt (`attempts`)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from collbench.core.errors import SpecError
from collbench.core.spec import Step
from collbench.store.meta import RunMeta
from collbench.store.rundir import ROWS_FILE, load_rows, read_meta

# Set by Slurm in a job's environment: how often it was requeued (0 or unset: first run).
RESTART_VAR = "SLURM_RESTART_COUNT"


def attempt(environ: Mapping[str, str] = os.environ) -> int:
    """Which attempt of its job this is (0: the first)."""
    text = environ.get(RESTART_VAR, "")
    return int(text) if text.isdigit() else 0


def kept_steps(run_dir: Path, steps: Sequence[Step]) -> tuple[int, int]:
    """(how many of `steps` an earlier attempt measured, their rows' #wrong). A row cut short
    by the kill is dropped first; rows that are not the first steps are a SpecError."""
    path = Path(run_dir) / ROWS_FILE
    if not path.exists():
        return 0, 0
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):  # cut after the last whole line
        with open(path, "r+b") as handle:
            handle.truncate(data.rfind(b"\n") + 1)
    rows = load_rows(run_dir, warn=False)
    for index, (row, step) in enumerate(zip(rows, steps, strict=False)):
        if (row.collective, row.placement, row.repeat_index) != (
            step.collective,
            step.placement,
            step.repeat,
        ) or len(rows) > len(steps):
            raise SpecError(
                ROWS_FILE, str(path), f"row {index + 1} is not this sweep's step: cannot resume"
            )
    return len(rows), sum(row.n_wrong or 0 for row in rows)


def resumed_meta(run_dir: Path, meta: RunMeta, kept: int) -> RunMeta:
    """This attempt's meta.json: the first attempt's start, and every attempt listed."""
    earlier = read_meta(run_dir)
    if earlier is None:
        return meta
    attempts: list[dict[str, Any]] = list(earlier.extra.get("attempts") or [])
    if not attempts:
        attempts.append({"attempt": 0, "started_utc": earlier.started_utc})
    attempts.append({"attempt": attempt(), "started_utc": meta.started_utc, "rows_kept": kept})
    return replace(
        meta, started_utc=earlier.started_utc, extra={**meta.extra, "attempts": attempts}
    )


def set_aside(run_dir: Path) -> Path | None:
    """A requeued doctor's earlier rows move to rows-attempt-N.jsonl, kept whole (None when
    it wrote none): it writes the rounds it keeps (those on the same hosts and ranks) again."""
    rows = Path(run_dir) / ROWS_FILE
    if not rows.exists():
        return None
    kept = rows.with_name(f"rows-attempt-{attempt() - 1}.jsonl")
    rows.replace(kept)
    return kept
