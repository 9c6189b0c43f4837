"""The `collbench` command line: thin typer commands that map onto library calls.

Keep this module's imports light: `collbench --help` must not import torch.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

try:  # typer >= 0.26 ships its own copy of click; older typer uses click itself
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - depends on the installed typer
    from click import exceptions as click_exceptions

from collbench.cli.compare import compare, noise
from collbench.cli.doctor import COMMAND_OPTIONS as DOCTOR_OPTIONS_ALL
from collbench.cli.doctor import HELP as DOCTOR_HELP
from collbench.cli.doctor import doctor_parts, run_doctor_command
from collbench.cli.export import EXPORT_OPTIONS, Exports, SinkMaker, export
from collbench.cli.fit import fit
from collbench.cli.gemm import gemm
from collbench.cli.help import use_help_classes
from collbench.cli.imports import import_app
from collbench.cli.measure import (
    FOLDED_PANELS,
    JSON_ROWS,
    OVERLAP_COMMAND_OPTIONS,
    QUIET,
    SWEEP_OPTIONS,
    measure_spec,
    print_error,
    run_measure,
    run_options,
    sink_factory,
)
from collbench.cli.mfu import mfu
from collbench.cli.options import Argument, add_command, group, say
from collbench.cli.predict import predict
from collbench.cli.report import report
from collbench.cli.topo import topo_app
from collbench.cli.tune import tune_app
from collbench.core.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, CollbenchError
from collbench.run.status import StatusRequest, describe_run, latest_run, wait_for_run

app = group(
    "Collective-communication benchmarks comparable to nccl-tests.",
    # Every command (and group) inherits -h from here.
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(wanted: bool) -> None:
    if wanted:
        from collbench import __version__

        print(f"collbench {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            help="Print collbench's version and exit.",
            callback=_print_version,
            is_eager=True,
        ),
    ] = False,
) -> None:
    """Collective-communication benchmarks comparable to nccl-tests."""


add_command(
    app,
    "sweep",
    "Measure collectives over a range of sizes; print an nccl-tests-style table.",
    SWEEP_OPTIONS,
    lambda values: run_measure("sweep", values),
    FOLDED_PANELS,
    config=True,
    check=lambda values: (measure_spec("sweep", values), run_options(values)),
)
add_command(
    app,
    "overlap",
    "Run compute-overlap probes: each collective and size alone, a matmul alone, "
    "and both together; print how much communication hides behind compute and what each "
    "costs the other.",
    OVERLAP_COMMAND_OPTIONS,
    lambda values: run_measure("overlap", values),
    FOLDED_PANELS,
)

app.add_typer(import_app, name="import")
app.add_typer(topo_app, name="topo")
for body in (fit, compare, noise, report, mfu, predict, gemm, export):
    app.command(body.__name__)(body)
app.add_typer(tune_app, name="tune")
add_command(
    app,
    "doctor",
    DOCTOR_HELP,
    DOCTOR_OPTIONS_ALL,
    run_doctor_command,
    FOLDED_PANELS,
    config=True,
    check=doctor_parts,
)


WAIT_OPTIONS = (
    Argument("run", "The run directory of a job submitted with --no-wait.", kind=Path),
    QUIET,
    JSON_ROWS,
    *EXPORT_OPTIONS,
)


def _finalize(values: dict[str, Any]) -> None:
    from collbench.render.export import complete_side_files
    from collbench.run.finalize import finalize_run

    print(finalize_run(values["run"], complete_side_files), flush=True)


def _wait(values: dict[str, Any]) -> None:
    from collbench.store.job import Job

    run = values["run"]
    try:  # the collectives it will measure, to name -J files
        planned = list(Job.load(run).spec.collectives)
    except CollbenchError:  # wait_for_run says what is wrong with the run
        planned = []
    output = "quiet" if values["quiet"] else "json" if values["json_rows"] else "table"
    make_sink = SinkMaker(sink_factory(output), Exports.given(values, planned))
    result = wait_for_run(run, make_sink)
    failed = make_sink.done(result.error, output == "table")
    if result.error:
        print_error(result.error)
    elif output == "table":
        print(f"# Results: {run}", flush=True)
    raise typer.Exit(result.code or failed)


add_command(
    app,
    "status",
    "Say how far a run has got (for a Slurm run, the job's state too).",
    (
        Argument(
            "run",
            "A run directory (default: the newest under ./results).",
            StatusRequest,
            kind=Path,
            required=False,
        ),
    ),
    lambda values: print(describe_run(values["run"] or latest_run(Path("results"))), flush=True),
)
add_command(
    app,
    "finalize",
    "Finish a run left `running` with no live process: write rows.parquet and its final\n"
    "state (orphaned, or failed if a rank reported a failure).",
    (Argument("run", "A run directory.", kind=Path),),
    _finalize,
)
add_command(
    app,
    "wait",
    "Follow a submitted Slurm sweep to its end, printing its table like `sweep` does.",
    WAIT_OPTIONS,
    _wait,
)
# Every command's help: flags without a metavar, one-sentence summaries, --help-all.
use_help_classes(app)


# Hints for nccl-tests reflexes: a flag typed as nccl-tests means it, answered with what
# collbench calls it, next to the usage error (collbench's own meanings stay).


@dataclass(frozen=True)
class Habit:
    """An nccl-tests short flag that means something else here (or nothing)."""

    flag: str  # the short flag as typed: -c
    field: str | None  # the collbench option its error names (None: no such option here)
    hint: str
    # Only when the value typed is a number, as nccl-tests' is (-c 1, -a 1, -T 30).
    numeric: bool = False
    # The commands it is typed at (nccl-tests' flags: the measuring ones).
    commands: tuple[str, ...] = ("sweep", "overlap")


HABITS = (
    Habit(
        "-c",
        "--collective",
        "-c is --collective here; nccl-tests' -c (check) is --check / --no-check",
        numeric=True,
    ),
    Habit(
        "-t",
        "--time",
        "-t is the Slurm --time limit here, not nccl-tests' threads: collbench runs one "
        "rank per process (-g sets how many)",
    ),
    Habit(
        "-g",
        "--nproc",
        "-g is --nproc here, the total number of ranks (nccl-tests' -g is GPUs per process; "
        "collbench gives each rank one device)",
    ),
    Habit(
        "-a",
        "--rank-stat",
        "nccl-tests' -a 0/1/2/3 is --rank-stat rank0/avg/min/max here",
        numeric=True,
    ),
    Habit(
        "-T",
        "--topology",
        "-T is --topology here; nccl-tests' -T (timeout) is --timeout",
        numeric=True,
    ),
    Habit(
        "-N",
        "--nodes",
        "-N is the Slurm --nodes here; nccl-tests' -N (run cycles) is --repeats",
        numeric=True,
    ),
    Habit("-m", None, "nccl-tests' -m (aggregated iterations) has no collbench option"),
    Habit("-z", None, "nccl-tests' -z (blocking) has no collbench option"),
    Habit(
        "-G",
        None,
        "nccl-tests' -G N (CUDA graph launches) is --cuda-graph here (nccl and rccl backends)",
    ),
    Habit(
        "-I",
        None,
        "nccl-tests' -I (per-iteration timing) is always on here: every row keeps its "
        "per-iteration times (time_us_samples in rows.jsonl)",
    ),
    # -o is --op wherever it exists (nccl-tests' letter): an output is --out, never -o.
    Habit(
        "-o",
        None,
        "-o is --op in collbench (nccl-tests' letter); the output is --out",
        commands=("report", "gemm", "noise"),
    ),
    Habit(
        "-R",
        None,
        "nccl-tests' -R (buffer registration) has no collbench option: torch allocates "
        "and registers the buffers",
    ),
)


def nccl_tests_hint(argv: Sequence[str], field: str | None) -> str | None:
    """The hint for an error on `field` (the option it names; None: an unknown option)
    when `argv` used the nccl-tests flag behind it; None when no habit explains it. A
    habit hints only at its commands (nccl-tests' flags: the measuring ones). Options
    given to `tune` itself get the subcommands it took them to."""
    command = next((arg for arg in argv if not arg.startswith("-")), None)
    if argv[:1] == ["tune"] and argv[1:2] and argv[1].startswith("-"):
        return (
            "tune takes a subcommand: `tune run OPTIONS` (was `tune OPTIONS`), "
            "`tune from RUN... --out DIR` (was `tune --from`), `tune verify DIR` (was "
            "`tune --verify`)"
        )
    for habit in HABITS:
        values = _typed(argv, habit.flag)
        if command not in habit.commands or habit.field != field or not values:
            continue
        if not habit.numeric or any(value.lstrip("-").isdigit() for value in values):
            return habit.hint
    return None


def _typed(argv: Sequence[str], flag: str) -> list[str]:
    """The values given to short `flag` in argv ("-c 1" and "-c1" alike)."""
    values = []
    for index, arg in enumerate(argv):
        if arg == flag:
            values.append(argv[index + 1] if index + 1 < len(argv) else "")
        elif arg.startswith(flag) and not arg.startswith("--"):
            values.append(arg[len(flag) :])
    return values


def _usage_field(error: Exception) -> str | None:
    """The option a click usage error is about (None: an unknown option)."""
    param = getattr(error, "param", None)
    return max(param.opts, key=len) if param is not None and getattr(param, "opts", None) else None


def _hint(argv: list[str], field: str | None) -> None:
    hint = nccl_tests_hint(argv, field)
    if hint:
        say(f"collbench: hint: {hint}")


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: every error is one line and a documented exit code (a
    usage error that looks like an nccl-tests habit gets a second line: the hint)."""
    click_command = typer.main.get_command(app)
    args = sys.argv[1:] if argv is None else argv
    try:
        code = click_command.main(args=argv, prog_name="collbench", standalone_mode=False)
    except click_exceptions.UsageError as error:
        message = error.format_message().replace("\n", " ").strip()
        if message:  # bare `collbench` has already printed the help instead
            print_error(message)
            _hint(args, _usage_field(error))
        code = EXIT_USAGE
    except (typer.Abort, KeyboardInterrupt):
        print_error("interrupted")
        code = EXIT_INTERRUPTED
    except CollbenchError as error:
        print_error(str(error))
        if error.exit_code == EXIT_USAGE:
            _hint(args, getattr(error, "field", None))
        code = error.exit_code
    except typer.Exit as done:
        code = done.exit_code
    sys.exit(code if isinstance(code, int) else EXIT_OK)
