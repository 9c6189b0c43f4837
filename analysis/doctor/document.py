"""doctor.json's content from a diagnosis: the DoctorReport the store saves (pure)."""

from __future__ import annotations

from collbench.analysis.doctor.expect import Expectation
from collbench.analysis.doctor.findings import Diagnosis, Finding
from collbench.store.doctor_report import DoctorExpectation, DoctorFinding, DoctorReport


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
        findings=tuple(_finding(item) for item in diagnosis.findings),
        hosts=tuple(diagnosis.hosts),
        matrix_gbps=tuple(tuple(row) for row in diagnosis.matrix_gbps),
        pairs=tuple(diagnosis.pair_gbps),
        nodes=dict(diagnosis.node_busbw_gbps),
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


def _finding(finding: Finding) -> DoctorFinding:
    return DoctorFinding(
        kind=finding.kind,
        hosts=tuple(finding.hosts),
        ranks=tuple(int(rank) for rank in finding.ranks),
        addresses=tuple(finding.addresses),
        evidence=finding.evidence,
        measured_gbps=finding.measured_gbps,
        expected_gbps=finding.expected_gbps,
        expected_from=finding.expected_from,
        rounds=int(finding.rounds),
        action=finding.action,
    )
