"""What `collbench tune` is asked for: which of its forms (`TuneRequest`), and for a launched
tune, what it searches and how (`TunePlan`, its checks and defaults, `--ranges` words)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from collbench.analysis.tune.select import SelectRule
from collbench.core.errors import SpecError
from collbench.core.spec import SweepSpec
from collbench.core.tune_grid import (
    DEFAULT_MAX_SETTINGS,
    DEFAULT_TUNE_REPEATS,
    MAX_TUNE_REPEATS,
    KnobAxis,
)
from collbench.run.tune_from import TunerConfRequest, check_channels
from collbench.run.tune_workload import TuneWorkload

SEARCHES = ("grid", "halving", "coordinate")


# --ranges: the option's words for SelectRule.granularity (whose default is written there)
RANGES = {"crossovers": "crossover", "bands": "band", "sizes": "size"}


DEFAULT_RANGES = next(name for name, value in RANGES.items() if value == SelectRule().granularity)


@dataclass(frozen=True)
class TuneRequest:
    """Which of tune's three forms the command line asks for (`--knob` measures settings,
    `--from RUN...` chooses from runs already measured, `--verify DIR` checks a result),
    and where the result goes."""

    knob: tuple[str, ...] = ()  # `NAME=V1,V2,...` axes as given (core.tune_grid parses them)
    from_runs: bool = False
    runs: tuple[Path, ...] = ()
    verify: Path | None = None
    out: Path | None = None  # required, except by --verify (DIR/verify-<time>)
    workload: bool = False  # --workload: choose best.env for mfu's training job


# Most settings a tune may measure (--max-settings): each is a whole sweep in fresh ranks,
# so 10,000 is already weeks; more is a typo (1e20), not a plan.
MAX_SETTINGS = 10_000


@dataclass(frozen=True)
class TunePlan:
    """What `collbench tune --knob ...` searches and how."""

    axes: tuple[KnobAxis, ...]
    out: Path
    search: str = "grid"
    budget_s: float | None = None
    max_settings: int = DEFAULT_MAX_SETTINGS
    channels: int | None = None
    rule: SelectRule = field(default_factory=SelectRule)
    record_choices: bool = True
    repeats: int = DEFAULT_TUNE_REPEATS  # runs of each setting, fresh processes, interleaved
    workload: TuneWorkload | None = None  # --workload: the training job best.env is for
    tuner_conf: TunerConfRequest = field(default_factory=TunerConfRequest)  # nccl_tuner.conf

    def __post_init__(self) -> None:
        if self.search not in SEARCHES:
            raise SpecError("--search", self.search, f"is not one of {', '.join(SEARCHES)}")
        if not self.axes:
            raise SpecError(
                "--knob", "", "is required: the knobs to tune, e.g. --knob NCCL_ALGO=Ring,Tree"
            )
        if self.budget_s is not None and not self.budget_s > 0:
            raise SpecError("--budget", self.budget_s, "must be more than 0 seconds")
        check_channels(self.channels)
        if isinstance(self.max_settings, bool) or not (
            isinstance(self.max_settings, int) and 1 <= self.max_settings <= MAX_SETTINGS
        ):
            raise SpecError(
                "--max-settings", self.max_settings, f"must be from 1 to {MAX_SETTINGS:,}"
            )
        if isinstance(self.repeats, bool) or not (
            isinstance(self.repeats, int) and 1 <= self.repeats <= MAX_TUNE_REPEATS
        ):
            raise SpecError("--repeats", self.repeats, f"must be from 1 to {MAX_TUNE_REPEATS}")


def parse_ranges(text: str, flag: str = "--ranges") -> str:
    """SelectRule.granularity of a --ranges word (crossovers, bands, sizes), or SpecError."""
    if text not in RANGES:
        raise SpecError(flag, text, f"must be one of {', '.join(RANGES)}")
    return RANGES[text]


def ranges_word(granularity: str) -> str:
    """The --ranges word of a SelectRule.granularity."""
    return next(name for name, value in RANGES.items() if value == granularity)


def check_one_dtype(spec: SweepSpec) -> None:
    """A tune judges settings per collective: one dtype and one reduction at a time."""
    for flag, value, several in (
        ("--dtype", spec.dtype, len(spec.dtypes) > 1),
        ("--op", spec.op, len(spec.ops) > 1),
    ):
        if several:
            raise SpecError(flag, value, "lists several; tune one at a time")
