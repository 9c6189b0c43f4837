"""`collbench fit RUN...`: robust piecewise alpha-beta fits of runs' sweep rows.

cli.py registers the command with `app.command("fit")(fit)`. Imports stay light (typer,
pathlib, the vs_topology constants): numpy and scipy load only when the command runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

# the measure's name and definition, written once (light: no numpy or scipy behind it)
from collbench.analysis.fit.vs_topology import MEASURE, MEASURE_DEFINITION, MODEL_WRONG_SPEEDUP

if TYPE_CHECKING:
    from collbench.analysis.fit.hockney import GroupFit
    from collbench.analysis.fit.vs_topology import TopologyComparison
    from collbench.store.rows import ResultRow


def fit(
    runs: Annotated[
        list[Path],
        typer.Argument(
            help="Run directories; rows of the same collective, backend, world size, topology, placement, dtype and knobs are pooled.",
            metavar="RUN...",
            show_default=False,
        ),
    ],
    json_out: Annotated[
        bool, typer.Option("--json", help="Print a JSON list of groups instead of tables.")
    ] = False,
    predict: Annotated[
        Optional[str],
        typer.Option(
            "--predict",
            help="Comma list of sizes (K/M/G = powers of 1024) to predict time and busbw at, e.g. 3M,48M.",
            show_default=False,
        ),
    ] = None,  # noqa: E501, UP045
    topology: Annotated[
        Optional[str],
        typer.Option(
            "--topology",
            help=f"A catalog name or a YAML/TOML file: report each group's {MEASURE} = {MEASURE_DEFINITION} per size band; over {MODEL_WRONG_SPEEDUP:.0%} the model, not the fabric, is wrong. (default: the catalog topology the rows record, from sweep --topology)",
            show_default=False,
        ),
    ] = None,  # noqa: E501, UP045
) -> None:
    """Fit t(S) = alpha + S/B per group, piecewise where the protocol changes."""
    from collbench.analysis.fit.hockney import fit_rows
    from collbench.analysis.fit.vs_topology import compare_fits
    from collbench.render.fit import render_fits
    from collbench.topologies.loader import load_topology

    sizes = parse_predict(predict)
    fabric = None if topology is None else load_topology(topology)
    rows = load_sweep_rows(runs)
    fits = fit_rows(rows)
    if fabric is not None:
        versus = compare_fits(fabric, rows, fits)
    else:
        versus = _compare_recorded(_recorded_topology(rows), rows, fits)
    print(render_fits(list(zip(fits, versus, strict=True)), sizes, as_json=json_out))


def _recorded_topology(rows: list[ResultRow]) -> Any:
    """The catalog topology the rows were measured on (`sweep --topology`), if they all
    name the same one; None otherwise (a file's name is not enough to find it again)."""
    from collbench.topologies.loader import catalog_names, load_topology

    names = {row.topology for row in rows}
    if len(names) != 1 or (name := names.pop()) not in catalog_names():
        return None
    return load_topology(name)


def _compare_recorded(
    fabric: Any, rows: list[ResultRow], fits: list[GroupFit]
) -> list[TopologyComparison | None]:
    """The fits against the topology the rows record (None: no comparison); one the user
    did not ask for that cannot describe the run is only a warning, and the fit is printed
    without it."""
    import sys

    from collbench.analysis.fit.vs_topology import compare_fits
    from collbench.core.errors import CollbenchError

    if fabric is None:
        return [None] * len(fits)
    try:
        return compare_fits(fabric, rows, fits)
    except CollbenchError as error:
        print(
            f"collbench: warning: not compared with the recorded topology: {error}", file=sys.stderr
        )
        return [None] * len(fits)


def parse_predict(text: str | None) -> list[int]:
    """Sizes from '3M,48M' (SpecError on a bad or zero size)."""
    from collbench.core.errors import SpecError
    from collbench.core.units import parse_size

    if text is None:
        return []
    sizes = [parse_size(part.strip(), "--predict") for part in text.split(",") if part.strip()]
    if not sizes or min(sizes) <= 0:
        raise SpecError("--predict", text, "needs positive sizes, e.g. 3M,48M")
    return sizes


def load_sweep_rows(runs: list[Path]) -> list[ResultRow]:
    """Sweep rows of every run (each tagged with its run id); SpecError if there are none."""
    from dataclasses import replace

    from collbench.core.errors import SpecError
    from collbench.store.load import load_run

    rows: list[ResultRow] = []
    run_dirs: dict[str, Path] = {}
    for run in dict.fromkeys(Path(run).resolve() for run in runs):  # a run given twice: once
        loaded = load_run(run, "RUN", ": pass a directory written by collbench sweep")
        run_id = loaded.meta.run_id or run.name
        tagged = [replace(row, run_id=row.run_id or run_id) for row in loaded.rows]
        run_dirs.update({str(row.run_id): run for row in tagged})
        rows.extend(tagged)
    sweep = [row for row in rows if row.kind == "sweep"]
    if not sweep:
        kinds = sorted({row.kind for row in rows})
        raise SpecError(
            "RUN",
            ", ".join(str(run) for run in runs),
            f"hold no sweep rows to fit (only {', '.join(kinds)})",
        )
    check_poolable(sweep, run_dirs)
    return sweep


def check_poolable(rows: list[ResultRow], run_dirs: dict[str, Path]) -> None:
    """SpecError when runs that land in one fit group were measured differently (the same
    methodology rule compare flags)."""
    from dataclasses import replace

    from collbench.analysis.fit.hockney import group_rows
    from collbench.analysis.rules import methodology
    from collbench.store.load import Run
    from collbench.store.meta import RunMeta
    from collbench.store.rundir import read_meta

    for key, members in group_rows(rows).items():
        runs = []
        for run_id in sorted({str(row.run_id) for row in members}):
            path = run_dirs.get(run_id)
            meta = (read_meta(path) if path is not None else None) or RunMeta()
            run_rows = [row for row in members if str(row.run_id) == run_id]
            runs.append(Run(str(path or run_id), replace(meta, run_id=run_id), run_rows))
        methodology.check_poolable(key, runs)
