"""`collbench sweep` and `collbench overlap`: their options and the body they share.

The method, in full: docs/architecture.md#collbench-cli-measure-py.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import typer

from collbench.bench.provenance import library_version
from collbench.bench.rank_env import RANK_ENVS
from collbench.cli.export import EXPORT_OPTIONS, NCCL_JSON_FILE, OUTPUT_PANEL, Exports, SinkMaker
from collbench.cli.launch_options import GPU_OR_CPU_RANKS, LAUNCHER_OPTIONS, launcher_settings
from collbench.cli.options import (
    FROM_OWNER,
    Option,
    given_fields,
    json_option,
    listing,
    run_dir_option,
    warn,
)
from collbench.core.collectives import REGISTRY
from collbench.core.dtypes import DTYPES
from collbench.core.errors import SpecError
from collbench.core.knobs import (
    SHARED_GPU_NOTE,
    apply_knobs,
    backend_warning,
    check_knob_name,
    parse_knob_settings,
    shared_gpu,
)
from collbench.core.overlap import (
    ALLOW_BLOCKING_FLAG,
    AUTO,
    BLOCKING_ENV,
    COMPUTE_DTYPES,
    DEFAULT_RATIOS,
    MAX_SQUARE,
    OverlapSpec,
    blocking_env,
    check_blocking_env,
    parse_ratios,
    parse_shape,
)
from collbench.core.spec import (
    BACKENDS,
    DEFAULT_FACTOR,
    DEFAULT_MAX_BYTES,
    PLACEMENT_CHOICES,
    RANK_STATS,
    REDUCE_OPS,
    SweepSpec,
)
from collbench.core.units import parse_size, size_arg
from collbench.launchers import LAUNCHERS
from collbench.run import sweep
from collbench.run.sweep import RunOptions

# Help panels: the common path in the first ("Options"), rarer options below it.
MEASUREMENT_PANEL = "Measurement"
_LAUNCH = "Launch"
_OVERLAP = "Overlap probes"
# The rarer panels: `-h` names them, `--help-all` shows them (cli/help.py).
FOLDED_PANELS = (MEASUREMENT_PANEL, _LAUNCH, "torchrun", "Slurm", "MPI", _OVERLAP)


def _names(text: str, flag: str) -> tuple[str, ...]:
    """'all_reduce, all_gather' -> ('all_reduce', 'all_gather'); SweepSpec checks them."""
    return tuple(name.strip() for name in text.split(",") if name.strip())


def _topology_ref(text: str, flag: str) -> tuple[str, str | None]:
    """(name, absolute file or None for a catalog topology), which SweepSpec takes as its
    `topology` and `topology_file`: loaded, so a bad one fails before a run; the file
    travels with the spec so ranks and printed commands find it."""
    from collbench.topologies.loader import catalog_names, load_topology

    name = load_topology(text, flag).name
    return name, None if text in catalog_names() else str(Path(text).absolute())


def _per_backend(defaults: dict[str, int]) -> str:
    """{'gloo': 16M, 'nccl': 1G, 'rccl': 1G} -> '16M on gloo, 1G on nccl/rccl'."""
    backends: dict[int, list[str]] = {}
    for backend, size in defaults.items():
        backends.setdefault(size, []).append(backend)
    return ", ".join(f"{size_arg(size)} on {'/'.join(names)}" for size, names in backends.items())


_AUTO_DTYPES = {
    AUTO: f"{OverlapSpec().resolved_dtype('cuda')} on GPUs, "
    f"{OverlapSpec().resolved_dtype('cpu')} on CPU"
}
_STARTED_BY_A_TOOL = ", ".join(name for name in LAUNCHERS if name not in ("local", "none"))
_measure = partial(Option, owner=SweepSpec, panel=MEASUREMENT_PANEL)

SPEC_OPTIONS = (
    Option(
        ("--collective", "-c"),
        f"Comma list of {listing(REGISTRY)}, or all.",
        SweepSpec,
        "collectives",
        parse=_names,
        metavar="LIST",
    ),
    Option(
        ("--min-bytes", "-b"),
        "Smallest size (K/M/G = powers of 1024).",
        SweepSpec,
        parse=parse_size,
        metavar="SIZE",
    ),
    Option(
        ("--max-bytes", "-e"),
        "Largest size.",
        SweepSpec,
        default_text=_per_backend(DEFAULT_MAX_BYTES),
        parse=parse_size,
        metavar="SIZE",
    ),
    Option(
        ("--factor", "-f"),
        "Multiply the size by this each step.",
        SweepSpec,
        default_text=f"{DEFAULT_FACTOR:g}",
    ),
    Option(
        ("--dtype", "-d"),
        f"{listing(DTYPES)}; several comma-separated, or all (nccl-tests' -d all).",
        SweepSpec,
        metavar="NAME",
    ),
    Option(
        ("--op", "-o"),
        f"{listing(REDUCE_OPS)}; several comma-separated, or all (avg: float dtypes only).",
        SweepSpec,
        metavar="NAME",
    ),
    Option(("--warmup", "-w"), "Untimed operations per size.", SweepSpec),
    Option(("--iters", "-n"), "Timed operations per size.", SweepSpec),
    _measure(
        ("--step-bytes", "-i"),
        "Add this many bytes each step instead of --factor.",
        parse=parse_size,
        metavar="SIZE",
    ),
    _measure(("--placement",), f"{listing(PLACEMENT_CHOICES, last=' or ')}.", metavar="NAME"),
    _measure(("--check/--no-check",), "Verify every result (#wrong; nccl-tests' -c)."),
    _measure(
        ("--rank-stat", "-a"),
        f"Combine ranks' times by {listing(RANK_STATS, {'avg': 'nccl-tests'}, ' or ')}.",
        metavar="NAME",
    ),
    _measure(
        ("--backend",),
        f"{listing(BACKENDS, {'auto': 'nccl/rccl on GPUs, else gloo'})}.",
        metavar="NAME",
    ),
    _measure(
        ("--timeout",),
        "Seconds without progress before a rank counts as hung.",
        field="timeout_s",
        metavar="S",
    ),
    _measure(
        ("--repeats",),
        "Repeat the whole measurement R times in the same rank processes, interleaved "
        "(repeat 1 of every size, then repeat 2, ...); every row records its repeat. "
        "compare and its CI gate decide from repeat-level statistics (tune and doctor repeat "
        "their own way; see docs/methodology/decisions.md).",
        metavar="R",
    ),
)
# nccl-tests' -G (sweep rows only: `collbench overlap` has no sweep rows).
CUDA_GRAPH = _measure(
    ("--cuda-graph",),
    "Time each size as replays of a CUDA graph that captured its iterations (nccl-tests' -G; "
    "GPU backends only): small sizes read NCCL's latency without torch's per-call cost; "
    "meta.json's timing_method says cuda_graph.",
)

_launch = partial(Option, owner=RunOptions, panel=_LAUNCH)
RUN_OPTIONS = (
    _launch(
        ("--launcher",),
        "auto: run as a rank under torchrun/srun/mpirun, else local; local: spawn ranks here; "
        f"{_STARTED_BY_A_TOOL}: start them through that tool; none: this process is a rank.",
        default=FROM_OWNER,
        metavar="NAME",
    ),
    _launch(
        ("--rank-env",),
        "For a rank of a job launched elsewhere: read the "
        f"{listing(RANK_ENVS, last=' or ')} variables (needed when they disagree).",
        metavar="NAME",
    ),
    _launch(
        ("--print",),
        "Print what the launcher would run, and exit.",
        field="print_only",
        default=FROM_OWNER,
    ),
)
# The one launch option on the common path (nccl-tests users reach for -g).
NPROC = Option(
    ("--nproc", "-g"),
    "Total ranks for --launcher local, mpi or srun (nccl-tests' -g is GPUs per process).",
    RunOptions,
    default_text=GPU_OR_CPU_RANKS,
)


QUIET = Option(
    ("--quiet", "-q"), "Print nothing but errors.", kind=bool, default=False, panel=OUTPUT_PANEL
)
JSON_ROWS = json_option(
    "Print the rows as JSON lines instead of the table.", name="json_rows", panel=OUTPUT_PANEL
)
PER_REPEAT = Option(
    ("--per-repeat",),
    "Print each repeat's tables as it finishes (default, with several repeats: one table "
    "per collective at the end, each size's median repeat and the repeats' spread).",
    RunOptions,
    panel=OUTPUT_PANEL,
)

# Where the results go, what is printed, and what is recorded with them.
OUTPUT_OPTIONS = (run_dir_option(RunOptions), *EXPORT_OPTIONS, QUIET, JSON_ROWS, PER_REPEAT)
# What is recorded with the results.
RECORD_OPTIONS = (
    _measure(
        ("--topology", "-T"),
        "Catalog name or topology file of the fabric this runs on: its name goes into every "
        "row and meta.json (see collbench topo list).",
        parse=_topology_ref,
        metavar="NAME|FILE",
    ),
    _measure(
        ("--knob",),
        "Set a communication knob for every rank, e.g. NCCL_MAX_NCHANNELS=4 (repeatable; "
        "checked as tune checks it, recorded with the results, part of every printed command).",
        field="knobs",
        kind=list[str],
        metavar="NAME=VALUE",
        name="knob",
    ),
)

WANTS_OVERLAP = Option(
    ("--overlap",),
    "Also run overlap probes (see collbench overlap), as the options below say.",
    SweepSpec,
    kind=bool,
    panel=_OVERLAP,
)
_overlap = partial(Option, owner=OverlapSpec, panel=_OVERLAP)

OVERLAP_OPTIONS = (
    _overlap(
        ("--compute-ratio",),
        "Compute per iteration as multiples of the collective's time, one probe each.",
        field="ratios",
        default_text=",".join(f"{ratio:g}" for ratio in DEFAULT_RATIOS),
        parse=lambda text, flag: parse_ratios(text),
        metavar="LIST",
    ),
    _overlap(
        ("--compute-tflop",), "A fixed amount of compute per iteration (TFLOP) instead of ratios."
    ),
    _overlap(
        ("--compute-dtype",),
        f"Matmul dtype: {listing((AUTO, *COMPUTE_DTYPES), _AUTO_DTYPES)}.",
        metavar="NAME",
    ),
    _overlap(
        ("--matmul-shape",),
        "MxNxK of each matmul.",
        default_text=f"the largest square up to {MAX_SQUARE['cuda']} on GPUs, "
        f"{MAX_SQUARE['cpu']} on CPU, that fits the smallest target",
        parse=lambda text, flag: parse_shape(text),
        metavar="MxNxK",
    ),
    _overlap(("--compute-streams",), "GPU streams the compute is spread over."),
    _overlap(
        (ALLOW_BLOCKING_FLAG,),
        f"Measure on a GPU backend even with {listing(BLOCKING_ENV, last=' or ')} set "
        "(overlap then reads ~0; warned instead of refused).",
    ),
)

# `collbench sweep`'s options, in the order its help lists them; `overlap` has all but one.
SWEEP_OPTIONS = (
    *SPEC_OPTIONS[:8],
    NPROC,
    *OUTPUT_OPTIONS,
    *SPEC_OPTIONS[8:],
    CUDA_GRAPH,
    *RECORD_OPTIONS,
    *RUN_OPTIONS,
    *LAUNCHER_OPTIONS,
    WANTS_OVERLAP,
    *OVERLAP_OPTIONS,
)


def one_at_a_time(options: tuple[Option, ...], who: str) -> tuple[Option, ...]:
    """`options` with --dtype and --op saying that `who` takes one value (SweepSpec refuses
    several or `all` for overlap probes and a doctor, run/tune/plan.py for a tune)."""
    helps = {
        "--dtype": f"{listing(DTYPES)}: one; {who} one dtype at a time.",
        "--op": f"{listing(REDUCE_OPS)}: one (avg: float dtypes only); {who} one at a time.",
    }
    return tuple(
        replace(option, help=helps[option.flag]) if option.flag in helps else option
        for option in options
    )


# Probes have no nccl-tests layout: `overlap` takes --csv but not -J.
OVERLAP_COMMAND_OPTIONS = one_at_a_time(
    tuple(
        option
        for option in SWEEP_OPTIONS
        if option not in (WANTS_OVERLAP, NCCL_JSON_FILE, CUDA_GRAPH)
    ),
    "overlap probes measure",
)


def run_measure(command: str, values: dict[str, Any]) -> None:
    """Shared body of `collbench sweep` and `collbench overlap`."""
    spec = measure_spec(command, values)
    apply_knobs(spec.knobs)
    options = run_options(values)
    exports = Exports.given(values, spec.collectives if spec.sweep_rows else ())
    # A given backend is known now (--print too); "auto" once the launcher resolves it.
    on_backend = None
    warn_knobs(spec.knobs, spec.backend)
    warn_blocking_env(spec, spec.backend)
    warn([SHARED_GPU_NOTE] if shared_gpu() else [])
    if spec.backend == "auto" and (spec.knobs or spec.cuda_graph or blocking_env(os.environ)):

        def on_backend(backend: str | None) -> None:
            warn_knobs(spec.knobs, backend, names=False)
            warn_blocking_env(spec, backend, refuse=False)  # a rank refused already

    make_sink = SinkMaker(sink_factory(options.output, options.per_repeat), exports, on_backend)
    result, run_dir = sweep.run_sweep(spec, options, command_line(), make_sink)
    failed = make_sink.done(result.error, options.output == "table" and result.is_primary)
    if result.error:
        print_error(result.error)
    elif options.output == "table" and result.is_primary:
        print(f"# Results: {run_dir}", flush=True)
    if result.is_rank:
        exit_rank(result.code)
    raise typer.Exit(result.code or failed)


def measure_spec(command: str, values: dict[str, Any]) -> SweepSpec:
    """What to measure: the spec the options give (`overlap`: probes only)."""
    wants_overlap = values.get(WANTS_OVERLAP.parameter_name) or command == "overlap"
    probe = [option for option in OVERLAP_OPTIONS if values[option.parameter_name] is not None]
    if probe and not wants_overlap:
        value = values[probe[0].parameter_name]
        raise SpecError(probe[0].flag, value, "needs --overlap (or collbench overlap)")
    overlap = None
    if wants_overlap:
        overlap = OverlapSpec(**given_fields(OverlapSpec, OVERLAP_OPTIONS, values))
    fields = sweep_fields(SWEEP_OPTIONS, values)
    fields.pop(WANTS_OVERLAP.field, None)  # the switch; the probes are OverlapSpec's
    return SweepSpec(overlap=overlap, sweep_rows=command == "sweep", **fields)


def sweep_fields(options: tuple[Option, ...], values: dict[str, Any]) -> dict[str, Any]:
    """SweepSpec's fields as given, --knob checked against --backend's ranges at the NCCL/RCCL
    release this torch runs (RCCL 2.20.5+ has 128 channels; a release not known: the newest)."""
    fields = given_fields(SweepSpec, options, values)
    if fields.get("knobs"):
        backend = fields.get("backend", SweepSpec.backend)
        fields["knobs"] = parse_knob_settings(fields["knobs"], backend, library_version(backend))[0]
    return fields


def run_options(values: dict[str, Any]) -> RunOptions:
    """How to run it: the launcher, the output, and the launcher's own settings as given
    (the launcher refuses those that do not apply to it)."""
    quiet, json_rows = values[QUIET.parameter_name], values[JSON_ROWS.parameter_name]
    if quiet and json_rows:
        raise SpecError("--json", True, "conflicts with --quiet: give one")
    extra = launcher_settings(values)
    given = given_fields(RunOptions, SWEEP_OPTIONS, values)
    # --print-sbatch is a Slurm setting (in `extra`) that prints instead of launching.
    given["print_only"] = given["print_only"] or bool(extra.get("print_sbatch"))
    output = "quiet" if quiet else "json" if json_rows else "table"
    return RunOptions(**given, output=output, extra=extra)


def warn_knobs(knobs: tuple[tuple[str, str], ...], backend: str | None, names: bool = True) -> None:
    """One stderr line per knob collbench does not know (`names`) or that the backend does
    not read (set and recorded anyway)."""
    for name, value in knobs:
        lines = check_knob_name(name, f"{name}={value}") if names else []
        mismatch = backend_warning(name, backend)
        lines += [f"{mismatch}; set and recorded anyway"] if mismatch else []
        warn(lines)


ROCM_GRAPH_NOTE = (
    "--cuda-graph on RCCL: HIP graph capture of RCCL collectives has failed or hung in some "
    "torch/ROCm releases; check the figures against a run without --cuda-graph"
)


def warn_blocking_env(spec: SweepSpec, backend: str | None, refuse: bool = True) -> None:
    """On a GPU backend, one stderr line when the environment (knobs included) makes the
    host wait for the GPU; SpecError instead for overlap probes without their flag
    (core.overlap.check_blocking_env), when `refuse`. And one for --cuda-graph on RCCL."""
    if backend not in ("nccl", "rccl"):
        return
    line = check_blocking_env(os.environ, spec.overlap if refuse else None)
    graph = spec.cuda_graph and backend == "rccl"
    warn([*([line] if line else []), *([ROCM_GRAPH_NOTE] if graph else [])])


def sink_factory(output: str, per_repeat: bool = False) -> Any:
    """What a person sees while rows arrive: the table, JSON lines or nothing (+ progress)."""
    from collbench.render.console import ConsoleSink

    progress = output != "quiet" and sys.stderr.isatty()
    return lambda spec: ConsoleSink(spec, output, progress=progress, per_repeat=per_repeat)


def command_line() -> list[str]:
    return ["collbench", *sys.argv[1:]]


def exit_rank(code: int) -> None:
    """End a rank process now: everything is on disk and printed.

    After a failure the process group cannot be destroyed cleanly, and letting the
    interpreter tear it down races with its threads ("terminate called without an active
    exception", SIGABRT) so the exit code would be lost.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def print_error(message: str) -> None:
    warn([message], "error")
