"""`collbench tune run --knob ...`: measure every setting in fresh rank processes and choose the
best per collective and size range (the same choice and files as `tune from`).

The method, in full: docs/tune.md#collbench-run-tune-launch-py.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from collbench.analysis.tune.from_runs import as_repeats
from collbench.analysis.tune.outputs import recorded_library, render_best_env, tune_document
from collbench.analysis.tune.search import (
    HalvingRule,
    descent_next,
    halving_iters,
    halving_round,
    settings_left,
)
from collbench.analysis.tune.select import SettingOutcome, select_best
from collbench.analysis.tune.validity import Skipped, per_collective_hint, split_collectives
from collbench.bench.provenance import library_version, nccl_conf_files
from collbench.bench.resume import attempt
from collbench.core.errors import EXIT_RUN_FAILED, CollbenchError, SpecError
from collbench.core.spec import SweepSpec
from collbench.core.tune_grid import (
    Setting,
    build_grid,
    check_axis,
    conf_file_warnings,
    setting_env,
)
from collbench.core.units import counted
from collbench.launchers.supervise import STOPPED_CODES, Stopped, StopSignals
from collbench.run.sweep import RunOptions, choose_launcher, run_sweep
from collbench.run.tune.choices import choices_env, collect_choices, load_choices
from collbench.run.tune.from_runs import (
    DRIVER_FOLDER,
    TuneFromResult,
    check_channels,
    tuner_conf_text,
    write_result,
)
from collbench.run.tune.plan import (
    TunePlan,
    check_one_dtype,
    environment,
    failed_collective,
    probe_spec,
    round_port,
)
from collbench.run.tune.workload import workload_choice
from collbench.store.load import load_run
from collbench.store.outputs import check_output_dir
from collbench.store.rows import SWEEP
from collbench.store.rundir import META_FILE, read_meta
from collbench.store.sink import SinkFactory
from collbench.store.tune_result import CHOICES_FILE, SettingRuns, TuneLaunch, TunerConfStatus

NCCL_BACKENDS = ("nccl", "rccl")


@dataclass
class Measured:
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
    # the pairings (collectives) NCCL cannot run under this setting, never launched
    skipped: tuple[Skipped, ...] = ()
    # where a sweep failed part-way: {"collective": ..., "error": ...} (its rows are kept)
    failed_in: dict[str, str] | None = None

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
            skipped=tuple(item.to_dict() for item in self.skipped),
            failed_in=self.failed_in,
        )


class Tuner:
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
        self.measured: dict[Setting, Measured] = {}
        self.started = time.monotonic()
        self.durations: list[float] = []
        self.not_run: list[dict[str, Any]] = []
        self.warned = False
        # settings NCCL can run none of the spec's collectives under: the reason (not run)
        self.unrunnable: dict[Setting, str] = {}
        self.library: str | None = None  # the backend as judged before launching
        # (exit code, how) once a stop signal ended the tune; the settings of the round
        # under way (those never started are listed as not run)
        self.stopped: tuple[int, str] | None = None
        self.round: Sequence[Setting] = ()

    # -- one sweep of one setting ---------------------------------------------------------

    def record(self, setting: Setting) -> Measured:
        if setting not in self.measured:
            self.measured[setting] = Measured(setting, len(self.measured))
        return self.measured[setting]

    def folder(self, setting: Setting, parent: str, prefix: str = "", suffix: str = "") -> str:
        return f"{parent}/{prefix}{self.record(setting).index:02d}-{setting.id}{suffix}"

    def sweep(
        self, setting: Setting, spec: SweepSpec, relative: str, slot: int
    ) -> tuple[tuple, str | None]:
        """Run `spec` under `setting` into out/relative as its sweep `slot` (round_port):
        (rows, error or None)."""
        run_dir = self.out / relative
        kept = _kept_sweep(run_dir)
        if kept is not None:  # a requeued driver: measured by an earlier attempt
            self.say(f"tune: {relative} kept from an earlier attempt of the job")
            return kept, None
        options = self._sweep_options(setting, run_dir, slot)
        error = None
        with environment(setting_env(setting, self.base_env)):
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

    def _sweep_options(self, setting: Setting, out: Path, slot: int) -> RunOptions:
        """Sweep `slot` of `setting` (round_port) into `out`, quiet: torchrun's rendezvous
        port is round_port's, from the setting's index and the slot alone, so every node
        (each walks the same settings in order, seeing rows or not) meets at the same one."""
        extra = dict(self.options.extra)
        index, repeats = self.record(setting).index, self.plan.repeats
        if self.options.launcher == "torchrun":
            endpoint = extra.get("rdzv_endpoint")
            if endpoint:
                host, _, port = str(endpoint).rpartition(":")
                extra["rdzv_endpoint"] = f"{host}:{round_port(int(port), index, slot, repeats)}"
            elif extra.get("nnodes", 1) > 1 or extra.get("master_addr"):
                from collbench.launchers.base import DEFAULT_MASTER_PORT

                port = extra.get("master_port") or DEFAULT_MASTER_PORT
                extra["master_port"] = round_port(port, index, slot, repeats)
        return replace(self.options, out=out, output="quiet", print_only=False, extra=extra)

    def measure(
        self, setting: Setting, spec: SweepSpec, stage: str, position: str, repeat: int = 0
    ) -> Measured:
        """A full sweep (stage "": repeat `repeat` of it) or a probe round of `setting`,
        with a progress line."""
        item = self.record(setting)
        several = not stage and self.plan.repeats > 1
        if stage:
            relative = self.folder(setting, "probes", f"{stage}-")
        else:
            relative = self.folder(setting, "settings", suffix=f"-r{repeat + 1}" if several else "")
        begun = time.monotonic()
        slot = self.plan.repeats + int(stage.lstrip("r")) if stage else repeat
        rows, error = self.sweep(setting, spec, relative, slot)
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
            if error is not None and item.failed_in is None:
                failed = failed_collective(spec, rows, error)
                item.failed_in = failed and {"collective": failed, "error": error}
        if rows:
            self.warn_backend()
        if not error and not stage and repeat == 0 and self.plan.record_choices:
            self.record_choices(setting, spec)
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
            elif item is None and setting not in self.unrunnable:
                self.skip(setting, f"the tune was {how.split(' ')[0]} before it ran")

    def record_choices(self, setting: Setting, spec: SweepSpec) -> None:
        """NCCL/RCCL: a short pass of `spec` with NCCL's debug output on; its lines into
        choices.jsonl. Every node runs the pass (its ranks are part of it), decided before
        any run (judged_backend) so that nodes without rows agree; only the node that
        writes the result turns the debug output on and records it."""
        if self.judged_backend() not in NCCL_BACKENDS:
            return
        folder = self.out / self.folder(setting, "nccl-debug")
        writes = _writes_result(self.options)
        env = {**setting_env(setting, self.base_env)}
        if writes:
            folder.mkdir(parents=True, exist_ok=True)
            env.update(choices_env(folder, env))
        with environment(env):
            options = self._sweep_options(setting, folder / "run", self.plan.repeats)
            try:
                run_sweep(
                    replace(spec, warmup=0, iters=1, check=False),
                    options,
                    self.command_line,
                    self.make_sink,
                )
            except CollbenchError as caught:
                self.say(f"tune: NCCL's choices for {setting.label} not recorded: {caught}")
                return
        if writes:
            collect_choices(folder, setting.id, self.out / CHOICES_FILE, spec)

    def backend(self) -> str:
        if self.spec.backend != "auto":
            return self.spec.backend
        rows = (row for item in self.measured.values() for row in item.rows)
        return next((str(row.backend) for row in rows), "auto")

    def judged_backend(self) -> str:
        """The backend the ranks run, judged before launching and alike on every node: the
        spec's, or "auto" resolved here (as the ranks resolve it); where that finds no GPU
        and the ranks run elsewhere (an srun or mpirun driver off the GPU nodes), what the
        rows say (the baseline runs first). A torchrun node runs its ranks itself, and
        only node 0 sees rows: its own answer is the one every node shares."""
        if self.library is None:
            from collbench.bench.distributed import resolve_backend

            auto = self.spec.backend == "auto"
            self.library = resolve_backend("auto") if auto else self.spec.backend
        elsewhere = self.options.launcher in ("mpi", "slurm", "srun")
        if self.library not in NCCL_BACKENDS and self.spec.backend == "auto" and elsewhere:
            return self.backend()
        return self.library

    def runnable(self, setting: Setting, spec: SweepSpec) -> SweepSpec | None:
        """`spec` without the collectives NCCL cannot run under `setting` (validity's
        table; NCCL/RCCL only, never the baseline), said once per setting and recorded;
        None where none is left (the setting is then not run, with the reason)."""
        if setting.is_baseline or self.judged_backend() not in NCCL_BACKENDS:
            return spec
        if setting in self.unrunnable:
            return None
        kept, skipped = split_collectives(setting.as_dict(), spec.collectives)
        if not skipped:
            return spec
        reasons = "; ".join(dict.fromkeys(entry.reason for entry in skipped))
        item = self.measured.get(setting)
        if item is None or not item.skipped:  # the first time: say it
            names = ", ".join(entry.collective for entry in skipped)
            hint = per_collective_hint(setting.as_dict(), kept, skipped)
            more = f" ({hint})" if hint else ""
            self.say(f"tune: {setting.label} skips {names}: {reasons}{more}")
        if not kept:
            reason = f"NCCL cannot run any of its collectives: {reasons}"
            self.unrunnable[setting] = reason
            self.skip(setting, reason)
            return None
        self.record(setting).skipped = skipped
        return replace(spec, collectives=kept)

    # -- budget ---------------------------------------------------------------------------

    def out_of_budget(self) -> bool:
        left = settings_left(self.plan.budget_s, time.monotonic() - self.started, self.durations)
        return left is not None and left < 1

    def skip(self, setting: Setting, reason: str) -> None:
        self.not_run.append({"knobs": setting.as_dict(), "label": setting.label, "reason": reason})

    # -- searches -------------------------------------------------------------------------

    def run_all(self, settings: Sequence[Setting], spec: SweepSpec, stage: str = "") -> bool:
        """Measure `settings` in order, numbered n/total: full sweeps --repeats times,
        interleaved (A B C A B C ...; a setting that failed is repeated only in the
        collectives it finished), a probe round once; each without the collectives NCCL
        cannot run under it (runnable). False where --budget ran out (and what did not run
        is recorded)."""
        repeats = 1 if stage else self.plan.repeats
        self.round = settings
        for repeat in range(repeats):
            for number, setting in enumerate(settings, start=1):
                runnable = self.runnable(setting, spec)
                if repeat and runnable is not None:
                    runnable = _repeatable(self.measured.get(setting), runnable)
                if runnable is None:
                    continue
                if not self.within_budget(settings[number - 1 :], repeat):
                    return False
                self.measure(setting, runnable, stage, f"{number}/{len(settings)}", repeat)
        return True

    def within_budget(self, rest: Sequence[Setting], repeat: int = 0) -> bool:
        """False (and the settings never started recorded as not run) once the budget has
        no room for another sweep."""
        if not self.durations or not self.out_of_budget():
            return True
        never = [item for item in rest if item not in self.unrunnable] if repeat == 0 else []
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
        probes = probe_spec(self.spec)
        rule = HalvingRule()
        self.say(
            f"tune: {len(settings)} settings (successive halving on "
            f"{', '.join(str(size) for size in probes.sizes())} B, then full sweeps)"
        )
        for round_index in range(rule.max_rounds):
            iters = halving_iters(self.spec.iters, round_index, rule)
            self.run_all(settings, replace(probes, iters=iters), f"r{round_index + 1}")
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
        self.say("tune: coordinate descent (numeric knobs one at a time), the baseline first")
        batch = [build_grid((), 1)[0]]  # the baseline, measured with the starting points
        while True:
            outcomes = [
                item.outcome() for item in self.measured.values() if not item.setting.is_baseline
            ]
            # settings NCCL can run none of the collectives under count as tried (failed)
            outcomes += [
                SettingOutcome(setting, (), why) for setting, why in self.unrunnable.items()
            ]
            proposal = descent_next(self.plan.axes, outcomes, self.plan.max_settings)
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
    check_channels(plan.channels, spec.backend, library_version(spec.backend))
    check_one_dtype(spec)
    _check_nodes_agree(plan, options)
    if choose_launcher(options.launcher, options.rank_env) == "local":
        # what sweep refuses before it launches, refused before the first setting: ranks
        # on this host that cannot start (no GPU for --backend nccl, -g 0)
        from collbench.bench.distributed import resolve_backend
        from collbench.launchers.local import local_nproc

        local_nproc(spec.with_backend(resolve_backend(spec.backend)), options.nproc)
    writes = _writes_result(options)
    if writes and not (options.launcher == "srun" and attempt()):  # requeued: resume
        allowed = (DRIVER_FOLDER,) if options.launcher == "srun" else ()
        if options.launcher == "torchrun" and options.extra.get("nnodes", 1) > 1:
            allowed = ("settings", "probes")  # the other nodes' first sweeps may be there first
        check_output_dir("--out", plan.out, allowed=allowed)
        Path(plan.out).mkdir(parents=True, exist_ok=True)
    tuner = Tuner(spec, options, plan, command_line, make_sink, say)
    conf_files = nccl_conf_files(tuner.base_env, tuner.base_env.get("HOME"))
    warnings = [*warnings, *conf_file_warnings(conf_files, plan.axes, tuner.base_env)]
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
        return finish_tune(tuner, writes, warnings)


def _kept_sweep(run_dir: Path) -> tuple | None:
    """The rows of a setting's sweep an earlier attempt of this requeued driver completed
    (bench/resume.py); None to measure it: first attempt, or a sweep it left unfinished,
    which is removed (measured again whole, in fresh ranks)."""
    if not attempt() or not run_dir.is_dir():
        return None
    run = load_run(run_dir)
    if run.meta.state == "completed":
        return tuple(run.rows_of(SWEEP))
    shutil.rmtree(run_dir, ignore_errors=True)
    return None


class _TuneStopped(Exception):
    """A sweep of the tune was stopped by a signal (the tune's Tuner.stopped says which)."""


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


def _repeatable(item: Measured | None, spec: SweepSpec) -> SweepSpec | None:
    """What a later repeat of a setting measures: `spec`; for a setting whose first sweep
    failed, only the collectives it finished (None: nothing, as after a failure at init)."""
    if item is None or item.error is None:
        return None if item is None else spec
    failed = item.failed_in["collective"] if item.failed_in else None
    finished = {row.collective for row in item.rows} - {failed}
    kept = tuple(name for name in spec.collectives if name in finished)
    return replace(spec, collectives=kept) if kept and failed else None


def finish_tune(
    tuner: Tuner, writes: bool, warnings: list[str]
) -> tuple[TuneFromResult | None, int]:
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
        # the setting cut short has a directory too, and the stop as its error
        ran = sum(1 for item in items if item.run_dirs and item.error is None)
        chosen = "is chosen from them and" if ran else "holds no choice and is"
        say(
            f"tune: {tuner.stopped[1]}: {counted(ran, 'setting')} finished a full sweep; the "
            f"result {chosen} marked interrupted"
        )
    if not writes:
        say(f"tune: this node walked {len(items)} settings; node 0 writes the result")
        return None, code
    return tune_result(tuner, items, warnings), code


def tune_result(tuner: Tuner, items: list[Measured], warnings: list[str]) -> TuneFromResult:
    plan = tuner.plan
    full = [item for item in items if item.run_dirs or item.error is not None]
    outcomes = [item.outcome() for item in full]
    best = select_best(outcomes, plan.rule)
    # NCCL's own choices in the baseline (its choices pass) name the pair where a rule needs
    # it; only the collectives tuned (collbench's own control calls are not the job's)
    recorded = load_choices(Path(plan.out) / CHOICES_FILE, Setting().id)
    baseline = [line for line in recorded if line.get("collective") in tuner.spec.collectives]
    inputs = plan.tuner_conf.inputs([row for item in full for row in item.rows], baseline)
    conf, notes, reason = tuner_conf_text(tuner.backend(), False, best, plan.channels, inputs)
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
    workload, why_not = workload_choice(outcomes, plan.workload)
    said = [reason, *why_not] if reason else why_not
    for line in said:
        tuner.say(f"collbench: warning: {line}")
    warnings = [*warnings, *said]
    library = recorded_library(
        read_meta(tuner.out / item.run_dir) for item in full if item.run_dir is not None
    )
    core = tune_document(
        [item.outcome() for item in items], best, plan.rule, workload=workload, library=library
    )
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
    written = write_result(plan.out, document, render_best_env(document.env), conf)
    choices = Path(plan.out) / CHOICES_FILE
    if choices.exists():
        written.append(choices)
    return TuneFromResult(Path(plan.out), best, document, written, warnings, notes)
