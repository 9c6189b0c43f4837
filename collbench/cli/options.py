"""Command-line options as data: each `Option` names the dataclass field it fills, and its
help text quotes that field's default (or the constant behind it), so a default is written
in one place only and the CLI just maps onto it. Typer reads the signature built here.

The method, in full: docs/architecture.md#collbench-cli-options-py.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
import typing
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from collbench.core.errors import Interrupted
from collbench.core.units import OPTION_NUMBERS, check_number

# What the help shows for a value an option declares no metavar for, by what it parses, in
# the ecosystem's words (click's TEXT and PATH, N a count, X a number); a flag shows none,
# a list its item's (typer's own would be <bool>, <int>, <list[str]> ...).
KIND_METAVARS: dict[Any, str] = {bool: "", int: "N", float: "X", Path: "PATH", str: "TEXT"}
# The owner field types an option's kind is read from (others parse as str).
_KINDS = {"int": int, "float": float, "bool": bool, "Path": Path}


def kind_metavar(kind: Any) -> str:
    """The metavar of a value of `kind` (a list's: its item's)."""
    if typing.get_origin(kind) in (list, tuple):
        kind = typing.get_args(kind)[0]
    return KIND_METAVARS.get(kind, "TEXT")


class _FromOwner:
    """The `default` of an option that takes its owner field's default (typer shows it)."""

    def __repr__(self) -> str:
        return "FROM_OWNER"


FROM_OWNER: Any = _FromOwner()
REQUIRED: Any = inspect.Parameter.empty


@dataclass(frozen=True)
class Option:
    """One command-line option and the dataclass field it fills.

    `default` None means "not given": the owner's default applies. FROM_OWNER passes the
    owner field's default to the command. Either way the help text says what the default
    is ("(default: X)", from `default_text`, the owner field or the value): typer's own
    "[default: X]" is never shown, as rich cuts a long one mid-word instead of wrapping it.
    """

    flags: tuple[str, ...]
    help: str
    # The dataclass whose field this option fills, and that field (None: not a field; with
    # an owner, the one its flag names: --top-k fills top_k).
    owner: type | None = None
    field: str | None = None
    # What typer parses: str, int, float, bool, list[str], Path ...; None: the owner field's
    # type where that is int, float, bool or Path (str where `parse` makes the value).
    kind: Any = None
    default: Any = None
    # Says the default when the owner field's own default does not (it is None, or the
    # value is decided later, e.g. per backend); "": the help itself says it.
    default_text: str | None = None
    panel: str | None = None
    # Turns the given value into the field's value; called with the value and the flag.
    parse: Callable[[Any, str], Any] | None = None
    # The parameter name; None: the field, else the long flag in snake_case.
    name: str | None = None
    # What the help shows for the value (SIZE, LIST, N); None: kind_metavar(kind).
    metavar: str | None = None

    def __post_init__(self) -> None:
        if self.owner is not None and self.field is None:
            object.__setattr__(self, "field", self.flag.lstrip("-").replace("-", "_"))
        if self.kind is None:
            object.__setattr__(self, "kind", str if self.parse else self._field_kind())

    def _field_kind(self) -> Any:
        """What the owner field holds, where typer can parse it (else str)."""
        if self.owner is None:
            return str
        types = {item.name: str(item.type) for item in dataclasses.fields(self.owner)}
        return _KINDS.get(types.get(self.field, "").split(" |")[0], str)

    @property
    def flag(self) -> str:
        """The long flag, as error messages name it (`--check` for `--check/--no-check`)."""
        return self.flags[0].split("/")[0]

    @property
    def parameter_name(self) -> str:
        return self.name or self.field or self.flag.lstrip("-").replace("-", "_")

    @property
    def owner_default(self) -> Any:
        """The owner field's default (None where it has none)."""
        if self.owner is None or not dataclasses.is_dataclass(self.owner):
            return None
        for item in dataclasses.fields(self.owner):
            if item.name == self.field:
                if item.default_factory is not dataclasses.MISSING:
                    return item.default_factory()
                return None if item.default is dataclasses.MISSING else item.default
        raise AttributeError(f"{self.owner.__name__} has no field {self.field!r}")

    @property
    def default_value(self) -> Any:
        """The parameter's default: what the command receives when the option is not given."""
        return self.owner_default if self.default is FROM_OWNER else self.default

    @property
    def help_text(self) -> str:
        """The help, ending in "(default: X)" where typer does not show the default itself."""
        text = self.default_text
        if text is None:
            text = self._shown(self.owner_default if self.default is None else self.default_value)
        return f"{self.help} (default: {text})" if text else self.help

    def _shown(self, value: Any) -> str | None:
        """A default as the help says it; None where there is nothing worth saying."""
        if isinstance(value, bool):  # the flag that gives it: --check/--no-check -> check
            on, _, off = self.flags[0].partition("/")
            return (on if value else off).lstrip("-") or None
        return None if value is None or value == () or value is REQUIRED else format_value(value)

    def info(self, folded: bool = False) -> Any:
        """The typer.Option for a hand-written signature (it names this declaration, so a
        test can tell an option that has an owner from one written by hand). A `folded`
        one is left out of -h and shown by --help-all (cli/help.py)."""
        info = typer.Option(
            *self.flags,
            help=self.help_text or None,
            show_default=False,
            metavar=kind_metavar(self.kind) if self.metavar is None else self.metavar,
            rich_help_panel=self.panel,
            hidden=folded,
        )
        info.collbench_option = self
        return info

    def parameter(self, folded: bool = False) -> inspect.Parameter:
        """The typer parameter: Optional[kind] when "not given" is a value of its own."""
        default = self.default_value
        kind = self.kind if default is not None else Optional[self.kind]  # noqa: UP045
        return inspect.Parameter(
            self.parameter_name,
            inspect.Parameter.KEYWORD_ONLY,
            default=default,
            annotation=Annotated[kind, self.info(folded)],
        )


@dataclass(frozen=True)
class Argument:
    """One positional argument (RUN...) and the field it fills (with an owner: the one of
    its name): required, or (`required` False) left out as None, the owner's default then
    applying."""

    name: str
    help: str
    owner: type | None = None
    field: str | None = None
    kind: Any = str
    metavar: str | None = None
    required: bool = True

    def __post_init__(self) -> None:
        if self.owner is not None and self.field is None:
            object.__setattr__(self, "field", self.name)

    @property
    def parameter_name(self) -> str:
        return self.name

    def parameter(self, folded: bool = False) -> inspect.Parameter:
        metavar = self.metavar or self.name.upper()
        info = typer.Argument(help=self.help, metavar=metavar, show_default=False)
        info.collbench_option = self
        kind = self.kind if self.required else Optional[self.kind]  # noqa: UP045
        return inspect.Parameter(
            self.name,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            default=REQUIRED if self.required else None,
            annotation=Annotated[kind, info],
        )


def field_option(
    owner: type, flag: str, text: str, panel: str | None = None, **more: Any
) -> Option:
    """The Option of the field of `owner` its flag names (--top-k: top_k; or `field`), of
    that field's type, its default the field's (FROM_OWNER) unless `more` says."""
    return Option((flag,), text, owner, panel=panel, **{"default": FROM_OWNER, **more})


def format_value(value: Any) -> str:
    """A default as help texts say it: 300.0 -> 300, (0.5, 1.0, 2.0) -> 0.5, 1, 2 (with
    spaces, so a long list wraps between items rather than inside one)."""
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (tuple, list)):
        return ", ".join(format_value(item) for item in value)
    return str(value)


def listing(values: Iterable[str], notes: Mapping[str, str] | None = None, last: str = ", ") -> str:
    """'a, b, c' (or with last=" or ": 'a, b or c'), each value followed by its note."""
    items = [f"{value} ({notes[value]})" if notes and value in notes else value for value in values]
    return ", ".join(items[:-1]) + last + items[-1] if len(items) > 1 else "".join(items)


def command(
    name: str,
    doc: str,
    options: Sequence[Option | Argument],
    run: Callable[[dict[str, Any]], None],
    folded: Collection[str] = (),
    config: bool = False,
    check: Callable[[dict[str, Any]], object] | None = None,
) -> Callable[..., None]:
    """A typer command whose parameters are `options` (its arguments first); it hands
    their values to `run`. The options of `folded` panels are the rarer ones: -h leaves
    them out (naming their panels) and --help-all shows them (cli/help.py). A `config`
    command also takes --config FILE and --print-config (cli/config.py), which prints
    only what `check` (the command's parsing, without its work) accepts."""
    from collbench.cli.config import config_parameters, dump_config

    ordered = sorted(options, key=lambda option: not isinstance(option, Argument))
    parameters = [option.parameter(getattr(option, "panel", None) in folded) for option in ordered]
    parameters += config_parameters() if config else []
    signature = inspect.Signature(parameters)

    def body(*args: Any, **values: Any) -> None:
        bound = signature.bind(*args, **values)
        bound.apply_defaults()
        given = dict(bound.arguments)
        if config:
            del given["config"]
            ctx = given.pop("ctx")
            if given.pop("print_config"):
                if check:  # a value the command would refuse is refused here
                    check(given)
                typer.echo(dump_config(ctx))
                raise typer.Exit()
        try:
            run(given)
        except KeyboardInterrupt:  # typer would turn it into a silent exit 130
            raise Interrupted("interrupted") from None

    body.__signature__ = signature  # type: ignore[attr-defined]
    body.__annotations__ = {param.name: param.annotation for param in parameters}
    body.__doc__ = doc
    body.__name__ = name
    return body


def given_fields(
    owner: type, options: Sequence[Option | Argument], values: Mapping[str, Any]
) -> dict[str, Any]:
    """The owner's fields that the command line gave, parsed; an option not given (None or
    an empty list) is left out, so the dataclass's own default applies."""
    fields = {}
    for option in options:
        value = values.get(option.parameter_name)
        if option.owner is not owner or value is None or value == []:
            continue
        parse = getattr(option, "parse", None)
        fields[option.field] = value if parse is None else parse(value, option.flag)
        if getattr(option, "flag", "") in OPTION_NUMBERS and not isinstance(value, list):
            check_number(OPTION_NUMBERS[option.flag], fields[option.field], option.flag)
    return fields


def request(owner: type, options: Sequence[Option | Argument], values: Mapping[str, Any]) -> Any:
    """The owner built from what the command line gave (its own defaults for the rest)."""
    return owner(**given_fields(owner, options, values))


def force_option(owner: type, **rest: Any) -> Option:
    """`--force` (overwrite an existing output file), filling `owner.force`."""
    from collbench.store.outputs import FORCE_HELP

    return Option(("--force",), FORCE_HELP, owner, default=FROM_OWNER, default_text="", **rest)


def say(line: str) -> None:
    """`line` on stderr, as it is."""
    print(line, file=sys.stderr, flush=True)


def warn(lines: Iterable[str], what: str = "warning") -> None:
    """Each line on stderr as `collbench: warning: LINE` (or another `what`)."""
    for line in lines:
        say(f"collbench: {what}: {line}")


def run_dir_option(owner: type, help: str = "Run directory (new or empty).") -> Option:
    """`--out DIR`, filling `owner.out` (when not given, the store names a new one so). Not
    -o: that is --op, as in nccl-tests (tests/cli/test_short_flags.py)."""
    return Option(("--out",), help, owner, default_text="results/<UTC time>-<id>", metavar="DIR")


def json_option(help: str, name: str = "json_out", **rest: Any) -> Option:
    """`--json`: print the command's result as JSON (a pure command-line flag)."""
    return Option(("--json",), help, kind=bool, default=False, name=name, **rest)


def group(help: str, **settings: Any) -> typer.Typer:
    """A command group (collbench, import, topo, tune) that shows its help when bare."""
    return typer.Typer(
        help=help,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        **settings,
    )


def add_command(parent: typer.Typer, name: str, *args: Any, **kwargs: Any) -> None:
    """Register `command(name, ...)` on the `parent` group as `name`."""
    parent.command(name)(command(name, *args, **kwargs))
