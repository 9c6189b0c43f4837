"""`collbench noise RUN RUN [RUN...]`: record the A/A noise floor for `compare`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from collbench.cli.options import FROM_OWNER, Argument, Option, command, request
from collbench.run.noise import NoiseRequest
from collbench.store.outputs import FORCE_HELP

NOISE_OPTIONS = (
    Argument(
        "runs",
        "Identical runs of one configuration (reruns, measured the same way).",
        NoiseRequest,
        "runs",
        kind=list[Path],
        metavar="RUN RUN [RUN...]",
    ),
    Option(
        ("--out",),  # not -o: that is --op, as in nccl-tests (tests/cli/test_short_flags.py)
        "Where to write the floor (an existing file: only with --force).",
        NoiseRequest,
        "out",
        kind=Path,
        metavar="FILE",
    ),
    Option(
        ("--force",),
        FORCE_HELP,
        NoiseRequest,
        "force",
        kind=bool,
        default=FROM_OWNER,
        default_text="",
    ),
)


def run_noise(values: dict[str, Any]) -> None:
    import sys

    from collbench.render.compare import noise_warnings, render_noise
    from collbench.run.noise import record_noise_of

    report = record_noise_of(request(NoiseRequest, NOISE_OPTIONS, values))
    print(render_noise(report), flush=True)
    for warning in noise_warnings(report):
        print(warning, file=sys.stderr, flush=True)


noise = command(
    "noise",
    "Measure how far identical runs land apart, per size band (the A/A noise floor), and\n"
    "write it for `collbench compare --noise-floor FILE`, which then calls a size faster or\n"
    "slower only beyond it.",
    NOISE_OPTIONS,
    run_noise,
)
