"""`collbench tune --knob ...`: measure every setting in fresh rank processes and choose the
best per collective and size range (the same choice and files as `tune --from`).

Each setting is one sweep through the chosen launcher, so it runs in new rank processes
however that launcher starts them: a new local spawn, a new torchrun round (every node's
`collbench tune` walks the same settings in the same order; setting i rendezvouses at the
master port + i, so a fast node never meets the previous round's store), a new mpirun, or
one srun step inside the allocation. The setting's knobs are exported for that sweep only;
the baseline gets the environment exactly as given.

--repeats R: every setting is measured R times, each time in fresh processes (NCCL reads its
environment once per process, and what a process sets up, such as its channels, differs
from one process to the next), interleaved: A B C A B C ... so drift over the tune falls
on every setting alike. The decision rule (analysis.decision) takes its statistics from
those repeats. A setting's rows are pooled with their repeat renumbered to the tune's.

A setting that fails (the backend rejecting a value at init, a rank crash, a hang past
--timeout) is recorded with its error, is not repeated, and the search goes on. Rows stream
into one run directory per setting and repeat (settings/NN-<id>; with --repeats above 1,
settings/NN-<id>-rK for K = 1..R), so a killed tune keeps every finished repeat.

Searches: grid (every setting), halving (probe rounds on a few sizes drop the clearly worse,
then full sweeps for the survivors) and coordinate (numeric knobs one at a time, per
algorithm/protocol pair); analysis/tune/search.py decides, this module measures. Halving's
probe rounds measure each setting once; full sweeps are repeated. Coordinate descent
interleaves the repeats of each batch of settings it proposes (the baseline with the first).

Ctrl-C, SIGTERM or SIGHUP (or a full disk: exit 1) ends the tune, not only the sweep running: the settings measured so
far are chosen from as usual, tune.json says `interrupted` (its not_run lists the settings of
the round under way that never started) and the exit code is the signal's (130, 143, 129).
A second signal waits for that result to be written.

On NCCL/RCCL a short extra pass per setting runs with NCCL's debug output on
(choices.jsonl: the algorithm, protocol and channels NCCL used). It is separate because
NCCL prints a line per collective call, which would slow the timed iterations it reports on.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from collbench.analysis.tune.from_runs import as_repeats
from collbench.analysis.tune.outputs import env_choice, render_best_env, tune_document
from collbench.analysis.tune.search import (
    DescentRule,
    HalvingRule,
    descent_next,
    halving_iters,
    halving_round,
    probe_sizes,
    settings_left,
)
from collbench.analysis.tune.select import SelectRule, SettingOutcome, select_best
from collbench.core.errors import EXIT_RUN_FAILED, CollbenchError, SpecError
from collbench.core.spec import SweepSpec
from collbench.core.tune_grid import (
    DEFAULT_MAX_SETTINGS,
    DEFAULT_TUNE_REPEATS,
    MAX_TUNE_REPEATS,
    KnobAxis,
    Setting,
    build_grid,
    check_axis,
    conf_file_warnings,
    setting_env,
)
from collbench.launchers.supervise import STOPPED_CODES, Stopped, StopSignals
from collbench.run.sweep import RunOptions, run_sweep
from collbench.run.tune_choices import choices_env, collect_choices
from collbench.run.tune_from import (
    DRIVER_FOLDER,
    TuneFromResult,
    check_channels,
    check_out,
    tuner_conf_text,
    write_result,
)
from collbench.store.load import load_run
from collbench.store.rows import SWEEP
from collbench.store.rundir import META_FILE
from collbench.store.sink import SinkFactory
from collbench.store.tune_result import (
    CHOICES_FILE,
    SettingRuns,
    TuneLaunch,
    TunerConfStatus,
)

SEARCHES = ("grid", "halving", "coordinate")
# --ranges: the option's words for SelectRule.granularity (whose default is written there)
RANGES = {"bands": "band", "sizes": "size"}
DEFAULT_RANGES = next(name for name, value in RANGES.items() if value == SelectRule().granularity)
SETTINGS_DIR = "settings"
PROBES_DIR = "probes"
CHOICES_DIR = "nccl-debug"
NCCL_BACKENDS = ("nccl", "rccl")


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
    """SelectRule.granularity of a --ranges word (bands, sizes), or SpecError."""
    if text not in RANGES:
        raise SpecError(flag, text, f"must be one of {', '.join(RANGES)}")
    return RANGES[text]


def ranges_word(granularity: str) -> str:
    """The --ranges word of a SelectRule.granularity."""
    return next(name for name, value in RANGES.items() if value == granularity)


@dataclass
class _Measured:
    """One setting as the tune saw it (mutable while the search runs)."""

    setting: Setting
    index: int
    rows: tuple = ()  # the full sweeps' rows, every repeat's (probe rounds: the last round's)
    error: str | None = None
    # the full sweeps' directories, one per repeat, relative to the tune directory
    run_dirs: list[str] = field(default_factory=list)
    probes: list[str] = field(default_factory=list)
    dropped: str | None = None
    duration_s: float = 0.0
    # a later repeat that failed after an earlier one measured: its error, the setting kept
    repeat_errors: list[str] = field(default_factory=list)

    @property
    def run_dir(self) -> str | None:
        """The first repeat's directory (None: no full sweep ran)."""
        return self.run_dirs[0] if self.run_dirs else None

    def outcome(self) -> SettingOutcome:
        return SettingOutcome(self.setting, tuple(self.rows), self.error)

    def runs(self) -> SettingRuns:
        """What tune.json records of this setting's runs."""
        return SettingRuns(
            run_dirs=tuple(self.run_dirs),
            probes=tuple(self.probes),
            dropped=self.dropped,
            repeat_errors=tuple(self.repeat_errors),
            duration_s=round(self.duration_s, 3),
        )


class _Tuner:
    """Runs settings one after another and keeps what each gave."""

    def __init__(
        self,
        spec: SweepSpec,
        options: RunOptions,
        plan: TunePlan,
        command_line: list[str],
        make_sink: SinkFactory,
        say: Callable[[str], None],
    ) -> None:
        self.spec, self.options, self.plan = spec, options, plan
        self.command_line, self.make_sink, self.say = command_line, make_sink, say
        self.base_env = dict(os.environ)
        self.out = Path(plan.out).absolute()
        self.measured: dict[Setting, _Measured] = {}
        self.started = time.monotonic()
        self.durations: list[float] = []
        self.not_run: list[dict[str, Any]] = []
        self.rounds = 0  # sweeps launched: each gets its own rendezvous port
        self.warned = False
        # (exit code, how) once a stop signal ended the tune; the settings of the round
        # under way (those never started are listed as not run)
        self.stopped: tuple[int, str] | None = None
        self.round: Sequence[Setting] = ()

    # -- one sweep of one setting ---------------------------------------------------------

    def record(self, setting: Setting) -> _Measured:
        if setting not in self.measured:
            self.measured[setting] = _Measured(setting, len(self.measured))
        return self.measured[setting]

    def folder(self, setting: Setting, parent: str, prefix: str = "", suffix: str = "") -> str:
        item = self.record(setting)
        return f"{parent}/{prefix}{item.index:02d}-{setting.id}{suffix}"

    def sweep(self, setting: Setting, spec: SweepSpec, relative: str) -> tuple[tuple, str | None]:
        """Run `spec` under `setting` into out/relative: (rows, error or None)."""
        run_dir = self.out / relative
        options = replace(
            self.options, out=run_dir, output="quiet", print_only=False, extra=self._extra()
        )
        self.rounds += 1
        error = None
        with _environment(setting_env(setting, self.base_env)):
            try:
                result, _ = run_sweep(spec, options, self.command_line, self.make_sink)
                error = result.error or (f"exit code {result.code}" if result.code else None)
                if result.code in STOPPED_CODES:
                    self.stopped = (result.code, str(result.error).split(";")[0])
                elif (error or "").startswith("disk full"):  # every later setting would fail
                    self.stopped = (EXIT_RUN_FAILED, str(error).split(";")[0])
            except CollbenchError as caught:
                error = str(caught)
        rows = ()
        if run_dir.is_dir() and not (run_dir / META_FILE).exists():
            # Not even the launcher could write meta.json (a full disk): no half-made
            # setting directory is left for tune.json to point at.
            shutil.rmtree(run_dir, ignore_errors=True)
        if run_dir.is_dir():
            with contextlib.suppress(CollbenchError):
                rows = tuple(load_run(run_dir).rows_of(SWEEP))
        return rows, error

    def _extra(self) -> dict[str, Any]:
        """The launcher's options for this round: torchrun's rendezvous port moves on by one
        per round, the same on every node (they walk the same settings in order)."""
        extra = dict(self.options.extra)
        if self.options.launcher == "torchrun":
            endpoint = extra.get("rdzv_endpoint")
            if endpoint:
                host, _, port = str(endpoint).rpartition(":")
                extra["rdzv_endpoint"] = f"{host}:{int(port) + self.rounds}"
            elif extra.get("nnodes", 1) > 1 or extra.get("master_addr"):
                from collbench.launchers.base import DEFAULT_MASTER_PORT

                extra["master_port"] = (extra.get("master_port") or DEFAULT_MASTER_PORT) + (
                    self.rounds
                )
        return extra

    def measure(
        self, setting: Setting, spec: SweepSpec, stage: str, position: str, repeat: int = 0
    ) -> _Measured:
        """A full sweep (stage "": repeat `repeat` of it) or a probe round of `setting`,
        with a progress line."""
        item = self.record(setting)
        several = not stage and self.plan.repeats > 1
        if stage:
            relative = self.folder(setting, PROBES_DIR, f"{stage}-")
        else:
            relative = self.folder(
                setting, SETTINGS_DIR, suffix=f"-r{repeat + 1}" if several else ""
            )
        begun = time.monotonic()
        rows, error = self.sweep(setting, spec, relative)
        took = time.monotonic() - begun
        self.durations.append(took)
        item.duration_s += took
        if stage:
            item.probes.append(relative)
            item.rows, item.error = rows, error
        else:
            if (self.out / relative).is_dir():  # gone: a full disk kept nothing of it
                item.run_dirs.append(relative)
            # this tune's repeat K holds the sweep's own repeats (one, as tune runs it) at K
            pooled = as_repeats(rows, repeat * spec.repeats)
            item.rows = tuple(pooled) if repeat == 0 else (*item.rows, *pooled)
            if error is not None and repeat > 0 and item.error is None:
                # earlier repeats measured: keep them (and this one's finished rows), say so
                item.repeat_errors.append(f"repeat {repeat + 1}: {error}")
            else:
                item.error = item.error or error
        if rows:
            self.warn_backend()
        if not error and not stage and repeat == 0 and self.plan.record_choices:
            self.record_choices(setting)
        status = "ok" if error is None else f"FAILED: {error}"
        label = f"{stage} " if stage else ""
        which = f" (repeat {repeat + 1}/{self.plan.repeats})" if several else ""
        self.say(f"tune: {label}setting {position}{which} {setting.label}: {status} ({took:.1f} s)")
        if self.stopped is not None:
            raise _TuneStopped()
        return item

    def stop(self, stopped: Stopped | None) -> None:
        """The tune was cut short (`stopped`: by a signal outside any sweep): the settings
        of the round under way that never started are recorded as not run."""
        if self.stopped is None and stopped is not None:
            self.stopped = (stopped.code, stopped.message)
        how = self.stopped[1] if self.stopped else "interrupted"
        for setting in self.round:
            item = self.measured.get(setting)
            if item is not None and not (item.run_dirs or item.probes or item.error):
                item.error = f"{how} before it ran"
            elif item is None:
                self.skip(setting, f"the tune was {how.split(' ')[0]} before it ran")

    def record_choices(self, setting: Setting) -> None:
        """NCCL/RCCL: a short pass with NCCL's debug output on; its lines into choices.jsonl."""
        backend = self.backend()
        if backend not in NCCL_BACKENDS:
            return
        folder = self.out / CHOICES_DIR / f"{self.record(setting).index:02d}-{setting.id}"
        folder.mkdir(parents=True, exist_ok=True)
        spec = replace(self.spec, warmup=0, iters=1, check=False)
        env = {**setting_env(setting, self.base_env)}
        env.update(choices_env(folder, env))
        with _environment(env):
            options = replace(
                self.options,
                out=folder / "run",
                output="quiet",
                print_only=False,
                extra=self._extra(),
            )
            self.rounds += 1
            try:
                run_sweep(spec, options, self.command_line, self.make_sink)
            except CollbenchError as caught:
                self.say(f"tune: NCCL's choices for {setting.label} not recorded: {caught}")
                return
        collect_choices(folder, setting.id, self.out / CHOICES_FILE)

    def backend(self) -> str:
        if self.spec.backend != "auto":
            return self.spec.backend
        for item in self.measured.values():
            for row in item.rows:
                return str(row.backend)
        return "auto"

    # -- budget ---------------------------------------------------------------------------

    def out_of_budget(self) -> bool:
        left = settings_left(self.plan.budget_s, time.monotonic() - self.started, self.durations)
        return left is not None and left < 1

    def skip(self, setting: Setting, reason: str) -> None:
        self.not_run.append({"knobs": setting.as_dict(), "label": setting.label, "reason": reason})

    # -- searches -------------------------------------------------------------------------

    def run_all(self, settings: Sequence[Setting], spec: SweepSpec, stage: str = "") -> bool:
        """Measure `settings` in order, numbered n/total: full sweeps --repeats times,
        interleaved (A B C A B C ...; a setting that failed is not repeated), a probe round
        once. False where --budget ran out (and what did not run is recorded)."""
        repeats = 1 if stage else self.plan.repeats
        self.round = settings
        for repeat in range(repeats):
            for number, setting in enumerate(settings, start=1):
                item = self.measured.get(setting)
                if repeat and (item is None or item.error is not None):
                    continue
                if not self.within_budget(settings[number - 1 :], repeat):
                    return False
                self.measure(setting, spec, stage, f"{number}/{len(settings)}", repeat)
        return True

    def within_budget(self, rest: Sequence[Setting], repeat: int = 0) -> bool:
        """False (and the settings never started recorded as not run) once the budget has
        no room for another sweep."""
        if not self.durations or not self.out_of_budget():
            return True
        never = rest if repeat == 0 else ()
        for setting in never:
            self.skip(setting, f"--budget {self.plan.budget_s:g} s spent")
        if repeat == 0:
            self.say(f"tune: --budget spent; {len(never)} settings not run")
        else:
            self.say(
                f"tune: --budget spent in repeat {repeat + 1} of {self.plan.repeats}; every "
                "setting keeps the repeats it finished"
            )
        return False

    def warn_backend(self) -> None:
        """Once the ranks have said which backend "auto" is: the knobs it does not read."""
        if self.warned or self.spec.backend != "auto" or self.backend() == "auto":
            return
        self.warned = True
        for axis in self.plan.axes:
            for warning in check_axis(axis, self.backend())[1]:
                if "does not apply" in warning:
                    self.say(f"collbench: warning: {warning}")

    def repeat_words(self) -> str:
        repeats = self.plan.repeats
        return f", {repeats} times each, interleaved" if repeats > 1 else ""

    def grid(self) -> None:
        settings = build_grid(self.plan.axes, self.plan.max_settings, exhaustive=True)
        self.say(
            f"tune: {len(settings)} settings (grid, the baseline first), each in fresh "
            f"processes{self.repeat_words()}"
        )
        self.run_all(settings, self.spec)

    def halving(self) -> None:
        settings = list(build_grid(self.plan.axes, self.plan.max_settings, exhaustive=False))
        probe_spec = _probe_spec(_sized(self.spec))
        rule = HalvingRule()
        self.say(
            f"tune: {len(settings)} settings (successive halving on "
            f"{', '.join(str(size) for size in probe_spec.sizes())} B, then full sweeps)"
        )
        for round_index in range(rule.max_rounds):
            iters = halving_iters(self.spec.iters, round_index, rule)
            self.run_all(settings, replace(probe_spec, iters=iters), f"r{round_index + 1}")
            ran = [self.measured[s] for s in settings if s in self.measured]
            decision = halving_round([item.outcome() for item in ran], round_index, rule)
            for outcome, reason in decision.drop:
                self.measured[outcome.setting].dropped = f"round {round_index + 1}: {reason}"
            settings = [outcome.setting for outcome in decision.keep]
            self.say(
                f"tune: round {round_index + 1}: {len(settings)} kept, "
                f"{len(decision.drop)} dropped ({decision.reason})"
            )
            if decision.done or self.out_of_budget():
                break
        for item in self.measured.values():  # probe rows do not count as the setting's result
            if item.setting in settings:
                item.rows = ()
        self.run_all(settings, self.spec)

    def coordinate(self) -> None:
        rule = DescentRule(max_settings=self.plan.max_settings)
        self.say("tune: coordinate descent (numeric knobs one at a time), the baseline first")
        batch = [build_grid((), 1)[0]]  # the baseline, measured with the starting points
        while True:
            outcomes = [
                item.outcome() for item in self.measured.values() if not item.setting.is_baseline
            ]
            proposal = descent_next(self.plan.axes, outcomes, rule)
            batch += proposal.settings
            if batch and not self.run_all(batch, self.spec):
                return
            batch = []
            if proposal.done or not proposal.settings or self.out_of_budget():
                self.say(f"tune: descent stopped: {proposal.reason}")
                return


def run_tune(
    spec: SweepSpec,
    options: RunOptions,
    plan: TunePlan,
    command_line: list[str],
    make_sink: SinkFactory,
    say: Callable[[str], None],
    warnings: Sequence[str] = (),
) -> tuple[TuneFromResult | None, int]:
    """Measure the settings and write the result into plan.out; (result, exit code). On a
    torchrun node other than 0, nothing is written: (None, code)."""
    build_grid(plan.axes, plan.max_settings, exhaustive=plan.search == "grid")  # refuse early
    check_channels(plan.channels, spec.backend)
    _check_nodes_agree(plan, options)
    writes = _writes_result(options)
    if writes:
        check_out(plan.out, allowed=(DRIVER_FOLDER,) if options.launcher == "srun" else ())
        Path(plan.out).mkdir(parents=True, exist_ok=True)
    tuner = _Tuner(spec, options, plan, command_line, make_sink, say)
    warnings = [*warnings, *_conf_warnings(plan, tuner.base_env)]
    for warning in warnings:
        say(f"collbench: warning: {warning}")
    with StopSignals() as stops:
        try:
            getattr(tuner, plan.search)()
        except _TuneStopped:  # the sweep's launcher caught the signal
            stops.stopped = True  # so a second one stays ignored to the exit
            tuner.stop(None)
        except Stopped as stopped:
            tuner.stop(stopped)
        finally:
            stops.shield()  # a second Ctrl-C waits for tune.json
        return _finish(tuner, writes, warnings)


def _finish(tuner: _Tuner, writes: bool, warnings: list[str]) -> tuple[TuneFromResult | None, int]:
    """The exit code and, where this node writes it, the result of the settings measured."""
    say = tuner.say
    items = sorted(tuner.measured.values(), key=lambda item: item.index)
    baseline = next((item for item in items if item.setting.is_baseline), None)
    ok = [item for item in items if item.error is None and item.rows]
    code = 0 if baseline is not None and baseline.error is None and ok else EXIT_RUN_FAILED
    if baseline is not None and baseline.error is not None:
        say(f"tune: the baseline failed, so no gain can be measured: {baseline.error}")
    elif not ok:
        say("tune: every setting failed")
    if tuner.stopped is not None:
        code = tuner.stopped[0]
        ran = sum(1 for item in items if item.run_dirs)
        say(
            f"tune: {tuner.stopped[1]}: {ran} setting(s) ran a full sweep; the result is "
            "chosen from them and tune.json says interrupted"
        )
    if not writes:
        say(f"tune: this node walked {len(items)} settings; node 0 writes the result")
        return None, code
    return _result(tuner, items, warnings), code


def _result(tuner: _Tuner, items: list[_Measured], warnings: list[str]) -> TuneFromResult:
    plan = tuner.plan
    full = [item for item in items if item.run_dirs or item.error is not None]
    outcomes = [item.outcome() for item in full]
    best = select_best(outcomes, plan.rule)
    backend = tuner.backend()
    conf, notes, reason = tuner_conf_text(backend, False, best, plan.channels)
    warnings = list(warnings)
    if reason:
        warnings.append(reason)
        tuner.say(f"collbench: warning: {reason}")
    launch = TuneLaunch(
        search=plan.search,
        repeats=plan.repeats,
        budget_s=plan.budget_s,
        command_line=tuple(tuner.command_line),
        spec=tuner.spec.to_dict(),
        launcher=tuner.options.launcher,
        not_run=tuple(tuner.not_run),
        elapsed_s=round(time.monotonic() - tuner.started, 3),
    )
    core = tune_document([item.outcome() for item in items], best, plan.rule)
    document = replace(
        core,
        settings=tuple(
            replace(entry, repeats=len(item.run_dirs), runs=item.runs())
            for entry, item in zip(core.settings, items, strict=True)
        ),
        launch=launch,
        tuner_conf=TunerConfStatus(conf is not None, reason, tuple(notes)),
        warnings=tuple(warnings),
        interrupted=tuner.stopped[1] if tuner.stopped is not None else None,
    )
    written = write_result(plan.out, document, render_best_env(env_choice(best)), conf)
    choices = Path(plan.out) / CHOICES_FILE
    if choices.exists():
        written.append(choices)
    return TuneFromResult(Path(plan.out), best, document, written, warnings, notes)


class _TuneStopped(Exception):
    """A sweep of the tune was stopped by a signal (the tune's _Tuner.stopped says which)."""


def _check_nodes_agree(plan: TunePlan, options: RunOptions) -> None:
    """Several torchrun nodes each run their own `collbench tune` and must walk the same
    settings: only a grid with no --budget is the same list on every node (a search decides
    from results, and a clock runs out at different settings on different nodes)."""
    extra = options.extra
    several = options.launcher == "torchrun" and (
        extra.get("nnodes", 1) > 1 or extra.get("rdzv_endpoint")
    )
    if not several:
        return
    if plan.search != "grid":
        raise SpecError(
            "--search",
            plan.search,
            "needs one process deciding for every node; with several torchrun nodes use "
            "--search grid, or --launcher slurm (one driver, an srun step per setting)",
        )
    if plan.budget_s is not None:
        raise SpecError(
            "--budget",
            f"{plan.budget_s:g}s",
            "would stop each torchrun node at a different setting; use --max-settings, or "
            "--launcher slurm",
        )


def _writes_result(options: RunOptions) -> bool:
    """Only node 0 of a multi-node torchrun writes the tune directory's files."""
    return not (options.launcher == "torchrun" and options.extra.get("node_rank", 0))


def _conf_warnings(plan: TunePlan, base_env: Mapping[str, str]) -> list[str]:
    from collbench.run.tune_choices import conf_files

    return conf_file_warnings(conf_files(), plan.axes, base_env)


def _probe_spec(spec: SweepSpec) -> SweepSpec:
    """The sweep a halving round measures: a few sizes across the bands (probe_sizes), as
    a geometric series so one sweep measures them all."""
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
def _environment(env: Mapping[str, str]) -> Iterator[None]:
    """os.environ is exactly `env` inside (every launcher hands os.environ to the ranks)."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _sized(spec: SweepSpec) -> SweepSpec:
    """`spec` with its largest size known: the backend's default when not given (the
    backend itself stays as given: the ranks resolve "auto" where they run)."""
    if spec.max_bytes is not None:
        return spec
    from collbench.bench.distributed import resolve_backend
    from collbench.core.spec import DEFAULT_MAX_BYTES

    return replace(spec, max_bytes=DEFAULT_MAX_BYTES[resolve_backend(spec.backend)])
