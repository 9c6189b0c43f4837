"""The doctor's vocabulary (pure): findings, the diagnosis, the actions for each backend, the
run context every stage's judgement reads (collbench.analysis.doctor.verdicts diagnoses), and
doctor.json's content from a diagnosis (doctor_report: the DoctorReport the store saves)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from collbench.analysis.doctor.expect import (
    ALL_REDUCE_STAGES,
    FLEET,
    MIN_FLEET,
    PAIR_STAGES,
    Bar,
    Expectation,
    bar_for,
)
from collbench.analysis.doctor.judge import StageJudgement, against_baseline, judge_stage
from collbench.core.doctor_spec import DoctorSpec
from collbench.store.doctor_report import DoctorExpectation, DoctorFinding, DoctorReport
from collbench.store.rows import DoctorRow

# A straggler: last in at least this share of its timed all-reduce iterations ...
STRAGGLER_LAST_SHARE = 0.8
# ... over groups of at least this many ranks (with two, one of them is always last) ...
STRAGGLER_MIN_GROUP = 3
# ... and at least this many iterations in all (fewer: chance).
STRAGGLER_MIN_ITERS = 10
DRAIN = "drain the node"
LINK_ACTION = "reseat or replace the cable / check the switch port between them"
RAIL_ACTION = "check that rail's NIC on every node / its switch plane"
SEGMENT_ACTION = "check these nodes' leaf switch, uplinks and cables; rerun doctor on them"
SPINE_ACTION = "check the spine / uplinks between the halves (switch error counters)"
BISECT_ACTION = "rerun with --bisect to find the slow part of the fabric"
JUDGE_HINT = "give --expect-busbw, --topology or --baseline"
PAIR_NODES = "pair nodes"  # the pair stage's judgement of nodes (their scores)
ONE_RANK = "one rank: its all-reduce moves nothing between ranks (busbw 0)"
FULL_UNJUDGED = "judged only against an expectation (--expect-busbw, --topology or --baseline)"


@dataclass(frozen=True)
class Checks:
    """What to look at on a slow node or rank, for the backend that measured it: GPU tools
    mean nothing to a gloo run on CPUs."""

    network: str
    inside: str
    rank: str
    pair: str  # two local ranks' link


GPU_CHECKS = Checks(
    network="check its NICs/links (ibstat, ethtool)",
    inside="check its GPUs and NVLink/PCIe (nvidia-smi topo -m, dcgmi diag) or CPU load",
    rank="check the rank's host for CPU/GPU throttling or a noisy neighbour",
    pair="check the link between these two GPUs (nvidia-smi topo -m, nvidia-smi nvlink -s)",
)
CPU_CHECKS = Checks(
    network="check its NICs/links (ethtool, ip -s link) and its network namespace/shaping",
    inside="check its CPU load, frequency and memory bandwidth (top, lscpu, numactl -H)",
    rank="check the rank's host for CPU throttling or a noisy neighbour (top, lscpu)",
    pair="check these two ranks' CPUs and the shaping between their addresses (top, tc qdisc)",
)


# What the doctor flags, with the evidence and what to do about it: as doctor.json keeps it.
Finding = DoctorFinding


@dataclass(frozen=True)
class Diagnosis:
    """Everything the doctor concluded from one run."""

    # True: something was measured against an expectation and nothing is flagged; False:
    # something is flagged; None: nothing could be judged (`reason` says why).
    healthy: bool | None
    findings: tuple[Finding, ...]
    hosts: tuple[str, ...]
    # hosts x hosts pair busbw (GB/s), None on the diagonal and where no pair was measured;
    # empty above store.doctor_report.MATRIX_DENSE_MAX_HOSTS hosts (pair_gbps holds them).
    matrix_gbps: tuple[tuple[float | None, ...], ...]
    node_busbw_gbps: dict[str, float]  # intra stage, per host
    rail_busbw_gbps: dict[int, float]  # rail stage, per local rank index
    pass_ratio: dict[str, float]  # per host, share of its pairings (circle + shuffle) passed
    full_busbw_gbps: float | None
    notes: tuple[str, ...]
    # Per host: the median of its pair busbw over its partners (what a node is judged by).
    pair_score_gbps: dict[str, float] = field(default_factory=dict)
    judged: tuple[str, ...] = ()  # the stages judged
    unjudged: dict[str, str] = field(default_factory=dict)  # stage -> why it was not
    reason: str = ""  # healthy None: why nothing was judged
    repeats: int = 0  # repeats of the run's rounds (the most any stage has)
    # Every measured node pair as (i, j, GB/s), indices into hosts with i < j: the matrix
    # without its empty cells (what a fleet of thousands keeps).
    pair_gbps: tuple[tuple[int, int, float], ...] = ()
    # Per host its gpu-pair matrix: {"ranks": [...], "gbps": ranks x ranks GB/s or None}.
    gpu_pairs: dict[str, Any] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        """healthy | flagged | unjudged."""
        return "unjudged" if self.healthy is None else "healthy" if self.healthy else "flagged"


@dataclass(frozen=True)
class DoctorRun:
    """The rows and the layout every stage's judgement reads."""

    rows: tuple[DoctorRow, ...]
    spec: DoctorSpec
    expectation: Expectation
    hosts: tuple[str, ...]
    addresses: Mapping[str, str]
    ranks_of: Mapping[str, tuple[int, ...]]
    checks: Checks = GPU_CHECKS

    def judge(
        self, stage: str, table: Mapping[Any, Mapping[int, float]], what: str, hint=JUDGE_HINT
    ) -> StageJudgement:
        """`table` (item -> repeat -> GB/s) judged repeat by repeat against the stage's bar;
        against a baseline, each item also by the decision rule (no bar: `hint` says why)."""
        count = len(table)
        no_bar = f"a fleet median needs {MIN_FLEET} {what}, this run has {count}; {hint}"
        judgement = judge_stage(
            table, lambda values: bar_for(stage, values, self.expectation, self.spec), no_bar
        )
        size_bytes = int(self.rows[0].size_bytes) if self.rows else 0
        return against_baseline(judgement, stage, self.expectation, size_bytes)

    def stage_rows(self, *stages: str) -> list[DoctorRow]:
        """The rows of `stages` that measured something (an all-reduce of one rank did not),
        stage by stage in the order first seen, each stage's in file order."""
        return [row for stage, rows in self._measured.items() if stage in stages for row in rows]

    @cached_property
    def _measured(self) -> dict[str | None, list[DoctorRow]]:
        """The rows that measured something, by stage (sorted out once, not per question)."""
        by_stage: dict[str | None, list[DoctorRow]] = {}
        for row in self.rows:
            if math.isfinite(row.busbw_gbps) and (
                row.stage not in ALL_REDUCE_STAGES or row.world_size >= 2
            ):
                by_stage.setdefault(row.stage, []).append(row)
        return by_stage

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


def row_hosts(row: DoctorRow) -> list[str]:
    """The hosts of a row's group: group_hosts, else read off the group's name."""
    if row.group_hosts:
        return list(row.group_hosts)
    group = row.group or ""
    if row.stage in PAIR_STAGES and "<->" in group:
        return group.split("<->")
    if row.stage == "intra" and group.startswith("node "):
        return [group.removeprefix("node ")]
    return []


def doctor_report(diagnosis: Diagnosis, run_id: str, expectation: Expectation) -> DoctorReport:
    """What the doctor concluded (healthy, the stages judged and why the others were not,
    findings, the pair matrix, per node, per rail, pass ratios, the full all-reduce, notes)
    and the expectation it held the run against."""
    return DoctorReport(
        run_id=run_id,
        healthy=diagnosis.healthy,
        verdict=diagnosis.verdict,
        reason=diagnosis.reason or None,
        judged=tuple(diagnosis.judged),
        unjudged=dict(diagnosis.unjudged),
        repeats=int(diagnosis.repeats),
        findings=tuple(diagnosis.findings),
        hosts=tuple(diagnosis.hosts),
        matrix_gbps=tuple(tuple(row) for row in diagnosis.matrix_gbps),
        pairs=tuple(diagnosis.pair_gbps),
        nodes=dict(diagnosis.node_busbw_gbps),
        gpu_pairs=dict(diagnosis.gpu_pairs),
        rails={str(rail): value for rail, value in diagnosis.rail_busbw_gbps.items()},
        pass_ratio=dict(diagnosis.pass_ratio),
        full_busbw_gbps=diagnosis.full_busbw_gbps,
        notes=tuple(diagnosis.notes),
        expectation=DoctorExpectation(
            source=expectation.source,
            busbw_gbps=dict(expectation.busbw_gbps),
            tolerance_pct=expectation.tolerance_pct,
            spread_pct=dict(expectation.spread_pct),
            noise_floor_pct=expectation.floor_pct,
            noise_floor_source=expectation.floor_source or None,
        ),
    )
