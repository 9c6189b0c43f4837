"""`collbench import nccl-tests`: read nccl-tests / rccl-tests logs and write them as a run.

Reading and writing happen here; parsing (analysis.nccl_import) and building the rows and
meta.json (analysis.nccl_import_rows) are pure. The run directory holds rows.jsonl,
meta.json and rows.parquet, as a sweep's does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from collbench.analysis.imports.nccl_logs import LOG_FIELD, ParsedLog
from collbench.analysis.imports.nccl_rows import build_import, parse_log, resolve_collective
from collbench.core.errors import SpecError
from collbench.core.knobs import check_knob_name, parse_knob_settings
from collbench.store.meta import RunMeta
from collbench.store.rows import ResultRow, utc_now
from collbench.store.rundir import (
    append_rows,
    new_run_id,
    prepare_run_dir,
    write_meta,
    write_parquet,
)


@dataclass(frozen=True)
class ImportResult:
    """A written import: where it went, its rows and its meta."""

    run_dir: Path
    rows: tuple[ResultRow, ...]
    meta: RunMeta

    @property
    def warnings(self) -> list[str]:
        return list(self.meta.warnings)


def import_logs(
    paths: Sequence[Path | str],
    out: Path | None = None,
    collective: str | None = None,
    knobs: Mapping[str, str] | None = None,
) -> ImportResult:
    """Import nccl-tests / rccl-tests logs into a new run directory (`out`, new or empty).

    Several logs become one run when they come from one system (same world size and
    backend); `collective` names the collective when the logs do not; `knobs` (from
    parse_knob_labels) labels what the logs were measured with (see label_knobs).
    """
    if not paths:
        raise SpecError(LOG_FIELD, "", "is missing: give at least one log file")
    override = resolve_collective(collective) if collective is not None else None
    logs = [read_log(Path(path)) for path in paths]
    run_id = new_run_id()
    rows, meta = build_import(logs, run_id, override, imported_utc=utc_now())
    if knobs:
        rows, meta = label_knobs(rows, meta, knobs)
        unknown = [w for n, v in knobs.items() for w in check_knob_name(n, f"{n}={v}")]
        meta = replace(meta, warnings=[*meta.warnings, *unknown])
    # meta.json names each log by its absolute path: the run may be read from elsewhere.
    meta = replace(meta, imported_from=[str(Path(path).resolve()) for path in meta.imported_from])
    _refuse_non_finite(rows, meta)
    run_dir = prepare_run_dir(out, run_id)
    append_rows(run_dir, rows)
    write_meta(run_dir, meta)
    write_parquet(run_dir)
    return ImportResult(run_dir=run_dir, rows=tuple(rows), meta=meta)


def parse_knob_labels(texts: Sequence[str]) -> dict[str, str]:
    """`--knob NAME=VALUE` labels, in the order given: one value each, checked as a sweep's
    `--knob` is (core.knobs.parse_knob_settings: a comma is part of the value, a typo gets
    "did you mean", a bad value or a knob given twice is refused); the warnings are the
    run's meta.json records (import_logs)."""
    return dict(parse_knob_settings(texts)[0])


def label_knobs(
    rows: Sequence[ResultRow], meta: RunMeta, labels: Mapping[str, str]
) -> tuple[list[ResultRow], RunMeta]:
    """Rows and meta with `labels` in their knobs' `env`, where a sweep records the knobs it
    ran with: a label wins over what the log printed. `settings.knob_labels` names them."""
    return (
        [replace(row, knobs=_labelled(row.knobs, labels)) for row in rows],
        replace(meta, knobs=_labelled(meta.knobs, labels)),
    )


def _labelled(knobs: Mapping[str, Any], labels: Mapping[str, str]) -> dict[str, Any]:
    settings = dict(knobs.get("settings") or {})
    settings["knob_labels"] = sorted(labels)
    return {
        **knobs,
        "env": {**(knobs.get("env") or {}), **labels},
        "settings": settings,
    }


def _refuse_non_finite(rows: Sequence[ResultRow], meta: RunMeta) -> None:
    """SpecError before anything is written if a figure is NaN or infinite: JSON has no
    such numbers (the rows builder drops those rows; this keeps the promise for the rest)."""
    try:
        for row in rows:
            json.dumps(row.to_dict(), allow_nan=False)
        json.dumps(meta.to_dict(), allow_nan=False, default=str)
    except ValueError:
        raise SpecError(
            LOG_FIELD,
            ", ".join(meta.imported_from),
            "holds a NaN or infinite figure that JSON cannot store; nothing was written",
        ) from None


def read_log(path: Path) -> ParsedLog:
    """Parse one nccl-tests / rccl-tests log file (text, or -J JSON)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as error:
        raise SpecError(LOG_FIELD, str(path), f"cannot be read: {error.strerror}") from None
    return parse_log(text, str(path))


@dataclass(frozen=True)
class ImportRequest:
    """What `collbench import nccl-tests` was asked for."""

    logs: tuple[Path, ...] = ()
    out: Path | None = None  # None: a new run directory under results/
    collective: str | None = None  # the collective measured, when the logs do not say
    knobs: tuple[str, ...] = ()  # NAME=VALUE labels of what the logs were measured with


def import_request(request: ImportRequest) -> ImportResult:
    """`import_logs` for what the command line asked (SpecError on bad input)."""
    labels = parse_knob_labels(request.knobs)
    return import_logs(request.logs, out=request.out, collective=request.collective, knobs=labels)
