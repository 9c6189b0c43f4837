"""The `collbench` command line: thin typer commands that map onto library calls.

Keep this module's imports light: `collbench --help` must not import torch.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

try:  # typer >= 0.26 ships its own copy of click; older typer uses click itself
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - depends on the installed typer
    from click import exceptions as click_exceptions

from collbench.cli.analysis import compare, report
from collbench.cli.fit import fit
from collbench.cli.imports import import_app
from collbench.cli.mfu import mfu
from collbench.cli.topo import topo_app
from collbench.core.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, CollbenchError, SpecError
from collbench.core.spec import SweepSpec, parse_size

app = typer.Typer(
    help="Collective-communication benchmarks comparable to nccl-tests.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_D = SweepSpec  # defaults live on the dataclass; help texts quote them from there


@app.callback()
def _root() -> None:
    """Collective-communication benchmarks comparable to nccl-tests."""


def _measure_options(
    collective: Annotated[
        str,
        typer.Option(
            "--collective",
            "-c",
            help="Comma list: all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all, sendrecv.",
        ),
    ] = ",".join(_D.collectives),
    min_bytes: Annotated[
        Optional[str],
        typer.Option(
            "--min-bytes",
            "-b",
            help=f"Smallest size (K/M/G = powers of 1024). (default: {_D.min_bytes})",
            show_default=False,
        ),
    ] = None,
    max_bytes: Annotated[
        Optional[str],
        typer.Option(
            "--max-bytes",
            "-e",
            help="Largest size. (default: 16M on gloo, 1G on nccl/rccl)",
            show_default=False,
        ),
    ] = None,
    factor: Annotated[
        Optional[float],
        typer.Option(
            "--factor",
            "-f",
            help="Multiply the size by this each step. (default: 2)",
            show_default=False,
        ),
    ] = None,
    step_bytes: Annotated[
        Optional[str],
        typer.Option(
            "--step-bytes",
            "-i",
            help="Add this many bytes each step instead of --factor.",
            show_default=False,
        ),
    ] = None,
    dtype: Annotated[
        Optional[str],
        typer.Option(
            "--dtype",
            "-d",
            help=f"float32, float16, bfloat16, float64, int8, uint8, int32, int64. (default: {_D.dtype})",
            show_default=False,
        ),
    ] = None,
    op: Annotated[
        Optional[str],
        typer.Option(
            "--op",
            "-o",
            help=f"Reduction: sum, prod, min, max, avg. (default: {_D.op})",
            show_default=False,
        ),
    ] = None,
    placement: Annotated[
        Optional[str],
        typer.Option(
            "--placement",
            help=f"out_of_place, in_place or both. (default: {_D.placement})",
            show_default=False,
        ),
    ] = None,
    warmup: Annotated[
        Optional[int],
        typer.Option(
            "--warmup",
            "-w",
            help=f"Untimed operations per size. (default: {_D.warmup})",
            show_default=False,
        ),
    ] = None,
    iters: Annotated[
        Optional[int],
        typer.Option(
            "--iters",
            "-n",
            help=f"Timed operations per size. (default: {_D.iters})",
            show_default=False,
        ),
    ] = None,
    check: Annotated[
        Optional[bool],
        typer.Option(
            "--check/--no-check",
            help="Verify every result (#wrong). (default: check)",
            show_default=False,
        ),
    ] = None,
    rank_stat: Annotated[
        Optional[str],
        typer.Option(
            "--rank-stat",
            "-a",
            help=f"Combine ranks' times by avg (nccl-tests), max, min or rank0. (default: {_D.rank_stat})",
            show_default=False,
        ),
    ] = None,
    backend: Annotated[
        Optional[str],
        typer.Option(
            "--backend",
            help=f"auto (nccl/rccl on GPUs, else gloo), nccl, rccl, gloo. (default: {_D.backend})",
            show_default=False,
        ),
    ] = None,
    timeout: Annotated[
        Optional[float],
        typer.Option(
            "--timeout",
            help=f"Seconds without progress before a rank counts as hung. (default: {_D.timeout_s:g})",
            show_default=False,
        ),
    ] = None,
    launcher: Annotated[
        str,
        typer.Option(
            "--launcher",
            help="auto: run as a rank under torchrun/srun/mpirun, else local; local: spawn ranks here; torchrun, mpi, slurm: start them through that tool; none: this process is a rank.",
        ),
    ] = "auto",
    nproc: Annotated[
        Optional[int],
        typer.Option(
            "--nproc",
            "-g",
            help="Ranks for --launcher local or mpi. (default: number of GPUs, else 2)",
            show_default=False,
        ),
    ] = None,
    rank_env: Annotated[
        Optional[str],
        typer.Option(
            "--rank-env",
            help="For a rank of a job launched elsewhere: read the torch, slurm or mpi variables (needed when they disagree).",
            show_default=False,
        ),
    ] = None,
    print_only: Annotated[
        bool, typer.Option("--print", help="Print what the launcher would run, and exit.")
    ] = False,
    nproc_per_node: Annotated[
        Optional[int],
        typer.Option(
            "--nproc-per-node",
            help="torchrun: ranks per node. (default: number of GPUs, else 2)",
            show_default=False,
            rich_help_panel="torchrun",
        ),
    ] = None,
    nnodes: Annotated[
        Optional[int],
        typer.Option(
            "--nnodes",
            help="torchrun: nodes in the job. (default: 1)",
            show_default=False,
            rich_help_panel="torchrun",
        ),
    ] = None,
    node_rank: Annotated[
        Optional[int],
        typer.Option(
            "--node-rank",
            help="torchrun: this node's index. (default: 0)",
            show_default=False,
            rich_help_panel="torchrun",
        ),
    ] = None,
    master_addr: Annotated[
        Optional[str],
        typer.Option(
            "--master-addr",
            help="torchrun: node 0's address (static rendezvous).",
            show_default=False,
            rich_help_panel="torchrun",
        ),
    ] = None,
    master_port: Annotated[
        Optional[int],
        typer.Option(
            "--master-port",
            help="torchrun: node 0's port. (default: 29500)",
            show_default=False,
            rich_help_panel="torchrun",
        ),
    ] = None,
    rdzv_endpoint: Annotated[
        Optional[str],
        typer.Option(
            "--rdzv-endpoint",
            help="torchrun: HOST:PORT of a c10d rendezvous instead of --master-addr.",
            show_default=False,
            rich_help_panel="torchrun",
        ),
    ] = None,
    nodes: Annotated[
        Optional[int],
        typer.Option(
            "--nodes",
            "-N",
            help="slurm: nodes to allocate. (default: 1)",
            show_default=False,
            rich_help_panel="Slurm",
        ),
    ] = None,
    ntasks_per_node: Annotated[
        Optional[int],
        typer.Option(
            "--ntasks-per-node",
            help="slurm: ranks per node. (default: --gpus-per-node, else 2)",
            show_default=False,
            rich_help_panel="Slurm",
        ),
    ] = None,
    gpus_per_node: Annotated[
        Optional[int],
        typer.Option(
            "--gpus-per-node",
            help="slurm: GPUs per node.",
            show_default=False,
            rich_help_panel="Slurm",
        ),
    ] = None,
    partition: Annotated[
        Optional[str],
        typer.Option(
            "--partition",
            "-p",
            help="slurm: partition.",
            show_default=False,
            rich_help_panel="Slurm",
        ),
    ] = None,
    account: Annotated[
        Optional[str],
        typer.Option(
            "--account", "-A", help="slurm: account.", show_default=False, rich_help_panel="Slurm"
        ),
    ] = None,
    qos: Annotated[
        Optional[str],
        typer.Option(
            "--qos", help="slurm: quality of service.", show_default=False, rich_help_panel="Slurm"
        ),
    ] = None,
    time_limit: Annotated[
        Optional[str],
        typer.Option(
            "--time",
            "-t",
            help="slurm: time limit (MM, HH:MM:SS, D-HH:MM...). (default: 30)",
            show_default=False,
            rich_help_panel="Slurm",
        ),
    ] = None,
    constraint: Annotated[
        Optional[str],
        typer.Option(
            "--constraint",
            "-C",
            help="slurm: node features.",
            show_default=False,
            rich_help_panel="Slurm",
        ),
    ] = None,
    exclusive: Annotated[
        Optional[bool],
        typer.Option(
            "--exclusive",
            help="slurm: whole nodes only.",
            show_default=False,
            rich_help_panel="Slurm",
        ),
    ] = None,
    slurm_args: Annotated[
        Optional[list[str]],
        typer.Option(
            "--slurm-arg",
            help="slurm: any other sbatch option as KEY=VALUE (repeatable).",
            show_default=False,
            rich_help_panel="Slurm",
        ),
    ] = None,
    no_wait: Annotated[
        Optional[bool],
        typer.Option(
            "--no-wait",
            help="slurm: submit, print the job id and return (see collbench status/wait).",
            show_default=False,
            rich_help_panel="Slurm",
        ),
    ] = None,
    print_sbatch: Annotated[
        bool,
        typer.Option(
            "--print-sbatch",
            help="slurm: print an equivalent sbatch script, and exit.",
            rich_help_panel="Slurm",
        ),
    ] = False,
    hostfile: Annotated[
        Optional[str],
        typer.Option(
            "--hostfile", help="mpi: Open MPI hostfile.", show_default=False, rich_help_panel="MPI"
        ),
    ] = None,
    mpi_args: Annotated[
        Optional[list[str]],
        typer.Option(
            "--mpi-arg",
            help="mpi: extra mpirun arguments (repeatable, shell-split).",
            show_default=False,
            rich_help_panel="MPI",
        ),
    ] = None,
    out: Annotated[
        Optional[Path],
        typer.Option(
            "--out",
            help="Run directory (new or empty). (default: results/<UTC time>-<id>)",
            show_default=False,
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing but errors.")] = False,
    json_rows: Annotated[
        bool, typer.Option("--json", help="Print the rows as JSON lines instead of the table.")
    ] = False,
    topology: Annotated[
        Optional[str],
        typer.Option(
            "--topology",
            "-T",
            help="Catalog name or topology file of the fabric this runs on: its name goes into every row and meta.json (see collbench topo list).",
            show_default=False,
        ),
    ] = None,
    knob: Annotated[
        Optional[list[str]],
        typer.Option(
            "--knob",
            help="Set a communication knob for every rank, e.g. NCCL_MAX_NCHANNELS=4 (repeatable; recorded with the results).",
            show_default=False,
        ),
    ] = None,
    overlap: Annotated[
        bool,
        typer.Option(
            "--overlap",
            help="Also run overlap probes (see collbench overlap).",
            rich_help_panel="Overlap probes",
        ),
    ] = False,
    compute_ratio: Annotated[
        Optional[str],
        typer.Option(
            "--compute-ratio",
            help="Compute per iteration as multiples of the collective's time, one probe each. (default: 0.5,1,2)",
            show_default=False,
            rich_help_panel="Overlap probes",
        ),
    ] = None,
    compute_tflop: Annotated[
        Optional[float],
        typer.Option(
            "--compute-tflop",
            help="A fixed amount of compute per iteration (TFLOP) instead of ratios.",
            show_default=False,
            rich_help_panel="Overlap probes",
        ),
    ] = None,
    compute_dtype: Annotated[
        Optional[str],
        typer.Option(
            "--compute-dtype",
            help="Matmul dtype: auto (bfloat16 on GPUs, float32 on CPU), float32, bfloat16, float16, float64. (default: auto)",
            show_default=False,
            rich_help_panel="Overlap probes",
        ),
    ] = None,
    matmul_shape: Annotated[
        Optional[str],
        typer.Option(
            "--matmul-shape",
            help="MxNxK of each matmul. (default: the largest square up to 8192 on GPUs, 1024 on CPU, that fits the smallest target)",
            show_default=False,
            rich_help_panel="Overlap probes",
        ),
    ] = None,
    compute_streams: Annotated[
        Optional[int],
        typer.Option(
            "--compute-streams",
            help="GPU streams the compute is spread over. (default: 1)",
            show_default=False,
            rich_help_panel="Overlap probes",
        ),
    ] = None,
) -> None:
    """The options `sweep` and `overlap` share (typer reads this signature)."""


_OVERLAP_FIELDS = (
    "compute_ratio",
    "compute_tflop",
    "compute_dtype",
    "matmul_shape",
    "compute_streams",
)


def _measure(command: str, options: dict[str, Any]) -> None:
    """Shared body of `collbench sweep` and `collbench overlap`."""
    from collbench.run.sweep import RunOptions, run_sweep

    spec = _spec_from_options(command, options)
    _set_knobs(options.pop("knob") or [])
    quiet, json_rows = options.pop("quiet"), options.pop("json_rows")
    if quiet and json_rows:
        raise SpecError("--json", True, "conflicts with --quiet: give one")
    output = "quiet" if quiet else "json" if json_rows else "table"
    print_sbatch = options.pop("print_sbatch")
    run_options = RunOptions(
        launcher=options.pop("launcher"),
        nproc=options.pop("nproc"),
        out=options.pop("out"),
        output=output,
        rank_env=options.pop("rank_env"),
        print_only=options.pop("print_only") or print_sbatch,
    )
    # What is left is launcher-specific; the launcher refuses what does not apply to it.
    options.update(time=options.pop("time_limit"), print_sbatch=print_sbatch or None)
    extra = {key: value for key, value in options.items() if value is not None and value != []}
    run_options = dataclasses.replace(run_options, extra=extra)
    result, run_dir = run_sweep(spec, run_options, _command_line(), _sink_factory(output))
    if result.error:
        _error(result.error)
    elif output == "table" and result.is_primary:
        print(f"# Results: {run_dir}", flush=True)
    if result.is_rank:
        _exit_rank(result.code)
    raise typer.Exit(result.code)


def _spec_from_options(command: str, options: dict[str, Any]) -> SweepSpec:
    """Pop the measurement options (the rest are about running) and build the spec."""
    from collbench.core.overlap import OverlapSpec, parse_ratios, parse_shape

    probe = {name: options.pop(name) for name in _OVERLAP_FIELDS}
    wants_overlap = options.pop("overlap", False) or command == "overlap"
    given_probe = [name for name, value in probe.items() if value is not None]
    if given_probe and not wants_overlap:
        flag = "--" + given_probe[0].replace("_", "-")
        raise SpecError(flag, probe[given_probe[0]], "needs --overlap (or collbench overlap)")
    overlap_spec = None
    if wants_overlap:
        overlap_spec = OverlapSpec(
            **{
                k: v
                for k, v in {
                    "ratios": None
                    if probe["compute_ratio"] is None
                    else parse_ratios(probe["compute_ratio"]),
                    "compute_tflop": probe["compute_tflop"],
                    "compute_dtype": probe["compute_dtype"],
                    "matmul_shape": None
                    if probe["matmul_shape"] is None
                    else parse_shape(probe["matmul_shape"]),
                    "compute_streams": probe["compute_streams"],
                }.items()
                if v is not None
            }
        )
    sizes = {name: options.pop(name) for name in ("min_bytes", "max_bytes", "step_bytes")}
    given = {
        **{
            name: None if value is None else parse_size(value, "--" + name.replace("_", "-"))
            for name, value in sizes.items()
        },
        **{
            name: options.pop(name)
            for name in (
                "factor",
                "dtype",
                "op",
                "placement",
                "warmup",
                "iters",
                "check",
                "rank_stat",
                "backend",
            )
        },
        "timeout_s": options.pop("timeout"),
    }
    collective = options.pop("collective")
    names = tuple(name.strip() for name in collective.split(",") if name.strip())
    topology = options.pop("topology")
    if topology is not None:
        from collbench.topologies.loader import load_topology

        given["topology"] = load_topology(topology).name
    return SweepSpec(
        collectives=names,
        overlap=overlap_spec,
        sweep_rows=command == "sweep",
        **{k: v for k, v in given.items() if v is not None},
    )


def _set_knobs(settings: list[str]) -> None:
    """--knob NAME=VALUE: set in this process, so every launcher passes it to the ranks."""
    from collbench.bench.provenance import is_knob

    for setting in settings:
        name, sep, value = setting.partition("=")
        if not sep or not name:
            raise SpecError("--knob", setting, "is not NAME=VALUE")
        if not is_knob(name):
            raise SpecError(
                "--knob",
                setting,
                "does not name a communication knob (NCCL_*, "
                "RCCL_*, GLOO_*, TORCH_*, UCX_*, FI_*, CUDA_DEVICE_MAX_CONNECTIONS, "
                "OMP_NUM_THREADS ...)",
            )
        os.environ[name] = value


def _command(name: str, doc: str, drop: tuple[str, ...] = ()) -> Any:
    """A typer command with _measure_options' options (less `drop`) that runs _measure."""
    # Evaluated annotations: this module's are strings (postponed evaluation).
    signature = inspect.signature(_measure_options, eval_str=True)
    params = [param for key, param in signature.parameters.items() if key not in drop]

    def command(**options: Any) -> None:
        _measure(name, options)

    command.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    command.__annotations__ = {param.name: param.annotation for param in params}
    command.__doc__ = doc
    command.__name__ = name
    return command


app.command("sweep")(
    _command("sweep", "Measure collectives over a range of sizes; print an nccl-tests-style table.")
)
app.command("overlap")(
    _command(
        "overlap",
        "Run compute-overlap probes: each collective and size alone, a matmul alone, "
        "and both together; print how much communication hides behind compute and what each "
        "costs the other.",
        drop=("overlap",),
    )
)


app.add_typer(import_app, name="import")
app.add_typer(topo_app, name="topo")
app.command("fit")(fit)
app.command("compare")(compare)
app.command("report")(report)
app.command("mfu")(mfu)


@app.command()
def status(run: Annotated[Path, typer.Argument(help="A run directory.")]) -> None:
    """Say how far a run has got (for a Slurm run, the job's state too)."""
    from collbench.run.status import describe_run

    print(describe_run(run), flush=True)


@app.command()
def wait(
    run: Annotated[
        Path, typer.Argument(help="The run directory of a job submitted with --no-wait.")
    ],
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing but errors.")] = False,
    json_rows: Annotated[
        bool, typer.Option("--json", help="Print the rows as JSON lines instead of the table.")
    ] = False,
) -> None:
    """Follow a submitted Slurm sweep to its end, printing its table like `sweep` does."""
    from collbench.run.status import wait_for_run

    output = "quiet" if quiet else "json" if json_rows else "table"
    result = wait_for_run(run, _sink_factory(output))
    if result.error:
        _error(result.error)
    elif output == "table":
        print(f"# Results: {run}", flush=True)
    raise typer.Exit(result.code)


def _sink_factory(output: str) -> Any:
    """What a person sees while rows arrive: the table, JSON lines or nothing (+ progress)."""
    from collbench.render.console import ConsoleSink

    progress = output != "quiet" and sys.stderr.isatty()
    return lambda spec: ConsoleSink(spec, output, progress=progress)


def _command_line() -> list[str]:
    return ["collbench", *sys.argv[1:]]


def _exit_rank(code: int) -> None:
    """End a rank process now: everything is on disk and printed.

    After a failure the process group cannot be destroyed cleanly, and letting the
    interpreter tear it down races with its threads ("terminate called without an active
    exception", SIGABRT) so the exit code would be lost.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _error(message: str) -> None:
    print(f"collbench: error: {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: every error is one line and a documented exit code."""
    command = typer.main.get_command(app)
    try:
        code = command.main(args=argv, prog_name="collbench", standalone_mode=False)
    except click_exceptions.UsageError as error:
        message = error.format_message().replace("\n", " ").strip()
        if message:  # bare `collbench` has already printed the help instead
            _error(message)
        code = EXIT_USAGE
    except (typer.Abort, KeyboardInterrupt):
        _error("interrupted")
        code = EXIT_INTERRUPTED
    except CollbenchError as error:
        _error(str(error))
        code = error.exit_code
    except typer.Exit as done:
        code = done.exit_code
    sys.exit(code if isinstance(code, int) else EXIT_OK)
