"""nccl_tuner.conf as NCCL's example tuner plugin reads it: its names and a strict parse (pure).

The method, in full: docs/tune.md#analysis-tune-tuner-conf-rules-py.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import astuple, dataclass

from collbench.core.errors import SpecError

FIELDS = (
    "collective_type",
    "min_bytes",
    "max_bytes",
    "algorithm",
    "protocol",
    "channels",
    "nNodes",
    "nRanks",
    "numPipeOps",
    "regBuff",
)
MIN_FIELDS, MAX_FIELDS = 8, 10
MAX_LINE_CHARS = 255  # fgets(line, 256): 255 characters, then the rest is another line
SIZE_MAX = 2**64 - 1  # size_t's largest value: "no upper end"
ANY = -1  # the wildcard of nNodes, nRanks, numPipeOps and regBuff

# The plugin's names, in NCCL's own index order, and collbench's names for its collectives.
COLLECTIVES = ("broadcast", "reduce", "allgather", "reducescatter", "allreduce")
ALGORITHMS = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat")
PROTOCOLS = ("ll", "ll128", "simple")
PLUGIN_COLLECTIVE = {  # collbench's name -> the plugin's: the same without underscores
    name: name.replace("_", "")
    for name in ("broadcast", "reduce", "all_gather", "reduce_scatter", "all_reduce")
}
# What the plugin makes of a name it does not know (parseCollType/Algorithm/Protocol).
FALLBACK = {"collective_type": "allreduce", "algorithm": "ring", "protocol": "simple"}
BACKENDS = ("nccl", "rccl")

_INTEGER = re.compile(r"-?[0-9]+")
_C_SPACE = " \t\n\v\f\r"


class TunerConfSyntaxError(SpecError):
    """A line of nccl_tuner.conf the example plugin would skip or misread."""

    def __init__(self, line_number: int, line: str, hint: str) -> None:
        super().__init__(f"nccl_tuner.conf line {line_number}", line, hint)


@dataclass(frozen=True)
class Rule:
    """One line of nccl_tuner.conf, in the plugin's names (-1: any)."""

    collective: str  # allreduce | allgather | reducescatter | broadcast | reduce
    min_bytes: int  # inclusive
    max_bytes: int  # inclusive
    algorithm: str
    protocol: str
    channels: int  # >0: that many; 0: the library's own count; -1: NCCL's 1, RCCL's own
    nnodes: int = ANY
    nranks: int = ANY
    num_pipe_ops: int = ANY
    reg_buff: int = ANY
    line_number: int = 0  # 0: not read from a file

    def line(self) -> str:
        """The rule as the file's line (all 10 fields, in FIELDS' order)."""
        return ",".join(str(value) for value in astuple(self)[:MAX_FIELDS])


def parse_tuner_conf(text: str) -> list[Rule]:
    """The rules of an nccl_tuner.conf, in file order; TunerConfSyntaxError for the first
    line the plugin would skip or misread (too long, a comment not in column 0, an empty
    field, not 8 to 10 fields, an unknown name, a number that is not one, a range that
    matches nothing)."""
    rules = []
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")  # CRLF: the plugin's atoi ignores the last field's \r
        if line.strip(" \t") == "" or line.startswith("#"):
            continue
        rules.append(_strict_rule(number, line))
    return rules


# ---- C's number reading, as the plugin's atoi does it ----


def _leading_integer(text: str) -> tuple[int, int]:
    """(sign, digits value) of C's number prefix: spaces, a sign, digits; 0 if none."""
    text = text.lstrip(_C_SPACE)
    sign = -1 if text[:1] == "-" else 1
    text = text[1:] if text[:1] in "+-" else text
    digits = re.match(r"[0-9]*", text).group()  # type: ignore[union-attr]
    return sign, int(digits) if digits else 0


def _atoi(text: str) -> int:
    sign, value = _leading_integer(text)
    value = min(sign * value, 2**63 - 1) if sign > 0 else max(sign * value, -(2**63))
    return (value + 2**31) % 2**32 - 2**31  # (int)strtol


# ---- strict reading: refuse what the plugin would skip or misread ----


_Fail = Callable[[str], TunerConfSyntaxError]


def _strict_rule(number: int, line: str) -> Rule:
    def fail(hint: str) -> TunerConfSyntaxError:
        return TunerConfSyntaxError(number, line, hint)

    if len(line) > MAX_LINE_CHARS:
        raise fail(f"is {len(line)} characters; the plugin reads 255 and the rest as a new line")
    if "#" in line:
        raise fail("has a '#' after column 0; the plugin has no such comments")
    fields = [field.strip(" \t") for field in line.split(",")]
    if "" in fields:
        raise fail("has an empty field; the plugin drops it and shifts the fields after it")
    if not MIN_FIELDS <= len(fields) <= MAX_FIELDS:
        raise fail(f"has {len(fields)} fields; the plugin reads 8 to 10 ({','.join(FIELDS)})")
    for index, known in ((0, COLLECTIVES), (3, ALGORITHMS), (4, PROTOCOLS)):
        if fields[index] not in known:
            name, fallback = FIELDS[index], FALLBACK[FIELDS[index]]
            raise fail(f"{name} {fields[index]!r} is unknown: the plugin reads it as {fallback}")
    padded = fields + ["-1"] * (MAX_FIELDS - len(fields))  # a missing field is -1 (any)
    numbers = [
        _strict_integer(fail, FIELDS[index], padded[index])
        for index in (1, 2, *range(5, MAX_FIELDS))
    ]
    rule = Rule(fields[0], numbers[0], numbers[1], fields[3], fields[4], *numbers[2:], number)
    _check_values(fail, rule)
    return rule


def _strict_integer(fail: _Fail, name: str, text: str) -> int:
    if not _INTEGER.fullmatch(text):
        raise fail(f"{name} {text!r} is not an integer; the plugin reads it as {_atoi(text)}")
    return int(text)


def _check_values(fail: _Fail, rule: Rule) -> None:
    if not 0 <= rule.min_bytes <= rule.max_bytes <= SIZE_MAX:
        raise fail(f"needs 0 <= min_bytes <= max_bytes <= {SIZE_MAX}; this range matches nothing")
    if rule.channels < -1 or rule.channels >= 2**31:
        raise fail("channels must be a count, 0 (the library's own) or -1")
    for name, value in zip(FIELDS[6:9], (rule.nnodes, rule.nranks, rule.num_pipe_ops), strict=True):
        if value != ANY and not 1 <= value < 2**31:
            raise fail(f"{name} must be a count or -1 (any)")
    if rule.reg_buff not in (ANY, 0, 1):
        raise fail("regBuff must be 0, 1 or -1 (any)")


# How a setting's NCCL_ALGO and NCCL_PROTO name an algorithm and a protocol for one
# collective, read as NCCL's parseList reads them (src/graph/tuning.cc), in the tuner
# plugin's names; nccl_tuner.conf writes a rule only where exactly one of each is left.
# NCCL's names in NCCL_ALGO / NCCL_PROTO (ncclAlgoStr, ncclProtoStr; compared ignoring case)
# and the plugin's names for them: the same without underscores.
ALGO_ENV_NAMES = {name.replace("_", ""): name for name in ALGORITHMS}
PROTO_ENV_NAMES = {name: name for name in PROTOCOLS}


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
