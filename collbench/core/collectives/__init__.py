"""Registry of collectives: adding one means adding one small module and one line here."""

from __future__ import annotations

from collbench.core.collectives import (
    all_gather,
    all_reduce,
    all_to_all,
    broadcast,
    reduce,
    reduce_scatter,
    sendrecv,
)
from collbench.core.collectives.base import Block, Collective, Geometry, RankContext

REGISTRY: dict[str, Collective] = {
    module.COLLECTIVE.name: module.COLLECTIVE
    for module in (
        all_reduce,
        all_gather,
        reduce_scatter,
        broadcast,
        reduce,
        all_to_all,
        sendrecv,
    )
}

DEFAULT_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")

__all__ = ["REGISTRY", "DEFAULT_COLLECTIVES", "Block", "Collective", "Geometry", "RankContext"]
