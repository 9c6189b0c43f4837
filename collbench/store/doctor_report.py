"""doctor.json: what `collbench doctor` concluded from one run, as a typed value with one
load and one save. It sits beside the run's rows.

`healthy` is true, false, or null (nothing could be judged; `reason` says why). A figure not
measured (or not finite) is null; rail keys are strings. The pair matrix is whole up to
MATRIX_DENSE_MAX_HOSTS hosts ("gbps") and its measured pairs above ("pairs"). Keys an older doctor.json lacks read
as empty (judged, unjudged, repeats, verdict, the noise floor); keys collbench does not know
are not read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from collbench.core.convert import convert, to_builtins
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

    kind: str  # node, rail, link, rank, segment or gpu-pair
    hosts: tuple[str, ...]
    ranks: tuple[int, ...] = ()
    addresses: tuple[str, ...] = ()  # one per host, "" where meta.json has none
    evidence: str = ""  # one line a person reads
    measured_gbps: float | None = None
    expected_gbps: float | None = None
    expected_from: str = ""  # the expectation's source, or the fleet median
    rounds: int = 0  # measurements behind it (e.g. 3 of 3 pairs slow)
    action: str = ""  # "drain the node", "reseat or replace the cable", ...


@dataclass(frozen=True)
class DoctorExpectation:
    """What the run was held against: the source, the bars (GB/s) and the tolerance."""

    source: str = ""
    busbw_gbps: Figures = field(default_factory=dict)
    tolerance_pct: float | None = None
    spread_pct: Figures = field(default_factory=dict)
    noise_floor_pct: float | None = None  # the recorded A/A floor for the run's size band
    noise_floor_source: str | None = None  # its file (--noise-floor)


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
    # Per host the gpu-pair stage's matrix: {"ranks": [...], "gbps": ranks x ranks GB/s}.
    gpu_pairs: dict[str, Any] = field(default_factory=dict)
    rails: Figures = field(default_factory=dict)
    pass_ratio: Figures = field(default_factory=dict)
    full_busbw_gbps: float | None = None
    notes: tuple[str, ...] = ()
    expectation: DoctorExpectation | None = None

    def to_dict(self) -> dict[str, Any]:
        """doctor.json's content, JSON-safe, in its key order: the pair matrix under "matrix",
        whole up to MATRIX_DENSE_MAX_HOSTS hosts, else its measured pairs."""
        data = to_builtins(replace(self, expectation=self.expectation or DoctorExpectation()))
        hosts = data["hosts"]
        grid = (
            ("gbps", "matrix_gbps") if len(hosts) <= MATRIX_DENSE_MAX_HOSTS else ("pairs", "pairs")
        )
        data["hosts"] = {"hosts": hosts, grid[0]: data[grid[1]]}  # keeps its place as "matrix"
        return {
            ("matrix" if key == "hosts" else key): value
            for key, value in data.items()
            if key not in ("matrix_gbps", "pairs")
        }

    @classmethod
    def from_dict(cls, data: Any, where: str) -> DoctorReport:
        """The report of doctor.json's content; SpecError naming `where` for one that is not
        a doctor's. A null or empty key reads as its default."""
        if not isinstance(data, Mapping) or "healthy" not in data:
            raise SpecError("doctor.json", where, "is not a doctor's result (no 'healthy')")
        healthy = data["healthy"]
        if healthy is not None and not isinstance(healthy, bool):
            raise SpecError("doctor.json", where, f"has healthy {healthy!r}: not true/false/null")
        findings = data.get("findings") or []
        if not all(isinstance(item, Mapping) and "kind" in item for item in findings):
            raise SpecError("doctor.json", where, "has a finding that is not an object with a kind")
        matrix = data.get("matrix") or {}
        if not isinstance(matrix, Mapping):
            raise SpecError("doctor.json", where, "has matrix that is not an object")
        fields = {key: value for key, value in data.items() if value not in (None, {})}
        fields.pop("matrix", None)
        fields.update(run_id=str(data.get("run_id") or ""), healthy=healthy)
        fields.update(matrix_gbps=matrix.get("gbps") or [])
        fields.update(hosts=matrix.get("hosts") or [], pairs=matrix.get("pairs") or [])
        return convert(fields, cls, "doctor.json", where)


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
