"""The results store: one tidy row per measurement, streamed to rows.jsonl as it finishes.

rows.jsonl is appended and flushed (and fsynced) after every row, so a crash loses
nothing already measured; rows.parquet is a copy written at the end; meta.json holds the
run-level provenance.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from collbench.core.errors import SpecError

SCHEMA_VERSION = 1
ROWS_FILE = "rows.jsonl"
PARQUET_FILE = "rows.parquet"
META_FILE = "meta.json"

ROW_COLUMNS = (
    "schema_version",
    "run_id",
    "timestamp_utc",
    "kind",
    "collective",
    "backend",
    "dtype",
    "op",
    "root",
    "size_bytes",
    "count",
    "world_size",
    "nodes",
    "ranks_per_node",
    "placement",
    "warmup",
    "iters",
    "time_us",
    "time_us_p50",
    "time_us_p95",
    "time_us_min",
    "time_us_max",
    "time_cv",
    "algbw_gbps",
    "busbw_gbps",
    "n_wrong",
    "topology",
    "knobs",
    "time_us_samples",
)
# Overlap-probe rows (kind "overlap") carry these too: the base columns describe the
# collective alone (time_us is t_comm, busbw its bandwidth); sweep rows leave them out.
PROBE_SERIES = ("comm", "comp", "both", "comp_during", "comm_during")  # probe_clock.SERIES
PROBE_COLUMNS = (
    "compute_ratio",
    "compute_ratio_actual",
    "compute_dtype",
    "matmul_shape",
    "matmul_reps",
    "compute_streams",
    "compute_tflop",
    "compute_tflops",
    *(f"t_{name}{suffix}" for name in PROBE_SERIES for suffix in ("_us", "_us_p50", "_cv")),
    "overlap_pct",
    "exposed_comm_us",
    "comm_wait_us",
    "compute_slowdown",
    "comm_slowdown",
    "probe_timing",
    "probe_samples_us",
)
ALL_COLUMNS = (*ROW_COLUMNS, *PROBE_COLUMNS)


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def new_run_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def prepare_run_dir(out: Path | None, run_id: str, allowed: frozenset[str] = frozenset()) -> Path:
    """Create the run directory; refuse one that already holds anything (but `allowed`)."""
    run_dir = Path(out) if out is not None else Path("results") / run_id
    if run_dir.exists() and (
        not run_dir.is_dir() or any(entry.name not in allowed for entry in run_dir.iterdir())
    ):
        raise SpecError(
            "--out",
            str(run_dir),
            "is not an empty directory; choose a new one (collbench never mixes two runs)",
        )
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise SpecError("--out", str(run_dir), f"cannot be created: {error.strerror}") from None
    return run_dir


class ResultWriter:
    """Appends rows to rows.jsonl, each one flushed to disk before the next step."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / ROWS_FILE
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()

    def append(self, row: dict[str, Any]) -> None:
        self._file.write(json.dumps(row, separators=(",", ":")) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()


def load_rows(run_dir: Path) -> list[dict[str, Any]]:
    """Rows of a run. A last line cut short by a crash is skipped, never half-read."""
    path = Path(run_dir) / ROWS_FILE
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            print(f"collbench: warning: skipped a truncated row in {path}", file=sys.stderr)
    return rows


def write_parquet(run_dir: Path) -> Path | None:
    """rows.parquet from rows.jsonl (knobs kept as a JSON string column)."""
    import pandas as pd

    rows = load_rows(run_dir)
    if not rows:
        return None
    probes = any(row.get("kind") == "overlap" for row in rows)
    frame = pd.DataFrame(rows, columns=list(ALL_COLUMNS if probes else ROW_COLUMNS))
    as_json = ("knobs", "probe_samples_us") if probes else ("knobs",)
    for column in as_json:  # nested values, kept as JSON strings
        frame[column] = frame[column].map(lambda value: json.dumps(value, sort_keys=True))
    path = Path(run_dir) / PARQUET_FILE
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    frame.to_parquet(tmp, index=False)
    os.replace(tmp, path)  # a reader (or a kill) never meets half a file
    return path


def read_meta(run_dir: Path) -> dict[str, Any] | None:
    path = Path(run_dir) / META_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None


def write_meta(run_dir: Path, meta: dict[str, Any]) -> None:
    """Write meta.json atomically (readers never see half a file)."""
    write_json_atomic(Path(run_dir) / META_FILE, meta)


def update_meta(run_dir: Path, **fields: Any) -> None:
    meta = read_meta(run_dir) or {}
    meta.update(fields)
    write_meta(run_dir, meta)


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(
        json.dumps(data, indent=2, sort_keys=False, default=str) + "\n", encoding="utf-8"
    )
    os.replace(tmp, path)


class RowBuilder:
    """Turns a rank-combined measurement into a result row with the run's context."""

    def __init__(
        self,
        run_id: str,
        spec: Any,
        world_size: int,
        nodes: int,
        knobs: dict[str, Any],
        topology: str | None = None,
    ) -> None:
        self.run_id = run_id
        self.spec = spec
        self.world_size = world_size
        self.nodes = nodes
        self.knobs = knobs
        self.topology = topology

    def build(self, collective: str, placement: str, measured: Any) -> dict[str, Any]:
        from collbench.core.bandwidth import algbw_gbps, bus_factor
        from collbench.core.collectives import REGISTRY

        coll = REGISTRY[collective]
        stats = measured.stats
        algbw = algbw_gbps(measured.geometry.size_bytes, stats.time_us)
        row = {
            "schema_version": SCHEMA_VERSION,
            "run_id": self.run_id,
            "timestamp_utc": utc_now(),
            "kind": "sweep",
            "collective": collective,
            "backend": self.spec.backend,
            "dtype": self.spec.dtype,
            "op": self.spec.op if coll.reduces else None,
            "root": coll.root,
            "size_bytes": measured.geometry.size_bytes,
            "count": measured.geometry.count,
            "world_size": self.world_size,
            "nodes": self.nodes,
            "ranks_per_node": self.world_size // max(1, self.nodes),
            "placement": placement,
            "warmup": self.spec.warmup,
            "iters": self.spec.iters,
            "time_us": stats.time_us,
            "time_us_p50": stats.time_us_p50,
            "time_us_p95": stats.time_us_p95,
            "time_us_min": stats.time_us_min,
            "time_us_max": stats.time_us_max,
            "time_cv": stats.time_cv,
            "algbw_gbps": algbw,
            "busbw_gbps": algbw * bus_factor(collective, self.world_size),
            "n_wrong": measured.n_wrong,
            "topology": self.topology,
            "knobs": self.knobs,
            "time_us_samples": [round(sample, 3) for sample in stats.samples_us],
        }
        return row

    def build_probe(
        self, collective: str, placement: str, probe: Any, timing: str
    ) -> dict[str, Any]:
        """A kind "overlap" row: the collective alone in the base columns, then the probe."""
        from collbench.core.stats import TimeStats

        comm = probe.series["comm"]
        row = self.build(collective, placement, _Alone(probe.geometry, comm, probe.n_wrong))
        row["kind"] = "overlap"
        compute, figures = probe.compute, probe.figures
        comp: TimeStats = probe.series["comp"]
        row.update(
            {
                "compute_ratio": probe.ratio,
                "compute_ratio_actual": figures.compute_ratio_actual,
                "compute_dtype": compute.dtype,
                "matmul_shape": "x".join(map(str, compute.shape)),
                "matmul_reps": compute.reps,
                "compute_streams": compute.streams,
                "compute_tflop": compute.tflop,
                "compute_tflops": compute.tflop / (comp.time_us * 1e-6),
            }
        )
        samples = {}
        for name in PROBE_SERIES:
            stats = probe.series[name]
            row[f"t_{name}_us"] = None if stats is None else stats.time_us
            row[f"t_{name}_us_p50"] = None if stats is None else stats.time_us_p50
            row[f"t_{name}_cv"] = None if stats is None else stats.time_cv
            if stats is not None:
                samples[f"t_{name}"] = [round(sample, 3) for sample in stats.samples_us]
        row.update(
            {
                "overlap_pct": figures.overlap_pct,
                "exposed_comm_us": figures.exposed_comm_us,
                "comm_wait_us": figures.comm_wait_us,
                "compute_slowdown": figures.compute_slowdown,
                "comm_slowdown": figures.comm_slowdown,
                "probe_timing": timing,
                "probe_samples_us": samples,
            }
        )
        return row


class _Alone:
    """The collective-alone part of a probe, shaped like a sweep measurement."""

    def __init__(self, geometry: Any, stats: Any, n_wrong: int | None) -> None:
        self.geometry, self.stats, self.n_wrong = geometry, stats, n_wrong
