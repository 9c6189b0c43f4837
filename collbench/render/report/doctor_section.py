"""The report's Doctor section: a `collbench doctor` run read back from its rows (kind
"doctor") and, where the run directory holds one, doctor.json's verdicts.

The method, in full: docs/report.md#collbench-render-report-doctor-section-py.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from collbench.core.stats import median
from collbench.core.units import format_size
from collbench.render.doctor_text import (
    HEALTHY,
    UNJUDGED,
    VERDICT_HEADER,
    doctor_nodes,
    finding_cells,
    format_ranks,
    gbps,
    hosts_text,
    pair_median_by_host,
)
from collbench.render.report.doctor_charts import LABEL_MAX_HOSTS, heatmap_chart, node_bars_chart
from collbench.render.report.document import Chart, Flagged, Report, Section, Table
from collbench.store.doctor_report import DOCTOR_JSON, DoctorReport
from collbench.store.load import Run
from collbench.store.rows import DOCTOR as DOCTOR_ROWS
from collbench.store.rows import DoctorRow

PAIR_STAGES = ("pair", "shuffle")  # stages whose rows are one node pair each
# More doctor rows than this: the rows table holds the slowest this many (rows.jsonl all).
ROWS_TABLE_MAX = 2000
# The CLI's verdict columns (finding_cells) with the figures after the addresses.
FINDINGS_HEADER = (
    *VERDICT_HEADER[:4],
    "measured (GB/s)",
    "expected (GB/s)",
    "rounds",
    *VERDICT_HEADER[4:],
)


def doctor_hosts(run: Run, rows: Sequence[DoctorRow]) -> list[str]:
    """The nodes in meta.json's order, then any other host the rows name, as first seen."""
    named = [str(host) for host in doctor_nodes(run.meta).get("hosts") or []]
    return list(dict.fromkeys([*named, *(host for row in rows for host in row.group_hosts or [])]))


def pair_array(rows: Sequence[DoctorRow], hosts: Sequence[str]) -> np.ndarray:
    """hosts x hosts: the median busbw of each node pair over its pair and shuffle rows
    (symmetric; NaN on the diagonal and for pairs never measured)."""
    index = {host: position for position, host in enumerate(hosts)}
    samples: dict[tuple[int, int], list[float]] = {}
    for row in rows:
        pair = row.group_hosts or []
        if row.stage not in PAIR_STAGES or len(pair) != 2 or pair[0] == pair[1]:
            continue
        first, second = index.get(pair[0]), index.get(pair[1])
        if first is not None and second is not None:
            key = (first, second) if first < second else (second, first)
            samples.setdefault(key, []).append(float(row.busbw_gbps))
    matrix = np.full((len(hosts), len(hosts)), np.nan)
    if samples:
        cells = np.array(list(samples), dtype=np.intp).reshape(-1, 2)
        medians = [median(values) for values in samples.values()]
        matrix[cells[:, 0], cells[:, 1]] = medians
        matrix[cells[:, 1], cells[:, 0]] = medians
    return matrix


def stage_busbw_by_host(rows: Sequence[DoctorRow]) -> dict[str, float]:
    """Per host the median busbw of its intra rows (the node's all-reduce)."""
    samples: dict[str, list[float]] = {}
    for row in rows:
        if row.stage == "intra" and len(row.group_hosts or []) == 1:
            samples.setdefault(row.group_hosts[0], []).append(float(row.busbw_gbps))
    return {host: median(values) for host, values in samples.items()}


def flagged(report: DoctorReport | None) -> tuple[set[str], set[frozenset[str]]]:
    """From doctor.json's findings: the hosts flagged as nodes, and the pairs flagged as links."""
    hosts: set[str] = set()
    links: set[frozenset[str]] = set()
    for item in report.findings if report is not None else ():
        if item.kind == "node":
            hosts.update(item.hosts)
        elif item.kind == "link" and len(item.hosts) == 2:
            links.add(frozenset(item.hosts))
    return hosts, links


def doctor_section(
    run: Run, name: str, document: DoctorReport | None = None, named: bool = False
) -> Section:
    """Everything the report says about one doctor run (`document`: its doctor.json)."""
    rows: list[DoctorRow] = run.rows_of(DOCTOR_ROWS)
    hosts = doctor_hosts(run, rows)
    matrix = pair_array(rows, hosts)
    intra = stage_busbw_by_host(rows)
    pair_median = pair_median_by_host(hosts, matrix)
    slow_hosts, slow_links = flagged(document)
    section = Section(f"Doctor: {name}" if named else "Doctor")
    section.lead += _lead(run, rows, hosts, document)
    section.warnings += [
        f"{item.kind} {hosts_text(item)}: {item.evidence or '-'}; {item.action or '-'}"
        for item in (document.findings if document is not None else ())
    ]
    heatmap = heatmap_chart(f"{name}: pair busbw (GB/s)", hosts, matrix, slow_hosts, slow_links)
    if heatmap is not None:
        section.charts.append(Chart(f"doctor_{name}_pairs", f"{name}: pair matrix", heatmap))
    expectation = document.expectation if document is not None else None
    expected_gbps = expectation.busbw_gbps if expectation is not None else {}
    panels = [
        ("intra-node all-reduce busbw per node", intra, expected_gbps.get("intra")),
        ("median pair busbw per node", pair_median, expected_gbps.get("pair")),
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
    shown = ", ".join(hosts) or "-"
    if len(hosts) > LABEL_MAX_HOSTS:  # a large fleet: its first and last few
        shown = f"{', '.join(hosts[:3])}, ..., {', '.join(hosts[-3:])}"
    lines = [
        f"{len(hosts)} node(s) ({shown}), {size} per operation, backend "
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
        count = len(document.findings)
        lines.append(f"Flagged: {count} finding(s) (expectation source: {source or '-'}).")
    return lines


def findings_table(document: DoctorReport) -> Table:
    """doctor.json's findings, one line each (empty when healthy)."""
    rows = []
    for item in document.findings:  # the CLI's verdict cells, with the figures
        kind, hosts, ranks, addresses, evidence, action = finding_cells(item)
        figures = (gbps(item.measured_gbps), gbps(item.expected_gbps), item.rounds)
        rows.append((Flagged(kind), hosts, ranks, addresses, *figures, evidence, action))
    empty = "nothing could be judged" if document.healthy is None else "the run was healthy"
    caption = "findings (doctor.json)" + ("" if rows else f": none, {empty}")
    return Table(FINDINGS_HEADER, rows, caption=caption)


def node_table(
    run: Run,
    hosts: Sequence[str],
    intra: Mapping[str, float],
    matrix: np.ndarray,
    document: DoctorReport | None,
) -> Table:
    """Per node: address, ranks, intra-node busbw, median and slowest pair, pass ratio."""
    medians = pair_median_by_host(hosts, matrix)
    nodes = doctor_nodes(run.meta)
    addresses = nodes.get("addresses") if isinstance(nodes.get("addresses"), Mapping) else {}
    ranks = nodes.get("ranks_per_host") if isinstance(nodes.get("ranks_per_host"), Mapping) else {}
    ratios = document.pass_ratio if document is not None else {}
    slow_hosts, _ = flagged(document)
    rows = []
    for position, host in enumerate(hosts):
        slowest = _slowest(hosts, matrix[position])
        rows.append(
            (
                Flagged(host) if host in slow_hosts else host,
                addresses.get(host) or "-",
                format_ranks(int(rank) for rank in ranks.get(host) or []),
                gbps(intra.get(host)),
                gbps(medians[host]),
                f"{gbps(slowest[0])} with {slowest[1]}" if slowest else "-",
                "-" if ratios.get(host) is None else f"{100 * ratios[host]:.0f}%",
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


def _slowest(hosts: Sequence[str], row: np.ndarray) -> tuple[float, str] | None:
    """A host's slowest pair in its matrix row: (GB/s, partner), the partner's name first
    in order on a tie; None without a measured pair."""
    measured = np.isfinite(row)
    if not measured.any():
        return None
    lowest = float(row[measured].min())
    return lowest, min(hosts[other] for other in np.flatnonzero(row == lowest))


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
    last most often; above ROWS_TABLE_MAX rows, the slowest ROWS_TABLE_MAX, slowest first."""
    caption = f"every doctor row ({len(rows)})"
    if len(rows) > ROWS_TABLE_MAX:
        caption = f"the {ROWS_TABLE_MAX} slowest of {len(rows)} doctor rows (rows.jsonl has all)"
        rows = heapq.nsmallest(ROWS_TABLE_MAX, rows, key=lambda row: row.busbw_gbps)
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
    return Table(header, lines, caption=caption, folded=True)


def _last_rank(row: DoctorRow) -> str:
    counts = row.rank_last_count or []
    ranks = row.group_ranks or []
    if not counts or len(counts) != len(ranks) or max(counts) == 0:
        return "-"
    position = max(range(len(counts)), key=counts.__getitem__)
    return f"rank {ranks[position]} ({counts[position]} of {row.iters or '?'} iters)"


def _notes(run: Run, document: DoctorReport | None) -> list[str]:
    skipped = doctor_nodes(run.meta).get("skipped") or {}
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
    doctors = [run for run in runs if run.rows_of(DOCTOR_ROWS)]
    named = len(doctors) > 1
    sections = [
        doctor_section(run, names[run.path], (documents or {}).get(run.path), named)
        for run in doctors
    ]
    return replace(report, sections=[*sections, *report.sections])
