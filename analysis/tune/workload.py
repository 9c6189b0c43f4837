"""`collbench tune --workload`: the one setting that makes a training job's step fastest
(pure: measured settings and priced steps in, the choice out).

The method, in full: docs/tune.md#analysis-tune-workload-py.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Protocol

from collbench.analysis.rules.decision import THRESHOLD, Question, evidence_of, judge
from collbench.analysis.tune.records import SelectRule, SettingOutcome, repeats_busbw
from collbench.analysis.tune.select import NO_SAMPLES, setting_table, tuned_placement
from collbench.analysis.tune.validity import split_collectives
from collbench.core.units import format_size, format_time
from collbench.store.rows import SWEEP, row_is


class StepItem(Protocol):
    """What the choice reads of one of the step's collectives (mfu's StepCollective)."""

    @property
    def kind(self) -> str: ...

    @property
    def collective(self) -> str: ...

    @property
    def size_bytes(self) -> float: ...

    @property
    def count(self) -> float: ...

    @property
    def ranks(self) -> int: ...


@dataclass(frozen=True)
class SettingStep:
    """One setting's modelled step for the workload."""

    setting: str  # label
    setting_id: str
    knobs: dict[str, str]
    baseline: bool
    step_time_s: float
    exposed_comm_s: float
    comm_s: float  # every collective's time, hidden or not
    mfu: float
    item_s: tuple[float, ...] = ()  # seconds per step in each of the step's collectives
    excluded: str | None = None  # why it is no candidate (None: it is one)
    outside: tuple[str, ...] = ()  # collectives priced beyond the sizes it measured


@dataclass(frozen=True)
class WorkloadLoss:
    """A collective and size at which the exported setting is not the fastest."""

    kind: str
    collective: str
    size_bytes: float
    count: float
    fastest: str  # the setting fastest there
    fastest_s: float  # seconds per step in it under that setting
    exported_s: float  # ... and under the exported one

    def describe(self, exported: str) -> str:
        extra_s = self.exported_s - self.fastest_s
        share = extra_s / self.fastest_s if self.fastest_s > 0 else math.inf
        return (
            f"{self.kind} {self.collective} {format_size(int(self.size_bytes))} x "
            f"{self.count:g}/step: fastest under {self.fastest}; {exported} takes "
            f"{format_time(extra_s)} more per step ({share:+.1%})"
        )


@dataclass(frozen=True)
class WorkloadChoice:
    """The workload, each setting's modelled step, the choice and what it gives up."""

    workload: dict[str, Any]  # the workload as tune.json says it
    collectives: tuple[dict[str, Any], ...]  # the step's collectives and how each was priced
    steps: tuple[SettingStep, ...]
    chosen: SettingStep
    losses: tuple[WorkloadLoss, ...] = ()
    notes: tuple[str, ...] = ()
    topology: str = ""
    exported: SettingStep | None = None  # best.env's setting (`resolve`; None: chosen's)
    margin_s: float | None = None  # the step gain the measurements cannot tell from none
    margin_text: str = "the default's step is the shortest"

    @property
    def default(self) -> SettingStep | None:
        return next((step for step in self.steps if step.baseline), None)

    @property
    def why(self) -> str:
        """best.env's reason, one line."""
        if (self.exported or self.chosen) is not self.chosen:
            return f"{self.chosen.setting}'s shorter step is within what is resolved: {self.margin_text}"
        return (
            f"the shortest modelled step of the workload ({format_time(self.chosen.step_time_s)}, "
            f"exposed communication {format_time(self.chosen.exposed_comm_s)}); {self.margin_text}"
        )

    def to_dict(self) -> dict[str, Any]:
        """tune.json's `workload` entry."""
        return {
            "workload": dict(self.workload),
            "topology": self.topology,
            "collectives": [dict(item) for item in self.collectives],
            "settings": [
                {**asdict(step), "item_s": list(step.item_s), "outside": list(step.outside)}
                for step in self.steps
            ],
            "chosen": self.chosen.setting,
            "chosen_id": self.chosen.setting_id,
            "export": {
                "setting": (self.exported or self.chosen).setting,
                "margin_s": self.margin_s,
                "text": self.margin_text,
            },
            "losses": [
                {**asdict(loss), "text": loss.describe(self.chosen.setting)} for loss in self.losses
            ],
            "notes": list(self.notes),
        }


def busbw_tables(outcomes: Sequence[SettingOutcome]) -> dict[int, dict[str, dict[int, float]]]:
    """Per outcome (by id) that measured something: {collective: {size: busbw}}, the busbw
    the geometric mean over its repeats at the placement tune tunes for that collective. A
    collective a setting cannot run (NCCL_ALGO=Tree's all-gather, skipped by validity) has the
    default's: best.env leaves it to NCCL's own choice, so the setting stays a candidate."""
    ran = [outcome for outcome in outcomes if outcome.rows]
    collectives = sorted(
        {row.collective for item in ran for row in item.rows if row_is(row, SWEEP)}
    )
    placements = {name: tuned_placement(name, ran) for name in collectives}
    tables = {
        id(outcome): {
            name: {
                size: busbw
                for size, repeats in setting_table(outcome.rows, name, placement).items()
                if size > 0 and math.isfinite(busbw := repeats_busbw(repeats)) and busbw > 0
            }
            for name, placement in placements.items()
        }
        for outcome in ran
    }
    default = next((tables[id(item)] for item in ran if item.is_baseline), {})
    for outcome in ran:
        for skipped in split_collectives(outcome.setting.as_dict(), collectives)[1]:
            tables[id(outcome)][skipped.collective] = default.get(skipped.collective, {})
    return tables


def exclusions(
    outcomes: Sequence[SettingOutcome],
    tables: Mapping[int, Mapping[str, Mapping[int, float]]],
    issued: Sequence[str],
) -> tuple[dict[int, str], list[str]]:
    """(why each setting that lacks a collective the workload issues and another setting
    measured is no candidate, by outcome id; the issued collectives no setting measured)."""
    measured = {name for table in tables.values() for name, sizes in table.items() if sizes}
    wanted = [name for name in dict.fromkeys(issued) if name in measured]
    reasons = {}
    for outcome in outcomes:
        table = tables.get(id(outcome), {})
        lacking = [name for name in wanted if not table.get(name)]
        if id(outcome) in tables and lacking:
            reasons[id(outcome)] = (
                f"it measured no {', '.join(lacking)}, which the workload issues and another "
                "setting measured"
            )
    unmeasured = [name for name in dict.fromkeys(issued) if name not in measured]
    return reasons, unmeasured


def choose(
    steps: Sequence[SettingStep],
    items: Sequence[StepItem],
    workload: Mapping[str, Any],
    notes: Sequence[str] = (),
    collectives: Sequence[Mapping[str, Any]] = (),
    topology: str = "",
) -> WorkloadChoice:
    """The candidate with the shortest modelled step (a tie: the default), and each of the
    step's collectives at which another candidate is faster. ValueError without one."""
    candidates = [step for step in steps if step.excluded is None]
    chosen = min(candidates, key=lambda step: (step.step_time_s, not step.baseline))
    losses = []
    for index, item in enumerate(items):
        fastest = min(candidates, key=lambda step: (step.item_s[index], step is not chosen))
        if fastest is not chosen and fastest.item_s[index] < chosen.item_s[index]:
            losses.append(
                WorkloadLoss(
                    item.kind,
                    item.collective,
                    item.size_bytes,
                    item.count,
                    fastest.setting,
                    fastest.item_s[index],
                    chosen.item_s[index],
                )
            )
    return WorkloadChoice(
        dict(workload),
        tuple(dict(item) for item in collectives),
        tuple(steps),
        chosen,
        tuple(losses),
        tuple(notes),
        topology,
    )


def resolve(
    choice: WorkloadChoice, outcomes: Sequence[SettingOutcome], rule: SelectRule
) -> WorkloadChoice:
    """`choice` with what best.env exports: the chosen setting when its step gain over the
    default is more than the margin, else the default. The margin: the default's exposed
    communication times the largest change the decision rule could miss
    (Verdict.detectable_pct) between the two, at the measured size nearest each of the
    step's collectives priced by busbw; unknown (the default exported) where one is unjudged."""
    default, ran = choice.default, [outcome for outcome in outcomes if outcome.rows]
    if default is None or default is choice.chosen:
        return choice
    ids = (default.setting_id, choice.chosen.setting_id)
    sides = [next(outcome for outcome in ran if outcome.setting.id == id_) for id_ in ids]
    questions: dict[str, Question] = {}
    for item in (item for item in choice.collectives if item["priced"] == "busbw"):
        name = item["collective"]
        base, pick = (setting_table(side.rows, name, tuned_placement(name, ran)) for side in sides)
        if sizes := [size for size in base if size in pick and size > 0]:
            near = min(sizes, key=lambda size: abs(math.log(size / max(item["size_bytes"], 1))))
            where = f"{name} {format_size(near)}"
            questions[where] = Question(evidence_of(base[near]), evidence_of(pick[near]), near)
    verdicts = dict(
        zip(questions, judge(list(questions.values()), rule.decision_rule), strict=True)
    )
    gain_s = default.step_time_s - choice.chosen.step_time_s
    text = f"exported only when the step gain is more than the margin: gain {format_time(gain_s)}, margin"
    unjudged = [where for where, verdict in verdicts.items() if verdict.detectable_pct is None]
    if unjudged or not verdicts:
        text += f" unknown: unjudged at {', '.join(unjudged) or 'every size'}"
        return replace(choice, exported=default, margin_text=text)
    where, widest = max(verdicts.items(), key=lambda pair: pair[1].detectable_pct or 0.0)
    pct = widest.detectable_pct or 0.0
    margin_s = default.exposed_comm_s * pct / 100.0
    by = NO_SAMPLES if widest.basis == THRESHOLD else f"{widest.basis}, {widest.floor_source}"
    text += (
        f" {format_time(margin_s)} ({pct:.1f}% of the default's exposed communication, the smallest "
        f"busbw change resolved: {by}, at {where})"
    )
    exported = choice.chosen if gain_s > margin_s else default
    return replace(choice, exported=exported, margin_s=margin_s, margin_text=text)


def group_note(items: Sequence[StepItem], world_sizes: Mapping[str, Sequence[int]]) -> str:
    """The assumption pricing by busbw rests on, naming the measured and the workload's
    group sizes."""
    groups = ", ".join(
        f"{item.kind} {item.collective} on {item.ranks}"
        for item in {(item.kind, item.collective): item for item in items}.values()
    )
    measured = ", ".join(
        f"{name} on {'/'.join(str(size) for size in sorted(sizes))}"
        for name, sizes in sorted(world_sizes.items())
    )
    return (
        f"priced by busbw: the settings were measured with {measured or 'no'} ranks, the "
        f"workload's groups are {groups or 'none'} ranks; busbw (nccl-tests' bus bandwidth, "
        "which takes out the group size's factor) is assumed to hold at the workload's group "
        "sizes and node spans, so the choice is as good as that assumption"
    )
