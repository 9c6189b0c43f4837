"""Orchestrates `collbench doctor`: check the expectation's inputs, run the rounds through
the chosen launcher (one job, like a sweep), then judge the rows.

The method, in full: docs/architecture.md#collbench-run-doctor-job-py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from collbench.analysis.doctor.expect import Expectation, baseline_evidence, expectation_from
from collbench.analysis.doctor.findings import Diagnosis, doctor_report
from collbench.analysis.doctor.verdicts import diagnose
from collbench.analysis.rules.bands import BAND_NAMES
from collbench.analysis.rules.methodology import DOCTOR_BASELINE, check
from collbench.bench.distributed import resolve_backend
from collbench.core.doctor_spec import DOCTOR, MIN_BANDWIDTH_BYTES, DoctorSpec
from collbench.core.dtypes import DTYPES
from collbench.core.errors import EXIT_FLAGGED, EXIT_OK, EXIT_UNJUDGED, SpecError
from collbench.core.noise import NoiseFloor
from collbench.core.spec import SweepSpec
from collbench.core.units import size_arg
from collbench.launchers import LaunchResult
from collbench.launchers.base import parent_launch
from collbench.launchers.local import local_nproc
from collbench.run.sweep import RunOptions, choose_launcher, run_sweep
from collbench.store.doctor_report import load_doctor_report, save_doctor_report
from collbench.store.load import Run, load_run
from collbench.store.noise_floor import load_noise_floor
from collbench.store.rows import DOCTOR as DOCTOR_ROWS
from collbench.store.sink import SinkFactory
from collbench.topologies.loader import load_topology
from collbench.topologies.schema import TopologyError

FIRST_NODE_JUDGES = "the verdict (doctor.json, exit code) comes from the first node (--node-rank 0)"


@dataclass(frozen=True)
class DoctorOutcome:
    """How a doctor ended: the launch, where its rows are, and (rows in hand) the verdicts."""

    launch: LaunchResult
    run_dir: Path
    diagnosis: Diagnosis | None = None
    expectation: Expectation | None = None
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def code(self) -> int:
        """The launch's code when it failed, else 0 healthy, EXIT_FLAGGED or EXIT_UNJUDGED
        (nothing could be judged: a Slurm prolog must not pass a node never checked)."""
        if self.launch.code != EXIT_OK or self.diagnosis is None:
            return self.launch.code
        if self.diagnosis.healthy is None:
            return EXIT_UNJUDGED
        return EXIT_OK if self.diagnosis.healthy else EXIT_FLAGGED


def run_doctor(
    spec: SweepSpec, options: RunOptions, command_line: list[str], make_sink: SinkFactory
) -> DoctorOutcome:
    """Run (or with print_only, print) the doctor's rounds and judge them."""
    doctor = spec.doctor  # a doctor's spec (doctor_sweep's) always has one
    topology, baseline, noise_floor = _inputs(spec, options)  # before any rank starts
    launch, run_dir = run_sweep(spec, options, command_line, make_sink)
    if options.print_only or not launch.is_primary or launch.code not in (EXIT_OK, 3):
        return DoctorOutcome(launch, run_dir)
    if options.extra.get("node_rank"):
        # torchrun's other nodes: rank 0 and its rows are on the first node, which judges.
        return DoctorOutcome(launch, run_dir, notes=(FIRST_NODE_JUDGES,))
    if launch.is_rank and parent_launch() is not None:
        # A rank of a doctor that collbench launched (torchrun, mpirun, srun): the launching
        # collbench judges; an exit code of 5 here would read as a failed rank to the tool.
        return DoctorOutcome(launch, run_dir)
    run = load_run(run_dir)
    rows = run.rows_of(DOCTOR_ROWS)
    nodes = dict((run.meta.extra or {}).get(DOCTOR) or {})
    where = {"backend": run.meta.backend, "nodes": run.meta.nodes}
    where["ranks_per_node"] = run.meta.ranks_per_node
    warnings = []
    if baseline is not None:  # measured like this run? (the one methodology rule)
        names = (f"--baseline {doctor.baseline}", f"this run ({run_dir})")
        pair = [baseline, run]
        found = check(pair, DOCTOR_BASELINE, lambda one: names[one is run], " and ".join(names))
        warnings += found.warnings
    try:
        expectation = expectation_from(
            doctor,
            topology=topology,
            baseline_rows=None if baseline is None else baseline.rows_of(DOCTOR_ROWS),
            baseline_path=doctor.baseline,
            noise_floor=noise_floor,
            **where,
        )
    except TopologyError as error:  # the run is done: judge it against the fleet instead
        warnings.append(f"--topology gives no bound for this run ({error}); judged by the fleet")
        fleet = replace(doctor, topology=None)
        expectation = expectation_from(fleet, noise_floor=noise_floor, **where)
    diagnosis = diagnose(rows, doctor, expectation, nodes)
    save_doctor_report(run_dir, doctor_report(diagnosis, run.run_id, expectation))
    notes = (setup,) if (setup := group_setup_line(nodes)) else ()
    return DoctorOutcome(launch, run_dir, diagnosis, expectation, tuple(warnings), notes)


def group_setup_line(nodes: Mapping[str, Any]) -> str | None:
    """One line on the seconds the doctor spent making process groups (meta.json's
    doctor.group_setup, written by bench.doctor_rounds.StageGroups), or None when it made none."""
    setup = nodes.get("group_setup") or {}
    seconds = setup.get("seconds") or {}
    if not seconds:
        return None
    stages = ", ".join(
        f"{stage} {value:.3g} s ({(setup.get('groups') or {}).get(stage, '?')} groups)"
        for stage, value in seconds.items()
    )
    return f"process groups by {setup.get('method')}: {setup.get('total_s', 0):.3g} s ({stages})"


def doctor_sweep(doctor: DoctorSpec, fields: Mapping[str, Any]) -> tuple[SweepSpec, list[str]]:
    """The sweep that runs the doctor's rounds (`fields`: the sweep options given), and the
    warnings to show before it runs. A topology loads now, so a bad one fails first."""
    topology = load_topology(doctor.topology).name if doctor.topology is not None else None
    spec = SweepSpec(
        collectives=("all_reduce", "sendrecv"),
        sweep_rows=False,
        doctor=doctor,
        topology=topology,
        **fields,
    )
    elem_bytes = DTYPES[spec.dtype].elem_bytes
    if doctor.size_bytes is not None and doctor.size_bytes < elem_bytes:
        raise SpecError(
            "--size",
            doctor.size_bytes,
            f"is less than one {spec.dtype} element ({elem_bytes} bytes): every collective "
            f"would move 0 elements and measure nothing; give at least {elem_bytes}",
        )
    warnings = []
    if doctor.size_bytes is not None and doctor.size_bytes < MIN_BANDWIDTH_BYTES:
        warnings.append(
            f"--size {size_arg(doctor.size_bytes)} measures latency more than bandwidth; use "
            f"{size_arg(MIN_BANDWIDTH_BYTES)} or more to compare links"
        )
    return spec, warnings


def _inputs(spec: SweepSpec, options: RunOptions) -> tuple[Any, Run | None, NoiseFloor | None]:
    """(the topology, the baseline run, the noise floor), read once and checked before the
    run (a baseline also against how this run will measure)."""
    doctor = spec.doctor
    topology = load_topology(doctor.topology) if doctor.topology is not None else None
    baseline = _baseline(doctor.baseline) if doctor.baseline is not None else None
    if baseline is not None:
        _measured_alike(baseline, spec, options)
    noise_floor = None
    if doctor.noise_floor is not None:
        noise_floor = load_noise_floor(Path(doctor.noise_floor), "--noise-floor", BAND_NAMES)
    return topology, baseline, noise_floor


def _measured_alike(baseline: Run, spec: SweepSpec, options: RunOptions) -> None:
    """Refuse up front a --baseline at another size or (local launcher) ranks per node."""
    doctor, spec = spec.doctor, spec.with_backend(resolve_backend(spec.backend))
    baseline_evidence(baseline.rows_of(DOCTOR_ROWS), doctor.baseline, spec.max_bytes)
    theirs = baseline.meta.ranks_per_node
    if not theirs or choose_launcher(options.launcher, options.rank_env) != "local":
        return
    if (ours := local_nproc(spec, options.nproc)) != theirs:
        raise SpecError(
            "--baseline",
            doctor.baseline,
            f"was measured with {theirs} ranks per node and this run would have {ours}: "
            f"busbw depends on them; rerun with --nproc {theirs}",
        )


def _baseline(path: str) -> Run:
    """The --baseline run, refused in one line unless it is a finished doctor run: valid
    doctor rows (the store refuses NaN, zero or negative figures, naming file and line) and
    the doctor.json its verdicts were written to."""
    hint = ": give the directory of an earlier collbench doctor run"
    try:
        run = load_run(path, "--baseline", hint)
    except SpecError as error:
        if error.field == "--baseline":
            raise
        raise SpecError("--baseline", path, f"cannot be used ({error})") from None
    if not run.rows_of(DOCTOR_ROWS):
        raise SpecError("--baseline", path, f"holds no doctor rows{hint}")
    try:
        report = load_doctor_report(Path(path))
    except SpecError as error:
        raise SpecError(
            "--baseline", path, f"has a doctor.json that is not valid ({error})"
        ) from None
    if report is None:
        raise SpecError(
            "--baseline",
            path,
            "has no doctor.json: its doctor never finished judging (interrupted or failed); "
            "give the directory of a finished collbench doctor run",
        )
    return run
