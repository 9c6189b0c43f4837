"""The report: what it says (built from runs), and its HTML / Markdown renderings.

The HTML is one self-contained file: inline CSS, charts inlined as data: URIs, no script
and nothing fetched. Markdown links PNG files written beside it.
"""

from __future__ import annotations

import base64
import html
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collbench.core.stats import median
from collbench.core.units import format_size
from collbench.render import charts
from collbench.store.load import Run
from collbench.store.meta import RunMeta
from collbench.store.rows import ResultRow


@dataclass(frozen=True)
class Chart:
    name: str  # file stem for Markdown
    title: str
    png: bytes


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: list[tuple[Any, ...]]


@dataclass
class Section:
    heading: str
    charts: list[Chart] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Report:
    title: str
    summary: Table
    sections: list[Section]
    provenance: list[tuple[str, Table]]
    overlap_summary: Table | None = None

    @property
    def charts(self) -> list[Chart]:
        return [chart for section in self.sections for chart in section.charts]


def run_label(run: Run) -> str:
    return Path(run.path).name or run.run_id


def build_report(runs: list[Run]) -> Report:
    """Everything the report shows, from loaded runs (fits are made here)."""
    from collbench.analysis.fit import fit_rows

    fits = {run.path: fit_rows(run.rows) for run in runs}
    keys = sorted({(row.collective, row.placement) for run in runs for row in run.sweep_rows})
    sections = [_collective_section(runs, fits, key) for key in keys]
    sections += [section for run in runs for section in _overlap_sections(run)]
    title = "collbench report: " + ", ".join(run_label(run) for run in runs)
    return Report(
        title,
        _summary(runs, fits, keys),
        sections,
        [(run_label(run), provenance_table(run)) for run in runs],
        overlap_summary(runs),
    )


def _curve(fits: dict[str, list[Any]], run: Run, key: tuple[str, str]) -> Any:
    for group in fits[run.path]:
        if (group.key["collective"], group.key["placement"]) == key and group.curve:
            return group.curve
    return None


def _rows(run: Run, key: tuple[str, str]) -> list[ResultRow]:
    return [row for row in run.sweep_rows if (row.collective, row.placement) == key]


def _collective_section(
    runs: list[Run], fits: dict[str, list[Any]], key: tuple[str, str]
) -> Section:
    collective, placement = key
    series = [
        charts.Series(run_label(run), _rows(run, key), _curve(fits, run, key))
        for run in runs
        if _rows(run, key)
    ]
    stem = f"{collective}_{placement}"
    section = Section(f"{collective} ({placement})")
    section.charts.append(
        Chart(
            f"{stem}_busbw",
            f"{collective} {placement}: bus bandwidth",
            charts.busbw_chart(f"{collective} ({placement}): bus bandwidth vs size", series),
        )
    )
    latency = charts.latency_chart(f"{collective} ({placement}): latency at small sizes", series)
    if latency is not None:
        section.charts.append(
            Chart(f"{stem}_latency", f"{collective} {placement}: latency", latency)
        )
    fitted = [item for item in series if item.fit is not None]
    if fitted:
        section.tables.append(
            Table(
                ("run", "regime sizes (B)", "alpha (us)", "busbw (GB/s)", "points"),
                [row for item in fitted for row in _regime_rows(item.label, item.fit)],
            )
        )
    section.notes += [
        f"{item.label}: too few sizes to fit a curve" for item in series if item.fit is None
    ]
    return section


def _regime_rows(label: str, fit: Any) -> list[tuple[Any, ...]]:
    return [
        (
            label,
            f"{charts.size_label(regime.min_bytes)} .. {charts.size_label(regime.max_bytes)}",
            f"{regime.alpha_us:.4g}",
            "latency-bound" if fit.latency_bound(regime) else f"{regime.busbw_gbps:.4g}",
            regime.n_points,
        )
        for regime in fit.regimes
    ]


def _overlap_sections(run: Run) -> list[Section]:
    probes = run.probe_rows
    sections = []
    for collective in sorted({row.collective for row in probes}):
        rows = [row for row in probes if row.collective == collective]
        section = Section(f"Overlap probes: {collective} ({run_label(run)})")
        stem = f"overlap_{run_label(run)}_{collective}"
        section.charts.append(
            Chart(
                f"{stem}_pct",
                f"{collective} overlap",
                charts.overlap_chart(f"{collective}: overlap and slowdowns vs size", rows),
            )
        )
        ratios = sorted(
            {row.compute_ratio for row in rows if row.compute_ratio},
            key=lambda ratio: abs(ratio - 1),
        )
        chosen = [row for row in rows if row.compute_ratio == (ratios[0] if ratios else None)]
        label = f"ratio {ratios[0]:g}" if ratios else "fixed compute"
        section.charts.append(
            Chart(
                f"{stem}_times",
                f"{collective} times",
                charts.overlap_times_chart(f"{collective}: alone and together ({label})", chosen),
            )
        )
        section.notes.append(
            f"{rows[0].compute_dtype} matmul on "
            f"{rows[0].compute_streams} stream(s), timing "
            f"{rows[0].probe_timing}; overlap % is OSU's definition "
            "(100: the collective is entirely hidden)"
        )
        sections.append(section)
    return sections


def _summary(runs: list[Run], fits: dict[str, list[Any]], keys: list[tuple[str, str]]) -> Table:
    rows = []
    for run in runs:
        for key in keys:
            measured = [row for row in _rows(run, key) if row.size_bytes > 0]
            if not measured:
                continue
            best = max(measured, key=lambda row: row.busbw_gbps)
            fit = _curve(fits, run, key)
            wrong = [row.n_wrong for row in measured if row.n_wrong is not None]
            rows.append(
                (
                    run_label(run),
                    f"{key[0]} ({key[1]})",
                    len(measured),
                    f"{best.busbw_gbps:.4g} at {charts.size_label(best.size_bytes)}",
                    f"{fit.busbw_peak_gbps:.4g}" if fit else "-",
                    f"{fit.alpha_us:.4g}" if fit else "-",
                    approx_size(fit.n_half_bytes) if fit else "-",
                    len(fit.regimes) if fit else "-",
                    sum(wrong) if wrong else "N/A",
                )
            )
    return Table(
        (
            "run",
            "collective",
            "sizes",
            "peak busbw measured (GB/s)",
            "fitted peak busbw (GB/s)",
            "latency alpha (us)",
            "n_half (B)",
            "regimes",
            "#wrong",
        ),
        rows,
    )


def approx_size(num_bytes: float) -> str:
    """A size to 3 significant digits in K/M/G (powers of 1024): 1.39M, 155M, 502K."""
    return format_size(num_bytes, compact=True, digits=3)


def overlap_summary(runs: list[Run]) -> Table | None:
    """Per run, collective and compute ratio: how much hides and what it costs (medians
    over sizes, with the range of overlap %); None without overlap rows."""
    rows = []
    for run in runs:
        probes = run.probe_rows
        for collective in sorted({row.collective for row in probes}):
            mine = [row for row in probes if row.collective == collective]
            for ratio, group in charts.group_by_ratio(mine).items():
                overlap = [row.overlap_pct for row in group if row.overlap_pct is not None]
                rows.append(
                    (
                        run_label(run),
                        collective,
                        f"{ratio:g}" if ratio is not None else "fixed",
                        len(group),
                        _range(overlap),
                        _median_pct([row.compute_slowdown for row in group]),
                        _median_pct([row.comm_slowdown for row in group]),
                    )
                )
    if not rows:
        return None
    return Table(
        (
            "run",
            "collective",
            "compute ratio",
            "sizes",
            "overlap % median (min..max)",
            "compute slowdown % (median)",
            "collective slowdown % (median)",
        ),
        rows,
    )


def _range(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{charts.number(median(values))} ({charts.number(min(values))}..{charts.number(max(values))})"


def _median_pct(values: list[float | None]) -> str:
    middle = median(values)
    return "-" if middle is None else charts.number(100 * middle)


def provenance_table(run: Run) -> Table:
    """What produced a run: enough to reproduce it and to judge a comparison. Fields the
    run does not know (an imported log has no launcher) are left out."""
    meta = run.meta
    first = (run.sweep_rows or run.rows)[0]
    devices = sorted(
        {
            str(rank.get("device_name"))
            for rank in meta.ranks or []
            if isinstance(rank, dict) and rank.get("device_name")
        }
    )
    command = meta.command_line
    items = [
        ("run id", meta.run_id),
        ("directory", run.path),
        ("source", _source(meta)),
        ("imported from", ", ".join(meta.imported_from or [])),
        ("state", meta.state),
        ("command line", " ".join(command) if isinstance(command, list) else command),
        ("launcher", meta.launcher),
        ("backend", meta.backend),
        ("world size / nodes", f"{first.world_size} / {first.nodes}"),
        ("hosts", ", ".join(meta.hosts or [])),
        ("devices", ", ".join(devices)),
        ("versions", ", ".join(f"{k} {v}" for k, v in (meta.versions or {}).items() if v)),
        ("timing", meta.timing_method),
        ("dtype / iters / warmup", f"{first.dtype} / {first.iters} / {first.warmup}"),
        ("knobs (environment)", _knobs(meta, first)),
        (
            "started / finished",
            " / ".join(str(time) for time in (meta.started_utc, meta.finished_utc) if time),
        ),
        ("imported at", meta.imported_utc),
        ("git sha", meta.git_sha),
        ("log comment", (meta.comment or "")[:COMMENT_MAX_CHARS]),
    ]
    known = [
        (name, "-" if value in (None, "") else value)
        for name, value in items
        if value not in (None, "") or name in _ALWAYS_SHOWN
    ]
    return Table(("field", "value"), known)


_ALWAYS_SHOWN = ("run id", "source", "state", "command line")
COMMENT_MAX_CHARS = 300


def _source(meta: RunMeta) -> str:
    """collbench sweep / collbench overlap, or the tool whose log was imported."""
    source = meta.source
    if source and source != "collbench":
        return f"{source} import"
    command = meta.command_line
    if isinstance(command, list) and len(command) > 1:
        return f"collbench {command[1]}"
    return "collbench"


def _knobs(meta: RunMeta, first: ResultRow) -> str:
    knobs = meta.knobs or first.knobs or {}
    if isinstance(knobs.get("env"), dict):  # rows (and imports) nest the environment
        knobs = knobs["env"]
    return json.dumps(knobs, sort_keys=True) if knobs else "none set"


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;
max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.2em;border-bottom:1px solid #ddd;padding-bottom:.2em;
margin-top:2em}table{border-collapse:collapse;margin:.6em 0;font-size:.85em}
td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f3f3f3}img{max-width:100%;display:block;margin:.6em 0}
.note{color:#555;font-size:.85em}td.value{word-break:break-all;max-width:800px}
"""


def _html_table(table: Table, value_class: bool = False) -> str:
    head = "".join(f"<th>{html.escape(str(cell))}</th>" for cell in table.header)
    body = []
    for row in table.rows:
        cells = []
        for index, cell in enumerate(row):
            css = ' class="value"' if value_class and index == len(row) - 1 else ""
            cells.append(f"<td{css}>{html.escape(str(cell))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def render_html(report: Report) -> str:
    parts = [
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>'
        f"{html.escape(report.title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(report.title)}</h1><h2>Summary</h2>",
        _html_table(report.summary)
        if report.summary.rows
        else '<p class="note">no sweep rows: nothing to fit</p>',
    ]
    if report.overlap_summary is not None:
        parts += ["<h3>Overlap probes</h3>", _html_table(report.overlap_summary)]
    for section in report.sections:
        parts.append(f"<h2>{html.escape(section.heading)}</h2>")
        for chart in section.charts:
            data = base64.b64encode(chart.png).decode("ascii")
            parts.append(
                f'<img alt="{html.escape(chart.title)}" src="data:image/png;base64,{data}">'
            )
        parts += [_html_table(table) for table in section.tables]
        parts += [f'<p class="note">{html.escape(note)}</p>' for note in section.notes]
    parts.append("<h2>Provenance</h2>")
    for label, table in report.provenance:
        parts.append(f"<h3>{html.escape(label)}</h3>{_html_table(table, value_class=True)}")
    parts.append("</body></html>")
    return "\n".join(parts)


# Markdown punctuation that could start a link, an image, code, emphasis or a table cell.
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|#!])")


def _md_text(value: Any) -> str:
    """Text from a run (host names, knobs, command lines) as Markdown shows it literally:
    HTML escaped as the HTML report does, Markdown punctuation backslashed, one line."""
    text = html.escape(" ".join(str(value).splitlines()), quote=False)
    return _MD_SPECIAL.sub(r"\\\1", text)


def _md_cell(value: Any) -> str:
    return _md_text(value)


def _md_table(table: Table) -> list[str]:
    lines = [
        "| " + " | ".join(map(_md_cell, table.header)) + " |",
        "|" + "---|" * len(table.header),
    ]
    return lines + ["| " + " | ".join(map(_md_cell, row)) + " |" for row in table.rows]


def render_markdown(report: Report, image_dir: str) -> tuple[str, dict[str, bytes]]:
    """The Markdown text and the PNG files it links (relative names under image_dir)."""
    lines = [f"# {_md_text(report.title)}", "", "## Summary", ""]
    lines += (
        _md_table(report.summary) if report.summary.rows else ["_no sweep rows: nothing to fit_"]
    )
    if report.overlap_summary is not None:
        lines += ["", "### Overlap probes", "", *_md_table(report.overlap_summary)]
    images: dict[str, bytes] = {}
    for section in report.sections:
        lines += ["", f"## {_md_text(section.heading)}", ""]
        for chart in section.charts:
            name = f"{image_dir}/{re.sub(r'[^A-Za-z0-9_.-]', '_', chart.name)}.png"
            images[name] = chart.png
            lines += [f"![{_md_text(chart.title)}]({name})", ""]
        for table in section.tables:
            lines += [*_md_table(table), ""]
        lines += [f"_{_md_text(note)}_" for note in section.notes]
    lines += ["", "## Provenance"]
    for label, table in report.provenance:
        lines += ["", f"### {_md_text(label)}", "", *_md_table(table)]
    return "\n".join(lines) + "\n", images
