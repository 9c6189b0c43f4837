"""Doctor verdicts (pure): which node, rail, link or rank is slow, from a doctor run's rows.

The method, in full: docs/doctor.md#analysis-doctor-verdicts-py.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from collbench.analysis.doctor.expect import (
    PAIR_STAGES,
    Bar,
    Expectation,
    gbps,
    median_of,
    repeat_medians,
)
from collbench.analysis.doctor.findings import (
    CPU_CHECKS,
    DRAIN,
    GPU_CHECKS,
    JUDGE_HINT,
    LINK_ACTION,
    ONE_RANK,
    PAIR_NODES,
    RAIL_ACTION,
    Diagnosis,
    DoctorRun,
    Finding,
    row_hosts,
)
from collbench.analysis.doctor.fleet import full_all_reduce, stragglers
from collbench.analysis.doctor.judge import NOT_MEASURED, Judged, StageJudgement
from collbench.core.doctor_spec import GPU_PAIR, MIN_BANDWIDTH_BYTES, DoctorSpec
from collbench.core.units import format_size, size_arg
from collbench.store.doctor_report import MATRIX_DENSE_MAX_HOSTS
from collbench.store.rows import DoctorRow


def diagnose(
    rows: Sequence[DoctorRow], spec: DoctorSpec, expectation: Expectation, nodes: Mapping[str, Any]
) -> Diagnosis:
    """The verdicts on a doctor run's rows. `nodes`: meta.json extra["doctor"] (hosts,
    addresses, ranks_per_host, skipped). Flagged when anything is (a straggling rank
    counts); healthy when not and at least one stage was judged; otherwise unjudged (healthy
    None, with the reason). Notes say what could not be judged and why."""
    run = _context(rows, spec, expectation, nodes)
    stages: dict[str, StageJudgement] = {}
    pairs = fold_pairs(run.stage_rows(*PAIR_STAGES), run.hosts)
    scores, pair_flags, stages[PAIR_NODES] = _pair_nodes(run, pairs)
    flagged = {flag.hosts[0] for flag in pair_flags}
    links, stages["pair"] = _links(run, pairs, flagged)
    node_busbw, intra_flags, stages["intra"] = _intra(run)
    gpu_pairs, gpu_findings, stages[GPU_PAIR] = _gpu_pairs(run)
    rail_busbw, rails, stages["rail"] = _rails(run)
    findings = [*_merge_nodes(run, [*pair_flags, *intra_flags]), *gpu_findings, *links, *rails]
    findings += stragglers(run)
    full_busbw, segments, full_notes, stages["full"] = full_all_reduce(run, findings)
    findings += segments
    if stages["intra"].reason == NOT_MEASURED and any(r.stage == "intra" for r in run.rows):
        stages["intra"] = StageJudgement(reason=ONE_RANK)
    judged = tuple(dict.fromkeys(_name(name) for name, stage in stages.items() if stage.judged))
    unjudged: dict[str, str] = {}
    for name, stage in stages.items():
        if not stage.judged and stage.reason != NOT_MEASURED and _name(name) not in judged:
            unjudged.setdefault(_name(name), stage.reason)
    unjudged.update((nodes.get("skipped") or {}).items())
    notes = _notes(run, nodes, unjudged) + full_notes
    healthy = False if findings else (True if judged else None)
    dense = len(run.hosts) <= MATRIX_DENSE_MAX_HOSTS
    return Diagnosis(
        healthy=healthy,
        findings=tuple(findings),
        hosts=run.hosts,
        matrix_gbps=_matrix(run.hosts, pairs.medians) if dense else (),
        pair_gbps=pairs.sparse(),
        node_busbw_gbps=node_busbw,
        gpu_pairs=gpu_pairs,
        rail_busbw_gbps=rail_busbw,
        pass_ratio=_pass_ratio(run, stages["pair"].bars),
        full_busbw_gbps=full_busbw,
        notes=tuple(notes),
        pair_score_gbps=scores,
        judged=judged,
        unjudged=unjudged,
        reason="" if healthy is not None else _nothing_judged(unjudged, nodes.get("skipped") or {}),
        repeats=len({row.repeat_index for row in run.rows}),
    )


def _name(stage: str) -> str:
    """The stage a judgement belongs to (the nodes' pair scores are the pair stage's)."""
    return "pair" if stage == PAIR_NODES else stage


def _nothing_judged(unjudged: Mapping[str, str], skipped: Mapping[str, str]) -> str:
    """Why no stage was judged: each measured stage's reason, then the skipped ones."""
    parts = [f"{stage}: {why}" for stage, why in unjudged.items() if stage not in skipped]
    if skipped:
        parts.append(f"skipped: {', '.join(skipped)}")
    return "no stage could be judged (" + ("; ".join(parts) or "no rows measured anything") + ")"


def _context(
    rows: Sequence[DoctorRow], spec: DoctorSpec, expectation: Expectation, nodes: Mapping
) -> DoctorRun:
    doctor_rows = tuple(row for row in rows if getattr(row, "stage", None))
    hosts = dict.fromkeys(nodes.get("hosts") or [])  # in order, each once
    for row in doctor_rows:
        hosts.update(dict.fromkeys(row_hosts(row)))
    ranks_of = {host: tuple(ranks) for host, ranks in (nodes.get("ranks_per_host") or {}).items()}
    backend = doctor_rows[0].backend if doctor_rows else None
    return DoctorRun(
        doctor_rows,
        spec,
        expectation,
        tuple(hosts),
        nodes.get("addresses") or {},
        ranks_of,
        CPU_CHECKS if backend == "gloo" else GPU_CHECKS,  # gloo: CPUs; nccl, rccl, unknown: GPUs
    )


def _pair_nodes(
    run: DoctorRun, pairs: PairFold
) -> tuple[dict[str, float], list[Finding], StageJudgement]:
    """Each host's score (median over its partners, per repeat) and the hosts slow with
    every partner in a majority of repeats."""
    table, scores = pairs.node_scores()  # table: hosts with two partners or more
    judgement = run.judge("pair", table, "nodes with two partners")
    flagged = judgement.flagged()
    partners_of = pairs.partners(flagged)
    flags = []
    for host, judged in flagged.items():
        partners = partners_of[host]
        slow = sum(value < judged.bar.threshold_gbps for value in partners.values())
        lead = "slow with every partner: " if slow == len(partners) else ""
        evidence = (
            f"{lead}pair busbw {gbps(judged.value)} GB/s, {slow} of {len(partners)} partners "
            f"below {gbps(judged.bar.threshold_gbps)} GB/s; {judged.evidence('nodes')}"
        )
        rounds = pairs.host_rounds[host]
        flags.append(_node(run, host, judged, rounds, evidence, run.checks.network))
    return scores, flags, judgement


def _links(
    run: DoctorRun, pairs: PairFold, flagged: set[str]
) -> tuple[list[Finding], StageJudgement]:
    """Slow pairs between nodes that are not slow themselves: the link between them."""
    healthy = {
        pair: by
        for pair, by in pairs.values.items()
        if pair[0] not in flagged and pair[1] not in flagged
    }
    judgement = run.judge("pair", healthy, "node pairs")
    findings = _slow_pairs(
        run, pairs, judgement, "link", LINK_ACTION, lambda a, b: ((a, b), None, "pair busbw")
    )
    return findings, judgement


def _slow_pairs(
    run: DoctorRun, pairs: PairFold, judgement: StageJudgement, kind: str, action: str, named
) -> list[Finding]:
    """A finding for each pair `judgement` flags, beside how its two ends do with their other
    partners; named(a, b): the finding's (hosts, ranks or None for the hosts', what its
    figure is)."""
    slow = judgement.flagged()
    partners_of = pairs.partners({end for pair in slow for end in pair})
    findings = []
    for (a, b), judged in slow.items():
        hosts, ranks, lead = named(a, b)
        findings.append(
            run.finding(
                kind,
                hosts,
                judged.bar,
                judged.value,
                ranks=ranks,
                rounds=pairs.rounds[(a, b)],
                evidence=f"{lead} {gbps(judged.value)} GB/s over {pairs.rounds[(a, b)]} "
                f"round(s); {_elsewhere(a, b, partners_of)}; {judged.evidence('pairs')}",
                action=action,
            )
        )
    return findings


def _elsewhere(host_a: str, host_b: str, partners_of: Mapping[str, Mapping[str, float]]) -> str:
    """How the two nodes of a slow pair do with their other partners."""
    parts = []
    for host, other in ((host_a, host_b), (host_b, host_a)):
        rest = [value for peer, value in partners_of[host].items() if peer != other]
        if rest:
            parts.append(f"{host} {gbps(median_of(rest))} GB/s")
    if not parts:
        return "no other partner: a slow end and a slow link look alike"
    return "with their other partners " + ", ".join(parts)


def _intra(run: DoctorRun) -> tuple[dict[str, float], list[Finding], StageJudgement]:
    """Each node's own all-reduce (scale-up) and the nodes below the bar."""
    by_host: dict[str, list[DoctorRow]] = {}
    for row in run.stage_rows("intra"):
        hosts = row_hosts(row)
        if len(hosts) == 1:
            by_host.setdefault(hosts[0], []).append(row)
    table = {host: repeat_medians(rows) for host, rows in by_host.items()}
    judgement = run.judge("intra", table, "nodes")
    values = {host: median_of(list(by.values())) for host, by in table.items()}
    flags = []
    for host, judged in judgement.flagged().items():
        rows = by_host[host]
        evidence = (
            f"intra-node all-reduce {gbps(judged.value)} GB/s over {rows[0].world_size} "
            f"ranks; {judged.evidence('nodes')}"
        )
        flags.append(_node(run, host, judged, len(rows), evidence, run.checks.inside))
    return values, flags, judgement


def _gpu_pairs(run: DoctorRun) -> tuple[dict[str, Any], list[Finding], StageJudgement]:
    """Each pair of local ranks' send/recv (both ways at once): per node their matrix, and
    the pairs below the bar (the pairs of every node are one fleet, or the expectation's)."""
    rows = run.stage_rows(GPU_PAIR)
    ends = {f"rank {rank}": (host, rank) for host, ranks in run.ranks_of.items() for rank in ranks}
    pairs = fold_pairs(rows, tuple(ends), lambda row: [f"rank {r}" for r in row.group_ranks])
    hint = "3 or more ranks per node, or --expect-busbw or --baseline"
    judgement = run.judge(GPU_PAIR, pairs.values, "pairs of local ranks", hint)

    def named(a: str, b: str) -> tuple:
        lead = f"{a}<->{b} send/recv, both ways at once (the slower way sets it):"
        return (ends[a][0],), (ends[a][1], ends[b][1]), lead

    findings = _slow_pairs(run, pairs, judgement, GPU_PAIR, run.checks.pair, named)
    matrices = {
        host: {"ranks": list(ranks), "gbps": _matrix([f"rank {r}" for r in ranks], pairs.medians)}
        for host, ranks in run.ranks_of.items()
        if len(ranks) >= 2 and rows
    }
    return matrices, findings, judgement


def _node(
    run: DoctorRun, host: str, judged: Judged, rounds: int, evidence: str, check: str
) -> Finding:
    """One stage's node finding on `host`, its `check` the action (merged per host later)."""
    return run.finding(
        "node", (host,), judged.bar, judged.value, rounds=rounds, evidence=evidence, action=check
    )


def _merge_nodes(run: DoctorRun, flags: Sequence[Finding]) -> list[Finding]:
    """One node finding per host, whatever stages flagged it (pair-wise first): the first's
    figures, every stage's rounds, evidence and checks after "drain the node"."""
    by_host: dict[str, list[Finding]] = {}
    for flag in flags:
        by_host.setdefault(flag.hosts[0], []).append(flag)
    return [
        replace(
            mine[0],
            rounds=sum(flag.rounds for flag in mine),
            evidence="; ".join(flag.evidence for flag in mine),
            action="; ".join([DRAIN, *(flag.action for flag in mine)]),
        )
        for host in run.hosts
        if (mine := by_host.get(host))
    ]


def _rails(run: DoctorRun) -> tuple[dict[int, float], list[Finding], StageJudgement]:
    """Each local-rank index's all-reduce across the nodes, and the rails below the bar."""
    by_rail: dict[int, list[DoctorRow]] = {}
    for row in run.stage_rows("rail"):
        index = (row.group or "").removeprefix("rail ")
        if index.isdigit():
            by_rail.setdefault(int(index), []).append(row)
    table = {rail: repeat_medians(rows) for rail, rows in sorted(by_rail.items())}
    judgement = run.judge("rail", table, "rails")
    values = {rail: median_of(list(by.values())) for rail, by in table.items()}
    findings = []
    for rail, judged in judgement.flagged().items():
        rows = by_rail[rail]
        on_rail = {host for row in rows for host in row_hosts(row)}
        hosts = [host for host in run.hosts if host in on_rail]
        ranks = sorted({rank for row in rows for rank in row.group_ranks or ()})
        findings.append(
            run.finding(
                "rail",
                hosts,
                judged.bar,
                judged.value,
                ranks=ranks,
                rounds=len(rows),
                evidence=f"rail {rail} all-reduce {gbps(judged.value)} GB/s across "
                f"{len(hosts)} nodes; {judged.evidence('rails')}",
                action=RAIL_ACTION,
            )
        )
    return values, findings, judgement


def _pass_ratio(run: DoctorRun, bars: Mapping[int, Bar]) -> dict[str, float]:
    """Per host, the share of its pairings (every circle and shuffle round of every repeat)
    at or above that repeat's pair bar (Imbue's pass ratio); {} when there is no bar."""
    passed: Counter[str] = Counter()
    pairings: Counter[str] = Counter()
    for row in run.stage_rows(*PAIR_STAGES):
        bar = bars.get(row.repeat_index)
        if bar is None:
            continue
        ok = int(not row.busbw_gbps < bar.threshold_gbps)
        for host in row_hosts(row):
            passed[host] += ok
            pairings[host] += 1
    return {host: passed[host] / pairings[host] for host in run.hosts if host in pairings}


def _matrix(
    hosts: Sequence[str], medians: Mapping[tuple[str, str], float]
) -> tuple[tuple[float | None, ...], ...]:
    def cell(a: str, b: str) -> float | None:
        return medians.get((a, b), medians.get((b, a)))

    return tuple(tuple(None if a == b else cell(a, b) for b in hosts) for a in hosts)


def _notes(run: DoctorRun, nodes: Mapping[str, Any], unjudged: Mapping[str, str]) -> list[str]:
    """What could not be judged and why, and warnings about the measurement itself."""
    skipped = nodes.get("skipped") or {}
    notes = [f"{stage} stage skipped: {why}" for stage, why in skipped.items()]
    notes += [
        f"{stage} stage not judged: {why}"
        for stage, why in unjudged.items()
        if stage not in skipped
    ]
    notes += list(run.expectation.notes)
    sizes = sorted({row.size_bytes for row in run.rows}) or [run.spec.size_bytes or 0]
    if 0 < sizes[0] < MIN_BANDWIDTH_BYTES:
        notes.append(
            f"size {format_size(sizes[0])} measures latency more than bandwidth: use "
            f"--size {size_arg(MIN_BANDWIDTH_BYTES)} or more"
        )
    wrong = [row.group or row.stage for row in run.rows if row.n_wrong]
    if wrong:
        notes.append(f"data check failed in {len(wrong)} row(s) ({', '.join(wrong)})")
    if run.stage_rows("bisect") and "full" not in run.expectation.busbw_gbps:
        notes.append(
            f"bisect rows not judged: the full all-reduce has no expectation; {JUDGE_HINT}"
        )
    return notes


# --- the pair stage folded once: each node pair's busbw per repeat, the nodes' scores, their
# partners and the rounds behind each figure, from the pair and shuffle rows ---

Pair = tuple[str, str]  # two hosts in the fleet's host order


@dataclass(frozen=True)
class PairFold:
    """The pair and shuffle rows by node pair (keys in host order, pairs in row order)."""

    hosts: tuple[str, ...]
    # pair -> repeat -> the median busbw over that repeat's rounds of the pair
    values: dict[Pair, dict[int, float]]
    rounds: Counter[Pair]  # rows behind each pair (every repeat)
    host_rounds: Counter[str]  # rows each host took part in

    @cached_property
    def medians(self) -> dict[Pair, float]:
        """Each pair's figure: the median over its repeats."""
        return {pair: median_of(list(by.values())) for pair, by in self.values.items()}

    def node_scores(self) -> tuple[dict[str, dict[int, float]], dict[str, float]]:
        """Per host and repeat the median over its partners: those with two partners or more
        (what a node is judged by), and every host's median over its repeats."""
        partners: dict[tuple[str, int], list[float]] = {}
        for (host_a, host_b), by_repeat in self.values.items():
            for repeat, value in by_repeat.items():
                partners.setdefault((host_a, repeat), []).append(value)
                partners.setdefault((host_b, repeat), []).append(value)
        by_host: dict[str, dict[int, tuple[float, int]]] = {}
        for (host, repeat), values in partners.items():
            by_host.setdefault(host, {})[repeat] = (median_of(values), len(values))
        table: dict[str, dict[int, float]] = {}
        scores: dict[str, float] = {}
        for host in self.hosts:  # the fleet's order, as findings list them
            if host not in by_host:
                continue
            mine = dict(sorted(by_host[host].items()))
            scores[host] = median_of([score for score, _ in mine.values()])
            judged = {repeat: score for repeat, (score, count) in mine.items() if count >= 2}
            if judged:
                table[host] = judged
        return table, scores

    def partners(self, hosts: Collection[str]) -> dict[str, dict[str, float]]:
        """For each of `hosts`, its partners' pair figures (one pass over the pairs)."""
        wanted = set(hosts)
        found: dict[str, dict[str, float]] = {host: {} for host in hosts}
        for (host_a, host_b), value in self.medians.items():
            if host_a in wanted:
                found[host_a][host_b] = value
            if host_b in wanted:
                found[host_b][host_a] = value
        return found

    def sparse(self) -> tuple[tuple[int, int, float], ...]:
        """Every measured pair as (i, j, GB/s), host indices i < j, in that order."""
        index = {host: position for position, host in enumerate(self.hosts)}
        cells = [(index[a], index[b], value) for (a, b), value in self.medians.items()]
        return tuple(sorted(cells))


def fold_pairs(
    rows: Sequence[DoctorRow],
    hosts: Sequence[str],
    ends: Callable[[DoctorRow], Sequence[str]] = row_hosts,
) -> PairFold:
    """The pair and shuffle `rows` by node pair (or by the pair `ends` names, e.g. two ranks);
    a row whose ends are not two distinct ones of `hosts` is left out."""
    index = {host: position for position, host in enumerate(hosts)}
    samples: dict[Pair, dict[int, list[float]]] = {}
    host_rounds: Counter[str] = Counter()
    for row in rows:
        pair = ends(row)
        if len(pair) != 2:
            continue
        first, second = index.get(pair[0], -1), index.get(pair[1], -1)
        if first < 0 or second < 0 or first == second:
            continue
        key = (pair[0], pair[1]) if first < second else (pair[1], pair[0])
        samples.setdefault(key, {}).setdefault(row.repeat_index, []).append(float(row.busbw_gbps))
    rounds: Counter[Pair] = Counter()
    values: dict[Pair, dict[int, float]] = {}
    for pair, by_repeat in samples.items():
        count = sum(len(v) for v in by_repeat.values())
        rounds[pair] = count
        host_rounds[pair[0]] += count
        host_rounds[pair[1]] += count
        values[pair] = {
            repeat: v[0] if len(v) == 1 else median_of(v) for repeat, v in by_repeat.items()
        }
    return PairFold(tuple(hosts), values, rounds, host_rounds)
