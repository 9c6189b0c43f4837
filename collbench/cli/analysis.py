"""`collbench compare` and `collbench report`: commands over finished run directories.

cli.py registers them. Imports stay light (typer, pathlib): numpy, scipy and matplotlib
load only when a command runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from collbench.analysis.comparison import Comparison, RunData


def load_run(path: Path) -> RunData:
    """A run directory's meta and rows, or SpecError naming the path."""
    from collbench.analysis.comparison import RunData
    from collbench.core.errors import SpecError
    from collbench.store.rundir import load_rows, read_meta

    if not Path(path).is_dir():
        raise SpecError("RUN", str(path), "is not a run directory")
    rows = load_rows(path)
    if not rows:
        raise SpecError(
            "RUN",
            str(path),
            "holds no result rows (no rows.jsonl): pass a "
            "directory written by collbench sweep or collbench import",
        )
    return RunData(str(path), read_meta(path) or {}, rows)


def compare(
    runs: Annotated[
        list[Path],
        typer.Argument(
            help="Run directories; the first is the baseline, every other one is compared with it.",
            metavar="BASELINE RUN...",
            show_default=False,
        ),
    ],
    json_out: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")] = False,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict",
            help="Exit 2 when the runs' methodology differs (dtype, iters, timing method, world size...).",
        ),
    ] = False,
    alpha: Annotated[
        float,
        typer.Option(
            "--alpha",
            help="Significance level of the per-size Mann-Whitney U test. (default: 0.05)",
            show_default=False,
        ),
    ] = 0.05,
) -> None:
    """Compare runs size by size: busbw ratio, whether the difference is significant, a
    summary per size band, and every difference in how they were measured."""
    from collbench.analysis.comparison import common_keys
    from collbench.analysis.comparison import compare as compare_runs
    from collbench.core.errors import SpecError

    if len(runs) < 2:
        raise SpecError(
            "RUN",
            " ".join(map(str, runs)),
            "needs a baseline and at least one run to compare with it",
        )
    if not 0 < alpha < 1:
        raise SpecError("--alpha", alpha, "must be between 0 and 1")
    loaded = [load_run(run) for run in runs]
    for candidate in loaded[1:]:
        if not common_keys(loaded[0], candidate):
            raise SpecError(
                "RUN",
                candidate.path,
                f"has no (collective, placement, size) in "
                f"common with {loaded[0].path}: nothing to compare",
            )
    comparisons = [compare_runs(loaded[0], candidate, alpha) for candidate in loaded[1:]]
    if json_out:
        print(json.dumps([item.to_dict() for item in comparisons], indent=2, default=str))
    else:
        print(
            "\n\n".join(
                render_comparison(item, loaded[0].path, run.path)
                for item, run in zip(comparisons, loaded[1:], strict=True)
            )
        )
    differing = [item for item in comparisons if item.methodology_differs]
    if strict and differing:
        first = next(d for d in differing[0].differences if d.kind == "methodology")
        raise SpecError(
            "--strict",
            True,
            f"refuses runs measured differently: {first.field} "
            f"{first.baseline!r} vs {first.candidate!r}",
        )


def render_comparison(result: Comparison, base_path: str, cand_path: str) -> str:
    """The comparison as text: the methodology warning first, then sizes, bands, the rest."""
    lines = [
        f"# compare: baseline {base_path} ({result.baseline})",
        f"#      vs candidate {cand_path} ({result.candidate})",
    ]
    method = [d for d in result.differences if d.kind == "methodology"]
    if method:
        lines += [
            "#",
            "# !!! METHODOLOGY DIFFERS: these runs were not measured the same way;",
            "# !!! the ratios below mix that difference with the system's:",
        ]
        lines += [f"# !!!   {d.field}: {d.baseline} -> {d.candidate}" for d in method]
    lines += _size_lines(result) + _band_lines(result)
    environment = [d for d in result.differences if d.kind == "environment"]
    if environment:
        lines += ["#", "# environment differences (what is being compared):"]
        lines += [
            f"#   {d.field}: {_shown(d.baseline)} -> {_shown(d.candidate)}" for d in environment
        ]
    for label, keys in (
        ("only in baseline", result.only_baseline),
        ("only in candidate", result.only_candidate),
    ):
        lines += [f"# {label}: {entry}" for entry in keys]
    return "\n".join(lines)


def _shown(value: Any) -> str:
    return "(unset)" if value is None else str(value)


def _size_lines(result: Comparison) -> list[str]:
    lines: list[str] = []
    current = None
    for item in result.sizes:
        if (item.collective, item.placement) != current:
            current = (item.collective, item.placement)
            lines += [
                "#",
                f"# {item.collective} ({item.placement})",
                "#        size   base busbw   cand busbw    ratio  verdict (p)",
            ]
        p_value = f" (p={item.p_value:.3g})" if item.p_value is not None else ""
        lines.append(
            f"{item.size_bytes:13d}  {item.baseline_busbw_gbps:11.4g}  "
            f"{item.candidate_busbw_gbps:11.4g}  {item.ratio:7.3f}x  "
            f"{item.verdict}{p_value}"
        )
    return lines


def _band_lines(result: Comparison) -> list[str]:
    lines = [
        "#",
        "# per size band (small < 64 KiB <= medium < 16 MiB <= large): geometric "
        "mean ratio, verdicts",
    ]
    for band in result.bands:
        counts = ", ".join(f"{count} {verdict}" for verdict, count in sorted(band.counts.items()))
        lines.append(
            f"#   {band.collective} {band.placement} {band.band:6s} "
            f"{band.geomean_ratio:7.3f}x over {band.sizes} size(s): {counts}"
        )
    return lines


REPORT_FORMATS = ("html", "md")


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
            help="The report file to write. (default: report.html, or report.md with --format md)",
            show_default=False,
        ),
    ] = None,
    report_format: Annotated[
        str,
        typer.Option(
            "--format",
            help="html: one self-contained file; md: Markdown with PNGs in a folder beside it. (default: html)",
            show_default=False,
        ),
    ] = "html",
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
    if not out.parent.is_dir():
        raise SpecError("--out", str(out), "is in a folder that does not exist")
    document = build_report([load_run(run) for run in runs])
    if report_format == "html":
        out.write_text(render_html(document), encoding="utf-8")
    else:
        image_dir = f"{out.stem}_files"
        text, images = render_markdown(document, image_dir)
        (out.parent / image_dir).mkdir(exist_ok=True)
        for name, png in images.items():
            (out.parent / name).write_bytes(png)
        out.write_text(text, encoding="utf-8")
    print(f"# Report: {out} ({len(document.charts)} charts)", flush=True)
