"""The report's Doctor section: a `collbench doctor` run read back from its rows (kind
"doctor") and, where the run directory holds one, doctor.json's verdicts.

From the rows alone: the node x node pair matrix as a heat map (median busbw per pair over
the pair and shuffle rounds), per node the intra-node busbw and the median of its pairs as
bars, a table per node and per stage, and every row (folded). From doctor.json: whether the
run was healthy, the findings table, the expectation and the notes. cli/report.py reads
doctor.json (DOCTOR_JSON) and hands its content in; nothing here reads a file.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from collbench.core.doctor import DOCTOR
from collbench.core.stats import median
from collbench.core.units import format_size
from collbench.render import charts
from collbench.render.doctor import (
    HEALTHY,
    UNJUDGED,
    format_ranks,
    gbps,
    pair_median_by_host,
)
from collbench.render.report_doc import Chart, Flagged, Report, Section, Table
from collbench.store.doctor_report import DOCTOR_JSON, DoctorFinding, DoctorReport
from collbench.store.load import Run
from collbench.store.rows import DOCTOR as DOCTOR_ROWS
from collbench.store.rows import DoctorRow

PAIR_STAGES = ("pair", "shuffle")  # stages whose rows are one node pair each
ANNOTATE_MAX_HOSTS = 16  # larger matrices: colors only, no figure in each cell
LABEL_MAX_HOSTS = 64  # larger matrices: no host names on the axes (the table names them)
SLOW_COLOR = "#d62728"
FINDINGS_HEADER = (
    "kind",
    "hosts",
    "ranks",
    "addresses",
    "measured (GB/s)",
    "expected (GB/s)",
    "rounds",
    "evidence",
    "action",
)


def doctor_rows(run: Run) -> list[DoctorRow]:
    """A run's doctor rows, in file order."""
    return run.rows_of(DOCTOR_ROWS)


def doctor_nodes(run: Run) -> Mapping[str, Any]:
    """meta.json's "doctor" entry (hosts, addresses, ranks_per_host, skipped); {} if none."""
    nodes = run.meta.extra.get(DOCTOR) if isinstance(run.meta.extra, dict) else None
    return nodes if isinstance(nodes, Mapping) else {}


def doctor_hosts(run: Run, rows: Sequence[DoctorRow]) -> list[str]:
    """The nodes in meta.json's order, then any other host the rows name, as first seen."""
    hosts = [str(host) for host in doctor_nodes(run).get("hosts") or []]
    for row in rows:
        for host in row.group_hosts or []:
            if host not in hosts:
                hosts.append(host)
    return hosts


def pair_matrix(rows: Sequence[DoctorRow], hosts: Sequence[str]) -> list[list[float | None]]:
    """hosts x hosts: the median busbw of each node pair over its pair and shuffle rows
    (symmetric; None on the diagonal and for pairs never measured)."""
    index = {host: position for position, host in enumerate(hosts)}
    samples: dict[tuple[int, int], list[float]] = {}
    for row in rows:
        pair = row.group_hosts or []
        if row.stage not in PAIR_STAGES or len(pair) != 2 or pair[0] == pair[1]:
            continue
        if pair[0] in index and pair[1] in index:
            key = tuple(sorted((index[pair[0]], index[pair[1]])))
            samples.setdefault(key, []).append(float(row.busbw_gbps))
    matrix: list[list[float | None]] = [[None] * len(hosts) for _ in hosts]
    for (first, second), values in samples.items():
        matrix[first][second] = matrix[second][first] = median(values)
    return matrix


def stage_busbw_by_host(rows: Sequence[DoctorRow], stage: str = "intra") -> dict[str, float]:
    """Per host the median busbw of a one-node stage's rows (intra: the node's all-reduce)."""
    samples: dict[str, list[float]] = {}
    for row in rows:
        if row.stage == stage and len(row.group_hosts or []) == 1:
            samples.setdefault(row.group_hosts[0], []).append(float(row.busbw_gbps))
    return {host: median(values) for host, values in samples.items()}


def flagged(report: DoctorReport | None) -> tuple[set[str], set[frozenset[str]]]:
    """From doctor.json's findings: the hosts flagged as nodes, and the pairs flagged as links."""
    hosts: set[str] = set()
    links: set[frozenset[str]] = set()
    for item in _findings(report):
        if item.kind == "node":
            hosts.update(item.hosts)
        elif item.kind == "link" and len(item.hosts) == 2:
            links.add(frozenset(item.hosts))
    return hosts, links


def _findings(report: DoctorReport | None) -> tuple[DoctorFinding, ...]:
    return report.findings if report is not None else ()


def heatmap_chart(
    title: str,
    hosts: Sequence[str],
    matrix: Sequence[Sequence[float | None]],
    slow_hosts: Collection[str] = frozenset(),
    slow_links: Collection[frozenset[str]] = frozenset(),
) -> bytes | None:
    """The pair matrix as a heat map (red: slow, green: fast, from 0 GB/s up; grey: not
    measured), each cell's GB/s written in it, flagged links outlined, flagged hosts' names
    in red. None without a measured pair."""
    values = np.array(
        [[np.nan if value is None else value for value in row] for row in matrix], dtype=float
    )
    if values.size == 0 or not np.isfinite(values).any():
        return None
    plt = charts.pyplot()
    side_in = min(12.0, 3.0 + 0.55 * len(hosts))
    figure, axes = plt.subplots(figsize=(side_in + 1.5, side_in))
    colormap = plt.get_cmap("RdYlGn").with_extremes(bad="#e0e0e0")
    image = axes.imshow(
        np.ma.masked_invalid(values), cmap=colormap, vmin=0.0, vmax=float(np.nanmax(values))
    )
    figure.colorbar(image, ax=axes, label="pair busbw (GB/s)", shrink=0.8)
    _host_ticks(axes, hosts, slow_hosts)
    _annotate(axes, values, hosts, slow_links)
    axes.set_title(title)
    return charts.save_png(figure)


def _host_ticks(axes: Any, hosts: Sequence[str], slow_hosts: Collection[str]) -> None:
    """Host names on both axes, flagged hosts' in red (none past LABEL_MAX_HOSTS)."""
    if len(hosts) > LABEL_MAX_HOSTS:
        axes.set_xticks([])
        axes.set_yticks([])
        return
    labels = [charts.short(host, 24) for host in hosts]
    axes.set_xticks(range(len(hosts)), labels, rotation=45, ha="right")
    axes.set_yticks(range(len(hosts)), labels)
    for ticks in (axes.get_xticklabels(), axes.get_yticklabels()):
        for host, tick in zip(hosts, ticks, strict=True):
            if host in slow_hosts:
                tick.set_color(SLOW_COLOR)
                tick.set_fontweight("bold")


def _annotate(
    axes: Any, values: np.ndarray, hosts: Sequence[str], slow_links: Collection[frozenset[str]]
) -> None:
    """Each measured cell's GB/s (small matrices), and a box around each flagged link."""
    from matplotlib.patches import Rectangle

    size = len(hosts)
    for row in range(size):
        for column in range(size):
            value = values[row, column]
            if size <= ANNOTATE_MAX_HOSTS and np.isfinite(value):
                axes.text(column, row, gbps(float(value)), ha="center", va="center", fontsize=8)
            if row != column and frozenset((hosts[row], hosts[column])) in slow_links:
                box = Rectangle(
                    (column - 0.5, row - 0.5), 1, 1, fill=False, edgecolor="black", linewidth=2.5
                )
                axes.add_patch(box)


def node_bars_chart(
    title: str,
    hosts: Sequence[str],
    panels: Sequence[tuple[str, Mapping[str, float | None], float | None]],
    slow_hosts: Collection[str] = frozenset(),
) -> bytes | None:
    """One bar panel per (label, busbw per host, expected GB/s or None) that has a figure:
    a bar per host (flagged hosts red), the fleet median dashed, the expectation dotted.
    None when no panel has a figure."""
    drawn = [panel for panel in panels if any(v is not None for v in panel[1].values())]
    if not drawn:
        return None
    plt = charts.pyplot()
    height_in = 1.2 + 2.6 * len(drawn)
    figure, axes_list = plt.subplots(len(drawn), 1, figsize=(charts.FIGSIZE_IN[0], height_in))
    axes_list = np.atleast_1d(axes_list)
    positions = np.arange(len(hosts))
    for axes, (label, busbw, expected_gbps) in zip(axes_list, drawn, strict=True):
        heights = [busbw.get(host) or 0.0 for host in hosts]
        colors = [SLOW_COLOR if host in slow_hosts else charts.COLORS[0] for host in hosts]
        axes.bar(positions, heights, color=colors)
        measured = [value for value in busbw.values() if value is not None]
        handles, names = [], []
        handles.append(axes.axhline(median(measured), color=charts.MODEL_COLOR, linestyle="--"))
        names.append(f"fleet median {gbps(median(measured))} GB/s")
        if expected_gbps is not None:
            handles.append(axes.axhline(expected_gbps, color=SLOW_COLOR, linestyle=":"))
            names.append(f"expected {gbps(expected_gbps)} GB/s")
        names_shown = len(hosts) <= LABEL_MAX_HOSTS
        labels = [charts.short(host, 24) for host in hosts] if names_shown else []
        axes.set_xticks(positions if names_shown else [], labels, rotation=30)
        axes.set_ylabel("busbw (GB/s)")
        axes.set_title(label, fontsize=10)
        axes.legend(handles, names, fontsize=8, loc="lower right")
        axes.set_ylim(0, max([*heights, expected_gbps or 0.0, 1e-9]) * charts.HEADROOM)
    figure.suptitle(title)
    return charts.save_png(figure)


def doctor_section(
    run: Run, name: str, document: DoctorReport | None = None, named: bool = False
) -> Section:
    """Everything the report says about one doctor run (`document`: its doctor.json)."""
    rows = doctor_rows(run)
    hosts = doctor_hosts(run, rows)
    matrix = pair_matrix(rows, hosts)
    intra = stage_busbw_by_host(rows)
    pair_medians = pair_median_by_host(hosts, matrix)
    slow_hosts, slow_links = flagged(document)
    section = Section(f"Doctor: {name}" if named else "Doctor")
    section.lead += _lead(run, rows, hosts, document)
    section.warnings += _finding_lines(document)
    heatmap = heatmap_chart(f"{name}: pair busbw (GB/s)", hosts, matrix, slow_hosts, slow_links)
    if heatmap is not None:
        section.charts.append(Chart(f"doctor_{name}_pairs", f"{name}: pair matrix", heatmap))
    expectation = document.expectation if document is not None else None
    expected_gbps = expectation.busbw_gbps if expectation is not None else {}
    panels = [
        ("intra-node all-reduce busbw per node", intra, expected_gbps.get("intra")),
        ("median pair busbw per node", pair_medians, expected_gbps.get("pair")),
    ]
    bars = node_bars_chart(f"{name}: per node", hosts, panels, slow_hosts)
    if bars is not None:
        section.charts.append(Chart(f"doctor_{name}_nodes", f"{name}: per node", bars))
    if document is not None:
        section.tables.append(findings_table(document))
    section.tables += [node_table(run, hosts, intra, matrix, document), stage_table(rows)]
    section.tables.append(rows_table(rows))
    section.notes += _notes(run, document)
    return section


def _lead(
    run: Run, rows: Sequence[DoctorRow], hosts: Sequence[str], document: DoctorReport | None
) -> list[str]:
    stages = [stage for stage in dict.fromkeys(row.stage for row in rows) if stage]
    size = format_size(rows[0].size_bytes) if rows else "-"
    backend = run.meta.backend or (rows[0].backend if rows else None) or "?"
    lines = [
        f"{len(hosts)} node(s) ({', '.join(hosts) or '-'}), {size} per operation, backend "
        f"{backend}; stages measured: {', '.join(stages) or 'none'} ({len(rows)} rows)."
    ]
    if document is None:
        return lines
    source = document.expectation.source if document.expectation is not None else None
    if document.healthy is None:
        reason = document.reason or "nothing could be judged"
        lines.append(f"{UNJUDGED}: {reason}.")
    elif document.healthy:
        lines.append(HEALTHY + (f" (expectation source: {source})." if source else "."))
    else:
        count = len(_findings(document))
        lines.append(f"Flagged: {count} finding(s) (expectation source: {source or '-'}).")
    return lines


def _finding_lines(document: DoctorReport | None) -> list[str]:
    return [
        f"{item.kind} {_hosts_text(item)}: {item.evidence or '-'}; {item.action or '-'}"
        for item in _findings(document)
    ]


def _hosts_text(item: DoctorFinding) -> str:
    joiner = "<->" if item.kind == "link" else ","
    return joiner.join(item.hosts) or "-"


def findings_table(document: DoctorReport) -> Table:
    """doctor.json's findings, one line each (empty when healthy)."""
    rows = [
        (
            Flagged(item.kind),
            _hosts_text(item),
            format_ranks(item.ranks),
            ",".join(item.addresses) or "-",
            _figure(item.measured_gbps),
            _figure(item.expected_gbps),
            item.rounds,
            item.evidence or "-",
            item.action or "-",
        )
        for item in _findings(document)
    ]
    empty = (
        ": none, nothing could be judged"
        if document.healthy is None
        else (": none, the run was healthy")
    )
    caption = "findings (doctor.json)" + ("" if rows else empty)
    return Table(FINDINGS_HEADER, rows, caption=caption)


def _figure(value: Any) -> str:
    return gbps(float(value)) if isinstance(value, int | float) else "-"


def node_table(
    run: Run,
    hosts: Sequence[str],
    intra: Mapping[str, float],
    matrix: Sequence[Sequence[float | None]],
    document: DoctorReport | None,
) -> Table:
    """Per node: address, ranks, intra-node busbw, median and slowest pair, pass ratio."""
    nodes = doctor_nodes(run)
    addresses = nodes.get("addresses") if isinstance(nodes.get("addresses"), Mapping) else {}
    ranks = nodes.get("ranks_per_host") if isinstance(nodes.get("ranks_per_host"), Mapping) else {}
    ratios = document.pass_ratio if document is not None else {}
    slow_hosts, _ = flagged(document)
    rows = []
    for position, host in enumerate(hosts):
        pairs = [
            (value, hosts[other])
            for other, value in enumerate(matrix[position])
            if value is not None
        ]
        slowest = min(pairs) if pairs else None
        ratio = ratios.get(host) if isinstance(ratios, Mapping) else None
        rows.append(
            (
                Flagged(host) if host in slow_hosts else host,
                addresses.get(host) or "-",
                format_ranks(int(rank) for rank in ranks.get(host) or []),
                gbps(intra.get(host)),
                gbps(median([value for value, _ in pairs]) if pairs else None),
                f"{gbps(slowest[0])} with {slowest[1]}" if slowest else "-",
                f"{100 * float(ratio):.0f}%" if isinstance(ratio, int | float) else "-",
            )
        )
    header = (
        "node",
        "address",
        "ranks",
        "intra-node busbw (GB/s)",
        "median pair busbw (GB/s)",
        "slowest pair (GB/s)",
        "pass ratio (pair + shuffle rounds)",
    )
    return Table(header, rows, caption="per node")


def stage_table(rows: Sequence[DoctorRow]) -> Table:
    """Per stage: how many groups and rounds, the median busbw, the lowest and highest group."""
    lines = []
    for stage in dict.fromkeys(row.stage for row in rows):
        mine = [row for row in rows if row.stage == stage]
        low = min(mine, key=lambda row: row.busbw_gbps)
        high = max(mine, key=lambda row: row.busbw_gbps)
        lines.append(
            (
                stage or "-",
                len(mine),
                len({row.round_index for row in mine}),
                len({row.repeat_index for row in mine}),
                gbps(median([row.busbw_gbps for row in mine])),
                f"{gbps(low.busbw_gbps)} ({low.group or '-'})",
                f"{gbps(high.busbw_gbps)} ({high.group or '-'})",
            )
        )
    header = ("stage", "rows", "rounds", "repeats", "median busbw (GB/s)", "lowest", "highest")
    return Table(header, lines, caption="per stage")


def rows_table(rows: Sequence[DoctorRow]) -> Table:
    """Every doctor row, folded: stage, round, group, ranks, busbw, time and which rank came
    last most often."""
    lines = [
        (
            row.stage or "-",
            "-" if row.round_index is None else row.round_index,
            row.repeat_index,
            row.group or "-",
            format_ranks(row.group_ranks or []),
            gbps(row.busbw_gbps),
            gbps(row.time_us),
            _last_rank(row),
        )
        for row in rows
    ]
    header = (
        "stage",
        "round",
        "repeat",
        "group",
        "ranks",
        "busbw (GB/s)",
        "time (us)",
        "last most often",
    )
    return Table(header, lines, caption=f"every doctor row ({len(lines)})", folded=True)


def _last_rank(row: DoctorRow) -> str:
    counts = row.rank_last_count or []
    ranks = row.group_ranks or []
    if not counts or len(counts) != len(ranks) or max(counts) == 0:
        return "-"
    position = max(range(len(counts)), key=counts.__getitem__)
    return f"rank {ranks[position]} ({counts[position]} of {row.iters or '?'} iters)"


def _notes(run: Run, document: DoctorReport | None) -> list[str]:
    skipped = doctor_nodes(run).get("skipped") or {}
    notes = [f"{stage} stage skipped: {why}" for stage, why in dict(skipped).items()]
    notes.append(
        "pair busbw: one rank pair's send/recv, one direction, with both directions running; "
        "the matrix holds each node pair's median over its pair and shuffle rounds"
    )
    if document is None:
        notes.append(
            f"no {DOCTOR_JSON} beside the rows: the findings are not shown, only the measurements"
        )
    else:
        notes += list(document.notes)
    return list(dict.fromkeys(notes))  # doctor.json repeats the skipped stages


def with_doctor(
    report: Report,
    runs: Sequence[Run],
    names: Mapping[str, str],
    documents: Mapping[str, DoctorReport] | None = None,
) -> Report:
    """The report with a Doctor section per run that holds doctor rows, ahead of the others
    (`names`: run path -> label; `documents`: run path -> its doctor.json, where read)."""
    doctors = [run for run in runs if doctor_rows(run)]
    named = len(doctors) > 1
    sections = [
        doctor_section(
            run,
            names.get(run.path) or Path(run.path).name or run.run_id,
            (documents or {}).get(run.path),
            named,
        )
        for run in doctors
    ]
    return replace(report, sections=[*sections, *report.sections])
