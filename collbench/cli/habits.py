"""Hints for nccl-tests reflexes: a flag typed as nccl-tests means it, answered with what
collbench calls it, next to the usage error (collbench's own meanings stay).

Keep this module's imports light: `collbench --help` must not import torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


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
