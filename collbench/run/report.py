"""`collbench report`'s use-case: what a report is drawn from, and writing its files.
Imports stay light (the CLI imports ReportRequest for its defaults)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collbench.core.errors import SpecError
from collbench.store.outputs import check_output_file, write_outputs

if TYPE_CHECKING:
    from collbench.run.run_dirs import ExpandedRuns, TuneDir
    from collbench.store.doctor_report import DoctorReport
    from collbench.store.load import Run

# --format: what each writes; the first is the default.
REPORT_FORMATS = {
    "html": "one self-contained file",
    "md": "Markdown with PNGs in a folder beside it",
}


@dataclass(frozen=True)
class ReportRequest:
    """What `collbench report` was asked for."""

    runs: tuple[Path, ...] = ()
    # None: report.FORMAT in the working directory.
    out: Path | None = None
    report_format: str = next(iter(REPORT_FORMATS))
    # Catalog names or topology files whose cost model the busbw charts draw: NAME|FILE for
    # every run (once), RUN=NAME|FILE for one run (RUN as --label names it).
    topology: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()  # RUN=NAME
    title: str | None = None  # None: "collbench report:" and the run names
    force: bool = False  # write over an existing report (never into a run directory)

    def __post_init__(self) -> None:
        if self.report_format not in REPORT_FORMATS:
            raise SpecError(
                "--format", self.report_format, f"is not one of {', '.join(REPORT_FORMATS)}"
            )
        if not self.runs:
            raise SpecError("RUN", "", "names no run directory")
        if self.title is not None and not self.title.strip():
            raise SpecError("--title", self.title, "is empty")

    @property
    def out_file(self) -> Path:
        return Path(self.out) if self.out is not None else Path(f"report.{self.report_format}")


@dataclass(frozen=True)
class ReportInputs:
    """Everything a report is drawn from, read and checked."""

    runs: list[Run]
    tunes: list[TuneDir]
    names: dict[str, str]  # run path -> its --label (or tune setting's name)
    title: str | None  # None: the report's own default
    fabric: Any  # the --topology of every run without its own, or None
    doctor: dict[str, DoctorReport]  # run path -> its doctor.json, where it could be read
    warnings: list[str] = field(default_factory=list)
    fabrics: dict[str, Any] = field(default_factory=dict)  # run path -> its RUN=NAME topology


def gather_report(request: ReportRequest) -> ReportInputs:
    """Check that the report can be written, then read what it is drawn from (SpecError
    naming the option on bad input; what is left out is in `warnings`)."""
    from collbench.run.run_dirs import expand_runs

    check_report_out(request)
    expanded = expand_runs(list(request.runs))
    warnings = [warning for source in expanded.tunes for warning in source.warnings]
    labels = parse_labels(list(request.labels), expanded.paths, expanded.runs)
    fabric, fabrics = parse_topologies(list(request.topology), expanded.paths, expanded.runs)
    doctor, left_out = _doctor_documents(expanded.runs)
    return ReportInputs(
        expanded.runs,
        expanded.tunes,
        {**expanded.labels, **labels},
        request.title or _tune_title(expanded),
        fabric,
        doctor,
        warnings + left_out,
        fabrics,
    )


def _doctor_documents(runs: list[Run]) -> tuple[dict[str, DoctorReport], list[str]]:
    """Each doctor run's doctor.json (run path -> report), where one can be read; one that
    cannot is left out with a warning (its Doctor section then shows the rows alone)."""
    from collbench.store.doctor_report import DOCTOR_JSON, load_doctor_report
    from collbench.store.rows import DOCTOR

    documents, warnings = {}, []
    for run in runs:
        if not run.rows_of(DOCTOR):
            continue
        try:
            report = load_doctor_report(Path(run.path))
        except SpecError as error:
            warnings.append(f"{Path(run.path) / DOCTOR_JSON} left out: {error}")
            continue
        if report is not None:
            documents[run.path] = report
    return documents, warnings


def _tune_title(expanded: ExpandedRuns) -> str | None:
    """The default title when tune directories are given ("collbench report: tune DIR");
    None otherwise (the report's own default)."""
    if not expanded.tunes:
        return None
    title = "collbench report: " + ", ".join(f"tune {source.name}" for source in expanded.tunes)
    others = sum(run.path not in expanded.labels for run in expanded.runs)
    return title + (f" and {others} other run(s)" if others > 0 else "")


def parse_topologies(
    values: list[str], runs: list[Path], loaded: list[Run]
) -> tuple[Any, dict[str, Any]]:
    """--topology values as (the topology of every run without its own or None, {run path:
    its topology}). A value whose part before '=' names a given run (as --label's RUN does)
    is that run's; any other value is every run's, given once at most."""
    from collbench.topologies.loader import load_topology

    every, own = None, {}
    for value in values:
        which, sep, name = value.partition("=")
        matches = [
            run for given, run in zip(runs, loaded, strict=True) if _names(which, given, run)
        ]
        if not sep or not matches:
            if every is not None:
                raise SpecError(
                    "--topology",
                    value,
                    f"is a second topology for every run (after {every.name}); give "
                    "RUN=NAME for a run's own",
                )
            every = load_topology(value)
            continue
        if len(matches) > 1:
            raise SpecError("--topology", value, f"matches {len(matches)} runs; give the path")
        if matches[0].path in own:
            raise SpecError("--topology", value, f"gives {matches[0].path} a second topology")
        own[matches[0].path] = load_topology(name)
    return every, own


def parse_labels(values: list[str], runs: list[Path], loaded: list[Run]) -> dict[str, str]:
    """--label RUN=NAME values as {run path: NAME}; SpecError for a value without '=', an
    empty NAME, a RUN that names no run given (or several), a run labelled twice, or one
    NAME for two runs."""
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


def check_report_out(request: ReportRequest) -> None:
    """SpecError before any run is read if the report (and a Markdown report's image
    folder) cannot be written where --out says: store/outputs.py's checks, the runs and the
    topology file as the inputs it must not be written into or over."""
    out, report_format = request.out_file, request.report_format
    if os.path.isdir(out) and not os.path.islink(out):  # (os.path: a bad name is refused below)
        raise SpecError(
            "--out",
            str(out),
            f"is a directory; give the report file, e.g. {out / f'report.{report_format}'}",
        )
    files = [value.partition("=")[2] or value for value in request.topology]
    inputs = [
        *request.runs,
        *(name for name in {*request.topology, *files} if os.path.isfile(name)),
    ]
    target = check_output_file("--out", out, inputs, request.force)
    images = target.parent / f"{out.stem}_files"
    if report_format == "md" and images.exists():
        if not images.is_dir():
            raise SpecError("--out", str(out), f"needs {images} for its images, which is a file")
        if not request.force:
            raise SpecError(
                "--out", str(out), f"would write over the images in {images}: give --force"
            )


def write_report(files: dict[Path, bytes], out: Path) -> None:
    """Write the report's files (the report itself last), each whole or not at all; on
    failure remove what was written, the image folder too if this made it, and raise
    (store/outputs.py: one line)."""
    write_outputs("--out", files)
