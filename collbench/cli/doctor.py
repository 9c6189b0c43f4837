"""`collbench doctor`: name the slow node, rail, link or rank (run/doctor_job.py runs it).

app.py registers it. Imports stay light (typer, the option tables): the work loads only when
the command runs.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

import typer

from collbench.cli.launch_options import LAUNCHER_OPTIONS
from collbench.cli.measure import (
    RUN_OPTIONS,
    SWEEP_OPTIONS,
    _per_backend,
    _topology_ref,
    command_line,
    exit_rank,
    one_at_a_time,
    print_error,
    run_options,
    sweep_fields,
    warn_knobs,
)
from collbench.cli.options import FROM_OWNER, Option, given_fields, say, warn
from collbench.core.doctor_plan import DEFAULT_SAMPLED_ROUNDS, SAMPLE_ABOVE_NODES
from collbench.core.doctor_spec import DEFAULT_DOCTOR_BYTES, DoctorSpec
from collbench.core.knobs import SHARED_GPU_NOTE, apply_knobs, shared_gpu
from collbench.core.spec import SweepSpec
from collbench.core.units import parse_size
from collbench.run.sweep import RunOptions
from collbench.store.doctor_report import DOCTOR_JSON

if TYPE_CHECKING:
    from collbench.run.doctor_job import DoctorOutcome

_EXPECT = "Expectation"
# The sweep's options a doctor has too: how to measure, where to write, how to launch.
_FROM_SWEEP = {
    "--nproc",
    "--out",
    "--quiet",
    "--json",
    "--dtype",
    "--warmup",
    "--iters",
    "--check",
    "--rank-stat",
    "--backend",
    "--timeout",
    "--knob",
}


_doctor = partial(Option, owner=DoctorSpec)
_expect = partial(Option, owner=DoctorSpec, panel=_EXPECT)

DOCTOR_OPTIONS = (
    _doctor(
        ("--size", "-s"),
        "Bytes per rank per operation (K/M/G = powers of 1024); big enough to measure "
        "bandwidth, not latency.",
        field="size_bytes",
        default_text=_per_backend(DEFAULT_DOCTOR_BYTES),
        parse=parse_size,
        metavar="SIZE",
    ),
    _doctor(
        ("--shuffle-rounds",),
        "Rounds of random node pairings after the pair-wise rounds (a pass ratio per host); "
        "with sampled --pairs, the rounds that replace them (0: the default K).",
        metavar="K",
    ),
    _doctor(
        ("--pairs",),
        "Node pairs of the pair stage: all (the circle method, N-1 rounds, every pair), "
        "sampled (only --shuffle-rounds K random rounds, default "
        f"{DEFAULT_SAMPLED_ROUNDS}), or auto (all up to {SAMPLE_ABOVE_NODES} nodes, "
        "sampled above).",
        metavar="MODE",
    ),
    _doctor(
        ("--bisect",),
        "Also halve the node set and re-test the slower half until the slow part is found.",
        default=FROM_OWNER,
    ),
    _doctor(
        ("--repeats",),
        "Run every round R times, in passes (all rounds, then all again); a finding needs "
        "the slow result in a majority of at least 3 repeats (fewer: unjudged).",
        metavar="R",
    ),
    _doctor(("--seed",), "Seed of the random pairings."),
    _expect(
        ("--expect-busbw",),
        "Bus bandwidth (GB/s) every group should reach.",
        field="expect_busbw_gbps",
        metavar="GBPS",
    ),
    _expect(
        ("--topology", "-T"),
        "Catalog name or topology file: expect its predicted bound (see collbench topo list).",
        # loaded now, to fail before a rank starts; a file as an absolute path (ranks run elsewhere)
        parse=lambda text, flag: _topology_ref(text, flag)[1] or text,
        metavar="NAME|FILE",
    ),
    _expect(
        ("--baseline",),
        "An earlier doctor run on a healthy fabric: expect what it measured.",
        metavar="RUN",
    ),
    _expect(
        ("--noise-floor",),
        "A/A noise floor recorded by `collbench noise` (per size): a baseline or "
        "expectation check holds its bar at least this far below the reference, and the "
        "decision rule against a --baseline uses it.",
        metavar="FILE",
    ),
    _expect(
        ("--tolerance",),
        "Flag what is more than this % below --expect-busbw, the topology or the baseline.",
        field="tolerance_pct",
        metavar="PCT",
    ),
    _expect(
        ("--fleet-tolerance",),
        "Without an expectation: flag what is more than this % below the fleet's median ...",
        field="fleet_tolerance_pct",
        metavar="PCT",
    ),
    _expect(("--outlier-mads",), "... and more than this many scaled MADs below it.", metavar="N"),
)
PER_NODE = Option(
    ("--per-node",),
    "Slurm: check each node alone first (a job array), then the rounds on those that passed.",
    RunOptions,
    default=FROM_OWNER,
)
COMMAND_OPTIONS = (
    *DOCTOR_OPTIONS,
    PER_NODE,
    *one_at_a_time(
        tuple(option for option in SWEEP_OPTIONS if option.flag in _FROM_SWEEP), "a doctor measures"
    ),
    *RUN_OPTIONS,
    *LAUNCHER_OPTIONS,
)
HELP = (
    "Name the slow node, GPU pair, rail, link or rank: an all-reduce per node and per rail, "
    "send/recv between local rank pairs and node pairs, shuffled pairings, bisection. "
    "Writes doctor.json; exit 0 healthy, 5 something flagged, 6 nothing could be judged, "
    "1 a rank died or hung."
)


def doctor_parts(values: dict[str, Any]) -> tuple[SweepSpec, list[str], RunOptions]:
    """The doctor's spec, its warnings and how to run it, parsed (what --print-config checks)."""
    from collbench.run.doctor_job import doctor_sweep

    doctor = DoctorSpec(**given_fields(DoctorSpec, DOCTOR_OPTIONS, values))
    spec, warnings = doctor_sweep(doctor, sweep_fields(COMMAND_OPTIONS, values))
    return (
        spec,
        warnings,
        run_options({**{o.parameter_name: None for o in SWEEP_OPTIONS}, **values}),
    )


def run_doctor_command(values: dict[str, Any]) -> None:
    """Parse, run the rounds and judge them (run/doctor_job.py), then show the verdicts."""
    from collbench.render.doctor_text import DoctorConsole
    from collbench.run.doctor_job import run_doctor

    spec, warnings, options = doctor_parts(values)
    warn([*warnings, *([SHARED_GPU_NOTE] if shared_gpu() else [])])
    apply_knobs(spec.knobs)
    if spec.backend != "auto":
        warn_knobs(spec.knobs, spec.backend)
    if values.get("per_node"):
        raise typer.Exit(_per_node(spec, replace(options, per_node=True)))
    outcome = run_doctor(spec, options, command_line(), lambda _spec: DoctorConsole(options.output))
    _show(outcome, options.output)
    if outcome.launch.is_rank:
        exit_rank(outcome.code)
    raise typer.Exit(outcome.code)


def _per_node(spec: SweepSpec, options: Any) -> int:
    """--per-node (run/doctor_nodes.py): the array of node checks, its table, then the rounds
    on the nodes that passed; 5 when a node failed or was flagged, else the rounds' code."""
    from collbench.core.errors import EXIT_FLAGGED
    from collbench.render.doctor_text import DoctorConsole, node_checks_table
    from collbench.run.doctor_job import run_doctor
    from collbench.run.doctor_nodes import check_nodes, fleet_options, nodes_code

    out, checks = check_nodes(spec, options, say)
    print(node_checks_table(checks), flush=True)
    code = nodes_code(checks)
    fleet = fleet_options(options, out, checks)
    if fleet is None:
        print("# Multi-node rounds: not run (fewer than 2 nodes passed)", flush=True)
        return code
    console = DoctorConsole(fleet.output)
    outcome = run_doctor(spec, fleet, command_line(), lambda _spec: console)
    _show(outcome, fleet.output)
    return code if code == EXIT_FLAGGED else outcome.code


def _show(outcome: DoctorOutcome, output: str) -> None:
    """The warnings (stderr), notes, a launch error, the verdicts and where they were written."""
    from collbench.render.doctor_text import render_doctor

    warn(outcome.warnings)
    notes = [f"# {note}" for note in outcome.notes] if output == "table" else []
    if outcome.diagnosis is None and notes:  # no verdict: they say why (the first node judges)
        print(*notes, sep="\n", flush=True)
    if outcome.launch.error:
        print_error(outcome.launch.error)
    if outcome.diagnosis is None:
        return
    if output != "quiet":
        print(render_doctor(outcome.diagnosis, outcome.expectation), flush=True)
    if output == "table":  # after the verdict, which stays the first line
        print(*notes, f"# Results: {outcome.run_dir} ({DOCTOR_JSON})", sep="\n", flush=True)
