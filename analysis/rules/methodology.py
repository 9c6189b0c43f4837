"""The one rule for "were these runs measured the same way?": `check(runs, purpose)`.

The method, in full: docs/methodology/decisions.md#analysis-rules-methodology-py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from collbench.core.errors import SpecError
from collbench.store.load import Run
from collbench.store.meta import RunMeta
from collbench.store.rows import DOCTOR, SWEEP, ResultRow

METHODOLOGY = (
    "source",
    "timing_method",
    "dtype",
    "op",
    "iters",
    "warmup",
    "rank_stat",
    "world_size",
    "nodes",
    "ranks_per_node",
    "shared_gpu",  # the test mode whose ranks share one GPU (core/knobs.py)
)
PLACEMENT = ("world_size", "nodes", "ranks_per_node")
# `source` is how a run's numbers were made, by family: rccl-tests is nccl-tests' fork and
# keeps its timer (a host timer around the launches and a stream synchronize, common.cu) and
# its algbw/busbw formulas, so the two are one source here; which tool printed the log is
# `tool`, the environment (listed, never an alarm).
SOURCE_FAMILY = {"rccl-tests": "nccl-tests"}
TOOL = "tool"
COLLECTIVES = "collectives"  # what a run measured (looked at only where a purpose names it)
KNOBS = "env.*"  # in a purpose: every knob variable a run recorded (fields `env.NAME`)
_ENV = "env."

REFUSE, WARN, LIST, IGNORE = "refuse", "warn", "list", "ignore"


@dataclass(frozen=True)
class Difference:
    field: str
    baseline: Any
    candidate: Any
    kind: str  # methodology | environment


@dataclass(frozen=True)
class Purpose:
    """What one command does with a run that differs from the first."""

    name: str
    refuse: tuple[str, ...]  # SpecError naming every one (METHODOLOGY fields, KNOBS, ...)
    warn: tuple[str, ...] = ()  # a warning line per run; the command goes on
    lists_rest: bool = False  # the other differences are returned (shown, never acted on)
    hint: str = ""  # the refusal's end: what to do instead
    goes_on: str = ""  # a warning's end: what the command did anyway
    rows: str = SWEEP  # the row kind that describes a run for this command

    def action(self, name: str) -> str:
        """REFUSE, WARN, LIST or IGNORE for a difference in field `name`."""
        for action, names in ((REFUSE, self.refuse), (WARN, self.warn)):
            if name in names or (KNOBS in names and name.startswith(_ENV)):
                return action
        return LIST if self.lists_rest and name != COLLECTIVES else IGNORE


# compare: runs are compared to see what changed, so nothing refuses; a methodology
# difference makes the ratios unlike-for-like and is flagged loudly, the environment (what
# people change on purpose: knobs, versions, hosts, backend) is listed.
# A run whose ranks shared one GPU (a test of code paths) is never compared with one whose
# ranks did not.
_TEST_ONLY = "a run made with COLLBENCH_SHARED_GPU=1 tests code paths, not a fabric"
COMPARE = Purpose(
    "compare", ("shared_gpu",), METHODOLOGY, lists_rest=True, hint=f"{_TEST_ONLY}: rerun without it"
)
# compare --strict (a CI gate that must not compare unlike runs): every methodology
# difference refuses.
STRICT_COMPARE = Purpose(
    "compare --strict", METHODOLOGY, lists_rest=True, hint="drop --strict to compare anyway"
)
# fit: the rows of every run in a group become one curve; a curve over points timed
# differently fits no one thing. Backend and knobs are in the group's key already; hosts and
# versions are not looked at (pooling several allocations' runs is what fit is for).
FIT = Purpose("fit", METHODOLOGY, hint="fit them separately")
# tune from: each run is a knob setting of one measurement. Settings of different
# collectives, rank counts, node counts or dtypes are different questions (a winner of one is
# no answer to the other); iterations, timing or an nccl-tests log beside a collbench sweep
# make the evidence unequal, not the question, and a backend that differs confounds the
# setting: those warn. Knobs are what is tuned: never a difference.
_ONE_QUESTION = ("world_size", "nodes", "dtype")
TUNE_FROM = Purpose(
    "tune from",
    refuse=(COLLECTIVES, *_ONE_QUESTION),
    warn=(*(name for name in METHODOLOGY if name not in _ONE_QUESTION), "backend"),
    hint="tune needs runs of one collective, rank count, node count and dtype",
    goes_on="tuned anyway",
)
# noise: an A/A floor is the spread of identical reruns; a run measured differently or with
# other knobs is another configuration, whose difference would be counted as noise. Hosts
# and versions that changed are listed: their noise is then in the floor.
NOISE = Purpose(
    "noise",
    (*METHODOLOGY, KNOBS),
    lists_rest=True,
    hint="an A/A floor needs reruns of one configuration, measured the same way",
)
# doctor --baseline: this run's busbw per stage is judged against the baseline's, stage by
# stage. A different backend, dtype, timing method or source gives another figure for the
# same link; ranks per node set the per-node and rail stages' groups (8 GPUs sharing a
# node's fabric are not 4). The node and rank count only change the full stage, and busbw
# normalises the rank count: a baseline of a healthy larger allocation can judge a part of
# it, so they warn, as do iterations, warm-up, the rank statistic and knobs (precision or a
# deliberate change, not another quantity). The size is checked with the stages
# (analysis/doctor/expect.py): busbw depends on it, stage by stage.
DOCTOR_BASELINE = Purpose(
    "doctor --baseline",
    refuse=("source", "timing_method", "backend", "dtype", "ranks_per_node", "shared_gpu"),
    warn=("op", "iters", "warmup", "rank_stat", "world_size", "nodes", KNOBS),
    hint="give a baseline doctor run measured like this one",
    goes_on="judged against it anyway",
    rows=DOCTOR,
)
PURPOSES = (COMPARE, STRICT_COMPARE, FIT, TUNE_FROM, NOISE, DOCTOR_BASELINE)


@dataclass(frozen=True)
class Checked:
    """What `check` let through."""

    warnings: list[str] = field(default_factory=list)  # one line per run that differs
    # the warned and listed differences, each once (the first run against each other)
    differences: list[Difference] = field(default_factory=list)


def check(
    runs: Sequence[Run],
    purpose: Purpose,
    label: Callable[[Run], str] | None = None,
    subject: str = "runs",
) -> Checked:
    """Every run against the first, for `purpose`: SpecError when a difference refuses, one
    line naming every refused field (`label` names the runs when there are more than two;
    default: their run ids; `subject` opens the line); otherwise the warnings and the
    differences the purpose lets through."""
    label = label or (lambda run: run.run_id)
    first = describe_method(runs[0], purpose.rows)
    refused: list[tuple[Run, list[Difference]]] = []
    warnings: list[str] = []
    passed: list[Difference] = []
    for run in runs[1:]:
        by_action: dict[str, list[Difference]] = {}
        for diff in _differing(first, describe_method(run, purpose.rows)):
            by_action.setdefault(purpose.action(diff.field), []).append(diff)
        if by_action.get(REFUSE):
            refused.append((run, by_action[REFUSE]))
        if by_action.get(WARN):
            warnings.append(
                f"{label(runs[0])} and {label(run)} measured differently "
                f"({named(by_action[WARN])}): {purpose.goes_on}"
            )
        passed += [
            diff for diff in by_action.get(WARN, []) + by_action.get(LIST, []) if diff not in passed
        ]
    if refused:
        if len(runs) == 2:
            listed = named(refused[0][1])
        else:
            listed = "; ".join(f"{label(run)}: {named(diffs)}" for run, diffs in refused)
        raise SpecError.from_message(f"{subject} measured differently ({listed}); {purpose.hint}")
    return Checked(warnings, passed)


def named(found: Sequence[Difference]) -> str:
    """Differences as one line's part: `iters 20 vs 50, dtype 'float32' vs 'bfloat16'`."""
    return ", ".join(f"{d.field} {_shown(d.baseline)} vs {_shown(d.candidate)}" for d in found)


def _shown(value: Any) -> str:
    return "(unset)" if value is None else repr(value) if isinstance(value, str) else str(value)


def check_poolable(key: tuple[Any, ...], runs: Sequence[Run]) -> None:
    """FIT: SpecError when runs whose rows land in one fit group (collective, backend, ranks)
    were measured differently."""
    ids = ", ".join(run.run_id for run in runs)
    check(runs, FIT, subject=f"runs {ids} (one fit group: {key[0]}, {key[1]}, {key[2]} ranks)")


def differences(baseline: Run, candidate: Run) -> list[Difference]:
    """Every field in which the two runs' methods or environments differ (what compare
    shows: COMPARE warns about the methodology ones and lists the rest)."""
    found = _differing(describe_method(baseline), describe_method(candidate))
    return [diff for diff in found if COMPARE.action(diff.field) != IGNORE]


def _differing(base: dict[str, Any], cand: dict[str, Any]) -> list[Difference]:
    found = []
    names = set(base) | set(cand)
    if base.get("source") != cand.get("source"):
        names.discard(TOOL)  # the source names it already
    for name in sorted(names, key=lambda n: (n not in METHODOLOGY, n)):
        if base.get(name) != cand.get(name):
            kind = "methodology" if name in METHODOLOGY else "environment"
            found.append(Difference(name, base.get(name), cand.get(name), kind))
    return found


def describe_method(run: Run, kind: str = SWEEP) -> dict[str, Any]:
    """What a run's numbers depend on, flattened to comparable fields, from its rows of
    `kind` (a sweep's, or a doctor's) and its meta.json."""
    meta, rows = run.meta, run.rows_of(kind)
    spec = meta.spec or {}
    devices = {str(rank["device_name"]) for rank in meta.ranks or [] if rank.get("device_name")}
    facts: dict[str, Any] = {
        "source": SOURCE_FAMILY.get(meta.source or "", meta.source or "collbench"),
        TOOL: meta.source or "collbench",
        "timing_method": meta.timing_method,
        # nccl-tests averages the ranks' times unless told otherwise (-a 1 is its default)
        "rank_stat": spec.get("rank_stat") or ("avg" if meta.source else None),
        "launcher": meta.launcher,
        "backend": _one(rows, "backend") or meta.backend,
        "hosts": ", ".join(meta.hosts or []) or None,
        "devices": ", ".join(sorted(devices)) or None,
        COLLECTIVES: ", ".join(sorted({str(row.collective) for row in rows})) or None,
        "shared_gpu": bool(meta.extra.get("shared_gpu")),
    }
    facts.update({name: _one(rows, name) for name in ("dtype", "op", "iters", "warmup")})
    for name in PLACEMENT:
        # a doctor row's placement is its group's; rows without one (an older or partial
        # import): meta.json says the run's
        facts[name] = None if kind == DOCTOR else _one(rows, name)
        if facts[name] is None:
            facts[name] = getattr(meta, name)
    for name, value in (meta.versions or {}).items():
        if name != "collbench":
            facts[f"versions.{name}"] = value
    facts.update({f"{_ENV}{name}": value for name, value in _knob_env(meta, rows).items()})
    return facts


def _one(rows: list[ResultRow], column: str) -> Any:
    """The value every row has in a column; several values are listed."""
    known = [getattr(row, column) for row in rows if getattr(row, column) is not None]
    values = sorted({str(value) for value in known})
    if not values:
        return None
    return known[0] if len(values) == 1 else ", ".join(values)


def _knob_env(meta: RunMeta, rows: list[ResultRow]) -> dict[str, Any]:
    knobs = meta.knobs or {}
    if isinstance(knobs, dict) and isinstance(knobs.get("env"), dict):
        return knobs["env"]
    if isinstance(knobs, dict) and knobs:
        return knobs
    for row in rows:
        env = (row.knobs or {}).get("env")
        if isinstance(env, dict):
            return env
    return {}
