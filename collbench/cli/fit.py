"""`collbench fit RUN...`: robust piecewise alpha-beta fits of runs' sweep rows.

cli.py registers the command with `app.command("fit")(fit)`. Imports stay light (typer,
pathlib): numpy and scipy load only when the command runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

if TYPE_CHECKING:
    from collbench.analysis.fit import CurveFit, GroupFit
    from collbench.analysis.vs_topology import TopologyComparison


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
            help="A catalog name or a YAML/TOML file: report each group's measured time as % of the cost model's prediction per size band. (default: the catalog topology the rows record, from sweep --topology)",
            show_default=False,
        ),
    ] = None,  # noqa: E501, UP045
) -> None:
    """Fit t(S) = alpha + S/B per group, piecewise where the protocol changes."""
    from collbench.analysis.fit import fit_rows
    from collbench.analysis.vs_topology import compare_fits
    from collbench.topologies.loader import load_topology

    sizes = parse_predict(predict)
    fabric = None if topology is None else load_topology(topology)
    rows = load_sweep_rows(runs)
    fits = fit_rows(rows)
    if fabric is not None:
        versus = compare_fits(fabric, rows, fits)
    else:
        versus = _compare_recorded(_recorded_topology(rows), rows, fits)
    pairs = list(zip(fits, versus, strict=True))
    if json_out:
        print(json.dumps([group_dict(group, sizes, vs) for group, vs in pairs], indent=2))
    else:
        print("\n\n".join(render_group(group, sizes, vs) for group, vs in pairs))


def _recorded_topology(rows: list[dict[str, Any]]) -> Any:
    """The catalog topology the rows were measured on (`sweep --topology`), if they all
    name the same one; None otherwise (a file's name is not enough to find it again)."""
    from collbench.topologies.loader import catalog_names, load_topology

    names = {row.get("topology") for row in rows}
    if len(names) != 1 or (name := names.pop()) not in catalog_names():
        return None
    return load_topology(name)


def _compare_recorded(
    fabric: Any, rows: list[dict[str, Any]], fits: list[GroupFit]
) -> list[TopologyComparison | None]:
    """The fits against the topology the rows record (None: no comparison); one the user
    did not ask for that cannot describe the run is only a warning, and the fit is printed
    without it."""
    import sys

    from collbench.analysis.vs_topology import compare_fits
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
    from collbench.core.spec import parse_size

    if text is None:
        return []
    sizes = [parse_size(part.strip(), "--predict") for part in text.split(",") if part.strip()]
    if not sizes or min(sizes) <= 0:
        raise SpecError("--predict", text, "needs positive sizes, e.g. 3M,48M")
    return sizes


def load_sweep_rows(runs: list[Path]) -> list[dict[str, Any]]:
    """Sweep rows of every run (each tagged with its run id); SpecError if there are none."""
    from collbench.core.errors import SpecError
    from collbench.store.rundir import load_rows, read_meta

    rows: list[dict[str, Any]] = []
    run_dirs: dict[str, Path] = {}
    for run in dict.fromkeys(Path(run).resolve() for run in runs):  # a run given twice: once
        run_rows = load_rows(run) if run.is_dir() else []
        if not run_rows:
            raise SpecError(
                "RUN",
                str(run),
                "holds no result rows (no rows.jsonl): pass a directory written by collbench sweep",
            )
        run_id = (read_meta(run) or {}).get("run_id") or run.name
        tagged = [{**row, "run_id": row.get("run_id") or run_id} for row in run_rows]
        run_dirs.update({str(row["run_id"]): run for row in tagged})
        rows.extend(tagged)
    sweep = [row for row in rows if row.get("kind", "sweep") == "sweep"]
    if not sweep:
        kinds = sorted({str(row.get("kind")) for row in rows})
        raise SpecError(
            "RUN",
            ", ".join(str(run) for run in runs),
            f"hold no sweep rows to fit (only {', '.join(kinds)})",
        )
    check_poolable(sweep, run_dirs)
    return sweep


# What makes times of one group mean different things: they must not be pooled in one fit.
POOL_BLOCKERS = ("source", "timing_method", "rank_stat", "op", "nodes", "ranks_per_node")


def check_poolable(rows: list[dict[str, Any]], run_dirs: dict[str, Path]) -> None:
    """SpecError when runs that land in one fit group were measured differently."""
    from collbench.analysis.comparison import RunData, describe_method
    from collbench.analysis.fit import group_rows
    from collbench.core.errors import SpecError
    from collbench.store.rundir import read_meta

    for key, members in group_rows(rows).items():
        methods: dict[str, dict[str, Any]] = {}
        for run_id in sorted({str(row["run_id"]) for row in members}):
            run_rows = [row for row in members if str(row["run_id"]) == run_id]
            path = run_dirs.get(run_id)
            meta = (read_meta(path) if path is not None else None) or {}
            methods[run_id] = describe_method(RunData(str(path or run_id), meta, run_rows))
        first = next(iter(methods))
        for run_id, method in methods.items():
            for field in POOL_BLOCKERS:
                if method.get(field) != methods[first].get(field):
                    raise SpecError(
                        "RUN",
                        f"{first}, {run_id}",
                        f"would be fitted together "
                        f"({key[0]}, {key[1]}, {key[2]} ranks) but were measured "
                        f"differently: {field} {methods[first].get(field)!r} vs "
                        f"{method.get(field)!r}; fit them separately",
                    )


def predictions(curve: CurveFit, sizes: list[int]) -> list[dict[str, Any]]:
    """Predicted time and busbw at each size, from the regime that covers it."""
    result = []
    for size in sizes:
        extrapolated = None
        if size < curve.regimes[0].min_bytes:
            extrapolated = "below"
        elif size > curve.regimes[-1].max_bytes:
            extrapolated = "above"
        result.append(
            {
                "size_bytes": size,
                "time_us": round(curve.predict_time_us(size), 4),
                "busbw_gbps": round(curve.predict_busbw_gbps(size), 4),
                "regime_index": curve.regime_index(size),
                "extrapolated": extrapolated,
            }
        )
    return result


def group_dict(
    group: GroupFit, sizes: list[int], versus: TopologyComparison | None = None
) -> dict[str, Any]:
    data = group.to_dict()
    if sizes and group.curve is not None:
        data["predictions"] = predictions(group.curve, sizes)
    if versus is not None:
        data["vs_topology"] = versus.to_dict()
    return data


def render_group(
    group: GroupFit, sizes: list[int], versus: TopologyComparison | None = None
) -> str:
    """One compact plain-text block per group."""
    key = group.key
    runs = f"{len(group.runs)} run" + ("s" if len(group.runs) != 1 else "")
    lines = [
        f"{key['collective']} | {key['backend']} | {key['world_size']} ranks | "
        f"{key['dtype']} | {key['placement']} | topology {key['topology'] or '-'} | "
        f"knobs {group.knobs_digest} | {group.n_points} points from {runs}"
    ]
    versus_lines = [] if versus is None else _versus_lines(versus)
    if group.curve is None:
        return "\n".join([*lines, f"  not fitted: {group.skipped}", *versus_lines])
    return "\n".join(
        [
            *lines,
            *_summary(group.curve),
            *_regime_lines(group.curve),
            *_outlier_lines(group.curve),
            *_prediction_lines(group.curve, sizes),
            *versus_lines,
        ]
    )


def _summary(curve: CurveFit) -> list[str]:
    from collbench.core.spec import format_size

    return [
        f"  alpha {_num(curve.alpha_us)} us {_ci(curve.alpha_us_ci)}   "
        f"peak busbw {_num(curve.busbw_peak_gbps)} GB/s {_ci(curve.busbw_peak_gbps_ci)}   "
        f"n_half {format_size(curve.n_half_bytes)}",
        f"  fit: rms {100 * curve.rmse_log_time:.2f}% of time, r2 {curve.r2_log_time:.5f} "
        f"(log time); busbw at {format_size(curve.regimes[-1].max_bytes)}: "
        f"{_num(curve.busbw_at_max_bytes_gbps)} GB/s; CI 95% from the fit's Jacobian",
    ]


def _regime_lines(curve: CurveFit) -> list[str]:
    from collbench.core.spec import format_size

    lines = [f"  {'regime':>6}  {'sizes':<23} {'alpha_us':>10} {'busbw_gbps':>11} {'points':>6}"]
    for number, regime in enumerate(curve.regimes, 1):
        span = f"{format_size(regime.min_bytes)} .. {format_size(regime.max_bytes)}"
        busbw = "latency" if curve.latency_bound(regime) else _num(regime.busbw_gbps)
        lines.append(
            f"  {number:>6}  {span:<23} {_num(regime.alpha_us):>10} "
            f"{busbw:>11} {regime.n_points:>6}"
        )
    return lines


def _outlier_lines(curve: CurveFit) -> list[str]:
    from collbench.core.spec import format_size

    if not curve.outliers:
        return ["  outliers: none"]
    lines = [f"  {'outlier':>7}  {'time_us':>10} {'busbw_gbps':>11} {'fitted':>10} {'off':>7}"]
    for outlier in curve.outliers:
        off = outlier.busbw_gbps / outlier.busbw_fit_gbps - 1
        lines.append(
            f"  {format_size(outlier.size_bytes):>7}  {_num(outlier.time_us):>10} "
            f"{_num(outlier.busbw_gbps):>11} {_num(outlier.busbw_fit_gbps):>10} "
            f"{100 * off:>+6.1f}%"
        )
    return lines


def _prediction_lines(curve: CurveFit, sizes: list[int]) -> list[str]:
    from collbench.core.spec import format_size

    if not sizes:
        return []
    lines = [f"  {'predict':>7}  {'time_us':>10} {'busbw_gbps':>11} {'regime':>6}"]
    for item in predictions(curve, sizes):
        note = ""
        if item["extrapolated"] == "below":
            note = f"  extrapolated below the smallest measured size, {format_size(curve.regimes[0].min_bytes)}"
        elif item["extrapolated"] == "above":
            note = f"  extrapolated above the largest measured size, {format_size(curve.regimes[-1].max_bytes)}"
        lines.append(
            f"  {format_size(item['size_bytes']):>7}  {_num(item['time_us']):>10} "
            f"{_num(item['busbw_gbps']):>11} {item['regime_index'] + 1:>6}{note}"
        )
    return lines


def _versus_lines(versus: TopologyComparison) -> list[str]:
    """Per size band: measured as % of the topology's prediction (a ratio of times)."""
    from collbench.core.spec import format_size

    nodes = f"{versus.nodes} node" + ("s" if versus.nodes != 1 else "")
    head = (
        f"  vs topology {versus.topology} ({nodes} x {versus.ranks_per_node} ranks, "
        f"{versus.group.ranks_per_domain} per scale-up domain)"
    )
    notes = [f"    note: {note}" for note in versus.notes]
    if versus.skipped is not None:
        return [f"{head}: not compared, {versus.skipped}", *notes]
    lines = [
        f"{head}: % = predicted time / measured time, over 100% is faster than the model",
        *notes,
    ]
    for band in versus.bands:
        at = band.largest
        where = (
            f"{format_size(band.sizes[0].size_bytes)} .. {format_size(at.size_bytes)}, "
            f"{len(band.sizes)} size" + ("s" if len(band.sizes) != 1 else "")
        )
        model = at.prediction
        if model.bottleneck == "latency":
            detail = (
                f"measured {_num(at.measured_time_us)} us vs predicted "
                f"{_num(model.time_s * 1e6)} us = {at.ratio:.0%}"
            )
        else:
            detail = (
                f"measured busbw {_num(at.measured_busbw_gbps)} GB/s = {at.ratio:.0%} of "
                f"predicted {_num(model.busbw_gbps)}"
            )
        lines.append(
            f"    {band.band} ({where}): {band.ratio_geomean:.0%} geomean; at "
            f"{format_size(at.size_bytes)} {detail} ({model.algorithm}, "
            f"{model.bottleneck} bound)"
        )
    return lines


def _num(value: float) -> str:
    """4 significant digits, plain where readable."""
    if value != 0 and not 1e-3 <= abs(value) < 1e6:
        return f"{value:.3e}"
    return f"{value:.4g}" if abs(value) < 1000 else f"{value:.0f}"


def _ci(pair: tuple[float, float]) -> str:
    high = "inf" if pair[1] == float("inf") else _num(pair[1])
    return f"[{_num(pair[0])}, {high}]"
