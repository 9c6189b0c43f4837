"""Doctor verdicts (pure): which node, rail, link or rank is slow, from a doctor run's rows.

Takes rows and an expectation and returns data; reading runs and topologies lives in
collbench.run.doctor, rendering in collbench.render.doctor. How each stage is judged:
- pair (and shuffle) rows: per node pair the median busbw over its rounds, the node x node
  matrix. A node whose median over its partners is below the bar (needs two partners or
  more) is slow with everyone: a node finding. A pair below the bar between two nodes that
  are not slow is a link finding (the cable or switch port between them).
- intra rows: each node's all-reduce against the bar; merged into that node's finding.
- rail rows: each local-rank index across the nodes: a rail finding (a NIC or switch plane).
- stragglers: a rank last in >= 80% of its all-reduce iterations (groups of 3 ranks or
  more) whose own time is clearly shorter than its group's median: a rank finding.
- full: only against an explicit expectation. Below it with nothing above to explain it, the
  bisect rows name the slower half, deepest level first: a segment finding.
Bars come from collbench.analysis.doctor_expect (an expectation, or the fleet's median).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from collbench.analysis.doctor_expect import (
    ALL_REDUCE_STAGES,
    FLEET,
    MIN_FLEET,
    PAIR_STAGES,
    Bar,
    Expectation,
    bar_for,
    expectation_from,
    gbps,
    median_of,
)
from collbench.core.doctor import MIN_BANDWIDTH_BYTES, DoctorSpec
from collbench.core.units import format_size, size_arg
from collbench.store.rows import DoctorRow

__all__ = [
    "FINDING_KINDS",
    "FLEET",
    "Diagnosis",
    "Expectation",
    "Finding",
    "diagnose",
    "expectation_from",
]

FINDING_KINDS = ("node", "rail", "link", "rank", "segment")
# A straggler: last in at least this share of its timed all-reduce iterations ...
STRAGGLER_LAST_SHARE = 0.8
# ... over groups of at least this many ranks (with two, one of them is always last) ...
STRAGGLER_MIN_GROUP = 3
# ... and at least this many iterations in all (fewer: chance).
STRAGGLER_MIN_ITERS = 10
DRAIN = "drain the node"
CHECK_NETWORK = "check its NICs/links (ibstat, ethtool)"
CHECK_INSIDE = "check its GPUs and NVLink/PCIe (nvidia-smi topo -m, dcgmi diag) or CPU load"
LINK_ACTION = "reseat or replace the cable / check the switch port between them"
RAIL_ACTION = "check that rail's NIC on every node / its switch plane"
RANK_ACTION = "check the rank's host for CPU/GPU throttling or a noisy neighbour"
SEGMENT_ACTION = "check these nodes' leaf switch, uplinks and cables; rerun doctor on them"
SPINE_ACTION = "check the spine / uplinks between the halves (switch error counters)"
BISECT_ACTION = "rerun with --bisect to find the slow part of the fabric"
JUDGE_HINT = "give --expect-busbw, --topology or --baseline"


@dataclass(frozen=True)
class Finding:
    """One thing the doctor flags, with the evidence and what to do about it."""

    kind: str  # FINDING_KINDS
    hosts: tuple[str, ...]
    ranks: tuple[int, ...]
    addresses: tuple[str, ...]  # one per host, "" where meta.json has none
    measured_gbps: float | None
    expected_gbps: float | None
    expected_from: str  # Expectation.source, or FLEET
    rounds: int  # measurements behind it (e.g. 3 of 3 pairs slow)
    evidence: str  # one line a person reads
    action: str  # "drain the node", "reseat or replace the cable", ...


@dataclass(frozen=True)
class Diagnosis:
    """Everything the doctor concluded from one run."""

    healthy: bool
    findings: tuple[Finding, ...]
    hosts: tuple[str, ...]
    # hosts x hosts pair busbw (GB/s), None on the diagonal and where no pair was measured.
    matrix_gbps: tuple[tuple[float | None, ...], ...]
    node_busbw_gbps: dict[str, float]  # intra stage, per host
    rail_busbw_gbps: dict[int, float]  # rail stage, per local rank index
    pass_ratio: dict[str, float]  # per host, share of its pairings (circle + shuffle) passed
    full_busbw_gbps: float | None
    notes: tuple[str, ...]
    # Per host: the median of its pair busbw over its partners (what a node is judged by).
    pair_score_gbps: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class _Run:
    """The rows and the layout every stage's judgement reads."""

    rows: tuple[DoctorRow, ...]
    spec: DoctorSpec
    expectation: Expectation
    hosts: tuple[str, ...]
    addresses: Mapping[str, str]
    ranks_of: Mapping[str, tuple[int, ...]]

    def stage_rows(self, *stages: str) -> list[DoctorRow]:
        """The rows of `stages` that measured something (an all-reduce of one rank did not)."""
        return [
            row
            for row in self.rows
            if row.stage in stages
            and math.isfinite(row.busbw_gbps)
            and (row.stage not in ALL_REDUCE_STAGES or row.world_size >= 2)
        ]

    def bar(self, stage: str, values: Sequence[float]) -> Bar | None:
        return bar_for(stage, values, self.expectation, self.spec)

    def finding(
        self, kind: str, hosts: Sequence[str], bar: Bar | None, measured: float | None, **columns
    ) -> Finding:
        """A Finding on `hosts` measured against `bar`, with the hosts' ranks (unless given)
        and addresses; `columns`: rounds, evidence, action."""
        ranks = columns.pop("ranks", None)
        if ranks is None:
            ranks = sorted(rank for host in hosts for rank in self.ranks_of.get(host, ()))
        return Finding(
            kind=kind,
            hosts=tuple(hosts),
            ranks=tuple(ranks),
            addresses=tuple(self.addresses.get(host, "") for host in hosts),
            measured_gbps=measured,
            expected_gbps=None if bar is None else bar.reference_gbps,
            expected_from=FLEET if bar is None else bar.source,
            **columns,
        )


@dataclass(frozen=True)
class _NodeFlag:
    """One stage's reason to flag a node (pair-wise, intra-node), merged per host later."""

    host: str
    measured_gbps: float
    bar: Bar
    rounds: int
    evidence: str
    check: str


def diagnose(
    rows: Sequence[DoctorRow],
    spec: DoctorSpec,
    expectation: Expectation,
    nodes: Mapping[str, Any],
) -> Diagnosis:
    """The verdicts on a doctor run's rows. `nodes`: meta.json extra["doctor"] (hosts,
    addresses, ranks_per_host, skipped). Healthy when nothing is flagged (a straggling rank
    counts); notes say what could not be judged and why."""
    run = _context(rows, spec, expectation, nodes)
    pairs = _pair_values(run)
    medians = {pair: median_of(values) for pair, values in pairs.items()}
    scores, pair_flags = _pair_nodes(run, medians)
    flagged = {flag.host for flag in pair_flags}
    links, link_bar = _links(run, medians, pairs, flagged)
    node_busbw, intra_flags = _intra(run)
    rail_busbw, rails = _rails(run)
    findings = [*_merge_nodes(run, [*pair_flags, *intra_flags]), *links, *rails]
    findings += _stragglers(run)
    full_busbw, segments, full_notes = _full(run, findings)
    findings += segments
    notes = _notes(run, nodes, medians, node_busbw, rail_busbw) + full_notes
    return Diagnosis(
        healthy=not findings,
        findings=tuple(findings),
        hosts=run.hosts,
        matrix_gbps=_matrix(run.hosts, medians),
        node_busbw_gbps=node_busbw,
        rail_busbw_gbps=rail_busbw,
        pass_ratio=_pass_ratio(run, link_bar or run.bar("pair", list(medians.values()))),
        full_busbw_gbps=full_busbw,
        notes=tuple(notes),
        pair_score_gbps=scores,
    )


def _context(
    rows: Sequence[DoctorRow], spec: DoctorSpec, expectation: Expectation, nodes: Mapping
) -> _Run:
    doctor_rows = tuple(row for row in rows if getattr(row, "stage", None))
    hosts = list(nodes.get("hosts") or [])
    for row in doctor_rows:
        hosts += [host for host in _row_hosts(row) if host not in hosts]
    ranks_of = {host: tuple(ranks) for host, ranks in (nodes.get("ranks_per_host") or {}).items()}
    return _Run(
        doctor_rows, spec, expectation, tuple(hosts), nodes.get("addresses") or {}, ranks_of
    )


def _pair_values(run: _Run) -> dict[tuple[str, str], list[float]]:
    """Each node pair's busbw over its rounds (circle and shuffle), keyed in host order."""
    values: dict[tuple[str, str], list[float]] = {}
    for row in run.stage_rows(*PAIR_STAGES):
        hosts = _row_hosts(row)
        if len(hosts) != 2 or hosts[0] == hosts[1]:
            continue
        host_a, host_b = sorted(hosts, key=run.hosts.index)
        values.setdefault((host_a, host_b), []).append(float(row.busbw_gbps))
    return values


def _partners(host: str, medians: Mapping[tuple[str, str], float]) -> dict[str, float]:
    return {next(h for h in pair if h != host): v for pair, v in medians.items() if host in pair}


def _pair_nodes(
    run: _Run, medians: Mapping[tuple[str, str], float]
) -> tuple[dict[str, float], list[_NodeFlag]]:
    """Each host's score (median over its partners) and the hosts slow with every partner."""
    partners = {host: _partners(host, medians) for host in run.hosts}
    scores = {host: median_of(list(by.values())) for host, by in partners.items() if by}
    judged = {host: score for host, score in scores.items() if len(partners[host]) >= 2}
    bar = run.bar("pair", list(judged.values()))
    flags = []
    for host, score in judged.items():
        if bar is None or not bar.below(score):
            continue
        total = len(partners[host])
        slow = sum(bar.below(value) for value in partners[host].values())
        lead = "slow with every partner: " if slow == total else ""
        evidence = (
            f"{lead}pair busbw {gbps(score)} GB/s, {slow} of {total} partners below "
            f"{gbps(bar.threshold_gbps)} GB/s; {bar.versus(score, 'nodes')}"
        )
        rounds = sum(host in _row_hosts(row) for row in run.stage_rows(*PAIR_STAGES))
        flags.append(_NodeFlag(host, score, bar, rounds, evidence, CHECK_NETWORK))
    return scores, flags


def _row_hosts(row: DoctorRow) -> list[str]:
    """The hosts of a row's group: group_hosts, else read off the group's name."""
    if row.group_hosts:
        return list(row.group_hosts)
    group = row.group or ""
    if row.stage in PAIR_STAGES and "<->" in group:
        return group.split("<->")
    if row.stage == "intra" and group.startswith("node "):
        return [group.removeprefix("node ")]
    return []


def _links(
    run: _Run,
    medians: Mapping[tuple[str, str], float],
    pairs: Mapping[tuple[str, str], list[float]],
    flagged: set[str],
) -> tuple[list[Finding], Bar | None]:
    """Slow pairs between nodes that are not slow themselves: the link between them."""
    healthy = {pair: value for pair, value in medians.items() if not set(pair) & flagged}
    bar = run.bar("pair", list(healthy.values()))
    if bar is None:
        return [], None
    findings = []
    for (host_a, host_b), value in healthy.items():
        if not bar.below(value):
            continue
        rounds = len(pairs[(host_a, host_b)])
        findings.append(
            run.finding(
                "link",
                (host_a, host_b),
                bar,
                value,
                rounds=rounds,
                evidence=f"pair busbw {gbps(value)} GB/s over {rounds} round(s); "
                f"{_elsewhere(host_a, host_b, medians)}; {bar.versus(value, 'pairs')}",
                action=LINK_ACTION,
            )
        )
    return findings, bar


def _elsewhere(host_a: str, host_b: str, medians: Mapping[tuple[str, str], float]) -> str:
    """How the two nodes of a slow pair do with their other partners."""
    parts = []
    for host, other in ((host_a, host_b), (host_b, host_a)):
        rest = [value for peer, value in _partners(host, medians).items() if peer != other]
        if rest:
            parts.append(f"{host} {gbps(median_of(rest))} GB/s")
    if not parts:
        return "two nodes only: a slow node and a slow link look alike"
    return "with their other partners " + ", ".join(parts)


def _intra(run: _Run) -> tuple[dict[str, float], list[_NodeFlag]]:
    """Each node's own all-reduce (scale-up) and the nodes below the bar."""
    by_host: dict[str, list[DoctorRow]] = {}
    for row in run.stage_rows("intra"):
        hosts = _row_hosts(row)
        if len(hosts) == 1:
            by_host.setdefault(hosts[0], []).append(row)
    values = {host: median_of([r.busbw_gbps for r in rs]) for host, rs in by_host.items()}
    bar = run.bar("intra", list(values.values()))
    flags = []
    for host, value in values.items():
        if bar is not None and bar.below(value):
            ranks = by_host[host][0].world_size
            evidence = (
                f"intra-node all-reduce {gbps(value)} GB/s over {ranks} ranks; "
                f"{bar.versus(value, 'nodes')}"
            )
            flags.append(_NodeFlag(host, value, bar, len(by_host[host]), evidence, CHECK_INSIDE))
    return values, flags


def _merge_nodes(run: _Run, flags: Sequence[_NodeFlag]) -> list[Finding]:
    """One node finding per host, whatever stages flagged it (pair-wise first)."""
    findings = []
    for host in run.hosts:
        mine = [flag for flag in flags if flag.host == host]
        if not mine:
            continue
        first = mine[0]
        findings.append(
            run.finding(
                "node",
                (host,),
                first.bar,
                first.measured_gbps,
                rounds=sum(flag.rounds for flag in mine),
                evidence="; ".join(flag.evidence for flag in mine),
                action="; ".join([DRAIN, *(flag.check for flag in mine)]),
            )
        )
    return findings


def _rails(run: _Run) -> tuple[dict[int, float], list[Finding]]:
    """Each local-rank index's all-reduce across the nodes, and the rails below the bar."""
    by_rail: dict[int, list[DoctorRow]] = {}
    for row in run.stage_rows("rail"):
        index = (row.group or "").removeprefix("rail ")
        if index.isdigit():
            by_rail.setdefault(int(index), []).append(row)
    values = {rail: median_of([r.busbw_gbps for r in rs]) for rail, rs in sorted(by_rail.items())}
    bar = run.bar("rail", list(values.values()))
    findings = []
    for rail, value in values.items():
        if bar is None or not bar.below(value):
            continue
        rows = by_rail[rail]
        hosts = [host for host in run.hosts if any(host in _row_hosts(r) for r in rows)]
        ranks = sorted({rank for row in rows for rank in row.group_ranks or ()})
        findings.append(
            run.finding(
                "rail",
                hosts,
                bar,
                value,
                ranks=ranks,
                rounds=len(rows),
                evidence=f"rail {rail} all-reduce {gbps(value)} GB/s across {len(hosts)} "
                f"nodes; {bar.versus(value, 'rails')}",
                action=RAIL_ACTION,
            )
        )
    return values, findings


def _stragglers(run: _Run) -> list[Finding]:
    """Ranks clearly and consistently last in their all-reduces (the others wait for them)."""
    short = 1 - run.spec.fleet_tolerance_pct / 100
    tally: dict[int, list[int]] = {}  # rank -> [last, iterations, rows, rows clearly short]
    for row in run.stage_rows(*ALL_REDUCE_STAGES):
        ranks, times, lasts = row.group_ranks or [], row.rank_time_us, row.rank_last_count
        if len(ranks) < STRAGGLER_MIN_GROUP or not row.iters or not times or not lasts:
            continue
        if not len(ranks) == len(times) == len(lasts):
            continue
        middle = median_of(times)
        for rank, time_us, last in zip(ranks, times, lasts, strict=True):
            this_row = (last, row.iters, 1, int(time_us < middle * short))
            tally[rank] = [a + b for a, b in zip(tally.get(rank, [0] * 4), this_row, strict=True)]
    host_of = {rank: host for host, ranks in run.ranks_of.items() for rank in ranks}
    findings = []
    for rank, (last, iters, rows, short_rows) in sorted(tally.items()):
        clearly_last = iters >= STRAGGLER_MIN_ITERS and last >= STRAGGLER_LAST_SHARE * iters
        if not clearly_last or 2 * short_rows <= rows:
            continue
        hosts = (host_of[rank],) if rank in host_of else ()
        findings.append(
            run.finding(
                "rank",
                hosts,
                None,
                None,
                ranks=(rank,),
                rounds=rows,
                evidence=f"rank {rank} came last in {last} of {iters} timed iterations over "
                f"{rows} all-reduce rows (the others waited for it); its own time was more "
                f"than {run.spec.fleet_tolerance_pct:g}% below its group's median in "
                f"{short_rows} of {rows}",
                action=RANK_ACTION,
            )
        )
    return findings


def _full(run: _Run, findings: Sequence[Finding]) -> tuple[float | None, list[Finding], list[str]]:
    """The full all-reduce, judged only against an explicit expectation: below it and with
    no node, link or rail finding to explain it, a segment finding (the bisect rows name the
    slower half; without them, the whole fleet, to rerun with --bisect)."""
    values = [row.busbw_gbps for row in run.stage_rows("full")]
    full = median_of(values) if values else None
    if full is None or "full" not in run.expectation.busbw_gbps:
        return full, [], []
    bar = run.bar("full", [])
    assert bar is not None
    if not bar.below(full):
        return full, [], []
    text = f"full all-reduce {gbps(full)} GB/s; {bar.versus(full)}"
    if any(finding.kind in ("node", "link", "rail") for finding in findings):
        return full, [], [f"{text}: the findings explain it"]
    return full, [_segment(run, bar, full, text)], []


def _segment(run: _Run, bar: Bar, full: float, text: str) -> Finding:
    """The slower half at the deepest bisect level where the halves differ; without one,
    the whole fleet (the links between the halves, or no bisect rows to tell)."""
    by_level: dict[int, dict[str, list[DoctorRow]]] = {}
    for row in run.stage_rows("bisect"):
        by_level.setdefault(row.round_index or 0, {}).setdefault(row.group or "", []).append(row)
    rounds = sum(len(rows) for groups in by_level.values() for rows in groups.values())
    tolerance = 1 - run.expectation.tolerance_pct / 100
    for level in sorted(by_level, reverse=True):
        halves = sorted(
            (
                (median_of([r.busbw_gbps for r in rows]), rows[0])
                for rows in by_level[level].values()
            ),
            key=lambda half: half[0],
        )
        (slow, slow_row), (fast, _) = halves[0], halves[-1]
        if slow < fast * tolerance:
            hosts = [host for host in run.hosts if host in _row_hosts(slow_row)]
            evidence = (
                f"{text}; bisect level {level}: the half {', '.join(hosts)} reaches "
                f"{gbps(slow)} GB/s, the other half {gbps(fast)} GB/s"
            )
            return run.finding(
                "segment", hosts, bar, slow, rounds=rounds, evidence=evidence, action=SEGMENT_ACTION
            )
    if by_level:
        why, action = "no bisected half is slower than the other", SPINE_ACTION
    else:
        why, action = "no single node, pair or rail explains it", BISECT_ACTION
    return run.finding(
        "segment",
        run.hosts,
        bar,
        full,
        rounds=max(rounds, 1),
        evidence=f"{text}; {why}",
        action=action,
    )


def _pass_ratio(run: _Run, bar: Bar | None) -> dict[str, float]:
    """Per host, the share of its pairings (every circle and shuffle round) at or above the
    pair bar (Imbue's pass ratio); {} when there is no bar."""
    if bar is None:
        return {}
    passed: dict[str, list[bool]] = {}
    for row in run.stage_rows(*PAIR_STAGES):
        for host in _row_hosts(row):
            passed.setdefault(host, []).append(not bar.below(row.busbw_gbps))
    return {host: sum(passed[host]) / len(passed[host]) for host in run.hosts if host in passed}


def _matrix(
    hosts: Sequence[str], medians: Mapping[tuple[str, str], float]
) -> tuple[tuple[float | None, ...], ...]:
    def cell(a: str, b: str) -> float | None:
        return medians.get((a, b), medians.get((b, a)))

    return tuple(tuple(None if a == b else cell(a, b) for b in hosts) for a in hosts)


def _notes(
    run: _Run,
    nodes: Mapping[str, Any],
    medians: Mapping[tuple[str, str], float],
    node_busbw: Mapping[str, float],
    rail_busbw: Mapping[int, float],
) -> list[str]:
    """What could not be judged and why, and warnings about the measurement itself."""
    skipped = nodes.get("skipped") or {}
    notes = [f"{stage} stage skipped: {why}" for stage, why in skipped.items()]
    if len(run.hosts) == 1 and "pair" not in skipped:
        notes.append("one node: pair-wise and rail stages need two or more")
    sizes = sorted({row.size_bytes for row in run.rows}) or [run.spec.size_bytes or 0]
    if 0 < sizes[0] < MIN_BANDWIDTH_BYTES:
        notes.append(
            f"size {format_size(sizes[0])} measures latency more than bandwidth: use "
            f"--size {size_arg(MIN_BANDWIDTH_BYTES)} or more"
        )
    for stage, what, count in (
        ("pair", "node pairs", len(medians)),
        ("intra", "nodes", len(node_busbw)),
        ("rail", "rails", len(rail_busbw)),
    ):
        if 0 < count < MIN_FLEET and stage not in run.expectation.busbw_gbps:
            notes.append(
                f"{stage} stage not judged: a fleet median needs {MIN_FLEET} {what}, this "
                f"run has {count}; {JUDGE_HINT}"
            )
    wrong = [row.group or row.stage for row in run.rows if row.n_wrong]
    if wrong:
        notes.append(f"data check failed in {len(wrong)} row(s) ({', '.join(wrong)})")
    if run.stage_rows("bisect") and "full" not in run.expectation.busbw_gbps:
        notes.append(
            f"bisect rows not judged: the full all-reduce has no expectation; {JUDGE_HINT}"
        )
    return notes
