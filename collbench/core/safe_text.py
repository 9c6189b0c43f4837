"""Values that reach a shell: control characters refused, or escaped where only shown.

The method, in full: docs/architecture.md#collbench-core-safe-text-py.
"""

from __future__ import annotations

import re

from collbench.core.errors import SpecError

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# An environment variable's name as a shell's `export` takes it.
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
ONE_LINE = "a value written into a script, a command line or best.env must be one line of text"


def find_control(text: str) -> str | None:
    """The first control character in `text` (None: there is none)."""
    match = _CONTROL.search(text)
    return match.group() if match else None


def refuse_control(flag: str, value: object, text: str | None = None) -> None:
    """SpecError(flag, value) when `text` (default: str(value)) holds a control character;
    the message shows it escaped, so it stays one line."""
    char = find_control(str(value) if text is None else text)
    if char is not None:
        raise SpecError(flag, value, f"holds a control character ({char!r}): {ONE_LINE}")


def refuse_control_args(argv: list[str]) -> None:
    """refuse_control for every argument of a command line, each named by the option before
    it (`--out`, `--topology`), or as "argument" where there is none."""
    for index, arg in enumerate(argv):
        before = argv[index - 1] if index else ""
        refuse_control(before if before.startswith("-") else "argument", arg)


def escape_control(text: str) -> str:
    """`text` with each control character written as its escape (`\\n`, `\\x1b`,
    `\\u2028`), for a line that only shows it."""
    return _CONTROL.sub(lambda match: match.group().encode("unicode_escape").decode("ascii"), text)
