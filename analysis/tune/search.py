"""`collbench tune run --search halving|coordinate`: which settings to measure next (pure: the
outcomes so far in, a decision out; the runner measures and calls again).

The method, in full: docs/tune.md#analysis-tune-search-py.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from collbench.analysis.rules.bands import band_of
from collbench.analysis.rules.decision import SLOWER, Question, Rule, evidence_of, judge
from collbench.analysis.tune.records import SettingOutcome, repeats_busbw, row_busbw, sample_busbw
from collbench.analysis.tune.select import setting_table, sort_key, tuned_placement
from collbench.core.stats import geomean
from collbench.core.tune_grid import KnobAxis, Setting
from collbench.store.rows import SWEEP, ResultRow, row_is

Key = tuple[str, int]  # (collective, size_bytes)


@dataclass(frozen=True)
class HalvingRule:
    """Successive halving's settings; every default lives here."""

    min_keep: int = 2  # never fewer survivors than this (the baseline counts)
    max_rounds: int = 3
    iters_growth: int = 2  # each round measures this many times more iterations


@dataclass(frozen=True)
class HalvingDecision:
    """One round's outcome: the settings kept, the ones dropped with a reason each."""

    keep: list[SettingOutcome]
    drop: list[tuple[SettingOutcome, str]]
    done: bool
    reason: str


def probe_sizes(sizes: Sequence[int]) -> list[int]:
    """A few probe sizes: per size band, the measured size nearest the band's geometric
    middle (size 0 is never a probe: it has no busbw)."""
    by_band: dict[str, list[int]] = {}
    for size in sorted(set(sizes)):
        if size > 0:
            by_band.setdefault(band_of(size), []).append(size)
    probes = []
    for members in by_band.values():
        middle = math.sqrt(members[0] * members[-1])
        probes.append(min(members, key=lambda size: (abs(math.log(size / middle)), size)))
    return probes


def halving_iters(base_iters: int, round_index: int, rule: HalvingRule | None = None) -> int:
    """Iterations for round `round_index` (0-based): more samples sharpen the test."""
    return base_iters * (rule or HalvingRule()).iters_growth ** round_index


def halving_round(
    outcomes: Sequence[SettingOutcome], round_index: int, rule: HalvingRule | None = None
) -> HalvingDecision:
    """Which settings to drop after probe round `round_index` (see the module's rule)."""
    rule = rule or HalvingRule()
    ran = [item for item in outcomes if item.status == "ok" and item.rows]
    dropped = [(item, f"failed: {item.error}") for item in outcomes if item not in ran]
    placements = {
        str(row.collective): tuned_placement(str(row.collective), ran)
        for item in ran
        for row in item.rows
        if row_is(row, SWEEP)
    }
    tables = {  # per (collective, size) at the tuned placement, its rows (one per repeat)
        id(item): {
            (name, size): rows
            for name, placement in placements.items()
            for size, rows in setting_table(item.rows, name, placement).items()
            if size > 0
        }
        for item in ran
    }
    keys = sorted(set.intersection(*(set(table) for table in tables.values())) if ran else [])
    worse = _clearly_worse(ran, tables, keys)
    ranked = sorted(ran, key=lambda item: -_score(tables[id(item)], keys))
    keep = [item for item in ran if item.is_baseline or id(item) not in worse]
    for item in ranked:  # keep-at-least: the best-ranked of the dropped come back
        if len(keep) >= rule.min_keep:
            break
        if item not in keep:
            keep.append(item)
    keep = [item for item in ran if item in keep]
    dropped += [(item, worse[id(item)]) for item in ran if item not in keep]
    last = round_index + 1 >= rule.max_rounds
    if not any(
        sample_busbw(row) for table in tables.values() for rows in table.values() for row in rows
    ):
        return HalvingDecision(keep, dropped, True, "no per-iteration samples to test")
    if len(keep) <= rule.min_keep:
        return HalvingDecision(keep, dropped, True, f"{len(keep)} settings left")
    reason = f"round {round_index + 1} of {rule.max_rounds}"
    return HalvingDecision(keep, dropped, last, reason)


def _score(table: dict[Key, tuple[ResultRow, ...]], keys: Sequence[Key]) -> float:
    return sort_key(geomean([repeats_busbw(table[key]) for key in keys]))


def _clearly_worse(
    ran: Sequence[SettingOutcome],
    tables: dict[int, dict[Key, tuple[ResultRow, ...]]],
    keys: Sequence[Key],
) -> dict[int, str]:
    """Per setting the rule calls slower than each probe size's leader at every probe size:
    the reason it is dropped."""
    tested: list[int] = []
    questions: list[Question] = []
    for key in keys:
        leader = max(ran, key=lambda item: _score(tables[id(item)], [key]))
        for item in ran:
            if item is not leader:
                tested.append(id(item))
                leader_rows, rows = tables[id(leader)][key], tables[id(item)][key]
                questions.append(Question(evidence_of(leader_rows), evidence_of(rows), key[1]))
    slower: dict[int, int] = {}
    for item_id, verdict in zip(tested, judge(questions, Rule()), strict=True):
        slower[item_id] = slower.get(item_id, 0) + (verdict.call == SLOWER)
    return {
        item_id: f"called slower than the leader at all {len(keys)} probe sizes"
        for item_id, count in slower.items()
        if keys and count == len(keys)
    }


@dataclass(frozen=True)
class DescentProposal:
    settings: list[Setting]
    done: bool
    reason: str
    numeric: list[str] = field(default_factory=list)  # the axes searched one at a time


def is_numeric(axis: KnobAxis) -> bool:
    """Whether every value of an axis is an integer (a count or a byte size)."""
    return len(axis.values) > 1 and all(_integer(value) is not None for value in axis.values)


def descent_next(
    axes: Sequence[KnobAxis], outcomes: Sequence[SettingOutcome], max_settings: int | None = None
) -> DescentProposal:
    """The next settings to measure (see the module's rule); none and done at the end, or
    once `max_settings` are measured (the baseline counted; None: until a local optimum)."""
    numeric = [_sorted_axis(axis) for axis in axes if is_numeric(axis)]
    categorical = [axis for axis in axes if not is_numeric(axis)]
    tried = {item.setting: item for item in outcomes}
    proposals: list[Setting] = []
    for values in itertools.product(*(axis.values for axis in categorical)):
        fixed = dict(zip((axis.name for axis in categorical), values, strict=True))
        start = _point(fixed, numeric, [len(axis.values) // 2 for axis in numeric])
        if start not in tried:
            proposals.append(start)
            continue
        group = [item for item in outcomes if _in_group(item.setting, fixed, numeric)]
        for best in _best_points(group):
            proposals += _neighbours(best.setting, fixed, numeric, tried)
    proposals = list(dict.fromkeys(proposals))
    names = [axis.name for axis in numeric]
    if max_settings is not None:
        room = max(0, max_settings - len(tried))
        if len(proposals) > room:
            reason = f"--max-settings {max_settings} reached"
            return DescentProposal(proposals[:room], True, reason, names)
    if not proposals:
        return DescentProposal([], True, "every best point's neighbours are measured", names)
    return DescentProposal(proposals, False, f"{len(proposals)} settings to measure", names)


def _integer(value: str) -> int | None:
    try:
        return int(value.strip())
    except ValueError:
        return None


def _sorted_axis(axis: KnobAxis) -> KnobAxis:
    return KnobAxis(axis.name, tuple(sorted(axis.values, key=lambda value: _integer(value) or 0)))


def _point(fixed: dict[str, str], numeric: Sequence[KnobAxis], indexes: Sequence[int]) -> Setting:
    values = {axis.name: axis.values[index] for axis, index in zip(numeric, indexes, strict=True)}
    return Setting.from_mapping({**fixed, **values})


def _in_group(setting: Setting, fixed: dict[str, str], numeric: Sequence[KnobAxis]) -> bool:
    knobs = setting.as_dict()
    names = set(fixed) | {axis.name for axis in numeric}
    return set(knobs) == names and all(knobs[name] == value for name, value in fixed.items())


def _best_points(group: Sequence[SettingOutcome]) -> list[SettingOutcome]:
    """Per (collective, size band), the measured setting of the group with the highest busbw
    (a failed setting is never best)."""
    ran = [item for item in group if item.status == "ok" and item.rows]
    scores: dict[tuple[str, str], dict[int, list[float]]] = {}
    for item in ran:
        for row in item.rows:
            if row_is(row, SWEEP) and row.size_bytes > 0:
                objective = (str(row.collective), band_of(int(row.size_bytes)))
                scores.setdefault(objective, {}).setdefault(id(item), []).append(row_busbw(row))
    best = []
    for per_setting in scores.values():
        winner = max(per_setting, key=lambda item_id: sort_key(geomean(per_setting[item_id])))
        best.append(next(item for item in ran if id(item) == winner))
    return list({id(item): item for item in best}.values())


def _neighbours(
    setting: Setting,
    fixed: dict[str, str],
    numeric: Sequence[KnobAxis],
    tried: dict[Setting, SettingOutcome],
) -> list[Setting]:
    """The untried neighbours of a point along the first numeric axis that has any."""
    knobs = setting.as_dict()
    indexes = [axis.values.index(knobs[axis.name]) for axis in numeric]
    for position, axis in enumerate(numeric):
        found = []
        for step in (-1, 1):
            index = indexes[position] + step
            if 0 <= index < len(axis.values):
                moved = list(indexes)
                moved[position] = index
                point = _point(fixed, numeric, moved)
                if point not in tried:
                    found.append(point)
        if found:
            return found
    return []


def settings_left(
    budget_s: float | None, elapsed_s: float, durations_s: Sequence[float]
) -> int | None:
    """--budget: how many more settings fit in the wall-clock budget, at the mean duration of
    the settings measured so far (None: no budget, or nothing measured yet to judge by)."""
    if budget_s is None or not durations_s:
        return None
    mean_s = sum(durations_s) / len(durations_s)
    return max(0, int((budget_s - elapsed_s) // mean_s)) if mean_s > 0 else None
