"""`collbench report`: an HTML or Markdown report over finished runs.

app.py registers it. Imports stay light (typer, pathlib): matplotlib loads only when the
command runs.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from collbench.cli.runs import ExpandedRuns, expand_runs

if TYPE_CHECKING:
    from collbench.store.load import Run

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
            help="Run directories (sweeps, imports, overlap probes); several are overlaid, and each is compared with the first. A tune directory stands for its settings' runs (the baseline first) and adds a Tuning section.",
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
    topology: Annotated[
        Optional[str],
        typer.Option(
            "--topology",
            metavar="NAME|FILE",
            help="A catalog name or a YAML/TOML file, as for fit --topology: draw its cost model's busbw (at link rate) on the busbw charts.",
            show_default=False,
        ),
    ] = None,  # noqa: E501, UP045
    labels: Annotated[
        Optional[list[str]],
        typer.Option(
            "--label",
            metavar="RUN=NAME",
            help="RUN=NAME: call a run NAME in legends and headings (RUN as given, its directory name or run id). Repeatable.",
            show_default=False,
        ),
    ] = None,  # noqa: E501, UP045
    title: Annotated[
        Optional[str],
        typer.Option(
            "--title",
            metavar="TEXT",
            help="The report's title. (default: collbench report: and the run names)",
            show_default=False,
        ),
    ] = None,  # noqa: UP045
) -> None:
    """Write a report: busbw and latency charts with fitted curves and regimes, overlays of
    several runs compared with the first, overlap-probe charts, and each run's provenance.
    A tune directory adds its Tuning section: busbw per setting, the winner per range, the
    settings that failed or were dropped, and what NCCL chose."""
    from collbench.core.errors import SpecError
    from collbench.render.report import ReportOptions, build_report, render_html, render_markdown
    from collbench.render.report_doctor import with_doctor
    from collbench.render.report_tune import tune_only_report, with_tuning
    from collbench.topologies.loader import load_topology

    if report_format not in REPORT_FORMATS:
        raise SpecError("--format", report_format, f"is not one of {', '.join(REPORT_FORMATS)}")
    if not runs:
        raise SpecError("RUN", "", "names no run directory")
    if title is not None and not title.strip():
        raise SpecError("--title", title, "is empty")
    out = Path(out) if out is not None else Path(f"report.{report_format}")
    _check_report_out(out, report_format)
    fabric = None if topology is None else load_topology(topology)
    expanded = expand_runs(runs)
    for source in expanded.tunes:
        for warning in source.warnings:
            print(f"collbench: warning: {warning}", file=sys.stderr)
    names = {**expanded.labels, **parse_labels(labels or [], expanded.paths, expanded.runs)}
    title = title or _tune_title(expanded)
    options = ReportOptions(title, names, fabric)
    if expanded.runs:
        document = with_tuning(build_report(expanded.runs, options), expanded.tunes)
        documents = _doctor_documents(expanded.runs)
        document = with_doctor(document, expanded.runs, _run_names(expanded.runs, names), documents)
    else:  # tune directories whose every setting failed
        document = tune_only_report(title or "collbench report", expanded.tunes)
    if report_format == "html":
        _write_report({out: render_html(document).encode()}, out)
    else:
        text, images = render_markdown(document, f"{out.stem}_files")
        _write_report(
            {**{out.parent / name: png for name, png in images.items()}, out: text.encode()}, out
        )
    print(f"# Report: {out} ({len(document.charts)} charts)", flush=True)


def _doctor_documents(runs: list[Run]) -> dict[str, dict]:
    """Each doctor run's doctor.json (run path -> content), where one can be read; one that
    cannot is left out with a warning (its Doctor section then shows the rows alone)."""
    import json

    from collbench.render.report_doctor import DOCTOR_JSON, doctor_rows

    documents = {}
    for run in runs:
        file = Path(run.path) / DOCTOR_JSON
        if not doctor_rows(run) or not file.is_file():
            continue
        try:
            content = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            content = error
        if isinstance(content, dict):
            documents[run.path] = content
        else:
            why = content if isinstance(content, Exception) else "not a JSON object"
            print(f"collbench: warning: {file} left out: {why}", file=sys.stderr)
    return documents


def _run_names(runs: list[Run], labels: dict[str, str]) -> dict[str, str]:
    """Every run's name in headings: its --label (or tune setting), else its directory's."""
    from collbench.render.report import run_label

    return {run.path: labels.get(run.path) or run_label(run) for run in runs}


def _tune_title(expanded: ExpandedRuns) -> str | None:
    """The default title when tune directories are given ("collbench report: tune DIR");
    None otherwise (the report's own default)."""
    if not expanded.tunes:
        return None
    title = "collbench report: " + ", ".join(f"tune {source.name}" for source in expanded.tunes)
    others = sum(run.path not in expanded.labels for run in expanded.runs)
    return title + (f" and {others} other run(s)" if others > 0 else "")


def parse_labels(values: list[str], runs: list[Path], loaded: list[Run]) -> dict[str, str]:
    """--label RUN=NAME values as {run path: NAME}; SpecError for a value without '=', an
    empty NAME, a RUN that names no run given (or several), a run labelled twice, or one
    NAME for two runs."""
    from collbench.core.errors import SpecError

    labels: dict[str, str] = {}
    for value in values:
        which, sep, name = value.partition("=")
        if not sep or not which or not name.strip():
            raise SpecError("--label", value, "needs RUN=NAME, e.g. --label results/run-1=baseline")
        matches = [
            run for given, run in zip(runs, loaded, strict=True) if _names(which, given, run)
        ]
        if not matches:
            given = ", ".join(str(run) for run in runs)
            raise SpecError("--label", value, f"names no run given (the runs are {given})")
        if len(matches) > 1:
            raise SpecError("--label", value, f"matches {len(matches)} runs; give the path")
        if matches[0].path in labels:
            raise SpecError("--label", value, f"labels {matches[0].path} a second time")
        if name.strip() in labels.values():
            raise SpecError("--label", value, "gives a name another run has; names must differ")
        labels[matches[0].path] = name.strip()
    return labels


def _names(which: str, given: Path, run: Run) -> bool:
    """Whether RUN in --label RUN=NAME is this run: as given, the same folder, its name or id."""
    if which in (str(given), given.name, run.run_id):
        return True
    return Path(which).exists() and Path(which).resolve() == given.resolve()


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
