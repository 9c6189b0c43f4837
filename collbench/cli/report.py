"""`collbench report`: an HTML or Markdown report over finished runs.

app.py registers it. Imports stay light (typer, pathlib): matplotlib loads only when the
command runs.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from collbench.cli.runs import load_run_dir

# --format: what each writes; the first is the default.
_REPORT_FORMATS = {
    "html": "one self-contained file",
    "md": "Markdown with PNGs in a folder beside it",
}
REPORT_FORMATS = tuple(_REPORT_FORMATS)
_OTHER_FORMATS = "".join(f", or report.{name} with --format {name}" for name in REPORT_FORMATS[1:])


def report(
    runs: Annotated[
        list[Path],
        typer.Argument(
            help="Run directories (sweeps, imports, overlap probes); several are overlaid.",
            metavar="RUN...",
            show_default=False,
        ),
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help=f"The report file to write. (default: report.{REPORT_FORMATS[0]}{_OTHER_FORMATS})",
            show_default=False,
        ),
    ] = None,
    report_format: Annotated[
        str,
        typer.Option(
            "--format",
            help="; ".join(f"{name}: {text}" for name, text in _REPORT_FORMATS.items())
            + f". (default: {REPORT_FORMATS[0]})",
            show_default=False,
        ),
    ] = REPORT_FORMATS[0],
) -> None:
    """Write a report: busbw and latency charts with fitted curves and regimes, overlays of
    several runs, overlap-probe charts, and each run's provenance."""
    from collbench.core.errors import SpecError
    from collbench.render.report import build_report, render_html, render_markdown

    if report_format not in REPORT_FORMATS:
        raise SpecError("--format", report_format, f"is not one of {', '.join(REPORT_FORMATS)}")
    if not runs:
        raise SpecError("RUN", "", "names no run directory")
    out = Path(out) if out is not None else Path(f"report.{report_format}")
    _check_report_out(out, report_format)
    document = build_report([load_run_dir(run) for run in runs])
    if report_format == "html":
        _write_report({out: render_html(document).encode()}, out)
    else:
        text, images = render_markdown(document, f"{out.stem}_files")
        _write_report(
            {**{out.parent / name: png for name, png in images.items()}, out: text.encode()}, out
        )
    print(f"# Report: {out} ({len(document.charts)} charts)", flush=True)


def _check_report_out(out: Path, report_format: str) -> None:
    """SpecError before any run is read if the report (and a Markdown report's image
    folder) cannot be written where --out says."""
    from collbench.core.errors import SpecError

    if out.is_dir():
        raise SpecError(
            "--out",
            str(out),
            f"is a directory; give the report file, e.g. {out / f'report.{report_format}'}",
        )
    if not out.parent.is_dir():
        raise SpecError("--out", str(out), "is in a folder that does not exist")
    images = out.parent / f"{out.stem}_files"
    if report_format == "md" and images.exists() and not images.is_dir():
        raise SpecError("--out", str(out), f"needs {images} for its images, which is a file")
    try:
        if out.exists():
            with out.open("ab"):  # opening to append changes nothing
                pass
        else:
            handle, probe = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.")
            os.close(handle)
            os.unlink(probe)
    except OSError as error:
        raise SpecError("--out", str(out), f"cannot be written: {error.strerror}") from None


def _write_report(files: dict[Path, bytes], out: Path) -> None:
    """Write the report's files (the report itself last); on failure remove what was
    written, the image folder too if this made it, and raise SpecError."""
    from collbench.core.errors import SpecError

    written: list[Path] = []
    made: list[Path] = []
    try:
        for path, data in files.items():
            if not path.parent.is_dir():
                path.parent.mkdir()
                made.append(path.parent)
            written.append(path)
            path.write_bytes(data)
    except OSError as error:
        for path in written:
            if path.is_file():
                path.unlink()
        for folder in made:
            shutil.rmtree(folder, ignore_errors=True)
        raise SpecError("--out", str(out), f"cannot be written: {error.strerror}") from None
