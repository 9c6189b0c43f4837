"""`collbench tune from RUN...`: the tune result from runs already measured, launching
nothing (analysis/tune/from_runs.py says how runs become settings).

The method, in full: docs/tune.md#collbench-run-tune-from-runs-py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collbench.analysis.tune.from_runs import check_tunable, outcomes_from_runs
from collbench.analysis.tune.outputs import recorded_library, render_best_env, tune_document
from collbench.analysis.tune.select import BestRecord, SelectRule, select_best
from collbench.analysis.tune.tuner_conf import (
    DEFAULT_TUNER_SHAPE,
    TunerConfUnavailable,
    communicator_shape,
    parse_tuner_shape,
    render_tuner_conf,
)
from collbench.analysis.tune.tuner_conf_rules import BACKENDS
from collbench.core.errors import SpecError
from collbench.core.tune_catalog import max_channels
from collbench.run.run_dirs import load_run_dir
from collbench.run.tune.choices import read_debug_logs
from collbench.run.tune.workload import TuneWorkload, workload_choice
from collbench.store.outputs import check_output_dir, path_error
from collbench.store.rundir import remove_temp_files
from collbench.store.tune_result import (
    BEST_ENV,
    TUNE_JSON,
    TUNER_CONF,
    TuneResult,
    save_tune_result,
)

# tune run --launcher slurm: the driver's batch script and output, made before the driver starts
DRIVER_FOLDER = "slurm"


@dataclass(frozen=True)
class ConfInputs:
    """What nccl_tuner.conf is written from besides the best records: the tuned
    communicator's shape for nNodes/nRanks ((None, None): -1, any) and what NCCL itself
    chose in the baseline (choices.jsonl lines or ChoiceSummary), where a rule must name
    NCCL's own pair."""

    shape: tuple[int | None, int | None] = (None, None)
    choices: tuple[Any, ...] = ()


@dataclass(frozen=True)
class TunerConfRequest:
    """How tune writes nccl_tuner.conf: `shape` "tuned" names the tuned communicator's
    nNodes/nRanks in every rule, "any" writes -1; `nccl_logs` are NCCL debug logs
    (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL,TUNING) of the baseline or of the job, saying what NCCL
    chose where a rule must name NCCL's own pair."""

    shape: str = DEFAULT_TUNER_SHAPE
    nccl_logs: tuple[Path, ...] = ()

    def __post_init__(self) -> None:
        parse_tuner_shape(self.shape)
        object.__setattr__(self, "nccl_logs", tuple(Path(path) for path in self.nccl_logs))

    def inputs(self, rows: Sequence[Any], choices: Sequence[Any] = ()) -> ConfInputs:
        """ConfInputs for runs of these rows: their shape (unless "any") and `choices` with
        those the logs hold."""
        shape = communicator_shape(rows)
        logged = read_debug_logs(list(self.nccl_logs), shape[1]) if self.nccl_logs else []
        kept = shape if self.shape == "tuned" else (None, None)
        return ConfInputs(kept, (*choices, *logged))


@dataclass(frozen=True)
class TuneFromResult:
    """What `tune from` decided and wrote."""

    out: Path
    best: list[BestRecord]
    document: TuneResult  # tune.json's content
    written: list[Path]
    warnings: list[str] = field(default_factory=list)  # one line each: `collbench: warning:`
    notes: list[str] = field(default_factory=list)  # nccl_tuner.conf's notes, one line each


def tune_from(
    paths: Sequence[Path],
    out: Path,
    channels: int | None = None,
    rule: SelectRule | None = None,
    workload: TuneWorkload | None = None,
    conf_request: TunerConfRequest | None = None,
) -> TuneFromResult:
    """Load the runs, choose the best setting per collective and range (and, for a
    `workload`, the setting that makes its step fastest), and write the files into `out` (a
    new or empty directory; SpecError otherwise, or when the runs differ in what tune needs
    them to share). `conf_request`: how nccl_tuner.conf is written (TunerConfRequest)."""
    rule = rule or SelectRule()
    conf_request = conf_request or TunerConfRequest()
    check_output_dir("--out", out, paths)
    _check_distinct(paths)
    runs = [load_run_dir(path) for path in paths]
    warnings = check_tunable(runs)
    backends = sorted({str(row.backend) for run in runs for row in run.sweep_rows})
    library = recorded_library(run.meta for run in runs)
    check_channels(channels, backends[0] if len(backends) == 1 else "nccl", library and library[1])
    outcomes = outcomes_from_runs(runs)
    best = select_best(outcomes, rule)
    imported = any(run.meta.source for run in runs)
    inputs = conf_request.inputs([row for run in runs for row in run.sweep_rows])
    conf, notes, reason = tuner_conf_text(", ".join(backends), imported, best, channels, inputs)
    if reason:
        warnings.append(reason)
    extra = {
        "from": [str(path) for path in paths],
        "tuner_conf": {"written": conf is not None, "reason": reason, "notes": notes},
        "warnings": warnings,
    }
    choice, why_not = workload_choice(outcomes, workload)
    warnings += why_not
    document = tune_document(outcomes, best, rule, extra, choice, library)
    written = write_result(out, document, render_best_env(document.env), conf)
    return TuneFromResult(out, best, document, written, warnings, notes)


def _check_distinct(paths: Sequence[Path]) -> None:
    """Each RUN once: the same directory twice would count one measurement as two repeats."""
    seen: dict[Path, Path] = {}
    for path in paths:
        real = Path(path).resolve()
        if real in seen:
            raise SpecError(
                "RUN",
                str(path),
                f"is given twice (as {seen[real]} too): one run is one measurement, not two "
                "repeats; give each run once",
            )
        seen[real] = Path(path)


def check_channels(
    channels: int | None, backend: str | None = None, version: str | None = None
) -> None:
    """--channels: a count, or 0 for NCCL's own (None: not given), at most what `backend`
    has at `version` (core.tune_catalog.max_channels). tune checks it again once the
    backend is known: its spec's, or the --from runs' (with the release they recorded)."""
    if channels is not None and channels < 0:
        raise SpecError("--channels", channels, "must be a count, or 0 for NCCL's own")
    most, limit = max_channels(backend, version)
    if channels is not None and channels > most:
        raise SpecError("--channels", channels, f"is more than {limit}")


def tuner_conf_text(
    backend: str,
    imported: bool,
    best: Sequence[BestRecord],
    channels: int | None,
    inputs: ConfInputs,
) -> tuple[str | None, list[str], str | None]:
    """nccl_tuner.conf's text and notes, or (None, [], why it is not written). `backend`:
    the runs' backend (several joined by ", " never have a tuner plugin); `imported`: some
    runs are imported logs, which record no channel count; `inputs`: the shape and NCCL's
    own choices (ConfInputs)."""
    if backend not in BACKENDS:
        return (
            None,
            [],
            (
                f"{TUNER_CONF} not written: backend {backend} has no tuner plugin "
                f"(only {', '.join(BACKENDS)})"
            ),
        )
    try:
        text, notes = render_tuner_conf(
            best,
            channels=channels,
            backend=backend,
            nodes=inputs.shape[0],
            ranks=inputs.shape[1],
            imported=imported,
            baseline_choices=inputs.choices,
        )
    except TunerConfUnavailable as error:
        return None, [], str(error)
    return text, notes, None


def write_result(out: Path, document: TuneResult, env: str, conf: str | None) -> list[Path]:
    """tune.json, best.env and (when given) nccl_tuner.conf into `out`; the paths written.
    All or none: a failure (a full disk) removes those written and is one line
    (store/outputs.py: exit 1 for a full disk); an empty `out` may be used again."""
    try:
        return save_tune_result(out, document, env, conf)
    except OSError as error:
        for name in (TUNE_JSON, BEST_ENV, TUNER_CONF):
            (Path(out) / name).unlink(missing_ok=True)
        remove_temp_files(Path(out))
        raise path_error("--out", out, error) from None
