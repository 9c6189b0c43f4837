"""Which collectives NCCL can run under a setting's NCCL_ALGO and NCCL_PROTO (pure).

The method, in full: docs/tune.md#analysis-tune-validity-py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from collbench.analysis.tune.tuner_conf_rules import (
    ALGO_ENV_NAMES,
    PLUGIN_COLLECTIVE,
    PROTO_ENV_NAMES,
    enabled_names,
)
from collbench.core.tune_catalog import NCCL_ALGORITHMS, NCCL_PROTOCOLS

_ALL = ("ll", "ll128", "simple")
_SIMPLE = ("simple",)
# plugin collective -> plugin algorithm -> the protocols NCCL runs it with, in the order
# the reasons name them (see the module for the source)
NCCL_SUPPORT: dict[str, dict[str, tuple[str, ...]]] = {
    "broadcast": {"ring": _ALL},
    "reduce": {"ring": _ALL},
    "allgather": {"ring": _ALL, "pat": _SIMPLE, "nvls": _SIMPLE, "collnet_direct": _SIMPLE},
    "reducescatter": {"ring": _ALL, "pat": _SIMPLE, "nvls": _SIMPLE, "collnet_direct": _SIMPLE},
    "allreduce": {
        "tree": _ALL,
        "ring": _ALL,
        "nvls": _SIMPLE,
        "nvls_tree": _SIMPLE,
        "collnet_direct": _SIMPLE,
        "collnet_chain": _SIMPLE,
    },
}
# the plugin's names -> NCCL's own spelling, for messages (NCCL_ALGO=Tree, not tree)
_ALGO_WORD = {ALGO_ENV_NAMES[name.lower()]: name for name in NCCL_ALGORITHMS}
_PROTO_WORD = {PROTO_ENV_NAMES[name.lower()]: name for name in NCCL_PROTOCOLS}


@dataclass(frozen=True)
class Skipped:
    """A collective a setting cannot run, and why (one line)."""

    collective: str  # collbench's name (all_gather)
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"collective": self.collective, "reason": self.reason}


def runnable_pairs(knobs: Mapping[str, str], collective: str) -> list[tuple[str, str]] | None:
    """The (algorithm, protocol) pairs, in the plugin's names, that NCCL can run
    `collective` (collbench's name) with under `knobs`; None where NCCL_ALGO/NCCL_PROTO do
    not govern it (all_to_all, sendrecv)."""
    target = PLUGIN_COLLECTIVE.get(collective)
    if target is None:
        return None
    algorithms = _enabled(knobs, "NCCL_ALGO", ALGO_ENV_NAMES, target)
    protocols = _enabled(knobs, "NCCL_PROTO", PROTO_ENV_NAMES, target)
    supported = NCCL_SUPPORT[target]
    return [
        (algorithm, protocol)
        for algorithm in supported
        if algorithm in algorithms
        for protocol in supported[algorithm]
        if protocol in protocols
    ]


def skip_reason(knobs: Mapping[str, str], collective: str) -> str | None:
    """Why NCCL cannot run `collective` under `knobs` (one line), or None where it can."""
    if runnable_pairs(knobs, collective) != []:
        return None
    target = PLUGIN_COLLECTIVE[collective]
    supported = NCCL_SUPPORT[target]
    algorithms = _enabled(knobs, "NCCL_ALGO", ALGO_ENV_NAMES, target)
    left = [name for name in supported if name in algorithms]
    if not left:
        return f"NCCL runs {collective} only with {_words(supported, _ALGO_WORD)}"
    protocols = sorted({p for name in left for p in supported[name]}, key=_ALL.index)
    return (
        f"NCCL runs {_words(left, _ALGO_WORD)} for {collective} only with "
        f"{_words(protocols, _PROTO_WORD)}"
    )


def split_collectives(
    knobs: Mapping[str, str], collectives: Sequence[str]
) -> tuple[tuple[str, ...], tuple[Skipped, ...]]:
    """`collectives` split into those NCCL can run under `knobs` (in order) and the
    pairings it cannot, each with its reason."""
    reasons = [(collective, skip_reason(knobs, collective)) for collective in collectives]
    kept = tuple(collective for collective, reason in reasons if reason is None)
    return kept, tuple(Skipped(name, reason) for name, reason in reasons if reason is not None)


def per_collective_hint(
    knobs: Mapping[str, str], kept: Sequence[str], skipped: Sequence[Skipped]
) -> str | None:
    """Where a plain NCCL_ALGO list (no `coll:` entries) made NCCL unable to run some
    collectives: the per-collective form that sets it only for those that can run it, as
    one line (`NCCL_ALGO=allreduce:tree`, NCCL 2.24+); None where it does not apply."""
    value = knobs.get("NCCL_ALGO")
    governed = [name for name in kept if name in PLUGIN_COLLECTIVE]
    if not value or ":" in value or ";" in value or not skipped or not governed:
        return None
    if any(runnable_pairs({"NCCL_ALGO": value}, item.collective) for item in skipped):
        return None  # NCCL_PROTO is what leaves them nothing
    form = ";".join(f"{PLUGIN_COLLECTIVE[name]}:{value.lower()}" for name in governed)
    return (
        f"NCCL 2.24+ takes NCCL_ALGO={form}, which leaves "
        f"{', '.join(item.collective for item in skipped)} to NCCL's own choice"
    )


def _enabled(
    knobs: Mapping[str, str], knob: str, names: Mapping[str, str], target: str
) -> list[str]:
    value = knobs.get(knob)
    return list(names.values()) if value is None else enabled_names(knob, value, names, target)


def _words(names: Sequence[str], spelling: Mapping[str, str]) -> str:
    return ", ".join(spelling[name] for name in names)
