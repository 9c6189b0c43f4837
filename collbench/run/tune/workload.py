"""`collbench tune --workload`'s use-case: the training job to tune for (mfu's model options
and the --topology it trains on), and each measured setting's modelled step for it.

The method, in full: docs/tune.md#collbench-run-tune-workload-py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from collbench.analysis.mfu.estimate import EstimateOptions, estimate
from collbench.analysis.mfu.inputs import DEFAULT_COMM_EFFICIENCY, BusbwPricer, cost_model_pricer
from collbench.core.errors import SpecError
from collbench.core.units import format_size

if TYPE_CHECKING:
    from collbench.analysis.mfu.step_collectives import StepCollective
    from collbench.analysis.mfu.workload import Model, Training, Workload
    from collbench.analysis.tune.select import SettingOutcome
    from collbench.analysis.tune.workload import WorkloadChoice
    from collbench.run.mfu import MfuRequest
    from collbench.topologies.schema import Topology


@dataclass(frozen=True)
class TuneWorkload:
    """A training job to tune for: the workload, the fabric it trains on (sized for it),
    and what the estimator assumes."""

    workload: Workload
    topology: Topology
    options: EstimateOptions = field(default_factory=EstimateOptions)
    comm_efficiency: float = DEFAULT_COMM_EFFICIENCY
    warnings: tuple[str, ...] = ()  # mfu's memory check: a job that may not fit


def tune_workload(
    request: MfuRequest,
    model: Model,
    training: Training,
    parallelism: dict[str, Any],
    options: EstimateOptions,
    topology: str | None,
) -> TuneWorkload:
    """The job from mfu's options (`parallelism`: the Parallelism fields given; dp fills the
    topology file's nodes unless given) on the --topology named by `topology`; refused as
    mfu refuses it (check_memory) when it does not fit the accelerators' memory."""
    from collbench.analysis.mfu.fabrics import check_memory, sized_for
    from collbench.run.mfu import size_workload
    from collbench.topologies.loader import load_topology

    if topology is None:
        raise SpecError(
            "--topology",
            "",
            "is required with --workload: the fabric the job trains on (its accelerators "
            "price the step's compute; a catalog name or a topology file)",
        )
    fabric = load_topology(topology, "--topology")
    workload = size_workload(request, model, training, parallelism, fabric)
    given = {} if request.comm_efficiency is None else {"comm_efficiency": request.comm_efficiency}
    job = TuneWorkload(workload, sized_for(workload, fabric), options, **given)
    pricer = cost_model_pricer(job.topology, job.comm_efficiency)  # memory is the same in any
    fits = estimate(workload, job.topology, pricer, options)
    _, warnings = check_memory([fits], request.allow_oversubscribed_memory)
    return replace(job, warnings=tuple(warnings))


def workload_choice(
    outcomes: Sequence[SettingOutcome], job: TuneWorkload | None
) -> tuple[WorkloadChoice | None, list[str]]:
    """Each setting's modelled step and the choice; (None, []) without a job, (None, [why])
    when no setting can be one (none measured a collective the workload issues)."""
    if job is None:
        return None, []
    from collbench.analysis.mfu.step_collectives import step_collectives
    from collbench.analysis.tune.workload import SettingStep, busbw_tables, choose, exclusions

    workload, topology = job.workload, job.topology
    items = step_collectives(workload)
    tables = busbw_tables(outcomes)
    excluded, unmeasured = exclusions(outcomes, tables, [item.collective for item in items])
    if not items or len(unmeasured) == len({item.collective for item in items}):
        issued = ", ".join(sorted({item.collective for item in items})) or "no collective"
        return None, [
            f"--workload: the settings measured none of the collectives it issues ({issued}): "
            "no choice for it; best.env follows the size ranges"
        ]
    fallback = cost_model_pricer(topology, job.comm_efficiency)
    steps, outside = [], set()
    for outcome in outcomes:
        if id(outcome) not in tables:
            continue
        pricer = BusbwPricer(tables[id(outcome)], fallback, outcome.setting.label)
        result = estimate(workload, topology, pricer, job.options)
        item_s = tuple(item.time_s(pricer) for item in items)
        steps.append(
            SettingStep(
                setting=outcome.setting.label,
                setting_id=outcome.setting.id,
                knobs=outcome.setting.as_dict(),
                baseline=outcome.is_baseline,
                step_time_s=result.step_time_s,
                exposed_comm_s=result.exposed_comm_s,
                comm_s=sum(kind.total_s for kind in result.comm),
                mfu=result.mfu,
                item_s=item_s,
                excluded=excluded.get(id(outcome)),
                outside=tuple(_sized_name(*entry) for entry in sorted(pricer.outside)),
            )
        )
        outside |= pricer.outside
    if all(step.excluded is not None for step in steps):
        return None, ["--workload: every setting lacks a collective the workload issues"]
    notes = _notes(steps, items, unmeasured, outside, job, outcomes)
    collectives = [_entry(item, unmeasured) for item in items]
    return choose(steps, items, describe(workload), notes, collectives, topology.name), []


def describe(workload: Workload) -> dict[str, Any]:
    """The workload as tune.json's `workload` entry says it."""
    model, run, par = workload.model, workload.training, workload.parallelism
    return {
        "model": model.name,
        "params": model.n_params,
        **{name: getattr(run, name) for name in ("seq", "global_batch", "micro_batch")},
        "recompute": run.recompute,
        **{
            name: getattr(par, name)
            for name in ("tp", "pp", "dp", "zero", "sequence_parallel", "virtual_stages")
        },
        "dp_overlap": par.dp_overlap,
        "dp_bucket_mb": par.dp_bucket_mb,
        "microbatches": workload.microbatches,
    }


def _entry(item: StepCollective, unmeasured: Sequence[str]) -> dict[str, Any]:
    priced = "cost model, the same for every setting" if item.collective in unmeasured else "busbw"
    return {**asdict(item), "priced": priced}  # kind, collective, size_bytes, count, ...


def _notes(
    steps: Sequence[Any],
    items: Sequence[StepCollective],
    unmeasured: Sequence[str],
    outside: set[tuple[str, float]],
    job: TuneWorkload,
    outcomes: Sequence[SettingOutcome],
) -> tuple[str, ...]:
    from collbench.analysis.tune.workload import group_note

    notes = [
        f"modelled step: compute from the MFU model on {job.topology.name} (the same for every "
        "setting), collectives from each setting's measured busbw; not measured end to end"
    ]
    if unmeasured:
        notes.append(
            f"{', '.join(unmeasured)}: issued by the workload, measured by no setting: priced "
            f"by {job.topology.name}'s cost model, the same for every setting (it cannot change "
            "the choice)"
        )
    notes += [f"{step.setting}: no candidate: {step.excluded}" for step in steps if step.excluded]
    if outside:
        sizes = ", ".join(_sized_name(*entry) for entry in sorted(outside))
        notes.append(
            f"beyond the measured sizes, priced at the nearest measured size's busbw: {sizes}"
        )
    worlds: dict[str, set[int]] = {}
    for outcome in outcomes:
        for row in outcome.rows:
            worlds.setdefault(str(row.collective), set()).add(int(row.world_size or 0))
    issued = {item.collective for item in items}
    measured = {name: sorted(sizes) for name, sizes in worlds.items() if name in issued}
    notes.append(group_note(items, measured))
    return tuple(notes)


def _sized_name(collective: str, size_bytes: float) -> str:
    return f"{collective} {format_size(int(size_bytes))}"
