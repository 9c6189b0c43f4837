"""`collbench predict` as text and JSON: per collective and size, each fabric's figures and
where they came from (m/p, as `mfu` tags them), and its time over the first fabric's; with
--html the same as a report, per collective a busbw chart and the side-by-side table, then
each topology's figures with their sources."""

from __future__ import annotations

import json
import string
from collections.abc import Sequence
from typing import Any

from collbench.analysis.model.fabric_compare import (
    CAPPED,
    EXTRAPOLATED,
    FITTED,
    MEASURED,
    PREDICTED,
    Cell,
    Line,
)
from collbench.core.units import counted, format_number, round_sig, size_arg
from collbench.render.report.document import Chart, Report, Section, Table, render_html
from collbench.render.table import text_columns
from collbench.render.topology import scale_out_text
from collbench.run.predict import Fabric, Prediction
from collbench.topologies.schema import numeric_figures

# The tag after a time, saying where it came from (mfu's m/p, with how a measured run gave it).
SOURCE_TAGS = {PREDICTED: "p", MEASURED: "m", FITTED: "m~", EXTRAPOLATED: "m*", CAPPED: "m^"}
LEGEND = (
    "p: predicted (topology cost model); m: measured (--curves) at that size; m~ (m*): the\n"
    "run's fit between (outside) its sizes; m^: an m* past the bound, capped at it. A ratio m/p\n"
    "(p/m): a measured time over a predicted one (the reverse). regime: the model's largest\n"
    "term; bound: the busbw the model's algorithm reaches as the size grows."
)
CELL_HEADER = ("time(us)", "busbw(GB/s)", "regime", "bound(GB/s)")


def letters(count: int) -> list[str]:
    """A, B, C ... for the fabrics in the order given (the first is the reference)."""
    return list(string.ascii_uppercase[:count]) if count <= 26 else [str(i) for i in range(count)]


def render_predict(prediction: Prediction, as_json: bool = False) -> str:
    """The side-by-side tables (one per collective), or the same figures as JSON."""
    if as_json:
        return json.dumps(to_json(prediction), indent=2)
    names = letters(len(prediction.fabrics))
    parts = [*header_lines(prediction), ""]
    for collective in dict.fromkeys(line.collective for line in prediction.lines):
        lines = [line for line in prediction.lines if line.collective == collective]
        parts += [f"# {collective}", *_table(lines, names), ""]
    return "\n".join([*parts, LEGEND])


def header_lines(prediction: Prediction) -> list[str]:
    """What is compared: the size convention, the efficiency, and each fabric's shape."""
    efficiency = prediction.request.comm_efficiency
    bound = " (the hardware bound)" if efficiency == 1 else ", as mfu prices collectives"
    lines = [
        f"collbench predict: cost model at {efficiency:.0%} of the link rates{bound}",
        "size: nccl-tests' (a rank's larger buffer); X/A: a fabric's time over A's (< 1: faster)",
    ]
    names = letters(len(prediction.fabrics))
    for index, fabric in enumerate(prediction.fabrics):
        used = any(line.cells[index].measured for line in prediction.lines)
        lines.append(f"  {names[index]} = {fabric_line(fabric, used)}")
    return lines


def fabric_line(fabric: Fabric, used: bool = True) -> str:
    """'dgx-h100: 2 nodes x 8 = 16 ranks (--nodes); nvlink 450 GB/s ...; measured: RUN'."""
    topology = fabric.topology
    whence = "--nodes" if fabric.nodes_given else "its topology's node count"
    up = topology.scale_up
    text = (
        f"{topology.name}: {counted(topology.nodes, 'node')} x {topology.accelerators_per_node} = "
        f"{topology.world_size} ranks ({whence}); {up.kind} {up.bandwidth_gbytes_s:g} GB/s"
    )
    if topology.scale_out is not None:
        text += f", {scale_out_text(topology)}"
    if fabric.runs:
        runs = ", ".join(fabric.runs)
        text += f"; measured: {runs}" if used else f"; {runs} measured no cell: all predicted"
    return text


def _table(lines: Sequence[Line], names: list[str]) -> list[str]:
    """Aligned columns: size, per fabric its cells, then the ratios to A; each fabric's letter
    centred above its cells."""
    header = ["size", *(CELL_HEADER * len(names)), *(f"{name}/{names[0]}" for name in names[1:])]
    rows = [header, *(line_cells(line) for line in lines)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    span = len(CELL_HEADER)
    groups = [
        f"[{name}]".center(sum(widths[1 + span * k : 1 + span * (k + 1)]) + 2 * (span - 1), "-")
        for k, name in enumerate(names)
    ]
    return ["  ".join([" " * widths[0], *groups]).rstrip(), *text_columns(rows, {0})]


def line_cells(line: Line) -> list[str]:
    """A table line: the size, each fabric's cells, then its time over the first's."""
    cells = [text for item in line.cells for text in cell_texts(item)]
    ratios = [
        "-" if value is None else f"{value:.3f}" + ("" if kind in ("m/m", "p/p") else f" {kind}")
        for value, kind in zip(line.ratios[1:], ratio_kinds(line)[1:], strict=True)
    ]
    return [size_arg(line.size_bytes), *cells, *ratios]


def ratio_kinds(line: Line) -> list[str]:
    """Per fabric its ratio's kinds, 'm/p' (a measured time over a predicted one), 'p/p' ..."""
    kind = ["m" if item.measured else "p" for item in line.cells]
    return [f"{mine}/{kind[0]}" for mine in kind]


def cell_texts(item: Cell) -> tuple[str, ...]:
    """time and its tag, busbw, regime, bound: as the table prints them."""
    bound = f"{item.bound_busbw_gbps:.1f} {item.algorithm}" if item.bound_busbw_gbps else "-"
    return (
        f"{format_number(item.time_s * 1e6, 4)} {SOURCE_TAGS[item.source]}",
        f"{item.busbw_gbps:.2f}",
        item.regime,
        bound,
    )


def to_json(prediction: Prediction) -> dict[str, Any]:
    """The request, each fabric and every line, in units named by their keys."""
    return {
        "comm_efficiency": prediction.request.comm_efficiency,
        "size_convention": "nccl-tests: the larger of a rank's send and receive buffers",
        "ratio": "a fabric's time over the first fabric's at the same collective and size",
        "fabrics": [_fabric_json(fabric) for fabric in prediction.fabrics],
        "lines": [_line_json(line, prediction.fabrics) for line in prediction.lines],
        "warnings": list(prediction.warnings),
    }


def _fabric_json(fabric: Fabric) -> dict[str, Any]:
    topology = fabric.topology
    return {
        "topology": topology.name,
        "origin": topology.origin,
        "nodes": topology.nodes,
        "nodes_from": "--nodes" if fabric.nodes_given else "topology",
        "accelerators_per_node": topology.accelerators_per_node,
        "ranks": topology.world_size,
        "curves": list(fabric.runs),
    }


def _line_json(line: Line, fabrics: Sequence[Fabric]) -> dict[str, Any]:
    return {
        "collective": line.collective,
        "size_bytes": line.size_bytes,
        "fabrics": [
            {
                "topology": fabric.topology.name,
                "time_us": round_sig(item.time_s * 1e6),
                "algbw_gbps": round_sig(item.algbw_gbps),
                "busbw_gbps": round_sig(item.busbw_gbps),
                "source": item.source,
                "tag": SOURCE_TAGS[item.source],
                "regime": item.regime,
                "algorithm": item.algorithm,
                "bound_busbw_gbps": round_sig(item.bound_busbw_gbps),
                **({"run": item.run} if item.run else {}),
            }
            for fabric, item in zip(fabrics, line.cells, strict=True)
        ],
        "time_ratio_to_first": [
            None if value is None else round_sig(value) for value in line.ratios
        ],
        "time_ratio_kinds": ratio_kinds(line),
    }


def predict_html(prediction: Prediction) -> str:
    """The comparison as one self-contained HTML page."""
    names = letters(len(prediction.fabrics))
    summary = Table(
        ("", "fabric"),
        [
            (name, fabric_line(fabric))
            for name, fabric in zip(names, prediction.fabrics, strict=True)
        ],
    )
    sections = [
        _collective_section(prediction, collective, names)
        for collective in dict.fromkeys(line.collective for line in prediction.lines)
    ]
    if prediction.warnings:
        sections[0].warnings.extend(prediction.warnings)
    report = Report(
        "collbench predict: " + " vs ".join(fabric.topology.name for fabric in prediction.fabrics),
        summary,
        sections,
        [(fabric.topology.name, _figures(fabric)) for fabric in prediction.fabrics],
        about=tuple(header_lines(prediction)[:1]),
    )
    return render_html(report)


def _collective_section(prediction: Prediction, collective: str, names: list[str]) -> Section:
    lines = [line for line in prediction.lines if line.collective == collective]
    cells = ("time (us)", "busbw (GB/s)", "regime", "bound (GB/s)")  # each fabric's
    header = ["size", *(f"{name} {cell}" for name in names for cell in cells)]
    header += [f"{name}/{names[0]} time" for name in names[1:]]
    rows = [tuple(line_cells(line)) for line in lines]
    notes = [" ".join(LEGEND.splitlines()), *header_lines(prediction)[1:2]]
    section = Section(collective, tables=[Table(tuple(header), rows)], notes=notes)
    if chart := _chart(collective, lines, prediction.fabrics, names):
        section.charts.append(chart)
    return section


def _chart(
    collective: str, lines: Sequence[Line], fabrics: Sequence[Fabric], names: list[str]
) -> Chart | None:
    """busbw vs size: each fabric's figures as a dashed curve in its colour."""
    from collbench.render import charts

    shown = [line for line in lines if line.size_bytes > 0]
    if len(shown) < 2:
        return None
    models = []
    for index, (name, fabric) in enumerate(zip(names, fabrics, strict=True)):
        measured = any(line.cells[index].measured for line in shown)
        label = f"{name}: {fabric.topology.name}" + (" (measured where m)" if measured else "")
        sizes = tuple(float(line.size_bytes) for line in shown)
        busbw = tuple(line.cells[index].busbw_gbps for line in shown)
        models.append(charts.ModelCurve(label, sizes, busbw, series_index=index))
    png = charts.busbw_chart(f"{collective}: busbw by fabric", [], models)
    return Chart(f"predict_{collective}", f"{collective} busbw by fabric", png)


def _figures(fabric: Fabric) -> Table:
    topology = fabric.topology
    rows = [
        (path, f"{value:g}", topology.sources.get(path, "-"))
        for path, value in numeric_figures(topology).items()
    ]
    origin = "catalog" if topology.origin == topology.name else topology.origin
    return Table(("figure", "value", "source"), rows, caption=f"{topology.name} ({origin})")
