"""`collbench fit`'s use-case: runs' sweep rows, pooled only where measured the same way,
fitted and held against a topology's cost model. Imports stay light (the CLI imports
FitRequest for its defaults): numpy and scipy load only when rows are fitted."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from collbench.core.errors import CollbenchError, SpecError

if TYPE_CHECKING:
    from collbench.analysis.fit.hockney import GroupFit
    from collbench.analysis.fit.vs_topology import TopologyComparison
    from collbench.store.load import Run
    from collbench.store.rows import ResultRow


@dataclass(frozen=True)
class FitRequest:
    """What `collbench fit` was asked for."""

    runs: tuple[Path, ...] = ()
    predict: str | None = None  # comma list of sizes to predict time and busbw at
    # A catalog name or a topology file (None: the catalog topology the rows record).
    topology: str | None = None


@dataclass(frozen=True)
class Fitted:
    """Each group's fit with its comparison against the topology (None: not compared), the
    sizes to predict at, and what could not be done (warnings)."""

    fits: list[tuple[GroupFit, TopologyComparison | None]]
    predict: list[int]
    warnings: list[str] = field(default_factory=list)


def fit_runs(request: FitRequest) -> Fitted:
    """Load, pool and fit the runs' sweep rows (SpecError on bad input)."""
    from collbench.analysis.fit.hockney import fit_rows
    from collbench.analysis.fit.vs_topology import compare_fits
    from collbench.core.units import parse_size
    from collbench.topologies.loader import load_topology

    text = request.predict  # '3M,48M': sizes to predict at
    sizes = [
        parse_size(part.strip(), "--predict") for part in (text or "").split(",") if part.strip()
    ]
    if text is not None and (not sizes or min(sizes) <= 0):
        raise SpecError("--predict", text, "needs positive sizes, e.g. 3M,48M")
    fabric = None if request.topology is None else load_topology(request.topology)
    rows = load_sweep_rows(list(request.runs))
    fits = fit_rows(rows)
    warnings: list[str] = []
    if fabric is not None:
        versus = compare_fits(fabric, rows, fits)
    else:
        versus = _compare_recorded(rows, fits, warnings)
    return Fitted(list(zip(fits, versus, strict=True)), sizes, warnings)


def _compare_recorded(
    rows: list[ResultRow], fits: list[GroupFit], warnings: list[str]
) -> list[TopologyComparison | None]:
    """The fits against the catalog topology the rows were measured on (`sweep --topology`),
    if they all name the same one (a file's name is not enough to find it again); None each
    otherwise. One the user did not ask for that cannot describe the run is only a warning,
    and the fit is printed without it."""
    from collbench.analysis.fit.vs_topology import compare_fits
    from collbench.topologies.loader import catalog_names, load_topology

    names = {row.topology for row in rows}
    if len(names) != 1 or (name := names.pop()) not in catalog_names():
        return [None] * len(fits)
    fabric = load_topology(name)
    try:
        return compare_fits(fabric, rows, fits)
    except CollbenchError as error:
        warnings.append(f"not compared with the recorded topology: {error}")
        return [None] * len(fits)


def load_sweep_rows(runs: list[Path]) -> list[ResultRow]:
    """Sweep rows of every run (each tagged with its run id); SpecError if there are none."""
    from collbench.store.load import load_run
    from collbench.store.rows import SWEEP, rows_of

    rows: list[ResultRow] = []
    loaded_by_id: dict[str, Run] = {}
    for run in dict.fromkeys(Path(run).resolve() for run in runs):  # a run given twice: once
        loaded = load_run(run, "RUN", ": pass a directory written by collbench sweep")
        run_id = loaded.meta.run_id or run.name
        tagged = [row if row.run_id else replace(row, run_id=run_id) for row in loaded.rows]
        loaded_by_id.update({str(row.run_id): loaded for row in tagged})
        rows.extend(tagged)
    sweep = rows_of(rows, SWEEP)
    if not sweep:
        kinds = sorted({row.kind for row in rows})
        raise SpecError(
            "RUN",
            ", ".join(str(run) for run in runs),
            f"hold no sweep rows to fit (only {', '.join(kinds)})",
        )
    check_poolable(sweep, loaded_by_id)
    return sweep


def check_poolable(rows: list[ResultRow], loaded_by_id: dict[str, Run]) -> None:
    """SpecError when runs that land in one fit group were measured differently (the same
    methodology rule compare flags); `loaded_by_id`: each row's run, by its run id."""
    from collbench.analysis.fit.hockney import group_rows
    from collbench.analysis.rules import methodology
    from collbench.store.load import Run

    for key, members in group_rows(rows).items():
        runs = []
        for run_id in sorted({str(row.run_id) for row in members}):
            loaded = loaded_by_id[run_id]
            run_rows = [row for row in members if str(row.run_id) == run_id]
            runs.append(Run(loaded.path, replace(loaded.meta, run_id=run_id), run_rows))
        methodology.check_poolable(key, runs)
