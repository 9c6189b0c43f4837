"""`collbench tune run --launcher slurm`: one allocation for the whole tune.

The method, in full: docs/tune.md#collbench-run-tune-slurm-py.
"""

from __future__ import annotations

import sys
import threading
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
    # the sweep's options less its --repeats (runs in the same processes, which tune never
    # asks for: tune's --repeats, the plan's, starts fresh ones); to_args always gives it
    spec_args = spec.to_args()
    at = spec_args.index("--repeats")
    args += spec_args[:at] + spec_args[at + 2 :]
    return collbench_argv(("tune", "run"), "srun", args, Path(plan.out).absolute())


class _Follower(threading.Thread):
    """Echoes the driver's output as it grows: its progress and warnings to stderr, the
    rest (the result table) to stdout."""

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True)
        self.path, self.offset, self.done = path, 0, threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.5):  # a poll every half second until stopped
            self.echo()

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
