"""`collbench report`: an HTML or Markdown report over finished runs. Imports stay light:
matplotlib loads only when the command runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from collbench.cli.options import Argument, Option, command, force_option, request, warn
from collbench.core.units import counted
from collbench.run.report import REPORT_FORMATS, ReportRequest, gather_report, write_report

_DEFAULT_FORMAT = ReportRequest.report_format
_OTHER_FORMATS = "".join(
    f", or report.{name} with --format {name}" for name in REPORT_FORMATS if name != _DEFAULT_FORMAT
)

REPORT_OPTIONS = (
    Argument(
        "runs",
        "Run directories (sweeps, imports, overlap probes); several are overlaid, and each is "
        "compared with the first. A tune directory stands for its settings' runs (the "
        "baseline first) and adds a Tuning section.",
        ReportRequest,
        kind=list[Path],
        metavar="RUN...",
    ),
    Option(
        ("--out",),  # not -o: that is --op, as in nccl-tests (tests/cli/test_short_flags.py)
        "The report file to write.",
        ReportRequest,
        default_text=f"report.{_DEFAULT_FORMAT}{_OTHER_FORMATS}",
        metavar="FILE",
    ),
    Option(
        ("--format",),
        "; ".join(f"{name}: {text}" for name, text in REPORT_FORMATS.items()) + ".",
        ReportRequest,
        "report_format",
        metavar="NAME",
    ),
    Option(
        ("--topology",),
        "A catalog name or a YAML/TOML file, as for fit --topology: draw its cost model's "
        "busbw (at link rate) on the busbw charts of every run; RUN=NAME|FILE for one run's "
        "own (RUN as --label names it). Repeatable.",
        ReportRequest,
        kind=list[str],
        metavar="[RUN=]NAME|FILE",
    ),
    Option(
        ("--label",),
        "RUN=NAME: call a run NAME in legends and headings (RUN as given, its directory name "
        "or run id). Repeatable.",
        ReportRequest,
        "labels",
        kind=list[str],
        metavar="RUN=NAME",
    ),
    Option(
        ("--title",),
        "The report's title.",
        ReportRequest,
        metavar="TEXT",
        default_text="collbench report: and the run names",
    ),
    force_option(ReportRequest),
)


def run_report(values: dict[str, Any]) -> None:
    from collbench.render.report.build import report_document, report_files

    wanted: ReportRequest = request(ReportRequest, REPORT_OPTIONS, values)
    inputs = gather_report(wanted)
    warn(inputs.warnings)
    document = report_document(inputs)
    out = wanted.out_file
    write_report(report_files(document, wanted.report_format, out), out)
    print(f"# Report: {out} ({counted(len(document.charts), 'chart')})", flush=True)


report = command(
    "report",
    "Write a report: busbw and latency charts with fitted curves and regimes, overlays of\n"
    "several runs compared with the first, overlap-probe charts, and each run's provenance.\n"
    "A tune directory adds its Tuning section: busbw per setting, the winner per range, the\n"
    "settings that failed or were dropped, and what NCCL chose.",
    REPORT_OPTIONS,
    run_report,
)
