"""`collbench noise RUN RUN [RUN...]`: record the A/A noise floor of one configuration for
`compare --noise-floor FILE`. app.py registers it; the use-case is run/noise.py."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

DEFAULT_OUT = "noise-floor.json"  # in the working directory


def noise(
    runs: Annotated[
        list[Path],
        typer.Argument(
            help="Identical runs of one configuration (reruns, measured the same way).",
            metavar="RUN RUN [RUN...]",
            show_default=False,
        ),
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            metavar="FILE",
            help="Where to write the floor; an existing file is never overwritten.",
        ),
    ] = Path(DEFAULT_OUT),
) -> None:
    """Measure how far identical runs land apart, per size band (the A/A noise floor), and
    write it for `collbench compare --noise-floor FILE`, which then calls a size faster or
    slower only beyond it."""
    from collbench.cli.runs import load_run_dir
    from collbench.render.noise import render_noise
    from collbench.run.noise import record_noise

    report = record_noise([load_run_dir(path) for path in runs], out)
    print(render_noise(report), flush=True)
