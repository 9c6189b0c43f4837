"""What NCCL chose during a tune: the debug environment for the choices pass, and its log
files read back into one choices.jsonl line per (setting, collective, size) NCCL decided.

The method, in full: docs/tune.md#collbench-run-tune-choices-py.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path

from collbench.analysis.imports.nccl_choice import (
    Choice,
    ChoiceSummary,
    debug_env,
    parse_choices,
    summarize,
)
from collbench.core.errors import CollbenchError, SpecError
from collbench.core.limits import LOG_MAX_BYTES, LOG_MAX_LINE_BYTES
from collbench.core.spec import SweepSpec
from collbench.store.load import load_run
from collbench.store.reading import iter_lines
from collbench.store.rows import SWEEP

DEBUG_FILE = "nccl-%h-%p.log"  # NCCL expands %h (host) and %p (pid): one file per process


def choices_env(folder: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """NCCL_DEBUG, NCCL_DEBUG_SUBSYS (widened, never narrowed) and NCCL_DEBUG_FILE into
    `folder` (which must exist: NCCL falls back to stdout otherwise)."""
    return debug_env(None, str(Path(folder).absolute() / DEBUG_FILE), environ)


def collect_choices(
    folder: Path, setting_id: str, out_file: Path, spec: SweepSpec | None = None
) -> int:
    """Append what the debug files in `folder` say NCCL used, one JSON line per collective
    and size, to `out_file`; returns the lines written. With `spec` (the pass's sweep, its
    run in folder/run): only the (collective, size) pairs the sweep measured, in its dtype;
    collbench's own control collectives (the barrier's all-reduce, the gathers of timings
    and identities, the data check's reductions) print the same lines and are dropped."""
    lines: list[str] = []
    for path in sorted(Path(folder).glob("nccl-*.log")):
        lines += path.read_text(encoding="utf-8", errors="replace").splitlines()
    run_dir = Path(folder) / "run"
    rows: list = []
    if run_dir.is_dir():
        with contextlib.suppress(CollbenchError):
            rows = load_run(run_dir).rows_of(SWEEP)
    # the pass's world size (its rows'), for NCCL's per-rank byte counts; None unknown
    choices = parse_choices(lines, int(rows[0].world_size) if rows else None)
    if spec is not None:
        # the pairs the sweep measures: its rows' (sizes as aligned to the world size) and,
        # where known here, the spec's own sizes
        measured = {(row.collective, row.size_bytes) for row in rows}
        with contextlib.suppress(ValueError):  # the backend's default largest size: the rows say
            measured |= {(name, size) for name in spec.collectives for size in spec.sizes()}
        choices = [item for item in choices if _measured(item, measured, spec.dtypes)]
    written = 0
    with open(out_file, "a", encoding="utf-8") as handle:
        for summary in summarize(choices):
            for used in summary.used:
                entry = {
                    "setting": setting_id,
                    "collective": summary.collective,
                    "size_bytes": summary.size_bytes,
                    "size_is_logged": summary.size_is_logged,
                    **asdict(used),  # algorithm, protocol, channels, count
                }
                handle.write(json.dumps(entry) + "\n")
                written += 1
    return written


def _measured(choice: Choice, measured: set[tuple[str, int]], dtypes: tuple[str, ...]) -> bool:
    size = choice.size_bytes if choice.size_bytes is not None else choice.logged_bytes
    return (choice.collective, size) in measured and (
        choice.dtype is None or choice.dtype in dtypes
    )


def load_choices(path: Path, setting_id: str) -> list[dict]:
    """The lines of a choices.jsonl (collect_choices) for one setting; [] without the file.
    A line that is not a JSON object (a tune killed mid-write) is skipped."""
    if not Path(path).is_file():
        return []
    lines = []
    for _, raw in iter_lines(Path(path), "choices.jsonl", LOG_MAX_LINE_BYTES, LOG_MAX_BYTES):
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("setting") == setting_id:
            lines.append(entry)
    return lines


def read_debug_logs(paths: list[Path], world_size: int | None) -> list[ChoiceSummary]:
    """What NCCL used per collective and size, from debug logs (NCCL_DEBUG=INFO,
    NCCL_DEBUG_SUBSYS=COLL,TUNING, NCCL 2.20+); SpecError naming the log that holds no choice."""
    summaries: list[ChoiceSummary] = []
    for path in paths:
        lines = [
            raw.decode("utf-8", errors="replace")
            for _, raw in iter_lines(Path(path), "--nccl-log", LOG_MAX_LINE_BYTES, LOG_MAX_BYTES)
        ]
        found = summarize(parse_choices(lines, world_size))
        if not found:
            raise SpecError(
                "--nccl-log",
                str(path),
                "holds no line saying what NCCL chose: run with NCCL_DEBUG=INFO "
                "NCCL_DEBUG_SUBSYS=COLL,TUNING (NCCL 2.20 or later prints it, on rank 0; before 2.23 "
                "only COLL names the collective)",
            )
        summaries += found
    return summaries
