"""Exceptions that map onto collbench's exit codes (see docs/errors.md)."""

from __future__ import annotations

EXIT_OK = 0
EXIT_RUN_FAILED = 1
EXIT_USAGE = 2
EXIT_WRONG_DATA = 3
EXIT_SLOWER = 4  # compare --fail-if-slower found a regression
EXIT_FLAGGED = 5  # doctor flagged a node, rail, link or rank
EXIT_UNJUDGED = 6  # doctor measured but could judge nothing (not healthy, not flagged)
EXIT_HANGUP = 129  # SIGHUP: the terminal or connection closed (128 + 1)
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


class CollbenchError(Exception):
    """Base class: the message is one line a person can act on."""

    exit_code = EXIT_RUN_FAILED


class SpecError(CollbenchError, ValueError):
    """Bad input: names the field and the value, and says what would be accepted."""

    exit_code = EXIT_USAGE

    def __init__(self, field: str, value: object, hint: str) -> None:
        self.field = field
        self.value = value
        self.hint = hint
        # a flag given (True) reads "--cuda-graph needs ...", not "--cuda-graph: True needs ..."
        flag = value is True and field.startswith("--")
        super().__init__(f"{field} {hint}" if flag else f"{field}: {value!r} {hint}")

    @classmethod
    def from_message(cls, message: str) -> SpecError:
        """Re-raise a SpecError whose text came from another rank."""
        error = cls.__new__(cls)
        error.field, error.value, error.hint = "", "", message
        Exception.__init__(error, message)
        return error


class RunFailed(CollbenchError):
    """A rank died, hung or raised; the message names the rank and host."""


class Interrupted(CollbenchError):
    """Ctrl-C in a command that has no words of its own for it (typer ends one silently)."""

    exit_code = EXIT_INTERRUPTED
