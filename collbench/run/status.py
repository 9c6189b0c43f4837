"""`collbench status RUN` and `collbench wait RUN`: look at, or follow, a run already started."""

from __future__ import annotations

import sys
from pathlib import Path

from collbench.core.errors import SpecError
from collbench.launchers.base import LaunchResult
from collbench.run.finalize import FINAL_STATES
from collbench.store.job import JOB_FILE, Job
from collbench.store.load import load_run
from collbench.store.rank_status import live_ranks, read_statuses
from collbench.store.rundir import META_FILE, read_meta
from collbench.store.sink import SinkFactory


def _load_job(run: Path) -> Job:
    if not (Path(run) / JOB_FILE).is_file():
        raise SpecError("RUN", str(run), f"is not a collbench run directory (no {JOB_FILE})")
    return Job.load(Path(run))


def describe_run(run: Path) -> str:
    """A few lines: launcher, Slurm job state, rows measured of rows planned, the run's state."""
    from collbench.core.spec import SweepSpec
    from collbench.launchers.slurm import job_state, read_slurm_record

    loaded = load_run(run)
    meta, rows = loaded.meta, loaded.rows
    if meta.source and not (Path(run) / JOB_FILE).is_file():
        logs = ", ".join(meta.imported_from or [])
        return (
            f"run {run}: imported from {meta.source} ({logs})\n"
            f"rows: {len(rows)}; state: {meta.state}"
        )
    job = _load_job(run)
    lines = [f"run {run}: launcher {job.launcher}, {job.nproc} rank(s)"]
    record = read_slurm_record(run)
    if record:
        state, reason, exit_code = job_state(record["job_id"])
        detail = f" ({reason})" if reason and reason != "None" else ""
        lines.append(
            f"Slurm job {record['job_id']}: {state or 'unknown to Slurm now'}{detail}"
            + (f", exit code {exit_code}" if exit_code and state else "")
        )
    if meta.spec is not None:  # rank 0 has written meta.json
        planned = len(SweepSpec.from_dict(meta.spec).steps())
        error = meta.extra.get("error")
        lines.append(
            f"rows: {len(rows)} of {planned}; state: {_state(run, meta.state)}"
            + (f"; error: {error}" if error else "")
        )
    elif (Path(run) / META_FILE).exists():
        lines.append(f"{META_FILE} unreadable; {len(rows)} row(s) on disk")
    elif rows:
        lines.append(f"{META_FILE} missing; {len(rows)} row(s) on disk")
    else:
        lines.append("rows: none yet (the ranks have not started)")
    return "\n".join(lines)


def _state(run: Path, state: str | None) -> str:
    """meta.json's state, unless it says running and no process of the run is left (the
    launcher and its ranks were killed before anyone could write the final state)."""
    if state != "running":
        return str(state)
    statuses = read_statuses(Path(run) / "ranks")
    if not statuses or live_ranks(Path(run) / "ranks"):
        return state  # running, or unwatched ranks (no status files) that nobody can judge
    return f"dead (meta.json says running, but no rank is alive; run `collbench finalize {run}`)"


def wait_for_run(run: Path, make_sink: SinkFactory) -> LaunchResult:
    """Re-attach to a Slurm run submitted with --no-wait and follow it like `sweep` would."""
    from collbench.launchers.slurm import read_slurm_record, watch

    job = _load_job(run)
    record = read_slurm_record(run)
    if job.launcher != "slurm" or record is None:
        raise SpecError(
            "RUN",
            str(run),
            "was not submitted with --launcher slurm --no-wait; nothing to wait for",
        )
    meta = read_meta(run)
    if meta is not None and meta.state in FINAL_STATES:
        print(describe_run(run), file=sys.stderr, flush=True)
    return watch(job, record["job_id"], make_sink(job.spec))
