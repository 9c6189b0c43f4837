"""`collbench status RUN` and `collbench wait RUN`: look at, or follow, a run already started."""

from __future__ import annotations

import socket
import sys
from dataclasses import dataclass
from pathlib import Path

from collbench.core.errors import SpecError
from collbench.core.safe_text import escape_control
from collbench.launchers.base import LaunchResult
from collbench.run.finalize import FINAL_STATES
from collbench.store.gemm_rows import GEMM_FILE, count_gemm_rows
from collbench.store.job import JOB_FILE, Job
from collbench.store.meta import RunMeta
from collbench.store.rank_status import live_ranks, pid_alive, read_statuses
from collbench.store.rundir import META_FILE, PARQUET_FILE, count_rows, read_meta
from collbench.store.sink import SinkFactory
from collbench.store.tune_result import is_tune_dir, load_tune_result


def _load_job(run: Path) -> Job:
    if not (Path(run) / JOB_FILE).is_file():
        raise SpecError("RUN", str(run), f"is not a collbench run directory (no {JOB_FILE})")
    return Job.load(Path(run))


@dataclass(frozen=True)
class StatusRequest:
    """What `collbench status` was asked for."""

    run: Path | None = None  # None: the newest run directory under ./results


def latest_run(folder: Path) -> Path:
    """The newest run directory in `folder` (by its meta.json's time); SpecError if none."""
    runs = [path.parent for path in Path(folder).glob(f"*/{META_FILE}")]
    if not runs:
        raise SpecError("RUN", "", f"not given, and {folder}/ holds no run directory")
    return max(runs, key=lambda run: (run / META_FILE).stat().st_mtime)


def describe_run(run: Path) -> str:
    """A few lines: launcher, Slurm job state, rows measured of rows planned, the run's state."""
    from collbench.launchers.slurm_state import read_slurm_record

    tune = _describe_tune_dir(Path(run))
    if tune is not None:
        return tune
    # meta.json and a count of the rows: the rows themselves are never decoded here.
    meta, rows = read_meta(Path(run)) or RunMeta(), count_rows(Path(run))
    if not rows and (Path(run) / GEMM_FILE).exists() and not (Path(run) / JOB_FILE).is_file():
        return _describe_gemm_run(run, meta)
    if meta.source and not (Path(run) / JOB_FILE).is_file():
        logs = ", ".join(meta.imported_from or [])
        return (
            f"run {run}: imported from {meta.source} ({logs})\n"
            f"rows: {rows}; state: {_unknown_state(meta.state) or meta.state}"
        )
    job = _load_job(run)
    lines = [f"run {run}: launcher {job.launcher}, {job.nproc} rank(s)"]
    record = read_slurm_record(run)
    slurm_end = None
    if record:
        slurm_line, slurm_end = _slurm_job(run, record)
        lines.append(slurm_line)
    if meta.spec is not None:  # rank 0 has written meta.json
        planned = _planned(meta.spec)
        error = meta.extra.get("error")
        lines.append(
            f"rows: {rows}{planned}; state: {_state(run, meta.state, slurm_end)}"
            + (f"; error: {escape_control(str(error))}" if error else "")
        )
        if rows and meta.state in FINAL_STATES and not (Path(run) / PARQUET_FILE).exists():
            lines.append(f"{PARQUET_FILE} missing: run `collbench finalize {run}` to write it")
    elif (Path(run) / META_FILE).exists():
        lines.append(f"{META_FILE} unreadable; {rows} row(s) on disk")
    elif rows:
        lines.append(f"{META_FILE} missing; {rows} row(s) on disk")
    else:
        lines.append(_no_rows(run, slurm_end))
    return "\n".join(lines)


def _planned(spec_fields: dict) -> str:
    """ " of N" rows planned; "" for a doctor (it plans its rounds from the nodes it finds)
    or a spec meta.json does not hold whole (a damaged file: the state line still shows)."""
    from collbench.core.doctor_spec import DOCTOR
    from collbench.core.spec import SweepSpec

    try:
        spec = SweepSpec.from_dict(spec_fields)
        return "" if spec.command == DOCTOR else f" of {len(spec.steps())}"
    except (ValueError, TypeError, KeyError, AttributeError):
        return ""


def _describe_gemm_run(run: Path, meta: RunMeta) -> str:
    """A `collbench gemm` run: no job, no ranks; its shapes measured of those planned."""
    gemm = meta.extra.get("gemm") if isinstance(meta.extra.get("gemm"), dict) else {}
    shapes = gemm.get("shapes")
    planned = f" of {len(shapes)}" if isinstance(shapes, list) else ""
    where = f" on {gemm['accelerator']}" if gemm.get("accelerator") else ""
    dtype = f", {gemm['dtype']}" if gemm.get("dtype") else ""
    state = "unknown (no meta.json)" if meta.state is None else meta.state
    state = (meta.state is not None and _unknown_state(meta.state)) or state
    if state == "running":
        state = _gemm_running(run, gemm)
    return (
        f"run {run}: collbench gemm{where}{dtype}\n"
        f"shapes: {count_gemm_rows(Path(run))}{planned} in {GEMM_FILE}; state: {state}"
    )


def _describe_tune_dir(tune: Path) -> str | None:
    """A `collbench tune` directory (its settings/ and probes/ hold one run directory per
    setting and repeat; tune.json once it has chosen): each setting run's rows and state, dead
    ones included, and how the tune ended. None: not a tune's directory."""
    setting_runs = sorted(
        path.parent
        for folder in ("settings", "probes")
        for path in (tune / folder).glob(f"*/{JOB_FILE}")
    )
    chosen = is_tune_dir(tune)
    if not setting_runs and not chosen:
        return None
    lines = [f"tune {tune}: {len(setting_runs)} setting run(s)"]
    for run in setting_runs:
        meta = read_meta(run)
        state = "starting (no meta.json yet)" if meta is None else _state(run, meta.state)
        rows = count_rows(run) if meta is not None else 0
        lines.append(f"  {run.relative_to(tune)}: {rows} row(s); state: {state}")
    if chosen:
        result = load_tune_result(tune, "RUN")
        ended = f"interrupted: {result.interrupted}" if result.interrupted else "completed"
        lines.append(f"tune.json: {len(result.settings)} setting(s); {ended}")
    else:
        lines.append(
            "no tune.json: the tune is still running, or it was killed before it could choose "
            "(its finished setting runs are kept; `collbench tune from` can choose from them)"
        )
    return "\n".join(lines)


def _gemm_running(run: Path, gemm: dict) -> str:
    """A gemm run meta.json calls running: dead when its process (recorded with its start
    token) is gone from this host; on another host, or recorded before gemm kept its pid,
    running with what to do if it was killed."""
    if gemm.get("host") == socket.gethostname() and "pid" in gemm:
        if not pid_alive(gemm.get("pid"), gemm.get("pid_token")):
            return (
                "dead (meta.json says running, but its process is gone; "
                f"run `collbench finalize {run}`)"
            )
        return "running"
    return f"running (if its process was killed: `collbench finalize {run}`)"


def _slurm_job(run: Path, record: dict) -> tuple[str, str | None]:
    """The Slurm job's line and how Slurm ended it (None while it may run). Its state and
    reason come from Slurm (slurm_state.job_state), else from slurm.json (what a watching collbench last saw: Slurm
    forgets a job minutes after its end); a job pending for a reason no wait cures says so."""
    from collbench.launchers.slurm import SUBMITIT_FOLDER
    from collbench.launchers.slurm_state import ENDED_STATES, HOPELESS, job_state, slurm_job

    job_id = record["job_id"]
    state, reason, exit_code = job_state(slurm_job(job_id, run / SUBMITIT_FOLDER))
    remembered = str(record.get("state") or "")
    reason = reason if state else str(record.get("reason") or "")
    detail = f" ({reason})" if reason and reason != "None" else ""
    if state:
        ended = exit_code and state in ENDED_STATES  # a pending job's 0:0 says nothing
        shown = f"{state}{detail}" + (f", exit code {exit_code}" if ended else "")
    else:
        shown = f"{remembered}{detail}, as last seen" if remembered else "unknown to Slurm now"
    if state == "PENDING" and reason in HOPELESS:
        shown += (
            f"; it can never start as asked ({HOPELESS[reason]}): `collbench wait {run}` "
            f"cancels it and marks the run cancelled, or scancel {job_id}"
        )
    # how Slurm ended a job that will run no more ("was cancelled", "ended TIMEOUT")
    word = (state or remembered).split()[0] if state or remembered else ""
    end = None
    if word in ENDED_STATES:
        end = "was cancelled" if word == "CANCELLED" else f"ended {word}"
    return f"Slurm job {job_id}: {escape_control(shown)}", end


def _no_rows(run: Path, slurm_end: str | None) -> str:
    """No row and no meta.json yet: have the ranks not started, or will they never write?"""
    statuses = read_statuses(Path(run) / "ranks")
    logs = list((Path(run) / "logs").glob("rank-*.log"))
    started = len(statuses) or len(logs)
    if slurm_end:
        who = (
            f"{started} rank(s) had started; see {Path(run) / 'logs'}"
            if started
            else "no rank had started"
        )
        return f"rows: none; the Slurm job {slurm_end} before rank 0 wrote any ({who})"
    if started:
        return f"rows: none yet ({started} rank(s) started; rank 0 has not written {META_FILE})"
    return "rows: none yet (the ranks have not started)"


def _state(run: Path, state: str | None, slurm_end: str | None = None) -> str:
    """meta.json's state, unless it says running and no process of the run is left (the
    launcher and its ranks were killed before anyone could write the final state), or
    Slurm has ended the job. A state collbench never writes (a damaged meta.json) is said
    to be one, escaped to stay on its line."""
    unknown = _unknown_state(state)
    if unknown:
        return unknown
    if state != "running":
        return str(state)
    if slurm_end:
        return (
            f"stopped (the Slurm job {slurm_end}; meta.json still says running: "
            f"run `collbench finalize {run}`)"
        )
    statuses = read_statuses(Path(run) / "ranks")
    if not statuses or live_ranks(Path(run) / "ranks"):
        return state  # running, or unwatched ranks (no status files) that nobody can judge
    return f"dead (meta.json says running, but no rank is alive; run `collbench finalize {run}`)"


def _unknown_state(state: object) -> str | None:
    """What to say of a meta.json state collbench never writes (None: a state it writes)."""
    if state in ("running", *FINAL_STATES):
        return None
    shown = "no state" if state is None else f"state {escape_control(repr(state))}"
    return (
        f"unknown (meta.json holds {shown}; collbench writes one of running, "
        f"{', '.join(FINAL_STATES)}: the file is damaged)"
    )


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
