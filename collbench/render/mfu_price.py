"""`collbench mfu --price`: each priced fabric's cost per step and per million tokens, under
the MFU table and in its JSON, and each against the first priced fabric (a cheaper
GPU-hour held against the tokens per second it realises).

Pure: estimates and costs (analysis/mfu/price.py) in, strings out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from collbench.analysis.mfu.estimate import Estimate
from collbench.analysis.mfu.price import TrainingCost
from collbench.core.units import round_sig
from collbench.render.table import text_columns


def price_lines(
    estimates: Sequence[Estimate],
    costs: Sequence[TrainingCost | None],
    names: Sequence[str],
    tags: Sequence[str],
) -> list[str]:
    """The cost table (one column per fabric, as the MFU table; `tags`: each column's m/p
    tag) and one line per further priced fabric against the first; none without prices."""
    if not any(cost is not None for cost in costs):
        return []
    rows = [
        ("USD per GPU-hour", lambda c: f"{c.usd_per_gpu_hour:,.2f}", False),
        ("USD per step", lambda c: f"{c.step_usd:,.4g}", True),
        ("USD per million tokens", lambda c: f"{c.usd_per_million_tokens:,.4g}", True),
    ]
    header = ["cost (--price)", *names]
    body = [
        [
            label,
            *(
                _cell(cost, text, tag if tagged else "")
                for cost, tag in zip(costs, tags, strict=True)
            ),
        ]
        for label, text, tagged in rows
    ]
    return ["", *text_columns([header, *body], {0}), *_against_first(estimates, costs, names)]


def _cell(cost: TrainingCost | None, text: Any, tag: str) -> str:
    if cost is None:
        return "-"
    return f"{text(cost)} {tag}" if tag else text(cost)


def _against_first(
    estimates: Sequence[Estimate], costs: Sequence[TrainingCost | None], names: Sequence[str]
) -> list[str]:
    """'B vs A: GPU-hour -15.0%, tokens/s -22.1%, cost per million tokens +9.1%'."""
    priced = [(index, cost) for index, cost in enumerate(costs) if cost is not None]
    if len(priced) < 2:
        return []
    first, base = priced[0]
    base_run = estimates[first]
    lines = []
    for index, cost in priced[1:]:
        run = estimates[index]
        lines.append(
            f"{names[index]} vs {names[first]}: GPU-hour "
            f"{_change(cost.usd_per_gpu_hour, base.usd_per_gpu_hour)}, tokens/s "
            f"{_change(run.tokens_per_s, base_run.tokens_per_s)}, MFU {run.mfu:.1%} vs "
            f"{base_run.mfu:.1%}: cost per million tokens "
            f"{_change(cost.usd_per_million_tokens, base.usd_per_million_tokens)}"
        )
    return lines


def _change(value: float, base: float) -> str:
    return f"{(value / base - 1):+.1%}" if base > 0 else "-"


def cost_json(cost: TrainingCost | None) -> dict[str, Any]:
    """A fabric's `cost` entry in `mfu --json` (empty when it was not priced)."""
    if cost is None:
        return {}
    return {
        "cost": {
            "usd_per_gpu_hour": cost.usd_per_gpu_hour,
            "accelerators": cost.accelerators,
            "usd_per_step": round_sig(cost.step_usd),
            "usd_per_million_tokens": round_sig(cost.usd_per_million_tokens),
        }
    }
