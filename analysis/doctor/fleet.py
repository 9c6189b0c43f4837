"""Doctor verdicts on the whole fleet (pure): straggling ranks, and the full all-reduce below
its expectation (the bisect rows name the slower half: a segment finding)."""

from __future__ import annotations

from collections.abc import Sequence

from collbench.analysis.doctor.expect import ALL_REDUCE_STAGES, Bar, gbps, median_of, repeat_medians
from collbench.analysis.doctor.findings import (
    BISECT_ACTION,
    FULL_UNJUDGED,
    SEGMENT_ACTION,
    SPINE_ACTION,
    STRAGGLER_LAST_SHARE,
    STRAGGLER_MIN_GROUP,
    STRAGGLER_MIN_ITERS,
    DoctorRun,
    Finding,
    row_hosts,
)
from collbench.analysis.doctor.judge import NOT_MEASURED, StageJudgement
from collbench.core.doctor_spec import MIN_DOCTOR_REPEATS
from collbench.store.rows import DoctorRow


def stragglers(run: DoctorRun) -> list[Finding]:
    """Ranks clearly and consistently last in their all-reduces (the others wait for them)."""
    short = 1 - run.spec.fleet_tolerance_pct / 100
    tally: dict[int, list[int]] = {}  # rank -> [last, iterations, rows, rows clearly short]
    repeats: dict[int, set[int]] = {}  # rank -> the repeats its rows come from
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
            repeats.setdefault(rank, set()).add(row.repeat_index)
    host_of = {rank: host for host, ranks in run.ranks_of.items() for rank in ranks}
    findings = []
    for rank, (last, iters, rows, short_rows) in sorted(tally.items()):
        clearly_last = iters >= STRAGGLER_MIN_ITERS and last >= STRAGGLER_LAST_SHARE * iters
        if not clearly_last or 2 * short_rows <= rows:
            continue
        if len(repeats[rank]) < MIN_DOCTOR_REPEATS:
            continue  # one slow round is not a straggler (the majority rule over repeats)
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
                action=run.checks.rank,
            )
        )
    return findings


def full_all_reduce(
    run: DoctorRun, findings: Sequence[Finding]
) -> tuple[float | None, list[Finding], list[str], StageJudgement]:
    """The full all-reduce, judged only against an explicit expectation: below it in a
    majority of repeats and with no node, link or rail finding to explain it, a segment
    finding (the bisect rows name the slower half; without them, the whole fleet, to rerun
    with --bisect)."""
    table = {"full": repeat_medians(run.stage_rows("full"))}
    if not table["full"]:
        return None, [], [], StageJudgement(reason=NOT_MEASURED)
    full = median_of(list(table["full"].values()))
    if "full" not in run.expectation.busbw_gbps:
        return full, [], [], StageJudgement(reason=FULL_UNJUDGED)
    judgement = run.judge("full", table, "all-reduces")
    judged = judgement.items["full"]
    if not judged.flagged:
        return full, [], [], judgement
    text = f"full all-reduce {gbps(judged.value)} GB/s; {judged.evidence()}"
    if any(finding.kind in ("node", "link", "rail") for finding in findings):
        return full, [], [f"{text}: the findings explain it"], judgement
    return full, [_segment(run, judged.bar, judged.value, text)], [], judgement


def _segment(run: DoctorRun, bar: Bar, full: float, text: str) -> Finding:
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
            hosts = [host for host in run.hosts if host in row_hosts(slow_row)]
            evidence = (
                f"{text}; bisect level {level}: the half {', '.join(hosts)} reaches "
                f"{gbps(slow)} GB/s, the other half {gbps(fast)} GB/s"
            )
            return run.finding(
                "segment", hosts, bar, slow, rounds=rounds, evidence=evidence, action=SEGMENT_ACTION
            )
    if by_level:
        why, action = "no bisected half is slower than the other", SPINE_ACTION
    else:  # --bisect needs two or more nodes and two ranks a half: else no advice to rerun it
        bisectable = len(run.hosts) >= 2 and run.stage_rows("full")[0].world_size >= 4
        why = "no single node, pair or rail explains it"
        action = BISECT_ACTION if bisectable else SEGMENT_ACTION
    return run.finding(
        "segment",
        run.hosts,
        bar,
        full,
        rounds=max(rounds, 1),
        evidence=f"{text}; {why}",
        action=action,
    )
