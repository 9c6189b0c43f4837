"""What `collbench tune` is asked for (`TuneRequest`), and for a launched
tune, what it searches and how (`TunePlan`, its checks and defaults, `--ranges` words); and
how each sweep of a launched tune is run: its rendezvous port (alike on every node), the sweep
a halving round measures, the environment a setting runs in, and which collective a failed
sweep failed in (pure but for `environment`, which sets os.environ)."""

from __future__ import annotations

import contextlib
import math
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from collbench.analysis.tune.search import HalvingRule, probe_sizes
from collbench.analysis.tune.select import SelectRule
from collbench.core.errors import SpecError
from collbench.core.spec import DEFAULT_MAX_BYTES, SweepSpec
from collbench.core.tune_grid import (
    DEFAULT_MAX_SETTINGS,
    DEFAULT_TUNE_REPEATS,
    MAX_TUNE_REPEATS,
    KnobAxis,
)
from collbench.run.tune.from_runs import TunerConfRequest, check_channels
from collbench.run.tune.workload import TuneWorkload

SEARCHES = ("grid", "halving", "coordinate")


# --ranges: the option's words for SelectRule.granularity (whose default is written there)
RANGES = {"crossovers": "crossover", "bands": "band", "sizes": "size"}
RANGES_WORD = {granularity: word for word, granularity in RANGES.items()}
DEFAULT_RANGES = RANGES_WORD[SelectRule().granularity]


@dataclass(frozen=True)
class TuneRequest:
    """What `collbench tune run|from|verify` is given besides the plan: the knobs (run),
    the runs (from), where the result goes, and the training job to choose for."""

    knob: tuple[str, ...] = ()  # `NAME=V1,V2,...` axes as given (core.tune_grid parses them)
    runs: tuple[Path, ...] = ()
    out: Path | None = None  # required, except by verify (DIR/verify-<time>)
    workload: Path | None = None  # --workload FILE: choose best.env for mfu's training job


# Most settings a tune may measure (--max-settings): each is a whole sweep in fresh ranks,
# so 10,000 is already weeks; more is a typo (1e20), not a plan.
MAX_SETTINGS = 10_000


@dataclass(frozen=True)
class TunePlan:
    """What `collbench tune run --knob ...` searches and how."""

    axes: tuple[KnobAxis, ...]  # at least one: tune run refuses no --knob before
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
        if self.budget_s is not None and not self.budget_s > 0:
            raise SpecError("--budget", self.budget_s, "must be more than 0 seconds")
        check_channels(self.channels)
        for flag, count, most in (
            ("--max-settings", self.max_settings, MAX_SETTINGS),
            ("--repeats", self.repeats, MAX_TUNE_REPEATS),
        ):
            if isinstance(count, bool) or not (isinstance(count, int) and 1 <= count <= most):
                raise SpecError(flag, count, f"must be from 1 to {most:,}")

    def to_args(self) -> list[str]:
        """`collbench tune run` options that give exactly this plan (less its knobs, which
        the caller has as given), as SweepSpec.to_args gives a sweep's."""
        args = ["--search", self.search, "--max-settings", str(self.max_settings)]
        args += ["--repeats", str(self.repeats), "--ranges", RANGES_WORD[self.rule.granularity]]
        args += ["--budget", f"{self.budget_s:g}s"] if self.budget_s is not None else []
        args += ["--channels", str(self.channels)] if self.channels is not None else []
        args += ["--tuner-shape", self.tuner_conf.shape]
        args += [f"--nccl-log={Path(path).absolute()}" for path in self.tuner_conf.nccl_logs]
        return args + ([] if self.record_choices else ["--no-choices"])


def parse_ranges(text: str, flag: str = "--ranges") -> str:
    """SelectRule.granularity of a --ranges word (crossovers, bands, sizes), or SpecError."""
    if text not in RANGES:
        raise SpecError(flag, text, f"must be one of {', '.join(RANGES)}")
    return RANGES[text]


def check_one_dtype(spec: SweepSpec) -> None:
    """A tune judges settings per collective: one dtype and one reduction at a time."""
    for flag, value, several in (
        ("--dtype", spec.dtype, len(spec.dtypes) > 1),
        ("--op", spec.op, len(spec.ops) > 1),
    ):
        if several:
            raise SpecError(flag, value, "lists several; tune one at a time")


def round_port(port: int, index: int, slot: int, repeats: int) -> int:
    """The rendezvous port of one sweep of a tune: setting `index` (its place in the walk,
    alike on every node), sweep `slot` of it (0..repeats-1: its full sweeps; repeats: the
    choices pass; repeats + K: halving's probe round K), from these alone, so nodes that see
    different rows still meet, and no two sweeps of one tune share a port (until the span
    up to 65535 is used up: it wraps to `port`)."""
    slots = repeats + 1 + HalvingRule().max_rounds
    return port + (index * slots + slot) % (65536 - port)


def failed_collective(spec: SweepSpec, rows: Sequence[Any], error: str) -> str | None:
    """The collective a sweep of `spec` failed in: the one its error names (the launchers
    say "failed during all_gather 1024 B out_of_place"), else, where it finished some rows,
    the first collective with fewer rows than steps; None for a failure before any step
    (at init) or where the sizes are not known here (the backend's default)."""
    named = re.search(r"during (\w+) \d+ B ", error)
    if named and named.group(1) in spec.collectives:
        return named.group(1)
    if not rows:
        return None
    try:
        steps = [step.collective for step in spec.steps() if step.kind == "sweep"]
    except ValueError:
        return None
    done = [row.collective for row in rows]
    return next((name for name in spec.collectives if done.count(name) < steps.count(name)), None)


def probe_spec(spec: SweepSpec) -> SweepSpec:
    """The sweep a halving round measures: a few sizes across the bands (probe_sizes), as
    a geometric series so one sweep measures them all. Without a largest size, the bands
    end at the backend's default (the backend itself stays as given: the ranks resolve
    "auto" where they run)."""
    if spec.max_bytes is None:
        from collbench.bench.distributed import resolve_backend

        spec = replace(spec, max_bytes=DEFAULT_MAX_BYTES[resolve_backend(spec.backend)])
    probes = probe_sizes(spec.sizes())
    low, high = min(probes), max(probes)
    if len(probes) == 1 or low == high:
        return replace(spec, min_bytes=low, max_bytes=low, factor=None, step_bytes=None)
    steps = len(probes) - 1
    factor = 2.0 ** max(1, round(math.log2(high / low) / steps))
    return replace(
        spec, min_bytes=low, max_bytes=int(low * factor**steps), factor=factor, step_bytes=None
    )


@contextlib.contextmanager
def environment(env: Mapping[str, str]) -> Iterator[None]:
    """os.environ is exactly `env` inside (every launcher hands os.environ to the ranks)."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
