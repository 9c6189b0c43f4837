"""`collbench report`'s document and files: the runs' report (report.py) with its Tuning
(report_tune.py) and Doctor (report_doctor.py) sections, drawn as HTML or Markdown
(report_render.py) into the files run/report.py writes."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from collbench.render.report_doc import Report
from collbench.render.report_render import render_html, render_markdown

if TYPE_CHECKING:
    from collbench.render.report_tune import TuneSource
    from collbench.run.report import ReportInputs
    from collbench.run.run_dirs import TuneDir


def report_document(inputs: ReportInputs) -> Report:
    """`collbench report`'s document: the runs' report with the Tuning and Doctor sections
    (a report of tune directories alone when every setting failed)."""
    from collbench.render.report import ReportOptions, build_report, run_label
    from collbench.render.report_doctor import with_doctor
    from collbench.render.report_tune import tune_only_report, with_tuning

    tunes = [tune_source(tune) for tune in inputs.tunes]
    if not inputs.runs:  # tune directories whose every setting failed
        return tune_only_report(inputs.title or "collbench report", tunes)
    options = ReportOptions(inputs.title, inputs.names, inputs.fabric, topologies=inputs.fabrics)
    document = with_tuning(build_report(inputs.runs, options), tunes)
    names = {run.path: inputs.names.get(run.path) or run_label(run) for run in inputs.runs}
    return with_doctor(document, inputs.runs, names, inputs.doctor)


def tune_source(tune: TuneDir) -> TuneSource:
    """A tune directory as read (run/run_dirs.py) as the Tuning section draws it."""
    from collbench.render.report_tune import TuneSource

    return TuneSource(tune.path, tune.document, tune.setting_rows, tune.choices, tune.warnings)


def report_files(document: Report, report_format: str, out: Path) -> dict[Path, bytes]:
    """The files of a report written to `out`: one HTML file, or the Markdown file and the
    PNGs in the folder beside it (the report itself last)."""
    if report_format == "html":
        return {out: render_html(document).encode()}
    text, images = render_markdown(document, f"{out.stem}_files")
    return {**{out.parent / name: png for name, png in images.items()}, out: text.encode()}
