"""`collbench predict --html`: the fabric comparison as a report, per collective a busbw
chart and the side-by-side table, then each topology's figures with their sources."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from collbench.render.predict import LEGEND, fabric_line, header_lines, letters, line_cells
from collbench.render.report.document import Chart, Report, Section, Table, render_html

if TYPE_CHECKING:
    from collbench.analysis.model.fabric_compare import Line
    from collbench.run.predict import Fabric, Prediction


def predict_html(prediction: Prediction) -> str:
    """The comparison as one self-contained HTML page."""
    names = letters(len(prediction.fabrics))
    titles = [fabric.topology.name for fabric in prediction.fabrics]
    summary = Table(
        ("", "fabric"),
        [
            (name, fabric_line(fabric))
            for name, fabric in zip(names, prediction.fabrics, strict=True)
        ],
    )
    sections = [
        _collective_section(prediction, collective)
        for collective in dict.fromkeys(line.collective for line in prediction.lines)
    ]
    if prediction.warnings:
        sections[0].warnings.extend(prediction.warnings)
    report = Report(
        "collbench predict: " + " vs ".join(titles),
        summary,
        sections,
        [(fabric.topology.name, _figures(fabric)) for fabric in prediction.fabrics],
        about=tuple(header_lines(prediction)[:1]),
    )
    return render_html(report)


def _collective_section(prediction: Prediction, collective: str) -> Section:
    lines = [line for line in prediction.lines if line.collective == collective]
    names = letters(len(prediction.fabrics))
    cells = ("time (us)", "busbw (GB/s)", "regime", "bound (GB/s)")  # each fabric's
    header = ["size", *(f"{name} {cell}" for name in names for cell in cells)]
    header += [f"{name}/{names[0]} time" for name in names[1:]]
    rows = [tuple(line_cells(line)) for line in lines]
    notes = [" ".join(LEGEND.splitlines()), *header_lines(prediction)[1:2]]
    section = Section(collective, tables=[Table(tuple(header), rows)], notes=notes)
    chart = _chart(collective, lines, prediction.fabrics, names)
    if chart is not None:
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
    from collbench.topologies.schema import numeric_figures

    topology = fabric.topology
    rows = [
        (path, f"{value:g}", topology.sources.get(path, "-"))
        for path, value in numeric_figures(topology).items()
    ]
    origin = "catalog" if topology.origin == topology.name else topology.origin
    return Table(("figure", "value", "source"), rows, caption=f"{topology.name} ({origin})")
