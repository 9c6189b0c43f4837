"""`collbench tune --from RUN...`: tune from runs already measured, without launching (pure).

The runs must be measured alike as the one methodology rule's TUNE_FROM purpose says
(analysis/rules/methodology.py): the collectives measured, the rank count, the node count and
the dtype refuse (SpecError naming every field that differs); other methodology differences
(iterations, timing method, an nccl-tests log next to a collbench sweep) and the backend warn.

Each run's setting is read from the knobs it recorded (meta.json `knobs.env` as the
methodology rule reads it: a sweep's environment, or what an imported log printed and the
`--knob` labels given at import). The knobs of a setting are the recorded variables
whose values differ between the runs; logging variables (NCCL_DEBUG, ...) never count.
Runs with the same knobs are one setting, and each run is a repeat of it: their rows are
pooled with the repeat renumbered (the first RUN's repeats first, then the next RUN's, ...;
a run measured with --repeats keeps its own repeats, offset), so the decision rule reads
several runs of one setting as its repeats (3 or more a side: a test on the repeats). The
baseline is the setting with no knob set; when every run set one, the first RUN stands for
the default (its knobs stay in its record).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from collbench.analysis.rules.methodology import TUNE_FROM, check, describe_method
from collbench.analysis.tune.select import SettingOutcome
from collbench.core.errors import SpecError
from collbench.store.load import Run
from collbench.store.rows import ResultRow

# Variables that change what a library logs, not how it communicates.
LOGGING_KNOBS = frozenset(
    {
        "NCCL_DEBUG",
        "NCCL_DEBUG_SUBSYS",
        "NCCL_DEBUG_FILE",
        "RCCL_LOG_LEVEL",
        "TORCH_CPP_LOG_LEVEL",
        "TORCH_DISTRIBUTED_DEBUG",
        "TORCH_SHOW_CPP_STACKTRACES",
    }
)
_ENV = "env."


def check_tunable(runs: Sequence[Run]) -> list[str]:
    """SpecError("RUN", ...) without runs, with one run, or with runs that differ in no knob
    (one setting: nothing to choose between); the methodology rule's refusal (one line naming
    every field that differs) when they are not runs of one question; otherwise one warning
    line per run that differs from the first in how it was measured."""
    if not runs:
        raise SpecError("RUN", "", "names no run: give the runs to tune from")
    if len(runs) == 1:
        raise SpecError(
            "RUN",
            runs[0].path,
            "is the only run: tune --from chooses between settings, so give at least two runs "
            "measured with different knobs",
        )
    warnings = check(runs, TUNE_FROM).warnings
    if not varying_knobs(runs):
        knobs = run_knobs(runs[0])
        same = ", ".join(f"{name}={value}" for name, value in sorted(knobs.items())) or "none"
        raise SpecError(
            "RUN",
            ", ".join(run.path for run in runs),
            f"differ in no knob (every run set the same: {same}): they are one setting, so "
            "there is nothing to choose between; give runs measured with different knobs",
        )
    return warnings


def run_knobs(run: Run) -> dict[str, str]:
    """The knob variables a run recorded, logging variables left out."""
    return {
        name[len(_ENV) :]: str(value)
        for name, value in describe_method(run).items()
        if name.startswith(_ENV) and name[len(_ENV) :] not in LOGGING_KNOBS and value is not None
    }


def varying_knobs(runs: Sequence[Run]) -> list[str]:
    """The knob names whose value (or presence) differs between the runs, sorted."""
    knobs = [run_knobs(run) for run in runs]
    names = sorted({name for item in knobs for name in item})
    return [name for name in names if len({item.get(name) for item in knobs}) > 1]


def outcomes_from_runs(runs: Sequence[Run]) -> list[SettingOutcome]:
    """One outcome per distinct setting among the runs, the baseline first (see the module's
    rules); every sweep row of each run is kept."""
    from collbench.core.tune_grid import Setting

    names = varying_knobs(runs)
    groups: dict[tuple[tuple[str, str], ...], list[Any]] = {}
    for run in runs:
        recorded = run_knobs(run)
        key = tuple((name, recorded[name]) for name in names if name in recorded)
        pooled = groups.setdefault(key, [])
        pooled.extend(as_repeats(run.sweep_rows, _repeats_in(pooled)))
    baseline_key = () if () in groups else next(iter(groups))
    ordered = [baseline_key] + [key for key in groups if key != baseline_key]
    return [
        SettingOutcome(
            Setting.from_mapping(dict(key)),
            tuple(groups[key]),
            baseline=key == baseline_key,
        )
        for key in ordered
    ]


def as_repeats(rows: Sequence[ResultRow], offset: int) -> list[ResultRow]:
    """One run's rows as repeats of a setting pooled from several runs: each row's repeat
    moved on by `offset` (the repeats the runs before it hold)."""
    return [replace(row, repeat=offset + row.repeat_index) for row in rows]


def _repeats_in(rows: Sequence[ResultRow]) -> int:
    return max((row.repeat_index for row in rows), default=-1) + 1
