"""The one rule for "were these runs measured the same way?", used by compare (flagged,
or refused with --strict) and by fit (runs that would be pooled into one curve).

`describe_method` flattens what a run's numbers depend on into comparable fields. Fields in
METHODOLOGY change what a time means (how it was taken, over what data and ranks): runs that
differ there are unlike-for-like. The rest (versions, knobs, hosts, devices, backend) is the
environment, which people compare on purpose.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from collbench.core.errors import SpecError
from collbench.store.load import Run
from collbench.store.meta import RunMeta
from collbench.store.rows import ResultRow

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
)


@dataclass(frozen=True)
class Difference:
    field: str
    baseline: Any
    candidate: Any
    kind: str  # methodology | environment


def describe_method(run: Run) -> dict[str, Any]:
    """What a run's numbers depend on, flattened to comparable fields."""
    meta, rows = run.meta, run.sweep_rows
    spec = meta.spec or {}
    facts: dict[str, Any] = {
        "source": meta.source or "collbench",
        "timing_method": meta.timing_method,
        # nccl-tests averages the ranks' times unless told otherwise (-a 1 is its default)
        "rank_stat": spec.get("rank_stat") or ("avg" if meta.source else None),
        "launcher": meta.launcher,
        "backend": _one(rows, "backend") or meta.backend,
        "hosts": ", ".join(meta.hosts or []) or None,
        "devices": ", ".join(
            sorted(
                {
                    str(rank.get("device_name"))
                    for rank in meta.ranks or []
                    if rank.get("device_name")
                }
            )
        )
        or None,
    }
    for name in ("dtype", "op", "iters", "warmup", "world_size", "nodes", "ranks_per_node"):
        facts[name] = _one(rows, name)
    for name in ("world_size", "nodes", "ranks_per_node"):
        # rows without the placement (an older or partial import): meta.json still says it
        if facts[name] is None:
            facts[name] = getattr(meta, name)
    for name, value in (meta.versions or {}).items():
        if name != "collbench":
            facts[f"versions.{name}"] = value
    for name, value in _knob_env(meta, rows).items():
        facts[f"env.{name}"] = value
    return facts


def _one(rows: list[ResultRow], column: str) -> Any:
    """The value every row has in a column; several values are listed."""
    known = [getattr(row, column) for row in rows if getattr(row, column) is not None]
    values = sorted({str(value) for value in known})
    if not values:
        return None
    if len(values) == 1:
        return known[0]
    return ", ".join(values)


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


def differences(baseline: Run, candidate: Run) -> list[Difference]:
    """Every field in which the two runs' methods or environments differ."""
    base, cand = describe_method(baseline), describe_method(candidate)
    found = []
    for name in sorted(set(base) | set(cand), key=lambda n: (n not in METHODOLOGY, n)):
        if base.get(name) != cand.get(name):
            kind = "methodology" if name in METHODOLOGY else "environment"
            found.append(Difference(name, base.get(name), cand.get(name), kind))
    return found


def method_conflict(runs: Sequence[Run]) -> tuple[str, Run, Run] | None:
    """The first methodology field in which a run differs from the first, with both runs."""
    methods = [(run, describe_method(run)) for run in runs]
    first, first_method = methods[0]
    for run, method in methods[1:]:
        for name in METHODOLOGY:
            if method.get(name) != first_method.get(name):
                return name, first, run
    return None


def check_poolable(key: tuple[Any, ...], runs: Sequence[Run]) -> None:
    """SpecError when runs whose rows land in one fit group were measured differently."""
    conflict = method_conflict(runs)
    if conflict is None:
        return
    name, first, other = conflict
    first_value, other_value = describe_method(first).get(name), describe_method(other).get(name)
    raise SpecError(
        "RUN",
        f"{first.run_id}, {other.run_id}",
        f"would be fitted together ({key[0]}, {key[1]}, {key[2]} ranks) but were measured "
        f"differently: {name} {first_value!r} vs {other_value!r}; fit them separately",
    )
