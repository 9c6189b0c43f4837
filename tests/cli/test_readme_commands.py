"""Every `collbench ...` command line in the README's shell blocks names commands and options
that exist, so a command copied from the README is not answered `No such command`."""

from __future__ import annotations

import functools
import re
import shlex
from pathlib import Path

import pytest
import typer

from collbench.cli import app

README = Path(__file__).resolve().parents[2] / "README.md"
_SHELL_BLOCK = re.compile(r"^( *)```(?:bash|sh|shell|console)\n(.*?)^\1```", re.M | re.S)
_NOT_COLLBENCH = {"git", "cd", "pip"}  # lines that name the folder or the package, not the command
_ENDS_COMMAND = {"&&", "||", "|", ";", ">", ">>", "2>&1"}


def readme_command_lines() -> list[str]:
    """The collbench invocations in the README's shell blocks, comments cut off."""
    lines = []
    for match in _SHELL_BLOCK.finditer(README.read_text(encoding="utf-8")):
        for raw in match.group(2).replace("\\\n", " ").splitlines():
            line = raw.split(" #", 1)[0].strip()
            tokens = shlex.split(line) if line and not line.startswith("#") else []
            for index, token in enumerate(tokens):
                before = tokens[index - 1] if index else ""
                if token == "collbench" and tokens[0] not in _NOT_COLLBENCH and before != "cd":
                    args = []
                    for arg in tokens[index + 1 :]:
                        if arg in _ENDS_COMMAND:
                            break
                        args.append(arg)
                    lines.append(" ".join(["collbench", *args]))
    return lines


@functools.cache
def _root() -> object:
    return typer.main.get_command(app)


def _is_group(command: object) -> bool:
    # typer >= 0.26 ships its own copy of click: test for a group by what it holds
    return hasattr(command, "commands")


def resolve(args: list[str]) -> tuple[object, list[str]]:
    """The (sub)command the arguments name, and the arguments left for it."""
    command = _root()
    while _is_group(command) and args and not args[0].startswith("-"):
        name = args[0]
        assert name in command.commands, f"No such command {name!r} under {command.name!r}"
        command, args = command.commands[name], args[1:]
    return command, args


def option_names(command) -> set[str]:
    names = {"--help"}
    for param in command.params:
        names.update(param.opts, getattr(param, "secondary_opts", ()))
    return names


LINES = readme_command_lines()


def test_the_readme_has_collbench_commands_to_check():
    assert len(LINES) >= 10
    assert "collbench sweep" in LINES


@pytest.mark.parametrize("line", LINES)
def test_readme_command_names_real_commands_and_options(line):
    command, args = resolve(shlex.split(line)[1:])
    assert not _is_group(command), f"{line!r} stops at a group: {command.name}"
    known = option_names(command)
    for arg in args:
        option = arg.strip("[]").split("=", 1)[0]
        if option.startswith("-") and option != "-":
            assert option in known, f"{line!r}: {option} is not an option of {command.name}"


def test_the_rccl_tests_import_the_readme_suggests_is_a_command():
    text = README.read_text(encoding="utf-8")
    assert "rccl-tests" in text
    command, _ = resolve(["import", "rccl-tests"])
    assert command.name == "rccl-tests"
