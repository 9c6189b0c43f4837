"""Every option of every command has an owner: a dataclass field whose default is the
option's, so a default is written once. An option declared by hand (a bare typer.Option) or
one whose default is written in the CLI fails here, unless it is a pure command-line flag
listed below with its reason."""

from __future__ import annotations

import dataclasses
from typing import Annotated

import pytest
import typer
from typer.models import ArgumentInfo, OptionInfo
from typer.utils import get_params_from_function

from collbench.cli.app import app
from collbench.cli.options import FROM_OWNER, REQUIRED, Argument, Option, command

# Flags that choose only how the command line itself behaves or prints: no use-case reads them.
PURE_CLI = {
    "--json": "prints the same result as JSON instead of a table",
    "--quiet": "prints less of the same result",
    "--json-rows": "prints the rows as JSON lines instead of the table",
    "--help": "typer's own",
    "--config": "reads the same options from a file (cli/config.py)",
    "--print-config": "prints the options given instead of running",
}


def _commands(group: typer.Typer, prefix: tuple[str, ...] = ()):
    for info in group.registered_commands:
        name = info.name or info.callback.__name__.replace("_", "-")
        yield (*prefix, name), info.callback
    for sub in group.registered_groups:
        yield from _commands(sub.typer_instance, (*prefix, sub.name))


COMMANDS = dict(_commands(app))


def _declared(callback) -> list[tuple[str, object, object]]:
    """(parameter, the typer info, its default) of every parameter of a command."""
    params = get_params_from_function(callback)
    return [
        (name, meta.default, meta.default.default)
        for name, meta in params.items()
        if isinstance(meta.default, (OptionInfo, ArgumentInfo))  # not the context
    ]


def test_the_walk_finds_every_command():
    assert {("compare",), ("report",), ("mfu",), ("gemm",), ("wait",)} <= set(COMMANDS)
    assert {("import", "nccl-tests"), ("topo", "show"), ("topo", "detect")} <= set(COMMANDS)
    assert len(COMMANDS) >= 20


def _problems(callback) -> list[str]:
    """Each option of a command whose default does not come from an owner, one line each."""
    problems = []
    for name, info, default in _declared(callback):
        declared = getattr(info, "collbench_option", None)
        if isinstance(info, ArgumentInfo):
            optional = isinstance(declared, Argument) and not declared.required
            if optional and (default is not None or declared.owner is None):
                problems.append(f"argument {name}: optional, so its owner's default applies")
            elif not optional and (
                not isinstance(declared, Argument) or default not in (..., REQUIRED)
            ):
                problems.append(f"argument {name}: not an Argument, or it has a default")
            continue
        assert isinstance(info, OptionInfo)
        flag = (info.param_decls or (f"--{name}",))[0].split("/")[0]
        if flag in PURE_CLI:
            continue
        if not isinstance(declared, Option):
            problems.append(f"{flag}: a bare typer.Option (declare it with Option)")
            continue
        if declared.owner is None or not dataclasses.is_dataclass(declared.owner):
            problems.append(f"{flag}: has no owning dataclass")
            continue
        if declared.field not in {item.name for item in dataclasses.fields(declared.owner)}:
            problems.append(f"{flag}: {declared.owner.__name__} has no field {declared.field}")
        if declared.default not in (None, FROM_OWNER, REQUIRED):
            problems.append(f"{flag}: its default {declared.default!r} is written in the CLI")
        if default not in (..., declared.default_value):
            problems.append(f"{flag}: the signature's default {default!r} is its own")
    return problems


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=" ".join)
def test_every_option_takes_its_default_from_its_owner(path):
    assert not _problems(COMMANDS[path])


@dataclasses.dataclass(frozen=True)
class _Owner:
    iters: int = 5


def test_a_default_written_in_the_cli_is_caught():
    def noop(values):
        return None

    owned = Option(("--iters",), "", _Owner, "iters", kind=int, default=FROM_OWNER)
    assert owned.default_value == 5 and owned.help_text.endswith("(default: 5)")
    assert _problems(command("ok", "", (owned, Argument("run", "")), noop)) == []
    written = Option(("--iters",), "", _Owner, "iters", kind=int, default=7)
    unowned = Option(("--warmup",), "", kind=int)
    bad = command("bad", "", (written, unowned), noop)
    assert [line.split(":")[0] for line in _problems(bad)] == ["--iters", "--warmup"]
    with pytest.raises(AttributeError, match="has no field 'seed'"):  # named at import
        command("typo", "", (Option(("--seed",), "", _Owner, "seed", kind=int),), noop)

    def by_hand(
        warmup: Annotated[int, typer.Option("--warmup")] = 5,
        quiet: Annotated[bool, typer.Option("--quiet")] = False,
    ) -> None:
        """A hand-written command: --warmup's default is its own; --quiet is pure CLI."""

    assert _problems(by_hand) == ["--warmup: a bare typer.Option (declare it with Option)"]
