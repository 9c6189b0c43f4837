"""`collbench doctor` as text and JSON: the verdict table, the pair matrix, the per-node and
per-rail figures, the notes, doctor.json's content and the progress lines (DoctorConsole).

The method, in full: docs/architecture.md#collbench-render-doctor-text-py.
"""

from __future__ import annotations

import heapq
import json
import math
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from collbench.analysis.doctor.expect import Expectation
from collbench.analysis.doctor.findings import Diagnosis
from collbench.bench.provenance import cpu_ranges
from collbench.core.doctor_plan import CircleRounds, pair_mode, sampled_rounds
from collbench.core.doctor_spec import DOCTOR, GPU_PAIR
from collbench.core.stats import median
from collbench.core.units import counted, format_number
from collbench.render.table import text_columns
from collbench.render.tune import aligned_table
from collbench.store.doctor_report import DOCTOR_JSON, MATRIX_DENSE_MAX_HOSTS, DoctorFinding
from collbench.store.meta import RunMeta
from collbench.store.rows import DoctorRow, ResultRow

VERDICT_HEADER = ("kind", "hosts", "ranks", "addresses", "evidence", "action")
HEALTHY = "healthy: no node, rail, link or rank below expectation"
UNJUDGED = "unjudged (no health check)"
NONE = "-"  # a figure not measured (the matrix's diagonal, a pair never paired)
MATRIX_DIGITS = 3  # significant digits of the GB/s figures in the text tables
PREFIX = "doctor: "  # every progress line starts with it
SUMMARY_COUNT = 10  # above MATRIX_DENSE_MAX_HOSTS hosts: the slowest pairs and nodes shown


def verdict_table(diagnosis: Diagnosis, expectation: Expectation | None = None) -> str:
    """One aligned line per finding (kind, hosts, ranks, addresses, evidence, action) under
    a `# ` header; a healthy run's one line says so and where the expectation came from."""
    lines = []
    if diagnosis.healthy is None:
        lines.append(f"{UNJUDGED}: {diagnosis.reason}")
    elif diagnosis.healthy:
        source = expectation.source if expectation is not None else ""  # healthy: no findings
        judged = ", ".join(diagnosis.judged)
        repeats = f"{diagnosis.repeats} repeats" if diagnosis.repeats else ""
        detail = "; ".join(
            part
            for part in (
                f"expectation source: {source}" if source else "",
                f"judged: {judged}" if judged else "",
                repeats,
            )
            if part
        )
        lines.append(HEALTHY + (f" ({detail})" if detail else ""))
    elif not diagnosis.findings:
        lines.append("not healthy: no single node, rail, link or rank to blame (see the notes)")
    if diagnosis.findings:
        lines += aligned_table(VERDICT_HEADER, [finding_cells(item) for item in diagnosis.findings])
    return "\n".join(lines)


def finding_cells(finding: DoctorFinding) -> tuple[str, ...]:
    """A finding's cells in VERDICT_HEADER's order (a link's hosts as A<->B)."""
    return (
        finding.kind,
        hosts_text(finding),
        format_ranks(finding.ranks),
        ",".join(finding.addresses) or NONE,
        finding.evidence or NONE,
        finding.action or NONE,
    )


def hosts_text(finding: DoctorFinding) -> str:
    """A finding's hosts: a link's as A<->B, the others comma-separated; none: "-"."""
    return ("<->" if finding.kind == "link" else ",").join(finding.hosts) or NONE


def format_ranks(ranks: Iterable[int]) -> str:
    """Global ranks as runs of consecutive numbers: [0, 1, 2, 3, 8] -> "0-3,8"; none: "-"."""
    return cpu_ranges(ranks) or NONE


def gbps(value: float | None) -> str:
    """A GB/s figure at MATRIX_DIGITS significant digits; "-" for none."""
    if value is None or not math.isfinite(value):
        return NONE
    return format_number(value, MATRIX_DIGITS)


def matrix_table(diagnosis: Diagnosis) -> str:
    """The pair matrix: hosts x hosts pair busbw (GB/s), "-" on the diagonal and for pairs
    not measured; empty with fewer than two hosts. Above MATRIX_DENSE_MAX_HOSTS hosts, a
    summary instead (matrix_summary)."""
    hosts = list(diagnosis.hosts)
    if len(hosts) > MATRIX_DENSE_MAX_HOSTS:
        return "\n".join(matrix_summary(diagnosis))
    if len(hosts) < 2 or not diagnosis.matrix_gbps:
        return ""
    return _grid("pair busbw (GB/s)", hosts, diagnosis.matrix_gbps)


def _grid(title: str, names: Sequence[str], grid: Sequence[Sequence[float | None]]) -> str:
    """A square table of GB/s figures, `names` along both sides."""
    rows = [(name, *(gbps(v) for v in values)) for name, values in zip(names, grid, strict=False)]
    return "\n".join(aligned_table((title, *names), rows))


def matrix_summary(diagnosis: Diagnosis) -> list[str]:
    """A large fleet's pair matrix in a few lines: how many pairs were measured, their
    median, and the SUMMARY_COUNT slowest (doctor.json holds every one)."""
    hosts, pairs = diagnosis.hosts, diagnosis.pair_gbps
    possible = len(hosts) * (len(hosts) - 1) // 2
    if not pairs:
        return [f"# pair matrix: {counted(len(hosts), 'node')}, no pair measured"]
    share = 100 * len(pairs) / possible
    middle = median(value for _, _, value in pairs)
    lines = [
        f"# pair matrix: {counted(len(hosts), 'node')}, {len(pairs)} of {possible} pairs measured "
        f"({share:.3g}%), median {gbps(middle)} GB/s; every pair is in {DOCTOR_JSON} "
        '("matrix": "pairs")'
    ]
    slowest = heapq.nsmallest(SUMMARY_COUNT, pairs, key=lambda cell: cell[2])
    cells = [f"{hosts[first]}<->{hosts[second]} {gbps(value)}" for first, second, value in slowest]
    lines.append(f"# slowest {len(cells)} pairs (GB/s): " + ", ".join(cells))
    return lines


def gpu_pair_tables(diagnosis: Diagnosis) -> list[str]:
    """Per node its gpu-pair matrix, local ranks x local ranks send/recv busbw (GB/s, both
    ways at once): every node's up to SUMMARY_COUNT nodes, above only the flagged nodes'."""
    flagged = {item.hosts[0] for item in diagnosis.findings if item.kind == GPU_PAIR}
    return [
        _grid(f"gpu-pair busbw (GB/s) {host}", [f"rank {r}" for r in grid["ranks"]], grid["gbps"])
        for host, grid in diagnosis.gpu_pairs.items()
        if len(diagnosis.gpu_pairs) <= SUMMARY_COUNT or host in flagged
    ]


def node_lines(diagnosis: Diagnosis) -> list[str]:
    """Per node its intra-node busbw, its median pair busbw and pass ratio (pair and shuffle
    rounds); per rail its busbw; the full all-reduce's busbw (each only where measured).
    Above MATRIX_DENSE_MAX_HOSTS hosts, only the flagged nodes and the SUMMARY_COUNT lowest by
    pair and by intra-node busbw, and a line saying so."""
    hosts = list(diagnosis.hosts) or sorted(diagnosis.node_busbw_gbps)
    lines = []
    if len(hosts) > MATRIX_DENSE_MAX_HOSTS:
        pair_medians: Mapping[str, float | None] = diagnosis.pair_score_gbps
        shown = {host for finding in diagnosis.findings for host in finding.hosts}
        for figures in (diagnosis.pair_score_gbps, diagnosis.node_busbw_gbps):
            shown.update(heapq.nsmallest(SUMMARY_COUNT, figures, key=figures.__getitem__))
        lines.append(
            f"# nodes: {len(hosts)}; shown: the {len(shown)} flagged or among the "
            f"{SUMMARY_COUNT} lowest by median pair or intra-node busbw (every node is in "
            f"{DOCTOR_JSON})"
        )
        hosts = [host for host in hosts if host in shown]
    else:
        pair_medians = pair_median_by_host(hosts, diagnosis.matrix_gbps)
    for host in hosts:
        parts = []
        if host in diagnosis.node_busbw_gbps:
            parts.append(f"intra-node busbw {gbps(diagnosis.node_busbw_gbps[host])} GB/s")
        if pair_medians.get(host) is not None:
            parts.append(f"median pair busbw {gbps(pair_medians[host])} GB/s")
        if host in diagnosis.pass_ratio:
            parts.append(f"pass ratio {100 * diagnosis.pass_ratio[host]:.0f}%")
        if parts:
            lines.append(f"# node {host}: " + ", ".join(parts))
    for rail, value in sorted(diagnosis.rail_busbw_gbps.items()):
        lines.append(f"# rail {rail}: busbw {gbps(value)} GB/s")
    if diagnosis.full_busbw_gbps is not None:
        lines.append(f"# full all-reduce: busbw {gbps(diagnosis.full_busbw_gbps)} GB/s")
    return lines


def pair_median_by_host(
    hosts: Sequence[str], matrix_gbps: Sequence[Sequence[float | None]]
) -> dict[str, float | None]:
    """Per host the median of its measured pairs' busbw (its row of the matrix; None or NaN:
    not measured), None without."""
    return {
        host: median(value for value in values if value is None or math.isfinite(value))
        for host, values in zip(hosts, matrix_gbps, strict=False)
    }


def doctor_nodes(meta: RunMeta) -> Mapping[str, Any]:
    """meta.json's "doctor" entry (hosts, addresses, ranks_per_host, skipped); {} if none."""
    nodes = meta.extra.get(DOCTOR) if isinstance(meta.extra, dict) else None
    return nodes if isinstance(nodes, Mapping) else {}


def render_doctor(diagnosis: Diagnosis, expectation: Expectation | None = None) -> str:
    """What `collbench doctor` prints: the verdict table, the pair matrix, the per-node,
    per-rail and full figures, then the notes."""
    parts = [verdict_table(diagnosis, expectation), matrix_table(diagnosis)]
    parts += gpu_pair_tables(diagnosis)
    parts.append("\n".join(node_lines(diagnosis)))
    parts.append("\n".join(f"# note: {note}" for note in diagnosis.notes))
    return "\n".join(part for part in parts if part)


class DoctorConsole:
    """A RowSink for `collbench doctor`: one progress line per row as it arrives, on stderr
    ("table"), or each row as a JSON line on stdout ("json", progress still on stderr), or
    nothing ("quiet")."""

    def __init__(self, mode: str = "table", clock: Callable[[], float] = time.monotonic) -> None:
        self.mode = mode
        self._clock = clock
        self._started_s = clock()
        self._hosts: list[str] = []
        self._shuffle_rounds: int | None = None
        self._repeats: int | None = None

    def start(self, meta: RunMeta) -> None:
        """Learn the node count (pair rounds: nodes - 1) and say which stages are skipped."""
        doctor = doctor_nodes(meta)
        self._hosts = [str(host) for host in doctor.get("hosts") or []]
        spec = meta.spec if isinstance(meta.spec, Mapping) else {}
        rounds = spec.get("shuffle_rounds", doctor.get("shuffle_rounds"))
        rounds = rounds if isinstance(rounds, int) and rounds > 0 else 0
        asked = spec.get("doctor") if isinstance(spec.get("doctor"), Mapping) else {}
        if pair_mode(len(self._hosts), str(asked.get("pairs") or "all")) == "sampled":
            rounds = sampled_rounds(rounds)  # they replace the circle's rounds
        self._shuffle_rounds = rounds or None
        repeats = doctor.get("repeats")
        self._repeats = repeats if isinstance(repeats, int) and repeats > 1 else None
        if self._hosts:
            self._progress(f"{len(self._hosts)} node(s): {', '.join(self._hosts)}")
        for stage, why in (doctor.get("skipped") or {}).items():
            self._progress(f"{stage} stage skipped ({why})")

    def row(self, row: ResultRow) -> None:
        if self.mode == "json":
            line = json.dumps(row.to_dict(), separators=(",", ":"))
            print(line, flush=True)
        if isinstance(row, DoctorRow):
            self._progress(self.progress_line(row))

    def finish(self, unfinished: str | None = None) -> None:
        if unfinished is not None:
            self._progress(f"stopped ({unfinished})")

    def progress_line(self, row: DoctorRow) -> str:
        """`doctor: pair round 2/3  cbnode0<->cbnode1  0.412 GB/s  (1.2 s)`: stage, round
        (of how many, where known), group, busbw and the time since the doctor started."""
        stage = row.stage or "?"
        if stage in ("pair", "shuffle"):
            circle = len(CircleRounds(len(self._hosts)))  # N-1 rounds, N for an odd N
            total = circle if stage == "pair" else self._shuffle_rounds
            index = (row.round_index or 0) + 1
            stage += f" round {index}/{total}" if total and total > 0 else f" round {index}"
        elif stage == "bisect":
            stage += f" level {row.round_index or 0}"
        if self._repeats:
            stage += f" repeat {row.repeat_index + 1}/{self._repeats}"
        elapsed_s = self._clock() - self._started_s
        # One rank's all-reduce is a local copy: busbw is 0 by definition, algbw says more.
        figure = (
            f"algbw {gbps(row.algbw_gbps)} GB/s (one rank)"
            if row.world_size == 1
            else f"{gbps(row.busbw_gbps)} GB/s"
        )
        return f"{PREFIX}{stage}  {row.group or '?'}  {figure}  ({elapsed_s:.1f} s)"

    def _progress(self, text: str) -> None:
        if self.mode == "quiet":
            return
        line = text if text.startswith(PREFIX) else PREFIX + text
        print(line, file=sys.stderr, flush=True)


def node_checks_table(checks: Sequence[Any]) -> str:
    """`doctor --per-node`'s table: each node check (run.doctor_nodes.NodeCheck) on a line."""
    rows = [["node", "element", "state", "verdict", "why"]]
    rows += [[one.host, str(one.index), one.state, one.verdict, one.reason] for one in checks]
    passed = sum(one.passed for one in checks)
    title = f"# Per-node checks: {passed} of {counted(len(checks), 'node')} passed"
    return "\n".join([title, *text_columns(rows, left={0, 2, 3, 4})])
