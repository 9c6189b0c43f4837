"""A Slurm job's state: what Slurm says of it now (job_state), and what its run directory
keeps of it (slurm.json: the submission, and how the job ended) for `status` and `report`.

The method, in full: docs/launchers.md#launchers-slurm-state-py.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collbench.core.errors import SpecError
from collbench.store.reading import load_json
from collbench.store.rundir import read_meta, update_meta, write_json_atomic

SLURM_FILE = "slurm.json"
# meta.json's `written_by` when the launcher wrote it (launchers.supervise.write_launcher_meta)
_BY_LAUNCHER = "launcher"


@dataclass(frozen=True)
class SlurmEnd:
    """A job's end as the watcher saw it."""

    job_id: str
    state: str  # Slurm's final state: CANCELLED, TIMEOUT, COMPLETED ...
    reason: str = ""  # Slurm's reason for the state ("": none given)
    meaning: str = ""  # what the reason means for the user ("": not one collbench knows)

    def record(self) -> dict[str, Any]:
        """The keys slurm.json and meta.json's `scheduler` keep (no empty ones)."""
        kept = {"state": self.state, "reason": self.reason, "reason_means": self.meaning}
        return {key: value for key, value in kept.items() if value}


def keep_end(run_dir: Path, record: dict[str, Any], end: SlurmEnd) -> None:
    """slurm.json (`record`, the submission's) with the job's end; a job cancelled before
    rank 0 wrote meta.json marks the run `cancelled`. A full disk keeps what it can: the
    run's own files say the rest."""
    with contextlib.suppress(OSError):
        write_json_atomic(Path(run_dir) / SLURM_FILE, {**record, **end.record()})
        if end.state == "CANCELLED" and _launcher_meta(Path(run_dir)):
            scheduler = {"name": "slurm", "job_id": end.job_id, **end.record()}
            update_meta(Path(run_dir), state="cancelled", scheduler=scheduler)


def _launcher_meta(run_dir: Path) -> bool:
    """True when meta.json is the one the launcher wrote because rank 0 never wrote one (no
    rank measured anything), with the state it gives a failed run."""
    meta = read_meta(run_dir)
    written_by = str((meta.extra.get("written_by") if meta else None) or "")
    return meta is not None and meta.state == "failed" and written_by.startswith(_BY_LAUNCHER)


# States after which a job runs no more (squeue/scontrol/sacct spellings).
ENDED_STATES = frozenset(
    "COMPLETED FAILED CANCELLED TIMEOUT NODE_FAIL PREEMPTED OUT_OF_MEMORY BOOT_FAIL DEADLINE "
    "REVOKED SPECIAL_EXIT".split()
)
POLL_STATE_S = 1.0
# Pending reasons that no amount of waiting cures, with what they mean for the user.
HOPELESS = {
    "PartitionTimeLimit": "--time is above the partition's limit",
    "PartitionNodeLimit": "--nodes is outside the partition's limits",
    "PartitionConfig": "the request does not fit the partition",
    "BadConstraints": "no node has the --constraint / resources asked for",
    "InvalidAccount": "--account is not valid",
    "InvalidQOS": "--qos is not valid",
    "QOSMaxWallDurationPerJobLimit": "--time is above the QOS limit",
    "AssocMaxWallDurationPerJobLimit": "--time is above the account's limit",
}
# How long a hopeless reason must persist: Slurm sometimes shows one briefly while it decides.
HOPELESS_AFTER_S = 3.0
# How long Slurm may not know a submitted job before it is taken as ended UNKNOWN (scontrol
# forgets jobs MinJobAge seconds after their end, 300 by default; a restarting slurmctld
# answers late).
UNKNOWN_AFTER_S = 60.0


@functools.cache
def _followed_job() -> type:
    """submitit's SlurmJob whose watcher asks sacct at most once a second, in one call for
    every job this process follows (submitit's own backs off to once in ten minutes, too
    slow to see a sweep end)."""
    import submitit
    from submitit.slurm.slurm import SlurmInfoWatcher

    # its warning when sacct fails (no accounting) would come every second: job_state says it
    logging.getLogger("submitit").setLevel(logging.ERROR)

    class FollowedJob(submitit.SlurmJob):
        watcher = SlurmInfoWatcher(delay_s=int(POLL_STATE_S))

    return FollowedJob


def slurm_job(job_id: str, folder: Path | None = None) -> Any:
    """submitit's job object of a submitted job (`folder`: submitit's files, if any)."""
    return _followed_job()(folder=Path(folder or "."), job_id=str(job_id))


def job_state(job: Any) -> tuple[str, str, str]:
    """(state, reason, exit code) of submitit's job object `job` (slurm_job). The state is
    submitit's (sacct, through Slurm's accounting); Slurm's reason and exit code, which
    submitit does not ask for, are scontrol's, as is the state while accounting does not
    know the job (just submitted, or a cluster without slurmdbd) or calls it pending
    (accounting hears of a start seconds late). ("", "", "") when neither knows it (asked
    again at the next poll)."""
    accounted = str(job.state).split()  # "CANCELLED by 0"; "UNKNOWN" when sacct is silent
    state = accounted[0] if accounted and accounted[0] != "UNKNOWN" else ""
    if state and state not in ENDED_STATES and state != "PENDING":
        return state, "", ""
    fields = job_fields(job.job_id)
    if state in ("", "PENDING"):
        state = fields.get("JobState") or state
    return state, fields.get("Reason", ""), fields.get("ExitCode", "")


class JobWatch:
    """A submitted job as collbench follows it, one poll (check) at a time: Slurm's state,
    reason and exit code, each change told once (`on_state`); an end believed when seen
    twice (a requeued job shows ended for a moment); a job pending for a reason no wait
    cures cancelled after HOPELESS_AFTER_S (`hopeless` names the reason); a job Slurm does
    not know for UNKNOWN_AFTER_S taken as ended, state UNKNOWN."""

    def __init__(
        self, job_id: str, on_state: Callable[[str], None], folder: Path | None = None
    ) -> None:
        self.job, self.job_id, self.on_state = slurm_job(job_id, folder), str(job_id), on_state
        self.state, self.reason, self.exit_code, self.hopeless = "PENDING", "", "", ""
        self._told, self._ending = "", ""
        self._since: dict[str, float] = {}  # since when unknown, or hopelessly pending

    @property
    def ended(self) -> bool:
        return self.state in ENDED_STATES or self.state == "UNKNOWN"

    def check(self, now: float) -> None:
        """One poll; nothing once the job ended."""
        if self.ended:
            return
        state, reason, exit_code = job_state(self.job)
        if not state:
            if now - self._since.setdefault("unknown", now) >= UNKNOWN_AFTER_S:
                self.state = "UNKNOWN"
                self._tell("UNKNOWN")
            return
        self._since.pop("unknown", None)
        if state in ENDED_STATES and self._ending != state:
            self._ending = state  # asked again at the next poll first
            return
        self._ending = ""
        self.state, self.reason, self.exit_code = state, reason, exit_code
        self._tell(f"{state} ({reason})" if reason not in ("", "None") else state)
        if state != "PENDING" or reason not in HOPELESS:
            self._since.pop("hopeless", None)
        elif now - self._since.setdefault("hopeless", now) >= HOPELESS_AFTER_S:
            self.job.cancel(check=False)
            self.state, self.hopeless = "CANCELLED", reason

    def _tell(self, shown: str) -> None:
        if shown != self._told:
            self._told = shown
            self.on_state(shown)


def job_fields(job_id: str) -> dict[str, str]:
    """scontrol's fields of the job (JobState, NodeList ...; {} when it does not know it)."""
    return dict(re.findall(r"(\w+)=(\S*)", ask_slurm(["scontrol", "show", "job", "-o", job_id])))


def ask_slurm(argv: list[str]) -> str:
    """A Slurm command's output; "" when it fails, is missing or does not answer in 30 s."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout if done.returncode == 0 else ""


def read_slurm_record(run_dir: Path) -> dict[str, Any] | None:
    """slurm.json of a submitted run (None: not a Slurm submission). One that exists but is
    not a record with a job id is a SpecError naming it."""
    path = Path(run_dir) / SLURM_FILE
    if not path.exists():
        return None
    try:  # within core.limits: a FIFO, a device or deep nesting is refused, never read
        record = load_json(path, SLURM_FILE)
    except SpecError as error:
        raise SpecError(
            SLURM_FILE, str(path), f"is corrupt or unreadable: it {error.hint}"
        ) from None
    job_id = record.get("job_id") if isinstance(record, dict) else None
    if not isinstance(job_id, (str, int)) or isinstance(job_id, bool) or not str(job_id):
        raise SpecError(SLURM_FILE, str(path), "holds no job_id (not a Slurm submission record)")
    return record
