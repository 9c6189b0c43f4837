"""`--launcher slurm`: submit the sweep to Slurm and watch it.

The method, in full: docs/launchers.md#launchers-slurm-py.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from collbench.core.errors import EXIT_OK, EXIT_RUN_FAILED, EXIT_USAGE, SpecError
from collbench.core.safe_text import refuse_control
from collbench.core.spec import SweepSpec
from collbench.launchers.base import (
    DEFAULT_CPU_RANKS,
    LaunchPlan,
    LaunchResult,
    RankCommand,
    check_command,
    check_job_values,
    rank_argv,
    watch_env,
)
from collbench.launchers.process import external_job
from collbench.launchers.slurm_state import (
    HOPELESS,
    POLL_STATE_S,
    SLURM_FILE,
    JobWatch,
    SlurmEnd,
    ask_slurm,
    keep_end,
    read_slurm_record,
)
from collbench.launchers.supervise import supervise
from collbench.store.job import Job
from collbench.store.rundir import unclaim_run_dir, write_json_atomic

# Slurm's files in a run directory: the script submitted and the job's output.
SUBMITIT_FOLDER = "slurm"
# Where sbatch writes the job's output (%j: the job id): beside the submitted script, or
# for a printed script in the directory it is submitted from (sbatch cannot create one).
JOB_OUTPUT = "collbench-%j.out"
DEFAULT_TIME = "30"
# A value an `#SBATCH` line holds unquoted (sbatch_quote): no space, quote, `#` or `\\`.
_SBATCH_PLAIN = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")
_TIME_FORMATS = (  # sbatch --time: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS
    r"(?P<m>\d+)",
    r"(?P<m>\d+):(?P<s>\d+)",
    r"(?P<h>\d+):(?P<m>\d+):(?P<s>\d+)",
    r"(?P<d>\d+)-(?P<h>\d+)",
    r"(?P<d>\d+)-(?P<h>\d+):(?P<m>\d+)",
    r"(?P<d>\d+)-(?P<h>\d+):(?P<m>\d+):(?P<s>\d+)",
)


def parse_time_minutes(text: str) -> int:
    """sbatch's --time in whole minutes (seconds round up): "90" -> 90, "1-00:00" -> 1440."""
    for pattern in _TIME_FORMATS:
        match = re.fullmatch(pattern, text.strip())
        if match:
            parts = {k: int(v) for k, v in match.groupdict().items() if v is not None}
            seconds = (
                (parts.get("d", 0) * 24 + parts.get("h", 0)) * 60 + parts.get("m", 0)
            ) * 60 + parts.get("s", 0)
            if seconds <= 0:
                break
            return -(-seconds // 60)
    raise SpecError(
        "--time",
        text,
        "is not a Slurm time limit (MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS)",
    )


@dataclass(frozen=True)
class SlurmSettings:
    """The allocation, as the user asked for it."""

    nodes: int = 1
    ntasks_per_node: int = DEFAULT_CPU_RANKS
    gpus_per_node: int | None = None
    # None: the node's CPUs shared out among its tasks (node_cpus, at submission);
    # 0: left to Slurm (one CPU a task)
    cpus_per_task: int | None = None
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time: str = DEFAULT_TIME
    constraint: str | None = None
    exclusive: bool = False
    slurm_args: tuple[str, ...] = ()
    no_wait: bool = False
    # Print the script (sbatch_script) instead of submitting it.
    print_sbatch: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "slurm_args", tuple(self.slurm_args))
        # Each value becomes an `#SBATCH` line: a newline in one would start a directive
        # or a command of its own.
        for flag, text in (
            ("--partition", self.partition),
            ("--account", self.account),
            ("--qos", self.qos),
            ("--time", self.time),
            ("--constraint", self.constraint),
            *(("--slurm-arg", item) for item in self.slurm_args),
        ):
            if text is not None:
                refuse_control(flag, text)
        for flag, value in (("--nodes", self.nodes), ("--ntasks-per-node", self.ntasks_per_node)):
            if value < 1:
                raise SpecError(flag, value, "must be at least 1")
        for flag, count in (
            ("--gpus-per-node", self.gpus_per_node),
            ("--cpus-per-task", self.cpus_per_task),
        ):
            if count is not None and count < 0:
                raise SpecError(flag, count, "must not be negative")
        parse_time_minutes(self.time)
        for item in self.slurm_args:
            key = item.split("=", 1)[0]
            if not re.fullmatch(r"[a-z][a-z0-9-_]*", key.lstrip("-")):
                raise SpecError(
                    "--slurm-arg",
                    item,
                    "is not KEY=VALUE (an sbatch long option "
                    "without the dashes, e.g. mem=64G or reservation=bringup)",
                )

    def sbatch_options(self) -> dict[str, Any]:
        """sbatch long options (name -> value; True: a flag) in the order a script lists them."""
        given = {
            "job-name": "collbench",
            "nodes": self.nodes,
            "ntasks-per-node": self.ntasks_per_node,
            "gpus-per-node": self.gpus_per_node,
            "cpus-per-task": self.cpus_per_task or None,
            "partition": self.partition,
            "account": self.account,
            "qos": self.qos,
            "constraint": self.constraint,
            "time": parse_time_minutes(self.time),
            "exclusive": self.exclusive or None,
        }
        options: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
        for item in self.slurm_args:
            key, _, value = item.partition("=")
            options[key.lstrip("-")] = value if value else True
        return options


# The options that shape each step (srun takes them too) and those that shape only the
# allocation (an srun step inside one already has them: its time limit, partition ...).
STEP_SHAPE = frozenset({"nodes", "ntasks_per_node", "gpus_per_node", "cpus_per_task"})
ALLOCATION_ONLY = frozenset(field.name for field in fields(SlurmSettings)) - STEP_SHAPE


class SlurmLauncher:
    name = "slurm"
    rank_env = "slurm"
    # plan() sets it: the run directory is new, so a refused submission removes it again.
    _made_dir = False
    options = STEP_SHAPE | ALLOCATION_ONLY
    nproc_refusal = "does not apply to --launcher slurm: use --nodes and --ntasks-per-node"

    def plan(self, spec: SweepSpec, options: Any, command_line: list[str]) -> Job:
        check_job_values(spec, options)
        given = dict(options.extra)
        given.setdefault("ntasks_per_node", given.get("gpus_per_node") or DEFAULT_CPU_RANKS)
        settings = SlurmSettings(**given)
        if not options.print_only:
            check_cluster(settings)
        settings = with_node_cpus(settings)  # a printed script too, where sinfo answers
        self._made_dir = options.out is None or not Path(options.out).exists()
        nproc = settings.nodes * settings.ntasks_per_node
        return external_job(self, spec, options, command_line, nproc, settings)

    def render(self, job: Job) -> LaunchPlan:
        """What is submitted: sbatch options, and each task's command and environment."""
        settings = SlurmSettings(**job.settings)
        task = RankCommand(rank_argv(job, self.rank_env), watch_env(job))
        return LaunchPlan(self.name, batch_options=settings.sbatch_options(), task=task)

    def describe(self, job: Job) -> str:
        return sbatch_script(job, self.render(job))

    def launch(self, job: Job, sink: Any) -> LaunchResult:
        plan, settings = self.render(job), SlurmSettings(**job.settings)
        try:  # through submitit, its files in the run directory
            job_id = submit_task(
                Path(job.run_dir) / SUBMITIT_FOLDER,
                RankTask(tuple(plan.task.argv)),
                lambda wrapper: sbatch_script(job, plan, wrapper),
                settings.nodes,
                settings.ntasks_per_node,
            )
        except SpecError:  # nothing will run: leave no half-made run directory behind
            unclaim_run_dir(job.run_dir, (SUBMITIT_FOLDER,), remove_dir=self._made_dir)
            raise
        record = {
            "job_id": job_id,
            "submitted_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        write_json_atomic(Path(job.run_dir) / SLURM_FILE, record)
        job.save()
        print(
            f"collbench: submitted Slurm job {job_id}; results go to {job.run_dir}",
            file=sys.stderr,
            flush=True,
        )
        if job.settings.get("no_wait"):
            print(
                f"collbench: follow it with `collbench wait {job.run_dir}` "
                f"(or `collbench status {job.run_dir}`)",
                file=sys.stderr,
                flush=True,
            )
            return LaunchResult(EXIT_OK, is_primary=False)
        return watch(job, job_id, sink)


def watch(job: Job, job_id: str, sink: Any) -> LaunchResult:
    """Follow a submitted job to its end (also `collbench wait`); slurm.json keeps the state
    Slurm ended it in and why (scontrol forgets a job minutes after its end), and a job
    cancelled before rank 0 wrote anything leaves its run `cancelled` (slurm_state.keep_end)."""
    handle = SlurmJobHandle(job_id, Path(job.run_dir) / SUBMITIT_FOLDER)
    result = supervise(job, [handle], sink, per_rank=False)
    end = handle.end()
    if end is not None:
        keep_end(Path(job.run_dir), read_slurm_record(job.run_dir) or {"job_id": job_id}, end)
    return result


def sbatch_script(job: Job, plan: LaunchPlan, wrapper: str | None = None) -> str:
    """The sbatch script of a job (pure): with `wrapper`, the one submitted through submitit
    (each task runs submitit's wrapper, which runs the rank argv: RankTask); without, the one
    `--print-sbatch` shows (what each writes where: docs/launchers.md). Both run the same argv
    in each task (tests/launchers/test_slurm.py checks it). SpecError when a value holds a
    control character (check_command)."""
    check_command(list(plan.task.argv), plan.task.env)
    command = f"collbench {job.spec.command}"
    argv = list(plan.task.argv)
    out = len(argv) - 1 - argv[::-1].index("--out")
    srun = "srun --kill-on-bad-exit=1"
    cpus = (plan.batch_options or {}).get("cpus-per-task")
    if cpus:  # a step does not inherit it from the allocation (Slurm >= 22.05)
        srun += f" --cpus-per-task={cpus}"
    directives = sbatch_directives(plan.batch_options or {})
    if wrapper is not None:
        folder = (Path(job.run_dir) / SUBMITIT_FOLDER).absolute()  # %j: job id, %t: task
        logs = str(folder / "%j_%t_log.out"), str(folder / "%j_%t_log.err")
        return "\n".join(
            [
                "#!/bin/bash",
                f"# {command} on Slurm, as submitted by {command} --launcher slurm (submitit);",
                f"# each task runs: {shlex.join(argv)}",
                *directives,
                f"#SBATCH --output={sbatch_quote(logs[0].replace('%t', '0'))}",
                f"#SBATCH --error={sbatch_quote(logs[1].replace('%t', '0'))}",
                "#SBATCH --open-mode=append",  # a requeued job's output follows the first
                "",
                *(f"export {k}={shlex.quote(v)}" for k, v in plan.task.env.items()),
                *SUBMITIT_ENV,
                "",
                f"{srun} --unbuffered --output {shlex.quote(logs[0])} "
                f"--error {shlex.quote(logs[1])} {wrapper}",
                "",
            ]
        )
    run_dir = shlex.quote(f"{job.run_dir}-") + "${SLURM_JOB_ID}"
    task = shlex.join(argv[: out + 1]) + f" {run_dir} " + shlex.join(argv[out + 2 :])
    lines = [
        "#!/bin/bash",
        f"# {command} on Slurm: submit with `sbatch THIS_FILE`, as often as you like.",
        "# Each job's rank 0 writes a new run directory, the --out below with the job id",
        "# appended (-JOBID), which every node must see; Slurm writes the job's output to",
        f"# {JOB_OUTPUT.replace('%j', 'JOBID')} in the directory it is submitted from.",
        *directives,
        f"#SBATCH --output={JOB_OUTPUT}",
        "",
        f"{srun} {task.rstrip()}",
        "",
    ]
    return "\n".join(lines)


# What submitit's task wrapper needs in its environment, quiet but for its warnings (its INFO
# lines would mix with the ranks' output).
SUBMITIT_ENV = ("export SUBMITIT_EXECUTOR=slurm", "export SUBMITIT_LOG_LEVEL=WARNING")


@dataclass(frozen=True)
class RankTask:
    """What one Slurm task runs under submitit's wrapper: `argv` in a child process whose exit
    code becomes the task's (non-zero fails the step; --kill-on-bad-exit stops the others)."""

    argv: tuple[str, ...]

    def __call__(self) -> None:
        code = subprocess.call(list(self.argv))
        if code:
            sys.exit(code if code > 0 else 128 - code)  # killed by a signal: as a shell says


def submit_task(folder: Path, task: RankTask, script: Any, nodes: int = 1, tasks: int = 1) -> str:
    """Submit `task` through submitit (a SlurmExecutor whose batch script is
    `script(wrapper)`, the wrapper being submitit's command that runs `task` in each task);
    submitit's pickles, script and logs go to `folder`. Returns the job id; SpecError with
    sbatch's own words when it refuses the job."""
    import submitit
    from submitit.core.utils import FailedJobError

    class Executor(submitit.SlurmExecutor):
        def _make_submission_file_text(self, command: str, uid: str) -> str:
            return script(command)

    folder = Path(folder).absolute()
    executor = Executor(folder=folder, max_num_timeout=0)
    executor.update_parameters(nodes=nodes, ntasks_per_node=tasks)
    try:  # submitit prints sbatch's refusal too: the one line below says it
        with contextlib.redirect_stderr(io.StringIO()):
            return str(executor.submit(task).job_id)
    except FailedJobError as error:
        # sbatch's usage hint ("Try sbatch --help") would hide the line saying what is wrong
        said = "\n".join(line for line in str(error).splitlines() if "--help" not in line)
        raise SpecError(
            "--launcher", "slurm", f"sbatch refused the job: {sbatch_errors(said or str(error))}"
        ) from None


def with_node_cpus(settings: SlurmSettings) -> SlurmSettings:
    """The settings with --cpus-per-task from the node's CPUs when not given
    (node_cpus: sinfo's smallest node of the partition, shared among its tasks)."""
    if settings.cpus_per_task is not None:
        return settings
    share = cpus_per_task(node_cpus(settings.partition), settings.ntasks_per_node)
    return replace(settings, cpus_per_task=share) if share else settings


def sbatch_directives(options: dict[str, Any]) -> list[str]:
    """`#SBATCH` lines for sbatch long options (True: a flag), in their order, each value
    quoted as sbatch reads it back (sbatch_quote); SpecError for a key that is no long option
    or a value holding a control character (it would start a line of its own)."""
    lines = []
    for key, value in options.items():
        refuse_control("--slurm-arg", f"{key}={value}")
        if not re.fullmatch(r"[a-z][a-z0-9_-]*", key):
            raise SpecError("--slurm-arg", key, "is not an sbatch long option")
        lines.append(
            f"#SBATCH --{key}" if value is True else f"#SBATCH --{key}={sbatch_quote(str(value))}"
        )
    return lines


def sbatch_quote(value: str) -> str:
    """`value` as sbatch reads it back from an `#SBATCH` line: as is when plain, else in
    double quotes with `\\` and `"` escaped. sbatch's own parser (src/sbatch/opt.c,
    _get_argument) takes double quotes and backslashes in every version, single quotes only
    in newer ones, and ends the line at an unquoted `#`; bash skips the line (a comment)."""
    refuse_control("#SBATCH", value)
    if _SBATCH_PLAIN.fullmatch(value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def sbatch_errors(text: str) -> str:
    """sbatch's error lines as one line ("sbatch: error: " left out), else its last line."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower()]
    kept = [re.sub(r"^sbatch:\s*error:\s*", "", line) for line in errors] or lines[-1:]
    return "; ".join(dict.fromkeys(kept)) or "no message"


def check_cluster(settings: SlurmSettings) -> None:
    """Fail before submitting when Slurm is missing or the partition does not exist."""
    if shutil.which("sbatch") is None:
        raise SpecError(
            "--launcher",
            "slurm",
            "needs Slurm's sbatch on PATH (run on a login "
            "node), or use --print-sbatch to write a script to submit elsewhere",
        )
    if settings.partition is None:
        return
    listing = subprocess.run(
        ["sinfo", "-h", "-o", "%R"], capture_output=True, text=True, timeout=30
    )
    partitions = sorted(set(listing.stdout.split()))
    if listing.returncode == 0 and settings.partition not in partitions:
        raise SpecError(
            "--partition",
            settings.partition,
            f"is not a partition of this cluster (sinfo lists: {', '.join(partitions) or 'none'})",
        )


class SlurmJobHandle:
    """A submitted job (slurm_state.JobWatch, over submitit's job object) as the monitor
    sees it: its state, when it started, how to cancel it."""

    def __init__(self, job_id: str, folder: Path) -> None:
        self.job_id, self.label = job_id, f"Slurm job {job_id}"
        self.watch = JobWatch(job_id, self._announce, folder)
        self._started: float | None = None
        self._checked = 0.0

    def poll(self) -> int | None:
        self._refresh()
        if not self.watch.ended:
            return None
        return EXIT_OK if self.watch.state == "COMPLETED" else EXIT_RUN_FAILED

    def running_since(self) -> float | None:
        self._refresh()
        return self._started

    def failure(self) -> tuple[int, str] | None:
        """A reason that is Slurm's, not a rank's: cancelled, out of time, a node lost, or a
        request that can never be met (exit 2: the options must change)."""
        state, reason = self.watch.state, self.watch.hopeless
        if reason:
            return EXIT_USAGE, (
                f"{self.label} can never start: {reason} ({HOPELESS[reason]}); cancelled it"
            )
        if state in ("COMPLETED", "FAILED") or not self.watch.ended:
            return None
        hint = " (scancel?)" if state == "CANCELLED" else ""
        return EXIT_RUN_FAILED, f"{self.label} ended {state}{hint}"

    def end(self) -> SlurmEnd | None:
        """The job's end with Slurm's reason: the pending reason it was cancelled for when
        it could never start (None while it may still run)."""
        if not self.watch.ended:
            return None
        watch = self.watch
        reason = watch.hopeless or ("" if watch.reason in ("", "None") else watch.reason)
        return SlurmEnd(self.job_id, watch.state, reason, HOPELESS.get(reason, ""))

    @property
    def scheduler_end(self) -> str | None:
        """How Slurm, not a rank, ended the job ("cancelled", ...), for the table's footer."""
        if self.watch.state == "CANCELLED":
            return "cancelled"
        if self.watch.state in ("COMPLETED", "FAILED") or not self.watch.ended:
            return None
        return f"ended by Slurm ({self.watch.state})"

    def terminate(self) -> None:
        self.watch.job.cancel(check=False)

    def stop(self) -> None:
        deadline = time.time() + 10
        while time.time() < deadline and self.poll() is None:
            time.sleep(POLL_STATE_S)

    def _refresh(self) -> None:
        now = time.time()
        if now - self._checked < POLL_STATE_S:
            return
        self._checked = now
        before = self.watch.state
        self.watch.check(now)
        state = self.watch.state
        if state not in ("PENDING", "CONFIGURING") and self._started is None:
            self._started = now
        # back to waiting or running after it ran (or was completing): Slurm requeued it
        if before in ("COMPLETING", "RUNNING") and state in ("PENDING", "REQUEUED", "RUNNING"):
            if state != before:
                print(
                    f"collbench: {self.label} was requeued: its ranks keep the finished rows "
                    "and resume after them",
                    file=sys.stderr,
                    flush=True,
                )

    def _announce(self, shown: str) -> None:
        print(f"collbench: {self.label}: {shown}", file=sys.stderr, flush=True)


# -- CPUs per task (docs/launchers.md#launchers-slurm-cpus-py) --


def node_cpus(partition: str | None) -> int | None:
    """The fewest CPUs of a node in `partition` (None: the default one) as sinfo lists
    them, or None when sinfo is missing or does not answer."""
    argv = ["sinfo", "-h", "-N", "-o", "%c"] + (["-p", partition] if partition else [])
    return parse_node_cpus(ask_slurm(argv))


def parse_node_cpus(text: str) -> int | None:
    """The smallest count in sinfo's `%c` lines ("64", or "64+" for a range), or None."""
    counts = [int(line.strip().rstrip("+")) for line in text.splitlines() if line.strip()]
    counts = [count for count in counts if count > 0]
    return min(counts, default=None)


def cpus_per_task(cpus: int | None, tasks_per_node: int) -> int | None:
    """The node's CPUs shared out among its tasks (None: unknown, or one CPU or less each,
    which is Slurm's default anyway)."""
    if cpus is None or tasks_per_node < 1:
        return None
    share = cpus // tasks_per_node
    return share if share >= 2 else None


def step_cpus_per_task(environ: Mapping[str, str], tasks_per_node: int) -> int | None:
    """Inside an allocation: its SLURM_CPUS_PER_TASK, else SLURM_CPUS_ON_NODE shared out."""
    on_node = slurm_count(environ, "SLURM_CPUS_ON_NODE")
    return slurm_count(environ, "SLURM_CPUS_PER_TASK") or cpus_per_task(on_node, tasks_per_node)


def slurm_count(environ: Mapping[str, str], name: str) -> int | None:
    """A count Slurm set; SLURM_GPUS_PER_NODE may name a type first ("h100:8")."""
    raw = environ.get(name, "").rsplit(":", 1)[-1]
    return int(raw) if raw.isdigit() and int(raw) > 0 else None
