"""`collbench doctor --launcher slurm --per-node`: each node checked on its own first, as
fleet health tools do at bring-up, then the multi-node rounds on the nodes that passed.

The method, in full: docs/doctor.md#collbench-run-doctor-nodes-py.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from collbench.core.doctor_spec import DOCTOR, GEMM, GPU_PAIR
from collbench.core.errors import EXIT_FLAGGED, EXIT_OK, EXIT_UNJUDGED, SpecError
from collbench.core.spec import SweepSpec
from collbench.launchers.base import collbench_argv
from collbench.launchers.slurm import SlurmSettings
from collbench.launchers.slurm_state import slurm_job
from collbench.run.sweep import RunOptions
from collbench.store.doctor_report import DOCTOR_JSON, load_doctor_report
from collbench.store.rundir import new_run_id, prepare_run_dir, read_meta, write_json_atomic

# An element's verdict from its doctor's exit code (anything else: it failed).
_VERDICTS = {EXIT_OK: "healthy", EXIT_FLAGGED: "flagged", EXIT_UNJUDGED: "unjudged"}


@dataclass(frozen=True)
class NodeCheck:
    """One element of the array: where it ran, how Slurm ended it, what its doctor said."""

    index: int
    job_id: str
    host: str  # "?" when it never started
    state: str  # Slurm's final state
    exit_code: int | None  # the element's; None when a signal or Slurm ended it
    verdict: str  # healthy, flagged, unjudged or failed
    reason: str = ""  # a flagged node's findings, a failed element's error

    @property
    def passed(self) -> bool:
        return self.verdict == "healthy"


def check_nodes(
    spec: SweepSpec, options: RunOptions, say: Callable[[str], None]
) -> tuple[Path, list[NodeCheck]]:
    """Stage 1: the array, waited for and gathered into RUN/nodes.json; (RUN, the checks)."""
    from collbench.launchers.slurm_batch import submit_array, wait_jobs

    if options.launcher != "slurm" or options.print_only:
        why = "submits a job array and follows it: it needs --launcher slurm, and no --print"
        raise SpecError("--per-node", True, why)
    settings = SlurmSettings(**options.extra)
    out = prepare_run_dir(options.out, run_id := new_run_id()).absolute()
    argvs = [
        collbench_argv(("doctor",), "srun", spec.to_args(), out / "nodes" / str(index))
        for index in range(settings.nodes)
    ]
    element = replace(settings, nodes=1, exclusive=True)
    jobs = submit_array(argvs, element, out / "slurm")
    say(
        f"collbench: doctor: Slurm job array {jobs[0].split('_')[0]}: {len(jobs)} single-node checks"
    )
    ends = wait_jobs(jobs, lambda job, shown: say(f"collbench: doctor: node check {job} {shown}"))
    checks = [
        _gathered(index, job, *end, out)
        for index, (job, end) in enumerate(zip(jobs, ends, strict=True))
    ]
    record = {"run_id": run_id, "nodes": [vars(check) for check in checks]}
    write_json_atomic(out / "nodes.json", record)
    return out, checks


def fleet_options(options: RunOptions, out: Path, checks: list[NodeCheck]) -> RunOptions | None:
    """Stage 2's options: the usual doctor on the nodes that passed (None: fewer than 2)."""
    hosts = sorted({check.host for check in checks if check.passed})
    if len(hosts) < 2:
        return None
    extra = dict(options.extra)
    slurm_args = (*extra.get("slurm_args", ()), f"nodelist={','.join(hosts)}")
    extra.update(nodes=len(hosts), slurm_args=slurm_args)
    return replace(options, out=out / "fleet", extra=extra, per_node=False)


def nodes_code(checks: list[NodeCheck]) -> int:
    """Stage 1's exit code: 5 when a node failed or was flagged, 6 when none was judged."""
    if any(check.verdict in ("failed", "flagged") for check in checks):
        return EXIT_FLAGGED
    return EXIT_OK if any(check.passed for check in checks) else EXIT_UNJUDGED


def _gathered(index: int, job: str, state: str, code: int | None, out: Path) -> NodeCheck:
    run_dir = out / "nodes" / str(index)
    meta = read_meta(run_dir)
    host = ",".join(meta.hosts) if meta is not None and meta.hosts else ""
    # submitit's job object keeps what accounting said of the element while it was followed
    listed = slurm_job(job).get_info(mode="cache").get("NodeList", "")
    host = host or ("" if listed == "None assigned" else listed) or "?"
    verdict = _VERDICTS.get(code, "failed") if state == "COMPLETED" or code else "failed"
    reason = ""
    if verdict == "flagged" and (run_dir / DOCTOR_JSON).is_file():
        report = load_doctor_report(run_dir)
        reason = "; ".join(
            f"{one.kind} {','.join(one.hosts)}: {one.evidence}" for one in report.findings[:2]
        )
    elif verdict == "failed":
        reason = _error_line(out / "slurm", job) or f"Slurm ended it {state}"
        if code is not None:
            reason = f"exit {code}: {reason}"
    else:  # the GPU stages it ran (the burn-in's TFLOP/s), or why not
        doctor = meta.extra.get(DOCTOR) or {} if meta is not None else {}
        skipped, burn = doctor.get("skipped") or {}, doctor.get(GEMM) or {}
        said = [
            f"{stage} skipped: {skipped[stage]}" for stage in (GPU_PAIR, GEMM) if stage in skipped
        ]
        if rates := burn.get("tflops"):
            said.append(f"gemm {min(rates):g}-{max(rates):g} TFLOP/s")
        reason = "; ".join(said)
    return NodeCheck(index, job, host, state, code, verdict, reason)


def _error_line(folder: Path, job: str) -> str:
    """The last `collbench: error:` line of an element's output ("" when none)."""
    try:
        text = (folder / f"{job}_0_log.out").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    errors = re.findall(r"collbench: error: (.*)", text)
    return errors[-1].strip() if errors else ""
