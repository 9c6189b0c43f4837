"""`collbench export RUN`: a run directory's rows as CSV and nccl-tests JSON, read a row at a
time (render/export.py has the formats).

Rules: no row is kept once its text is made, so memory follows the files written, not the
run's samples (a CSV leaves the samples out). What needs every row is kept as it goes: the
CSV's probe columns (written when any row is a probe), each collective's entries, its #wrong
and busbw sum (the footer), and whether every row has per-iteration times (the head). The
files are the bytes export wrote when it loaded every row first: same text, same order.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collbench.render.export import (
    csv_columns,
    csv_record,
    footer_of,
    json_paths,
    nccl_entry,
    nccl_head,
    nccl_time,
    per_iter_series,
    same_line,
)
from collbench.store.meta import RunMeta
from collbench.store.outputs import write_outputs
from collbench.store.rows import OVERLAP, SWEEP, ResultRow, row_is

_ROW_CELLS = len(csv_columns(False))
_MARK = '\n "results": [],\n'  # where a collective's entries go in its document


@dataclass
class _Collective:
    """One collective's -J file as its rows arrive: entry texts, the size in progress."""

    entries: list[str] = field(default_factory=list)
    pending: list[ResultRow] = field(default_factory=list)
    wrong: float = 0  # summed as nccl_footer sums: same order, same float
    busbw: float = 0
    bodies: int = 0
    per_iter: bool = True

    def add(self, row: ResultRow) -> None:
        if self.pending and not same_line(self.pending, row):
            self.commit()
        self.pending.append(row)
        self.per_iter = self.per_iter and per_iter_series(row) is not None

    def commit(self) -> None:
        if not self.pending:
            return
        entry = nccl_entry(self.pending)
        self.pending = []
        for placement in ("out_of_place", "in_place"):
            body = entry.get(placement)
            if body:
                self.wrong += body["nwrong"] or 0
                self.busbw += body["bus_bw"]
                self.bodies += 1
        # The entry as json.dumps(document, indent=1) writes it: two levels in.
        self.entries.append("  " + json.dumps(entry, indent=1).replace("\n", "\n  "))


class RunExport:
    """The --csv text and -J documents of one run, built a row at a time (`add`)."""

    def __init__(self, csv_wanted: bool, json_wanted: bool) -> None:
        self.csv_wanted, self.json_wanted = csv_wanted, json_wanted
        self.rows = 0
        self.with_probes = False
        self._lines: list[tuple[str, str]] = []  # each row's CSV text: row cells, probe cells
        self._buffer = io.StringIO(newline="")
        self._writer = csv.writer(self._buffer)
        self.collectives: dict[str, _Collective] = {}

    def add(self, row: ResultRow) -> None:
        self.rows += 1
        if self.csv_wanted:
            self.with_probes = self.with_probes or row_is(row, OVERLAP)
            cells = csv_record(row, csv_columns(True))
            self._lines.append((self._line(cells[:_ROW_CELLS]), self._line(cells[_ROW_CELLS:])))
        if self.json_wanted and row_is(row, SWEEP):
            self.collectives.setdefault(row.collective, _Collective()).add(row)

    def _line(self, cells: list[str]) -> str:
        self._buffer.seek(0)
        self._buffer.truncate()
        self._writer.writerow(cells)
        return self._buffer.getvalue()[:-2]  # without csv's "\r\n"

    def csv_text(self) -> str:
        header = self._line(list(csv_columns(self.with_probes)))
        if self.with_probes:
            lines = (f"{cells},{probes}\r\n" for cells, probes in self._lines)
        else:
            lines = (f"{cells}\r\n" for cells, _ in self._lines)
        return header + "\r\n" + "".join(lines)

    def json_text(self, collective: str, meta: RunMeta) -> str:
        """One collective's nccl-tests document, as json.dumps(document, indent=1) + "\\n"."""
        state = self.collectives[collective]
        state.commit()
        error = meta.extra.get("error")
        # An import of one log keeps that log's own average (nccl-tests' figure).
        single = meta.source and len(meta.imported_from) == 1
        average = (meta.extra.get("footer") or {}).get("avg_bus_bandwidth_gbps")
        if not single or average is None:
            average = state.busbw / state.bodies if state.bodies else 0.0
        footer = footer_of(
            int(state.wrong), average, [error] if error else (), nccl_time(meta.finished_utc)
        )
        document = {**nccl_head(meta, state.per_iter), "results": [], **footer}
        head, tail = json.dumps(document, indent=1).split(_MARK, 1)
        results = "[\n" + ",\n".join(state.entries) + "\n ]" if state.entries else "[]"
        return f'{head}\n "results": {results},\n{tail}\n'


def export_run(
    rows: Iterable[ResultRow], csv_path: Path | None, json_path: Path | None
) -> RunExport:
    """Read `rows` (a run's, in file order) once into what export writes (write_export)."""
    export = RunExport(csv_path is not None, json_path is not None)
    for row in rows:
        export.add(row)
    return export


def write_export(
    export: RunExport, meta: RunMeta, csv_path: Path | None, json_path: Path | None
) -> list[Path]:
    """Write the CSV and/or nccl-tests JSON files (paths checked by store/outputs.py); the
    paths written. Each file is written whole or not at all, and a failure (a full disk)
    removes those written before it (write_outputs)."""
    files: dict[Path, Any] = {}
    if csv_path is not None:
        files[Path(csv_path)] = export.csv_text().encode()
    if json_path is not None:
        for collective, path in json_paths(json_path, export.collectives).items():
            files[Path(path)] = export.json_text(collective, meta).encode()
    write_outputs("-J", files, flags={Path(csv_path): "--csv"} if csv_path else None)
    return list(files)
