"""The `collbench` command line: thin typer commands that map onto library calls.

Keep this module's imports light: `collbench --help` must not import torch.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

try:  # typer >= 0.26 ships its own copy of click; older typer uses click itself
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - depends on the installed typer
    from click import exceptions as click_exceptions

from collbench.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, CollbenchError, SpecError
from collbench.spec import SweepSpec, parse_size

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


@app.command()
def sweep(
    collective: Annotated[str, typer.Option("--collective", "-c", help="Comma list: all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all, sendrecv.")] = ",".join(_D.collectives),  # noqa: E501
    min_bytes: Annotated[Optional[str], typer.Option("--min-bytes", "-b", help=f"Smallest size (K/M/G = powers of 1024). [default: {_D.min_bytes}]", show_default=False)] = None,  # noqa: E501
    max_bytes: Annotated[Optional[str], typer.Option("--max-bytes", "-e", help="Largest size. [default: 16M on gloo, 1G on nccl/rccl]", show_default=False)] = None,  # noqa: E501
    factor: Annotated[Optional[float], typer.Option("--factor", "-f", help="Multiply the size by this each step. [default: 2]", show_default=False)] = None,  # noqa: E501
    step_bytes: Annotated[Optional[str], typer.Option("--step-bytes", "-i", help="Add this many bytes each step instead of --factor.", show_default=False)] = None,  # noqa: E501
    dtype: Annotated[Optional[str], typer.Option("--dtype", "-d", help=f"float32, float16, bfloat16, float64, int8, uint8, int32, int64. [default: {_D.dtype}]", show_default=False)] = None,  # noqa: E501
    op: Annotated[Optional[str], typer.Option("--op", "-o", help=f"Reduction: sum, prod, min, max, avg. [default: {_D.op}]", show_default=False)] = None,  # noqa: E501
    placement: Annotated[Optional[str], typer.Option("--placement", help=f"out_of_place, in_place or both. [default: {_D.placement}]", show_default=False)] = None,  # noqa: E501
    warmup: Annotated[Optional[int], typer.Option("--warmup", "-w", help=f"Untimed operations per size. [default: {_D.warmup}]", show_default=False)] = None,  # noqa: E501
    iters: Annotated[Optional[int], typer.Option("--iters", "-n", help=f"Timed operations per size. [default: {_D.iters}]", show_default=False)] = None,  # noqa: E501
    check: Annotated[Optional[bool], typer.Option("--check/--no-check", help="Verify every result (#wrong). [default: check]", show_default=False)] = None,  # noqa: E501
    rank_stat: Annotated[Optional[str], typer.Option("--rank-stat", "-a", help=f"Combine ranks' times by avg (nccl-tests), max, min or rank0. [default: {_D.rank_stat}]", show_default=False)] = None,  # noqa: E501
    backend: Annotated[Optional[str], typer.Option("--backend", help=f"auto (nccl/rccl on GPUs, else gloo), nccl, rccl, gloo. [default: {_D.backend}]", show_default=False)] = None,  # noqa: E501
    timeout: Annotated[Optional[float], typer.Option("--timeout", help=f"Seconds without progress before a rank counts as hung. [default: {_D.timeout_s:g}]", show_default=False)] = None,  # noqa: E501
    launcher: Annotated[str, typer.Option("--launcher", help="local: spawn ranks on this host; none: this process is a rank of a job already launched (torchrun).")] = "local",  # noqa: E501
    nproc: Annotated[Optional[int], typer.Option("--nproc", "-g", help="Ranks for --launcher local. [default: number of GPUs, else 2]", show_default=False)] = None,  # noqa: E501
    out: Annotated[Optional[Path], typer.Option("--out", help="Run directory (new or empty). [default: results/<UTC time>-<id>]", show_default=False)] = None,  # noqa: E501
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing but errors.")] = False,  # noqa: E501
    json_rows: Annotated[bool, typer.Option("--json", help="Print the rows as JSON lines instead of the table.")] = False,  # noqa: E501
) -> None:
    """Measure collectives over a range of sizes; print an nccl-tests-style table."""
    from collbench.launchers import LAUNCHERS
    from collbench.sweep import RunOptions, run_sweep

    if quiet and json_rows:
        raise SpecError("--json", True, "conflicts with --quiet: give one")
    if launcher not in LAUNCHERS:
        raise SpecError("--launcher", launcher, f"is not one of {', '.join(LAUNCHERS)}")
    given = {
        "min_bytes": None if min_bytes is None else parse_size(min_bytes, "--min-bytes"),
        "max_bytes": None if max_bytes is None else parse_size(max_bytes, "--max-bytes"),
        "step_bytes": None if step_bytes is None else parse_size(step_bytes, "--step-bytes"),
        "factor": factor, "dtype": dtype, "op": op, "placement": placement, "warmup": warmup,
        "iters": iters, "check": check, "rank_stat": rank_stat, "backend": backend,
        "timeout_s": timeout,
    }
    names = tuple(name.strip() for name in collective.split(",") if name.strip())
    spec = SweepSpec(collectives=names, **{k: v for k, v in given.items() if v is not None})
    output = "quiet" if quiet else "json" if json_rows else "table"
    options = RunOptions(launcher=launcher, nproc=nproc, out=out, output=output)
    result, run_dir = run_sweep(spec, options, _command_line())
    if result.error:
        _error(result.error)
    elif output == "table" and result.is_primary:
        print(f"# Results: {run_dir}", flush=True)
    if launcher == "none":
        _exit_rank(result.code)
    raise typer.Exit(result.code)


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
