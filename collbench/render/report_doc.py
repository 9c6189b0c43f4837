"""The report as data: sections of charts, tables and notes (report.py fills it in,
report_render.py draws it). No matplotlib, no analysis: plain containers."""

from __future__ import annotations

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
