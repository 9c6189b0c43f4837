"""Where rows go as they are measured: the interface the rank layer and launchers write to.

The console table (collbench.render.console.ConsoleSink) is one implementation; the layers
below the renderer only know this protocol, so the command line chooses what a person sees.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from collbench.store.meta import RunMeta
from collbench.store.rows import ResultRow


class RowSink(Protocol):
    # "table", "json" or "quiet"; a launcher may set "quiet" (torchrun nodes other than 0).
    mode: str

    def start(self, meta: RunMeta) -> None:
        """The run's meta.json, once rank 0 has written it (before the first row)."""

    def row(self, row: ResultRow) -> None:
        """One finished row, in measurement order."""

    def finish(self, unfinished: str | None = None) -> None:
        """The run is over (also after a failure): print what is pending. `unfinished`:
        how a run that did not complete ended ("cancelled", "failed", "interrupted"),
        None when every step was measured."""


# Makes the sink for a job's spec (the ranks' own spec, with the backend resolved).
SinkFactory = Callable[[Any], RowSink]
