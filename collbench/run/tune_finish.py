"""The end of a launched tune: its exit code and, on the node that writes it, the result
(the choice, tune.json, best.env and nccl_tuner.conf) of the settings measured."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from collbench.analysis.tune.outputs import env_choice, render_best_env, tune_document
from collbench.analysis.tune.select import select_best
from collbench.core.errors import EXIT_RUN_FAILED
from collbench.core.tune_grid import Setting
from collbench.run.tune_choices import load_choices
from collbench.run.tune_from import TuneFromResult, tuner_conf_text, write_result
from collbench.run.tune_workload import workload_choice
from collbench.store.tune_result import CHOICES_FILE, TuneLaunch, TunerConfStatus

if TYPE_CHECKING:
    from collbench.run.tune import Measured, Tuner


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
        ran = sum(1 for item in items if item.run_dirs)
        say(
            f"tune: {tuner.stopped[1]}: {ran} setting(s) ran a full sweep; the result is "
            "chosen from them and marked interrupted"
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
    backend = tuner.backend()
    # NCCL's own choices in the baseline (its choices pass) name the pair where a rule needs
    # it; only the collectives tuned (collbench's own control calls are not the job's)
    recorded = load_choices(Path(plan.out) / CHOICES_FILE, Setting().id)
    baseline = [line for line in recorded if line.get("collective") in tuner.spec.collectives]
    inputs = plan.tuner_conf.inputs([row for item in full for row in item.rows], baseline)
    conf, notes, reason = tuner_conf_text(backend, False, best, plan.channels, inputs)
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
    workload, why_not = workload_choice(outcomes, plan.workload)
    warnings += why_not
    for line in why_not:
        tuner.say(f"collbench: warning: {line}")
    core = tune_document([item.outcome() for item in items], best, plan.rule, workload=workload)
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
    written = write_result(plan.out, document, render_best_env(env_choice(best, workload)), conf)
    choices = Path(plan.out) / CHOICES_FILE
    if choices.exists():
        written.append(choices)
    return TuneFromResult(Path(plan.out), best, document, written, warnings, notes)
