"""NCCL's own algorithm/protocol per collective and size range, from what it printed it used
(analysis/imports/nccl_choice.py), for nccl_tuner.conf's rules that must name a pair the
measured winner does not (pure).

Choices come in either shape tune has them: ChoiceSummary (or its to_dict), one per
collective and size with every (algorithm, protocol, channels) NCCL used there, or the flat
lines of a tune's choices.jsonl (one per setting, collective, size and pair used).

The rules, each written once here:
- A size counts only where NCCL printed collbench's size (not `size_is_logged`) and used one
  pair there, one the plugin can name (not one rank, symmetric kernels, copy engine, MSCCL).
  A size with several pairs, or a path the plugin cannot name, makes the whole range
  unknown: a rule there would force a pair NCCL did not always use.
- Within a range, the pair NCCL printed at a size holds from that size to just below the
  next printed size with another pair; the first part starts at the range's start and the
  last ends at its end. Neighbouring parts with one pair are one part.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from collbench.analysis.tune.tuner_conf_rules import ALGORITHMS, PLUGIN_COLLECTIVE, PROTOCOLS
from collbench.core.units import format_size

Pair = tuple[str, str]
# (min_bytes, max_bytes inclusive, (algorithm, protocol)) in the plugin's names
Part = tuple[int, int, Pair]


def _get(record: Any, key: str) -> Any:
    if isinstance(record, Mapping):
        return record.get(key)
    return getattr(record, key, None)


def _used(entry: Any) -> list[Pair]:
    """The (algorithm, protocol) pairs one choices entry says NCCL used."""
    used = _get(entry, "used")
    if used is None:  # a flat choices.jsonl line is one pair
        return [(_get(entry, "algorithm"), _get(entry, "protocol"))]
    return [(_get(item, "algorithm"), _get(item, "protocol")) for item in used]


def pairs_by_size(choices: Sequence[Any], collective: str) -> dict[int, set[Pair]]:
    """size_bytes -> the pairs NCCL used for `collective` (the plugin's name) at that size."""
    sizes: dict[int, set[Pair]] = {}
    for entry in choices:
        name = _get(entry, "collective")
        if PLUGIN_COLLECTIVE.get(name, name) != collective or _get(entry, "size_is_logged"):
            continue
        sizes.setdefault(int(_get(entry, "size_bytes")), set()).update(_used(entry))
    return sizes


def collectives(choices: Sequence[Any]) -> set[str]:
    """The plugin's names of the collectives the choices say anything about."""
    names = {_get(entry, "collective") for entry in choices}
    return {PLUGIN_COLLECTIVE[name] for name in names if name in PLUGIN_COLLECTIVE}


def own_parts(
    choices: Sequence[Any], collective: str, min_bytes: int, max_bytes: int
) -> list[Part] | None:
    """NCCL's own pair over [min_bytes, max_bytes] of `collective`, cut where it changed
    (the module's rules); None when it printed nothing there or one size is not usable."""
    sizes = pairs_by_size(choices, collective)
    printed = sorted(size for size in sizes if min_bytes <= size <= max_bytes)
    if not printed:
        return None
    parts: list[Part] = []
    for size in printed:
        pairs = sizes[size]
        if len(pairs) != 1:
            return None
        pair = next(iter(pairs))
        if pair[0] not in ALGORITHMS or pair[1] not in PROTOCOLS:
            return None
        if parts and parts[-1][2] == pair:
            continue
        if parts:
            parts[-1] = (parts[-1][0], size - 1, parts[-1][2])
        parts.append((min_bytes if not parts else size, max_bytes, pair))
    return parts


def words(parts: Sequence[Part]) -> str:
    """`ring/ll below 64 KiB, ring/simple from 64 KiB` style: the pairs, in order."""
    if len(parts) == 1:
        return "/".join(parts[0][2])
    said = [f"{'/'.join(pair)} from {format_size(low)}" for low, _, pair in parts[1:]]
    return ", ".join([f"{'/'.join(parts[0][2])}", *said])
