"""The report as data (build.py fills it in), drawn as one self-contained HTML file (inline
CSS and charts, no script, nothing fetched) or as Markdown linking PNGs beside it. Text is
never cut: long values wrap."""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collbench.topologies.schema import Topology


class Flagged(str):
    """A cell or note the report makes stand out (a poor fit, a methodology difference)."""


@dataclass(frozen=True)
class Chart:
    name: str  # file stem for Markdown
    title: str
    png: bytes


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: list[tuple[Any, ...]]
    caption: str | None = None  # shown above the table; with folded, the only line shown
    folded: bool = False  # HTML: inside <details> (long, size-by-size tables)


@dataclass
class Section:
    heading: str
    charts: list[Chart] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # shown first and flagged
    lead: list[str] = field(default_factory=list)  # after the warnings, before the charts


@dataclass(frozen=True)
class ReportOptions:
    """What the user chose about the report: its title, run labels, a topology to draw."""

    title: str | None = None  # None: "collbench report: " and the run labels
    labels: Mapping[str, str] = field(default_factory=dict)  # run path -> its legend name
    topology: Topology | None = None  # its cost model's busbw is drawn on the busbw charts
    # run path -> a topology of its own (--topology RUN=NAME), drawn for that run instead
    topologies: Mapping[str, Topology] = field(default_factory=dict)
    generated_utc: datetime | None = None  # None: now


@dataclass(frozen=True)
class Report:
    title: str
    summary: Table
    sections: list[Section]
    provenance: list[tuple[str, Table]]
    overlap_summary: Table | None = None
    about: tuple[str, ...] = ()  # what made the report, when, against which topology

    @property
    def charts(self) -> list[Chart]:
        return [chart for section in self.sections for chart in section.charts]


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;
max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.2em;border-bottom:1px solid #ddd;padding-bottom:.2em;
margin-top:2em}table{border-collapse:collapse;margin:.6em 0;font-size:.85em}
td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f3f3f3}img{max-width:100%;display:block;margin:.6em 0}
.note{color:#555;font-size:.85em}.lead{font-size:.9em}.about{color:#555;font-size:.85em;margin:.2em 0}
td.value{overflow-wrap:anywhere;max-width:800px}
td.flag{background:#fdecea;color:#a50e0e;font-weight:600}
.warn{background:#fdecea;border-left:4px solid #d93025;color:#a50e0e;padding:.4em .7em;
margin:.5em 0;font-size:.9em}caption{text-align:left;font-weight:600;padding:.2em 0}
summary{cursor:pointer;font-size:.9em;margin:.4em 0}
"""


def _html_cell(cell: Any, value_class: bool) -> str:
    css = " flag" if isinstance(cell, Flagged) else ""
    css += " value" if value_class else ""
    attribute = f' class="{css.strip()}"' if css else ""
    return f"<td{attribute}>{html.escape(str(cell))}</td>"


def _html_table(table: Table, value_class: bool = False) -> str:
    head = "".join(f"<th>{html.escape(str(cell))}</th>" for cell in table.header)
    body = []
    for row in table.rows:
        cells = [
            _html_cell(cell, value_class and index == len(row) - 1)
            for index, cell in enumerate(row)
        ]
        body.append("<tr>" + "".join(cells) + "</tr>")
    caption = ""
    if table.caption and not table.folded:
        caption = f"<caption>{html.escape(table.caption)}</caption>"
    text = f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    if table.folded:
        summary = html.escape(table.caption or "table")
        return f"<details><summary>{summary}</summary>{text}</details>"
    return text


def _html_section(section: Section) -> list[str]:
    parts = [f"<h2>{html.escape(section.heading)}</h2>"]
    parts += [f'<p class="warn">{html.escape(text)}</p>' for text in section.warnings]
    parts += [f'<p class="lead">{html.escape(text)}</p>' for text in section.lead]
    for chart in section.charts:
        data = base64.b64encode(chart.png).decode("ascii")
        parts.append(f'<img alt="{html.escape(chart.title)}" src="data:image/png;base64,{data}">')
    parts += [_html_table(table) for table in section.tables]
    parts += [f'<p class="note">{html.escape(note)}</p>' for note in section.notes]
    return parts


def render_html(report: Report) -> str:
    """The report as one self-contained HTML page."""
    parts = [
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>'
        f"{html.escape(report.title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(report.title)}</h1>",
        *(f'<p class="about">{html.escape(line)}</p>' for line in report.about),
        "<h2>Summary</h2>",
        _html_table(report.summary)
        if report.summary.rows
        else '<p class="note">no sweep rows: nothing to fit</p>',
    ]
    if report.overlap_summary is not None:
        parts += ["<h3>Overlap probes</h3>", _html_table(report.overlap_summary)]
    for section in report.sections:
        parts += _html_section(section)
    parts.append("<h2>Provenance</h2>")
    for label, table in report.provenance:
        parts.append(f"<h3>{html.escape(label)}</h3>{_html_table(table, value_class=True)}")
    parts.append("</body></html>")
    return "\n".join(parts)


# Markdown punctuation that could start a link, an image, code, emphasis or a table cell.
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|#!])")


def _md_text(value: Any) -> str:
    """Text from a run shown literally: HTML escaped, Markdown punctuation backslashed."""
    text = html.escape(" ".join(str(value).splitlines()), quote=False)
    return _MD_SPECIAL.sub(r"\\\1", text)


def _md_cell(value: Any) -> str:
    text = _md_text(value)
    return f"**\u26a0 {text}**" if isinstance(value, Flagged) else text


def _md_table(table: Table) -> list[str]:
    lines = [f"**{_md_text(table.caption)}**", ""] if table.caption else []
    lines += [
        "| " + " | ".join(map(_md_cell, table.header)) + " |",
        "|" + "---|" * len(table.header),
    ]
    return lines + ["| " + " | ".join(map(_md_cell, row)) + " |" for row in table.rows]


def _md_section(section: Section, image_dir: str, images: dict[str, bytes]) -> list[str]:
    lines = ["", f"## {_md_text(section.heading)}", ""]
    lines += [f"> **\u26a0 {_md_text(text)}**\n" for text in section.warnings]
    lines += [f"{_md_text(text)}\n" for text in section.lead]
    for chart in section.charts:
        name = f"{image_dir}/{re.sub(r'[^A-Za-z0-9_.-]', '_', chart.name)}.png"
        images[name] = chart.png
        lines += [f"![{_md_text(chart.title)}]({name})", ""]
    for table in section.tables:
        lines += [*_md_table(table), ""]
    return lines + [f"_{_md_text(note)}_\n" for note in section.notes]


def render_markdown(report: Report, image_dir: str) -> tuple[str, dict[str, bytes]]:
    """The Markdown text and the PNG files it links (relative names under image_dir)."""
    lines = [f"# {_md_text(report.title)}", ""]
    lines += [f"_{_md_text(line)}_\n" for line in report.about]
    lines += ["## Summary", ""]
    lines += (
        _md_table(report.summary) if report.summary.rows else ["_no sweep rows: nothing to fit_"]
    )
    if report.overlap_summary is not None:
        lines += ["", "### Overlap probes", "", *_md_table(report.overlap_summary)]
    images: dict[str, bytes] = {}
    for section in report.sections:
        lines += _md_section(section, image_dir, images)
    lines += ["", "## Provenance"]
    for label, table in report.provenance:
        lines += ["", f"### {_md_text(label)}", "", *_md_table(table)]
    return "\n".join(lines) + "\n", images
