"""How a setting's NCCL_ALGO and NCCL_PROTO name an algorithm and a protocol for one
collective, read as NCCL's parseList reads them (src/graph/tuning.cc), in the tuner plugin's
names (pure). nccl_tuner.conf (analysis/tune/tuner_conf.py) writes a rule only where exactly
one of each is left.
"""

from __future__ import annotations

from collections.abc import Mapping

from collbench.analysis.tune.tuner_conf_rules import COLLECTIVES
from collbench.core.errors import SpecError

# NCCL's names in NCCL_ALGO / NCCL_PROTO (ncclAlgoStr, ncclProtoStr; compared ignoring case)
# and the plugin's names for them.
ALGO_ENV_NAMES = {
    "tree": "tree",
    "ring": "ring",
    "collnetdirect": "collnet_direct",
    "collnetchain": "collnet_chain",
    "nvls": "nvls",
    "nvlstree": "nvls_tree",
    "pat": "pat",
}
PROTO_ENV_NAMES = {"ll": "ll", "ll128": "ll128", "simple": "simple"}


def single_name(knobs: Mapping[str, str], kind: str, collective: str) -> str | None:
    """The one algorithm (kind ALGO) or protocol (PROTO) NCCL_<kind> leaves for a collective
    in the plugin's names, or None when it leaves several (or is not set)."""
    name = f"NCCL_{kind}"
    value = knobs.get(name)
    if value is None:
        return None
    names = ALGO_ENV_NAMES if kind == "ALGO" else PROTO_ENV_NAMES
    enabled = enabled_names(name, value, names, collective)
    return enabled[0] if len(enabled) == 1 else None


def enabled_names(knob: str, value: str, names: Mapping[str, str], collective: str) -> list[str]:
    """What NCCL_ALGO/NCCL_PROTO `value` enables for `collective` (plugin names), read as
    NCCL's parseList does: `a,b` (all collectives), then `coll:a,b` entries that replace the
    list of one collective; `^a,b` enables all but those. SpecError where NCCL refuses it."""
    enabled = list(names.values())
    for index, entry in enumerate(part for part in value.split(";") if part):
        prefix, _, elements = entry.rpartition(":")
        if index > 0 and not prefix:
            raise SpecError(
                knob, value, "needs a 'collective:' prefix on every entry but the first"
            )
        if prefix and prefix.lower() not in COLLECTIVES:
            raise SpecError(knob, value, f"names an unknown collective {prefix!r}")
        exclude = elements.startswith("^")
        listed = [item.lower() for item in elements.lstrip("^").split(",") if item]
        unknown = [item for item in listed if item not in names]
        if unknown:
            raise SpecError(knob, value, f"names {unknown[0]!r}; NCCL knows {', '.join(names)}")
        if prefix and prefix.lower() != collective:
            continue
        chosen = {names[item] for item in listed}
        enabled = [name for name in names.values() if (name in chosen) != exclude]
    return enabled
