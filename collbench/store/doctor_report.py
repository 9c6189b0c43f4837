"""doctor.json: what `collbench doctor` concluded from one run, as a typed value with one
load and one save. It sits beside the run's rows.

`healthy` is true, false, or null (nothing could be judged; `reason` says why). A figure not
measured (or not finite) is null; rail keys are strings. The pair matrix is whole up to
MATRIX_DENSE_MAX_HOSTS hosts ("gbps") and its measured pairs above ("pairs"). Keys an older doctor.json lacks read
as empty (judged, unjudged, repeats, verdict, the noise floor); keys collbench does not know
are not read.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collbench.core.errors import SpecError
from collbench.store.reading import load_json
from collbench.store.rundir import write_json_atomic

DOCTOR_JSON = "doctor.json"
# Up to this many hosts doctor.json holds the pair matrix whole ("gbps": hosts x hosts, null
# where not measured) and `collbench doctor` prints it; above, only the measured pairs
# ("pairs": [i, j, GB/s], i < j) and a summary: 4,096 hosts are 16.8 million cells.
MATRIX_DENSE_MAX_HOSTS = 64

Figures = dict[str, float | None]  # a figure per host, rail or group ("intra", "pair")


@dataclass(frozen=True)
class DoctorFinding:
    """One thing flagged: a node, link, rail or rank, with its evidence and the action."""

    kind: str
    hosts: tuple[str, ...]
    ranks: tuple[int, ...] = ()
    addresses: tuple[str, ...] = ()
    evidence: str = ""
    measured_gbps: float | None = None
    expected_gbps: float | None = None
    expected_from: str = ""
    rounds: int = 0
    action: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "hosts": list(self.hosts),
            "ranks": [int(rank) for rank in self.ranks],
            "addresses": list(self.addresses),
            "evidence": self.evidence,
            "measured_gbps": figure(self.measured_gbps),
            "expected_gbps": figure(self.expected_gbps),
            "expected_from": self.expected_from,
            "rounds": int(self.rounds),
            "action": self.action,
        }


@dataclass(frozen=True)
class DoctorExpectation:
    """What the run was held against: the source, the bars (GB/s) and the tolerance."""

    source: str = ""
    busbw_gbps: Figures = field(default_factory=dict)
    tolerance_pct: float | None = None
    spread_pct: Figures = field(default_factory=dict)
    noise_floor_pct: float | None = None  # the recorded A/A floor for the run's size band
    noise_floor_source: str | None = None  # its file (--noise-floor)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "busbw_gbps": figures(self.busbw_gbps),
            "tolerance_pct": figure(self.tolerance_pct),
            "spread_pct": figures(self.spread_pct),
            "noise_floor_pct": figure(self.noise_floor_pct),
            "noise_floor_source": self.noise_floor_source or None,
        }


@dataclass(frozen=True)
class DoctorReport:
    """doctor.json's content (see the module)."""

    run_id: str
    healthy: bool | None
    verdict: str = ""
    reason: str | None = None
    judged: tuple[str, ...] = ()
    unjudged: dict[str, str] = field(default_factory=dict)
    repeats: int = 0  # repeats of the rounds (0: an older doctor.json, which says none)
    findings: tuple[DoctorFinding, ...] = ()
    hosts: tuple[str, ...] = ()  # the pair matrix's hosts, in its order
    matrix_gbps: tuple[tuple[float | None, ...], ...] = ()
    # Every measured pair (i, j, GB/s), i < j indices into hosts: what doctor.json holds of
    # the matrix above MATRIX_DENSE_MAX_HOSTS hosts (and the matrix is then empty).
    pairs: tuple[tuple[int, int, float | None], ...] = ()
    nodes: Figures = field(default_factory=dict)
    rails: Figures = field(default_factory=dict)
    pass_ratio: Figures = field(default_factory=dict)
    full_busbw_gbps: float | None = None
    notes: tuple[str, ...] = ()
    expectation: DoctorExpectation | None = None

    def to_dict(self) -> dict[str, Any]:
        """doctor.json's content, JSON-safe, in its key order."""
        return {
            "run_id": self.run_id,
            "healthy": None if self.healthy is None else bool(self.healthy),
            "verdict": self.verdict,
            "reason": self.reason or None,
            "judged": list(self.judged),
            "unjudged": dict(self.unjudged),
            "repeats": int(self.repeats),
            "findings": [finding.to_dict() for finding in self.findings],
            "matrix": self._matrix(),
            "nodes": figures(self.nodes),
            "rails": figures(self.rails),
            "pass_ratio": figures(self.pass_ratio),
            "full_busbw_gbps": figure(self.full_busbw_gbps),
            "notes": list(self.notes),
            "expectation": (self.expectation or DoctorExpectation()).to_dict(),
        }

    def _matrix(self) -> dict[str, Any]:
        """The pair matrix whole up to MATRIX_DENSE_MAX_HOSTS hosts, else its measured pairs."""
        if len(self.hosts) <= MATRIX_DENSE_MAX_HOSTS:
            rows = [[figure(value) for value in row] for row in self.matrix_gbps]
            return {"hosts": list(self.hosts), "gbps": rows}
        pairs = [[int(first), int(second), figure(value)] for first, second, value in self.pairs]
        return {"hosts": list(self.hosts), "pairs": pairs}

    @classmethod
    def from_dict(cls, data: Any, where: str) -> DoctorReport:
        """The report of doctor.json's content; SpecError naming `where` for one that is not
        a doctor's."""
        if not isinstance(data, Mapping) or "healthy" not in data:
            raise SpecError("doctor.json", where, "is not a doctor's result (no 'healthy')")
        healthy = data["healthy"]
        if healthy is not None and not isinstance(healthy, bool):
            raise SpecError("doctor.json", where, f"has healthy {healthy!r}: not true/false/null")
        findings = _list(data, "findings", where)
        if not all(isinstance(item, Mapping) and "kind" in item for item in findings):
            raise SpecError("doctor.json", where, "has a finding that is not an object with a kind")
        try:
            return cls._read(data, findings, where)
        except SpecError:
            raise
        except (TypeError, ValueError) as error:
            raise SpecError(
                "doctor.json", where, f"has a value of the wrong type ({error})"
            ) from None

    @classmethod
    def _read(cls, data: Mapping[str, Any], findings: list[Any], where: str) -> DoctorReport:
        matrix = _mapping(data, "matrix", where)
        expectation = _mapping(data, "expectation", where)
        return cls(
            run_id=str(data.get("run_id") or ""),
            healthy=data["healthy"],
            verdict=str(data.get("verdict") or ""),
            reason=data.get("reason") or None,
            judged=tuple(str(stage) for stage in _list(data, "judged", where)),
            unjudged={str(k): str(v) for k, v in _mapping(data, "unjudged", where).items()},
            repeats=int(data.get("repeats") or 0),
            findings=tuple(_finding(item) for item in findings),
            hosts=tuple(str(host) for host in matrix.get("hosts") or []),
            matrix_gbps=tuple(tuple(row) for row in matrix.get("gbps") or []),
            pairs=tuple(_pair(cell, where) for cell in matrix.get("pairs") or []),
            nodes=_figures(data, "nodes", where),
            rails=_figures(data, "rails", where),
            pass_ratio=_figures(data, "pass_ratio", where),
            full_busbw_gbps=data.get("full_busbw_gbps"),
            notes=tuple(str(note) for note in _list(data, "notes", where)),
            expectation=DoctorExpectation(
                source=str(expectation.get("source") or ""),
                busbw_gbps=_figures(expectation, "busbw_gbps", where),
                tolerance_pct=expectation.get("tolerance_pct"),
                spread_pct=_figures(expectation, "spread_pct", where),
                noise_floor_pct=expectation.get("noise_floor_pct"),
                noise_floor_source=expectation.get("noise_floor_source") or None,
            )
            if expectation
            else None,
        )


def save_doctor_report(run_dir: Path, report: DoctorReport) -> Path:
    """Write doctor.json into the run directory (atomically); its path."""
    path = Path(run_dir) / DOCTOR_JSON
    write_json_atomic(path, report.to_dict())
    return path


def load_doctor_report(run_dir: Path) -> DoctorReport | None:
    """A run directory's doctor.json (None: the directory has none); SpecError naming the
    file for one that cannot be read or is not a doctor's."""
    path = Path(run_dir) / DOCTOR_JSON
    if not path.is_file():
        return None
    try:
        data = load_json(path, DOCTOR_JSON)  # within core.limits (store.reading)
    except (OSError, ValueError) as error:
        raise SpecError("doctor.json", str(path), f"cannot be read ({error})") from None
    return DoctorReport.from_dict(data, str(path))


def figure(value: float | None) -> float | None:
    """A figure as doctor.json holds it: a float, or None where not measured or not finite."""
    if value is None or not math.isfinite(value):
        return None
    return float(value)


def figures(values: Mapping[Any, float | None]) -> dict[str, float | None]:
    """Figures keyed by strings (a rail's index too), each as `figure` holds it."""
    return {str(key): figure(value) for key, value in values.items()}


def _finding(item: Mapping[str, Any]) -> DoctorFinding:
    return DoctorFinding(
        kind=str(item["kind"]),
        hosts=tuple(str(host) for host in item.get("hosts") or []),
        ranks=tuple(int(rank) for rank in item.get("ranks") or []),
        addresses=tuple(str(address) for address in item.get("addresses") or []),
        evidence=str(item.get("evidence") or ""),
        measured_gbps=item.get("measured_gbps"),
        expected_gbps=item.get("expected_gbps"),
        expected_from=str(item.get("expected_from") or ""),
        rounds=int(item.get("rounds") or 0),
        action=str(item.get("action") or ""),
    )


def _pair(cell: Any, where: str) -> tuple[int, int, float | None]:
    """One measured pair of a large matrix: [i, j, GB/s or null]."""
    if not isinstance(cell, list) or len(cell) != 3:
        raise SpecError("doctor.json", where, f"has a matrix pair {cell!r}: not [i, j, GB/s]")
    first, second, value = cell
    return int(first), int(second), None if value is None else float(value)


def _list(data: Mapping[str, Any], key: str, where: str) -> list[Any]:
    value = data.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise SpecError("doctor.json", where, f"has {key} that is not a list")
    return value


def _mapping(data: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise SpecError("doctor.json", where, f"has {key} that is not an object")
    return value


def _figures(data: Mapping[str, Any], key: str, where: str) -> Figures:
    value = _mapping(data, key, where)
    return {str(name): None if item is None else float(item) for name, item in value.items()}
