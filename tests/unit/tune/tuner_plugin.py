"""NCCL's example tuner plugin (plugins/tuner/example/plugin.c) as a model: nccl_tuner.conf
exactly as it loads it, silent fallbacks included, which rule it applies to a call, and what
channel count a collective ends up with. The oracle the tests hold collbench's strict reader
(analysis/tune/tuner_conf_rules.parse_tuner_conf) and the files tune writes against."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence

from collbench.analysis.tune.tuner_conf_rules import (
    ALGORITHMS,
    ANY,
    BACKENDS,
    COLLECTIVES,
    FALLBACK,
    MAX_FIELDS,
    MAX_LINE_CHARS,
    MIN_FIELDS,
    PLUGIN_COLLECTIVE,
    PROTOCOLS,
    SIZE_MAX,
    Rule,
    _atoi,
    _leading_integer,
)
from collbench.core.errors import SpecError

# The count a collective gets when no rule applies, or the rule says -1: None is the
# library's own choice (NCCL reads 0 as unset).
UNMATCHED_CHANNELS = {"nccl": 1, "rccl": None}


def plugin_rules(text: str) -> list[Rule]:
    """The rules the plugin loads from `text`, in file order."""
    read = (_plugin_rule(number, line) for number, line in _fgets_lines(text))
    return [rule for rule in read if rule is not None]


def _fgets_lines(text: str) -> Iterator[tuple[int, str]]:
    """What the plugin's fgets loop hands over, with the number of the file line it starts
    in: at most 255 characters, newline removed, comment and empty lines skipped."""
    position, number = 0, 1
    while position < len(text):
        chunk = text[position : position + MAX_LINE_CHARS]
        newline = chunk.find("\n")
        if newline != -1:
            chunk = chunk[: newline + 1]
        start = number
        position += len(chunk)
        number += chunk.endswith("\n")
        if chunk[0] not in "#\n":
            yield start, chunk.split("\n", 1)[0]


def _plugin_rule(number: int, line: str) -> Rule | None:
    # strtok(",") (empty pieces vanish), at most 10 tokens, spaces and tabs trimmed
    fields = [piece.strip(" \t") for piece in line.split(",") if piece][:MAX_FIELDS]
    if len(fields) < MIN_FIELDS:
        return None
    fields += ["-1"] * (MAX_FIELDS - len(fields))
    return Rule(
        collective=fields[0] if fields[0] in COLLECTIVES else FALLBACK["collective_type"],
        min_bytes=_strtoull(fields[1]),
        max_bytes=_strtoull(fields[2]),
        algorithm=fields[3] if fields[3] in ALGORITHMS else FALLBACK["algorithm"],
        protocol=fields[4] if fields[4] in PROTOCOLS else FALLBACK["protocol"],
        channels=_atoi(fields[5]),
        nnodes=_atoi(fields[6]),
        nranks=_atoi(fields[7]),
        num_pipe_ops=_atoi(fields[8]),
        reg_buff=_atoi(fields[9]),
        line_number=number,
    )


def _strtoull(text: str) -> int:
    sign, value = _leading_integer(text)
    if value > SIZE_MAX:
        return SIZE_MAX
    return value if sign > 0 else (-value) % 2**64


def matches(
    rule: Rule,
    collective: str,
    nbytes: int,
    nnodes: int,
    nranks: int,
    num_pipe_ops: int = 1,
    reg_buff: int = 0,
) -> bool:
    """The plugin's match test (collective in the plugin's names)."""
    return (
        rule.collective == collective
        and rule.min_bytes <= nbytes <= rule.max_bytes
        and rule.nnodes in (ANY, nnodes)
        and rule.nranks in (ANY, nranks)
        and rule.num_pipe_ops in (ANY, num_pipe_ops)
        and rule.reg_buff in (ANY, reg_buff)
    )


def lookup(
    rules: Collection[Rule],
    collective: str,
    nbytes: int,
    nnodes: int,
    nranks: int,
    *,
    num_pipe_ops: int = 1,
    reg_buff: int = 0,
    ignored: Collection[tuple[str, str]] = (),
) -> Rule | None:
    """The rule the plugin applies to one call, or None (see `effective_channels`).

    ignored: (algorithm, protocol) pairs NCCL marks unavailable; the plugin passes over a
    matching rule with such a pair and tries the next one."""
    if collective not in COLLECTIVES and collective not in PLUGIN_COLLECTIVE:
        known = ", ".join(PLUGIN_COLLECTIVE)
        raise SpecError("collective", collective, f"has no tuner-plugin rule; tunable: {known}")
    name = PLUGIN_COLLECTIVE.get(collective, collective)  # either naming: all_reduce, allreduce
    for rule in rules:
        if (rule.algorithm, rule.protocol) in ignored:
            continue
        if matches(rule, name, nbytes, nnodes, nranks, num_pipe_ops, reg_buff):
            return rule
    return None


def uncovered(
    rules: Sequence[Rule], collective: str, nnodes: int, nranks: int, backend: str = "nccl"
) -> list[tuple[int, int]]:
    """The inclusive byte ranges of `collective` (0..SIZE_MAX) where a call of one operation
    on unregistered buffers gets the plugin's no-rule channel count (NCCL: 1): no rule
    applies, or the rule says -1. Exact: the answer only changes at rule boundaries."""
    edges = {0} | {rule.min_bytes for rule in rules}
    edges |= {rule.max_bytes + 1 for rule in rules if rule.max_bytes < SIZE_MAX}
    points = sorted(edges)
    gaps: list[tuple[int, int]] = []
    for start, end in zip(points, [*points[1:], SIZE_MAX + 1], strict=True):
        rule = lookup(rules, collective, start, nnodes, nranks)
        if (rule is not None and rule.channels != -1) or effective_channels(rule, backend) is None:
            continue  # a rule with a count, or the library's own choice: no gap
        if gaps and gaps[-1][1] + 1 == start:
            gaps[-1] = (gaps[-1][0], end - 1)
        else:
            gaps.append((start, end - 1))
    return gaps


def effective_channels(rule: Rule | None, backend: str = "nccl") -> int | None:
    """The channel count a call runs with under the example plugin: a number, or None for
    the library's own choice. NCCL's plugin gives 1 where no rule applies or it says -1."""
    if backend not in BACKENDS:
        raise SpecError("backend", backend, f"has no tuner plugin here; one of {BACKENDS}")
    if rule is None or rule.channels == -1:
        return UNMATCHED_CHANNELS[backend]
    return None if rule.channels == 0 else rule.channels
