"""What a training step costs on a fabric at a quoted price per GPU-hour (`mfu --price`), so
that cheaper hardware can be held against the MFU it realises.

    cost per step            = price per accelerator-hour x accelerators x step time / 3600
    cost per million tokens  = cost per step / tokens per step x 1e6

Every accelerator of the job is paid for the whole step (idle in a bubble or waiting on a
collective included): the estimate's step time already holds that. Prices are USD per
accelerator-hour as quoted (GPU-hour); no other cost (power, storage, staff) is counted.

Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from collbench.analysis.mfu.estimate import Estimate
from collbench.core.errors import SpecError

SECONDS_PER_HOUR = 3600.0
TOKENS_PER_MILLION = 1e6


@dataclass(frozen=True)
class TrainingCost:
    """One fabric's cost of a step and of a million tokens at its price."""

    usd_per_gpu_hour: float
    accelerators: int
    step_usd: float
    usd_per_million_tokens: float


def training_cost(
    estimate: Estimate, tokens_per_step: int, usd_per_gpu_hour: float
) -> TrainingCost:
    """The cost of one step of `estimate` and of a million of its tokens."""
    step_usd = usd_per_gpu_hour * estimate.accelerators * estimate.step_time_s / SECONDS_PER_HOUR
    return TrainingCost(
        usd_per_gpu_hour=usd_per_gpu_hour,
        accelerators=estimate.accelerators,
        step_usd=step_usd,
        usd_per_million_tokens=step_usd / tokens_per_step * TOKENS_PER_MILLION,
    )


def parse_prices(
    texts: Sequence[str], fabrics: Sequence[str], flag: str = "--price"
) -> dict[str, float]:
    """`NAME=USD` per fabric (NAME one of `fabrics`, each at most once; USD a positive
    finite number) -> {name: USD per GPU-hour}; SpecError naming `flag` otherwise."""
    prices: dict[str, float] = {}
    for text in texts:
        name, sep, value = text.partition("=")
        name = name.strip()
        if not sep or not name:
            raise SpecError(
                flag, text, "is not NAME=USD (a --topology name and its price per GPU-hour)"
            )
        if name not in fabrics:
            raise SpecError(flag, text, f"names no --topology given ({', '.join(fabrics)})")
        if name in prices:
            raise SpecError(flag, text, f"prices {name} twice: give one price per fabric")
        try:
            usd = float(value)
        except ValueError:
            usd = math.nan
        if not (math.isfinite(usd) and usd > 0):
            raise SpecError(flag, text, "needs a price above 0 (USD per GPU-hour), e.g. 2.10")
        prices[name] = usd
    return prices
