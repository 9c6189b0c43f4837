"""What a person sees while a sweep runs: the table (or JSON rows) and a progress bar."""

from __future__ import annotations

import json
import os
import sys
from typing import TextIO

from collbench.core.spec import SweepSpec
from collbench.render.table import (
    MISSING,
    collective_banner,
    format_line,
    format_probe_line,
    overlap_plan_lines,
    preface_lines,
    probe_banner,
    probe_summary_lines,
    summary_lines,
)
from collbench.store.meta import RunMeta
from collbench.store.rows import (
    OVERLAP,
    SWEEP,
    ResultRow,
    median_over_repeats,
    point_key,
    row_is,
    rows_of,
)


class ConsoleSink:
    """Receives rows in measurement order and renders them as they arrive."""

    def __init__(
        self,
        spec: SweepSpec,
        mode: str = "table",
        progress: bool = False,
        stream: TextIO | None = None,
        per_repeat: bool = False,
    ) -> None:
        self.spec = spec
        self.mode = mode
        self.per_repeat = per_repeat
        # With --repeats (and not per_repeat): the rows, printed at the end as one table per
        # collective over the repeats (median time, the repeats' spread), as `report` reads.
        self._held: list[ResultRow] = []
        self._spreads: dict[tuple, float] = {}
        self.stream = stream or sys.stdout
        self._pending: dict[str, ResultRow] = {}
        self._collective_rows: list[ResultRow] = []
        self._collective: str | None = None
        self._kind = SWEEP
        self._repeat = 0  # the repeat of the table being printed
        self._repeat_shown: int | None = None  # the last "# Repeat r of R" line printed
        self._started = False
        self._want_progress = progress
        self._progress: _Progress | None = None
        self._measured = 0
        # Set by finish() for a run that did not complete: how it ended, for the summary.
        self._ending: str | None = None

    def start(self, meta: RunMeta) -> None:
        if self._started:
            return
        self._started = True
        # The ranks' own spec: they resolved the backend (and with it the default sizes).
        self.spec = SweepSpec.from_dict(meta.spec)
        if self._want_progress:
            self._progress = _Progress(len(self.spec.steps()))
        if self.mode == "table":
            header = preface_lines(meta.to_dict(), self.spec.to_dict())
            self._print(*header, *overlap_plan_lines(self.spec, meta.to_dict()))

    def row(self, row: ResultRow) -> None:
        self._measured += 1
        if self._progress is not None:
            self._progress.advance(row)
        if self.mode == "json":
            self._print(json.dumps(row.to_dict(), separators=(",", ":")))
        elif self.mode == "table" and self._pooled:
            self._repeat_line(row)  # progress: the tables come at the end
            self._held.append(row)
        elif self.mode == "table":
            self._table_row(row)

    @property
    def _pooled(self) -> bool:
        return self.spec.repeats > 1 and not self.per_repeat

    def _repeat_line(self, row: ResultRow) -> None:
        if row.repeat_index != self._repeat_shown:
            self._repeat_shown = row.repeat_index
            self._print(f"# Repeat {row.repeat_index + 1} of {self.spec.repeats}")

    def _print_pooled(self) -> None:
        """One table per collective over the repeats held: each size's median repeat
        (store.rows.median_over_repeats, what report and fit read) and the repeats' spread."""
        held, self._held = self._held, []
        times: dict[tuple, list[float]] = {}
        for row in rows_of(held, SWEEP):
            times.setdefault(point_key(row), []).append(row.time_us)
        self._spreads = {
            key: (max(values) / min(values) - 1.0) * 100.0
            for key, values in times.items()
            if min(values) > 0
        }
        for row in median_over_repeats(held):
            self._table_row(row)

    def finish(self, unfinished: str | None = None) -> None:
        """Print what is pending; `unfinished` ("cancelled", "failed", ...): the last summary
        says INCOMPLETE and a closing line counts the rows measured of those planned."""
        if self.mode == "table":
            self._ending = self._ending_text(unfinished) if unfinished else None
            if self._pooled:
                self._print_pooled()
            self.finish_collective()
            if unfinished and (self._started or self._measured):  # else no table: the error says it
                self._print(
                    f"# Run {unfinished}: {self._measured} of {self._planned()} rows measured"
                )
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def _planned(self, **wanted: str | int | None) -> int:
        """The steps planned, of those whose fields match `wanted` (None: any)."""
        return sum(
            all(value is None or getattr(step, name) == value for name, value in wanted.items())
            for step in self.spec.steps()
        )

    def _ending_text(self, unfinished: str) -> str:
        if self._collective is None:
            return unfinished
        planned = self._planned(collective=self._collective, kind=self._kind, repeat=self._repeat)
        return f"{unfinished} after {len(self._collective_rows)} of {planned} rows"

    def _table_row(self, row: ResultRow) -> None:
        """One table per collective (and kind) and repeat: with --repeats, each repeat's
        tables follow a "# Repeat r of R" line, each with nccl-tests' own summary."""
        table = (row.collective, row.kind, None if self._pooled else row.repeat_index)
        if table != (self._collective, self._kind, self._repeat):
            self.finish_collective()
            self._collective, self._kind, self._repeat = table
            self._collective_rows = []
            if self.spec.repeats > 1 and not self._pooled:
                self._repeat_line(row)
            banner = collective_banner(row.collective, spread=self._pooled)
            self._print(*(probe_banner(row) if row_is(row, OVERLAP) else banner))
        self._collective_rows.append(row)
        if row_is(row, OVERLAP):
            self._print(format_probe_line(row))
            return
        self._pending[row.placement] = row
        if len(self._pending) == len(self.spec.placements_for(row.collective)):
            self._print_pending()

    def _print_pending(self) -> None:
        line = format_line(self._pending)
        if self._pooled:
            spreads = [self._spreads.get(point_key(row)) for row in self._pending.values()]
            known = [spread for spread in spreads if spread is not None]
            line += f"  {max(known):6.1f}%" if known else f"  {MISSING:>7}"
        self._print(line)
        self._pending = {}

    def finish_collective(self) -> None:
        if self._collective is None:
            return
        if self._pending:
            self._print_pending()
        summary = probe_summary_lines if self._kind == OVERLAP else summary_lines
        self._print(*summary(self._collective_rows, self._ending))
        self._collective = None

    def _print(self, *lines: str) -> None:
        # With a live bar on the same terminal, lines go above the bar, not through it.
        above_bar = self._progress is not None and self.stream is sys.stdout and os.isatty(1)
        for line in lines:
            if above_bar:
                self._progress.print(line)
            else:
                print(line, file=self.stream, flush=True)


class _Progress:
    """A rich progress bar on stderr (only used when stderr is a terminal)."""

    def __init__(self, total: int) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._task = self._bar.add_task("sweep", total=total)
        self._bar.start()

    def advance(self, row: ResultRow) -> None:
        description = f"{row.collective} {row.size_bytes} B"
        if row.repeat:
            description += f" repeat {row.repeat + 1}"
        if row_is(row, OVERLAP):
            description += f" overlap x{row.compute_ratio or 'tflop'}"
        self._bar.update(self._task, advance=1, description=description)

    def print(self, line: str) -> None:
        self._bar.console.print(line, markup=False, highlight=False, soft_wrap=True)

    def stop(self) -> None:
        self._bar.stop()
