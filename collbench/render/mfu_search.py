"""`collbench mfu --search` as text and JSON: per fabric the layouts that fit, best first,
and where the job's own layout ranks among them and why (the method: docs/mfu/index.md)."""

from __future__ import annotations

import json
from typing import Any

from collbench.analysis.mfu.accuracy import band, regime
from collbench.analysis.mfu.estimate import Estimate, training_cost
from collbench.analysis.mfu.memory import DEMONSTRATED_ERROR, GIB
from collbench.analysis.mfu.search import Ranked
from collbench.analysis.mfu.workload import Workload
from collbench.render.mfu import column_name
from collbench.render.table import text_columns
from collbench.run.mfu import MfuEstimate

SHOWN = 6  # the best layout and five alternatives
_PARALLELISM = ("tp", "cp", "pp", "virtual_stages", "dp", "zero")
_FORMATS = {"memory_gib": "{:.1f}", "mfu": "{:.1%}", "step_time_s": "{:.2f}"}
_FORMATS["usd_per_million_tokens"] = "{:.3f}"


def with_search(output: str, result: MfuEstimate, as_json: bool) -> str:
    """`output` (the table or its JSON) with the search's ranking per fabric, if any."""
    if not result.searches:
        return output
    pairs = zip(result.searches, result.estimates, strict=True)
    found = [
        _fabric(ranked, yours, result.prices.get(yours.topology), result.workload)
        for ranked, yours in pairs
    ]
    if as_json:
        return json.dumps({**json.loads(output), "search": found}, indent=2)
    return "\n".join([output, *(line for data in found for line in _lines(data))])


def _fabric(
    ranked: Ranked, yours: Estimate, price: float | None, workload: Workload
) -> dict[str, Any]:
    best = []
    for rank, (layout, estimate) in enumerate(ranked[:SHOWN], 1):
        cost = price and training_cost(estimate, layout.tokens_per_step, price)
        best.append(
            {
                "rank": rank,
                **{key: getattr(layout.parallelism, key) for key in _PARALLELISM},
                "micro_batch": layout.training.micro_batch,
                "recompute": layout.training.recompute,
                "memory_gib": estimate.memory.total_bytes / GIB,
                "mfu": estimate.mfu,
                "step_time_s": estimate.step_time_s,
                "usd_per_million_tokens": cost.usd_per_million_tokens if cost else None,
            }
        )
    memory = yours.memory  # estimated anyway (--allow-oversubscribed-memory) is not fitting
    fits = not (memory and memory.overflows)
    rank = 1 + sum(e.step_time_s < yours.step_time_s for _, e in ranked) if fits else None
    why = _why(yours, ranked[0][1]) if ranked and fits else "it does not fit"
    if not fits and memory and memory.capacity_bytes:
        why += f" (~{memory.total_bytes / GIB:,.0f} GiB per accelerator of {memory.capacity_bytes / GIB:g})"
    if not ranked and (capacity := yours.memory.capacity_bytes):
        why = f"nothing fits in {capacity / GIB:g} GiB per accelerator"
    found = {"layouts_fit": len(ranked), "best": best, "yours": {"rank": rank, "why": why}}
    # the ranking is a model's: how far it erred on published runs of this accelerator in
    # the best layout's regime
    kind = regime(ranked[0][0] if ranked else workload)
    return {
        "topology": column_name(yours),
        **found,
        "estimate_error": band(yours.accelerator, kind),
    }


def _why(yours: Estimate, best: Estimate) -> str:
    """What sets the job's own layout apart from the best: the part of the step (compute,
    bubble, a kind of exposed communication) that differs most."""
    if yours.step_time_s <= best.step_time_s:
        return "it is the best"
    mine, theirs = _parts(yours), _parts(best)
    gaps = {name: mine.get(name, 0) - theirs.get(name, 0) for name in {**mine, **theirs}}
    most = max(gaps, key=lambda name: abs(gaps[name]))
    gap = yours.step_time_s - best.step_time_s
    return f"its step is {gap:.3g} s longer than the best's, most in {most} ({gaps[most]:+.3g} s)"


def _parts(result: Estimate) -> dict[str, float]:
    parts = {f"exposed {kind.kind}": kind.exposed_s for kind in result.comm}
    parts["compute slowed beside collectives"] = result.slowdown_s
    return {**parts, "compute": result.compute_s, "bubble": result.bubble_s}


def _lines(data: dict[str, Any]) -> list[str]:
    """The fabric's heading, its best layouts (the JSON's, headed by its keys' first words)
    and where its own ranks."""
    yours, rows = data["yours"], [[_cell(*item) for item in row.items()] for row in data["best"]]
    head = (
        f"\nlayout search on {data['topology']}: {data['layouts_fit']:,} layouts fit with "
        f"{DEMONSTRATED_ERROR:.0%} memory headroom (memory: GiB per accelerator; step: s; usd: "
        "per million tokens)"
    )
    header = [key.split("_")[0] for key in data["best"][0]] if rows else []
    table = text_columns([header, *rows], {8})
    own = f"yours ranks {yours['rank']:,}" if yours["rank"] else "yours"
    error = data["estimate_error"]
    caveat = (
        f"the estimator's MFU erred {error} on published runs of this accelerator in the best "
        "layout's regime: steps closer than that are not told apart"
        if error != "not validated"
        else "not validated: no published run of this accelerator in the best layout's regime "
        "says how far the estimator errs, so close steps are not told apart"
    )
    return [head, *(table if rows else []), f"  {own}: {yours['why']}", f"  ({caveat})"]


def _cell(key: str, value: Any) -> str:
    return "-" if value is None else _FORMATS.get(key, "{}").format(value)
