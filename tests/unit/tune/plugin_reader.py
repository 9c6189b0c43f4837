"""nccl_tuner.conf exactly as NCCL's example tuner plugin loads it (plugins/tuner/example/
plugin.c), silent fallbacks included: the oracle the tests hold collbench's strict reader
(analysis/tune/tuner_conf_rules.parse_tuner_conf) and the files it writes against."""

from __future__ import annotations

from collections.abc import Iterator

from collbench.analysis.tune.tuner_conf_rules import (
    ALGORITHMS,
    COLLECTIVES,
    FALLBACK,
    MAX_FIELDS,
    MAX_LINE_CHARS,
    MIN_FIELDS,
    PROTOCOLS,
    SIZE_MAX,
    Rule,
    _atoi,
    _leading_integer,
)


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
