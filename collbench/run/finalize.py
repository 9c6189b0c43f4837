"""`collbench finalize RUN`: give a run that nobody finished its final state and rows.parquet.

The method, in full: docs/architecture.md#collbench-run-finalize-py.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from collbench.core.errors import SpecError
from collbench.store.gemm_rows import GEMM_FILE, count_gemm_rows
from collbench.store.job import JOB_FILE, Job
from collbench.store.rank_status import live_ranks, read_statuses
from collbench.store.rows import utc_now
from collbench.store.rundir import (
    META_FILE,
    PARQUET_FILE,
    ROWS_FILE,
    load_rows,
    read_meta,
    remove_temp_files,
    update_meta,
    write_parquet,
)

# Final states; `orphaned`: the launcher went away, and with it the ranks; `cancelled`: the
# scheduler cancelled the job before rank 0 wrote anything (launchers/slurm_state.py).
FINAL_STATES = ("completed", "failed", "interrupted", "orphaned", "cancelled")


def finalize_run(run: Path, complete_side_files: Callable[[Path], Any] | None = None) -> str:
    """Write rows.parquet and the final state of a run left `running` with no live process,
    and complete its side files (`complete_side_files(run)`: what it did, falsy for nothing,
    `.describe()` in one clause); returns what was done, in one line. SpecError for a run
    still alive, or final with nothing left to complete."""
    run = Path(run)
    meta = read_meta(run)
    if meta is None:
        raise SpecError(
            "RUN", str(run), f"has no readable {META_FILE}: not a run collbench can finalize"
        )
    if (run / JOB_FILE).exists():
        Job.load(run)  # a job.json that is not a job (a list, a FIFO): refused, nothing written
    if meta.state in FINAL_STATES:
        # a final run may still lack its parquet (a disk that filled at the very end, a
        # launcher killed after its ranks finished): mended whatever the state
        done = []
        if not (run / PARQUET_FILE).exists() and (rows := load_rows(run, warn=False)):
            write_parquet(run, rows)
            done.append(f"wrote its missing {PARQUET_FILE} ({len(rows)} row(s))")
        completed = complete_side_files(run) if complete_side_files is not None else None
        done += [completed.describe()] if completed else []
        if done:
            return f"run {run}: already final (state {meta.state}); {'; '.join(done)}"
        raise SpecError("RUN", str(run), f"is already final (state {meta.state}); nothing to do")
    alive = live_ranks(run / "ranks")
    if alive:
        rank = alive[0]
        raise SpecError(
            "RUN",
            str(run),
            f"is still running (rank {rank['rank']}, pid {rank.get('pid')} on "
            f"{rank.get('host')}, is alive); wait for it or stop it first",
        )
    rows = load_rows(run, warn=False)
    if rows:
        write_parquet(run, rows)
    failed = [s for s in read_statuses(run / "ranks") if s.get("state") == "failed"]
    state = "failed" if failed else "orphaned"
    error = (
        f"rank {failed[0]['rank']}: {failed[0].get('error')}"
        if failed
        else "no process of the run was alive (its launcher and ranks were killed)"
    )
    update_meta(run, state=state, finished_utc=utc_now(), error=error)
    remove_temp_files(run)
    completed = complete_side_files(run) if complete_side_files is not None else None
    side = f"; {completed.describe()}" if completed else ""
    if not rows and (run / GEMM_FILE).exists():  # a collbench gemm run
        return f"run {run}: state {state}; {count_gemm_rows(run)} row(s) kept in {GEMM_FILE}"
    kept = f"{ROWS_FILE} and {PARQUET_FILE}" if rows else ROWS_FILE
    return f"run {run}: state {state}; {len(rows)} row(s) kept in {kept}{side}"
