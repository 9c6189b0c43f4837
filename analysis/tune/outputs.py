"""`collbench tune`'s result documents: tune.json's content and best.env's text (pure).

The method, in full: docs/tune.md#analysis-tune-outputs-py.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, replace
from typing import Any

from collbench.analysis.rules.decision import SLOWER, Question, evidence_of, judge
from collbench.analysis.tune.records import repeats_busbw
from collbench.analysis.tune.select import (
    BestRecord,
    SelectRule,
    SettingOutcome,
    range_label,
    setting_table,
)
from collbench.analysis.tune.tuner_conf_rules import PLUGIN_COLLECTIVE
from collbench.analysis.tune.validity import split_collectives
from collbench.analysis.tune.workload import SettingStep, WorkloadChoice, resolve
from collbench.core.errors import SpecError
from collbench.core.safe_text import ENV_NAME, escape_control, refuse_control
from collbench.core.stats import geomean
from collbench.core.tune_catalog import release
from collbench.store.meta import RunMeta
from collbench.store.tune_result import EnvExport, TuneResult, TuneSetting


def env_choice(
    best: Sequence[BestRecord],
    workload: WorkloadChoice | None = None,
    outcomes: Sequence[SettingOutcome] = (),
    rule: SelectRule | None = None,
    library: tuple[str, str] | None = None,
) -> EnvExport:
    """The one setting best.env exports (see the module's rule; with a resolved `workload`,
    its `exported` setting) and the conflicts, made safe for a whole job (`deployable`).
    Without a workload, a setting that loses a measured range (in `outcomes`) by more than
    the rule's threshold against the default is not exported."""
    choice = _env_choice(best, workload)
    loss = _loses_a_range(choice, best, outcomes, rule or SelectRule()) if not workload else None
    if loss is not None:
        why = (
            f"{choice.setting} is best where it was chosen but {loss}: one environment would "
            "cost that range; give --workload (it weighs the ranges by the job) or deploy "
            "nccl_tuner.conf (per range)"
        )
        return EnvExport({}, "baseline", why, choice.conflicts)
    nodes = sorted({row.nodes for item in outcomes for row in item.rows if row.nodes})
    knobs, note = deployable(choice.knobs, [r.collective for r in best], library, nodes)
    return choice if note is None else replace(choice, knobs=knobs, why=f"{choice.why}; {note}")


# NCCL reads NCCL_ALGO's per-collective form (`allreduce:tree`) from 2.24 (RCCL too, whose
# releases follow NCCL's numbering); older releases switch every algorithm off and fall back
# to their own choice in silence.
PER_COLLECTIVE_SINCE = (2, 24)


def deployable(
    knobs: Mapping[str, str],
    measured: Sequence[str] = (),
    library: tuple[str, str] | None = None,
    nodes: Sequence[int] = (),
) -> tuple[dict[str, str], str | None]:
    """`knobs` as a whole job can export them. A plain NCCL_ALGO list is set only for the
    `measured` collectives (every collective NCCL can run under it when none is named) and
    only where NCCL runs it: NCCL_ALGO=Tree alone would fail every all-gather and
    reduce-scatter, NVLS would be forced on collectives never measured. That needs the
    per-collective form (`allreduce:tree`); the `library` (name, version) the runs recorded
    decides whether it is read: an older one gets no NCCL_ALGO at all. The note says what
    was done and on how many `nodes` it was measured (None: nothing changed)."""
    value = knobs.get("NCCL_ALGO")
    if not value or ":" in value or ";" in value:
        return dict(knobs), None
    kept, skipped = split_collectives({"NCCL_ALGO": value}, tuple(PLUGIN_COLLECTIVE))
    ran = [name for name in kept if not measured or name in measured]
    if not kept or (not skipped and ran == list(kept)):
        return dict(knobs), None
    form = ";".join(f"{PLUGIN_COLLECTIVE[name]}:{value.lower()}" for name in ran)
    on = f" on {'/'.join(map(str, nodes))} node(s)" if nodes else ""
    note = f"NCCL_ALGO={value} was measured for {', '.join(ran) or 'no collective'}{on}"
    name, version = library or ("NCCL", "")
    numbers = release(version)[:2]
    if not ran or (len(numbers) == 2 and numbers < PER_COLLECTIVE_SINCE):
        return {k: v for k, v in knobs.items() if k != "NCCL_ALGO"}, (
            f"{note}; {name} {version} reads no per-collective NCCL_ALGO (2.24+) and would "
            "switch every algorithm off in silence, so NCCL_ALGO is not exported: deploy "
            "nccl_tuner.conf, which sets it per collective and size"
        )
    known = f"{name} {version} reads it" if version else "NCCL 2.24+ only: no version recorded"
    return {**knobs, "NCCL_ALGO": form}, (
        f"{note}, so it is exported as NCCL_ALGO={form}, leaving the other collectives to "
        f"NCCL ({known}; older NCCL switches every algorithm off in silence)"
    )


def recorded_library(metas: Iterable[RunMeta | None]) -> tuple[str, str] | None:
    """The communication library and version the runs recorded (("NCCL", "2.21.5"))."""
    for meta in metas:
        for name in ("nccl", "rccl"):
            if meta is not None and (meta.versions or {}).get(name):
                return name.upper(), str(meta.versions[name])
    return None


def _loses_a_range(
    choice: EnvExport,
    best: Sequence[BestRecord],
    outcomes: Sequence[SettingOutcome],
    rule: SelectRule,
) -> str | None:
    """Where the chosen setting loses to the default: its busbw over a range more than the
    rule's threshold below the default's, and the decision rule calling a size of it slower
    (beyond the noise), in one clause ('is 17.0% slower than the default in all_reduce
    large: 16 MiB .. 512 MiB'); None when it loses no measured range."""
    ran = [item for item in outcomes if item.error is None]
    chosen = [item for item in ran if item.setting.label == choice.setting]
    default = [item for item in ran if item.is_baseline]
    if not choice.knobs or not chosen or not default:
        return None
    for record in best:
        if record.knobs == choice.knobs:
            continue
        pick, base = (
            setting_table(item.rows, record.collective, record.placement)
            for item in (chosen[0], default[0])
        )
        sizes = [size for size in record.sizes if size in pick and size in base]
        if not sizes:
            continue
        change = (
            geomean([repeats_busbw(pick[size]) for size in sizes])
            / geomean([repeats_busbw(base[size]) for size in sizes])
            - 1.0
        )
        if change >= -rule.unsampled_min_gain:
            continue
        questions = [Question(evidence_of(base[s]), evidence_of(pick[s]), s) for s in sizes]
        slower = [v for v in judge(questions, rule.decision_rule) if v.call == SLOWER]
        if slower:  # the evidence: the range's change, and one size's verdict with its floor
            where = range_label(record.band, record.sizes)
            return (
                f"is {-change:.1%} slower than the default in {record.collective} {where} "
                f"(a size there: {slower[0].describe()})"
            )
    return None


def _env_choice(best: Sequence[BestRecord], workload: WorkloadChoice | None) -> EnvExport:
    pick: BestRecord | SettingStep
    if workload is not None:
        pick, why = workload.exported or workload.chosen, workload.why
    elif not best:
        return EnvExport({}, "baseline", "nothing was tuned")
    elif len({_knob_key(record.knobs) for record in best}) == 1:
        pick, why = best[0], "the best setting in every range"
    else:
        votes: dict[tuple[tuple[str, str], ...], list[BestRecord]] = {}
        for name in dict.fromkeys(record.collective for record in best):
            mine = [record for record in best if record.collective == name]
            largest = max(mine, key=lambda record: record.min_bytes)  # its largest range votes
            votes.setdefault(_knob_key(largest.knobs), []).append(largest)
        winner = max(
            votes.values(),
            key=lambda records: (len(records), max(item.gain or 0.0 for item in records)),
        )
        pick = winner[0]
        names = ", ".join(record.collective for record in winner)
        why = f"the best setting of the largest size range of {names}"
    conflicts = [_conflict(record, pick.setting) for record in best if record.knobs != pick.knobs]
    return EnvExport(dict(pick.knobs), pick.setting, why, tuple(conflicts))


def render_best_env(choice: EnvExport) -> str:
    """best.env: comment lines and `export NAME=VALUE`, ending in a newline; every line made
    by best_env_line. SpecError when a knob to export is no variable name or holds a control
    character (a recorded run's knobs can: `--knob` refuses them)."""
    comments = ["collbench tune: the environment to export (every range is in tune.json)"]
    if choice.knobs:
        comments.append(f"{choice.setting}: {choice.why}")
    else:
        comments.append(f"the default environment: {choice.why}; nothing to export")
    exports = (best_env_line(export=pair) for pair in choice.knobs.items())
    lines = [*map(best_env_line, comments), *exports]
    if choice.conflicts and choice.knobs:  # exporting nothing follows the default everywhere
        notes = [
            "The best setting differs between size ranges; one environment cannot",
            "express it (nccl_tuner.conf can, per range). Not followed here:",
            *choice.conflicts,
        ]
        lines += map(best_env_line, notes)
    return "\n".join(lines) + "\n"


def best_env_line(comment: str = "", export: tuple[str, str] | None = None) -> str:
    """One line of best.env, the only way one is made. `export=(NAME, VALUE)`: `export
    NAME=VALUE`, the value shell-quoted, the name a variable's (SpecError otherwise) and
    neither holding a control character (SpecError: quoting keeps `$(...)`, backticks and `;`
    inert, but a newline is refused all the same). Otherwise `# comment`, its control
    characters escaped, so nothing in a label or a reason can end the comment."""
    if export is None:
        return f"# {escape_control(comment)}"
    name, value = export
    refuse_control("best.env", f"{name}={value}")
    if not ENV_NAME.fullmatch(name):
        raise SpecError("best.env", name, "is not an environment variable's name: not exported")
    return f"export {name}={shlex.quote(value)}"


def tune_document(
    outcomes: Sequence[SettingOutcome],
    best: Sequence[BestRecord],
    rule: SelectRule | None = None,
    extra: Mapping[str, Any] | None = None,
    workload: WorkloadChoice | None = None,
    library: tuple[str, str] | None = None,
) -> TuneResult:
    """tune.json's content: `settings` (knobs, status, error, id, label, baseline, rows,
    repeats), `best` (BestRecord.to_dict), `env` (best.env's choice and conflicts), `rule`,
    and the caller's `extra` keys as tune.json names them (a launched tune's, or `from`,
    `tuner_conf`, `warnings`); with a `workload`, its choice as the measurements resolve it
    (`workload`; analysis/tune/workload.resolve)."""
    rule = rule or SelectRule()
    if workload is not None:
        workload = resolve(workload, outcomes, rule)
        extra = {**(extra or {}), "workload": workload.to_dict()}
    core = TuneResult(
        settings=tuple(_setting_entry(outcome) for outcome in outcomes),
        best=tuple(best),
        env=env_choice(best, workload, outcomes, rule, library),
        rule=asdict(rule),
    )
    return TuneResult.from_dict({**core.to_dict(), **(extra or {})}) if extra else core


def _setting_entry(outcome: SettingOutcome) -> TuneSetting:
    setting = outcome.setting
    return TuneSetting(
        knobs=setting.as_dict(),
        status=outcome.status,
        error=outcome.error,
        id=setting.id,
        label=setting.label,
        baseline=outcome.is_baseline,
        rows=len(outcome.rows),
        repeats=outcome.repeats,
    )


def _knob_key(knobs: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(knobs.items()))


def _conflict(record: BestRecord, exported: str) -> str:
    """`all_reduce 16 MiB .. 512 MiB: best is baseline, best.env exports X` (a fixed band
    keeps its name: `large: 16 MiB .. 8 GiB`)."""
    where = range_label(record.band, record.sizes)
    gain = f" {record.gain * 100:+.1f}%" if record.gain is not None else ""
    best = "the default" if record.default_is_best else record.setting
    return f"{record.collective} {where}: best is {best}{gain}, best.env exports {exported}"
