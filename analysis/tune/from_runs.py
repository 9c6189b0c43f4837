"""`collbench tune from RUN...`: tune from runs already measured, without launching (pure).

The method, in full: docs/tune.md#analysis-tune-from-runs-py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from collbench.analysis.rules.methodology import TUNE_FROM, check, describe_method
from collbench.analysis.tune.select import SettingOutcome
from collbench.core.errors import SpecError
from collbench.core.knobs import is_setting_knob
from collbench.core.tune_grid import Setting
from collbench.store.load import Run
from collbench.store.rows import ResultRow

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
            "is the only run: tune from chooses between settings, so give at least two runs "
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
    """The knob variables a run recorded that make a setting (core.knobs.is_setting_knob)."""
    return {
        name[len(_ENV) :]: str(value)
        for name, value in describe_method(run).items()
        if name.startswith(_ENV) and is_setting_knob(name[len(_ENV) :]) and value is not None
    }


def varying_knobs(runs: Sequence[Run]) -> list[str]:
    """The knob names whose value (or presence) differs between the runs, sorted."""
    knobs = [run_knobs(run) for run in runs]
    names = sorted({name for item in knobs for name in item})
    return [name for name in names if len({item.get(name) for item in knobs}) > 1]


@dataclass(frozen=True)
class RunSetting:
    """A `tune from` setting: the whole environment its runs had (`as_dict`: what
    best.env exports and nccl_tuner.conf reads), labelled by the knobs that differ between
    the runs (`label`, as the table shows it)."""

    env: Setting  # every knob the runs recorded
    shown: Setting  # the knobs that differ between the runs
    is_baseline: bool

    @property
    def id(self) -> str:
        return self.env.id

    @property
    def label(self) -> str:
        return self.shown.label

    def as_dict(self) -> dict[str, str]:
        return self.env.as_dict()


def differing_knobs(run: Run, names: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """The knobs among `names` (varying_knobs) a run set: what labels its setting."""
    recorded = run_knobs(run)
    return tuple((name, recorded[name]) for name in names if name in recorded)


def run_label(run: Run, names: Sequence[str]) -> str:
    """The label tune from gives a run's setting (RunSetting.label)."""
    return Setting.from_mapping(dict(differing_knobs(run, names))).label


def outcomes_from_runs(runs: Sequence[Run]) -> list[SettingOutcome]:
    """One outcome per distinct setting among the runs, the baseline first (see the module's
    rules); every sweep row of each run is kept."""
    names = varying_knobs(runs)
    groups: dict[tuple[tuple[str, str], ...], list[Any]] = {}
    whole: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
    for run in runs:
        key = differing_knobs(run, names)
        whole.setdefault(key, run_knobs(run))
        pooled = groups.setdefault(key, [])
        offset = max((row.repeat_index for row in pooled), default=-1) + 1  # repeats so far
        pooled.extend(as_repeats(run.sweep_rows, offset))
    baseline_key = () if () in groups else next(iter(groups))
    ordered = [baseline_key] + [key for key in groups if key != baseline_key]
    return [
        SettingOutcome(
            RunSetting(
                Setting.from_mapping(whole[key]),
                Setting.from_mapping(dict(key)),
                key == baseline_key,
            ),
            tuple(groups[key]),
        )
        for key in ordered
    ]


def as_repeats(rows: Sequence[ResultRow], offset: int) -> list[ResultRow]:
    """One run's rows as repeats of a setting pooled from several runs: each row's repeat
    moved on by `offset` (the repeats the runs before it hold)."""
    return [replace(row, repeat=offset + row.repeat_index) for row in rows]
