"""`collbench tune run --launcher slurm`: one allocation for the whole tune.

The method, in full: docs/tune.md#collbench-run-tune-slurm-py.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from collbench.core.errors import EXIT_RUN_FAILED
from collbench.run.tune.from_runs import DRIVER_FOLDER
from collbench.store.outputs import check_output_dir

if TYPE_CHECKING:
    from collbench.core.spec import SweepSpec
    from collbench.run.sweep import RunOptions
    from collbench.run.tune.plan import TunePlan

POLL_S = 0.5


def tune_in_allocation(
    spec: SweepSpec,
    plan: TunePlan,
    knobs: Sequence[str],
    json_out: bool,
    options: RunOptions,
    say: Callable[[str], None],
) -> int:
    """Submit the tune as a driver (`driver_argv`) and follow it to its end; the driver's
    exit code (1 when Slurm ended it: cancelled, out of time, a node failure)."""
    from collbench.core.tune_grid import build_grid
    from collbench.launchers.slurm import SlurmSettings
    from collbench.launchers.slurm_batch import driver_output, submit_driver, wait_job

    build_grid(plan.axes, plan.max_settings, exhaustive=plan.search == "grid")  # refuse early
    argv = driver_argv(spec, plan, knobs, json_out)
    settings = SlurmSettings(**options.extra)
    out = Path(plan.out).absolute()
    check_output_dir("--out", out)
    folder = out / DRIVER_FOLDER
    job_id = submit_driver(argv, settings, folder)
    output = driver_output(folder, job_id)
    say(f"tune: Slurm job {job_id}: one srun step per setting in one allocation ({output})")
    follower = _Follower(output)
    follower.start()
    try:
        state, code = wait_job(job_id, on_state=lambda shown: say(f"tune: job {job_id} {shown}"))
    finally:
        follower.stop()
    if code is None:
        say(f"tune: job {job_id} ended {state} before the driver finished; see {output}")
        return EXIT_RUN_FAILED
    return code


def driver_argv(spec: SweepSpec, plan: TunePlan, knobs: Sequence[str], json_out: bool) -> list[str]:
    """The driver's command line: this tune under `--launcher srun` (`knobs`: the --knob
    values as given, each a knob and the values to try)."""
    from collbench.launchers.base import collbench_argv

    args = [*(f"--knob={text}" for text in knobs), *plan.to_args(), *(["--json"] * json_out)]
    args += _without_repeats(spec.to_args())  # tune's --repeats is its own (plan's)
    return collbench_argv(("tune", "run"), "srun", args, Path(plan.out).absolute())


def _without_repeats(args: list[str]) -> list[str]:
    """A sweep's options less its --repeats (runs in the same processes, which tune never
    asks for: tune's --repeats starts fresh ones)."""
    if "--repeats" not in args:
        return args
    at = args.index("--repeats")
    return args[:at] + args[at + 2 :]


class _Follower(threading.Thread):
    """Echoes the driver's output as it grows: its progress and warnings to stderr, the
    rest (the result table) to stdout."""

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True)
        self.path, self.offset, self.done = path, 0, threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            self.echo()
            time.sleep(POLL_S)

    def stop(self) -> None:
        self.done.set()
        self.join(timeout=5)
        self.echo(final=True)

    def echo(self, final: bool = False) -> None:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
        except FileNotFoundError:
            return
        chunks = data.splitlines(keepends=True)
        if chunks and not chunks[-1].endswith(b"\n") and not final:
            chunks.pop()  # a line still being written: the next poll gets it whole
        for chunk in chunks:
            self.offset += len(chunk)
            line = chunk.decode("utf-8", errors="replace")
            stream = sys.stderr if line.startswith(("tune", "collbench:")) else sys.stdout
            stream.write(line if line.endswith("\n") else line + "\n")
            stream.flush()
