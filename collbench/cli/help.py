"""How every command's help reads; typer renders it, these classes set what it renders.

The method, in full: docs/architecture.md#collbench-cli-help-py.
"""

from __future__ import annotations

import copy
import inspect
import re
from typing import Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup

HELP_ALL = "--help-all"
# A sentence ends at ". " before a capital or a backquote (not after e.g. / i.e.).
_SENTENCE_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)\.\s+(?=[A-Z`])")


def first_sentence(text: str) -> str:
    """The summary of a help text: its first sentence, on one line."""
    flat = " ".join(text.split())
    end = _SENTENCE_END.search(flat)
    return flat[: end.start() + 1] if end else flat


def _tidy(command: Any) -> None:
    """Set the help rules above on a built command or group (its own parameters)."""
    if command.help is not None:  # each paragraph on one line (paragraphs stay apart)
        paragraphs = inspect.cleandoc(command.help).split("\n\n")
        command.help = "\n\n".join(" ".join(part.split()) for part in paragraphs)
    if command.help and not command.short_help:
        command.short_help = first_sentence(command.help)
    for param in command.params:
        _tidy_param(param)


def _tidy_param(param: Any) -> Any:
    if getattr(param, "is_flag", False) and param.metavar is None:
        param.metavar = ""
    if isinstance(param, TyperArgument) and hasattr(param, "display_type_rich"):
        param.display_type_rich = lambda ctx: None  # the name (its metavar) says it
    if isinstance(param, TyperArgument) and hasattr(param, "_usage_display_name"):
        param._usage_display_name = lambda: _usage_name(param)
    return param


def _usage_name(argument: Any) -> str:
    """An argument as the usage line shows it, as click does: RUN, [RUN], RUN..."""
    name = argument.metavar or argument.name.upper()
    dots = "" if "..." in name or argument.nargs == 1 else "..."
    return f"{name}{dots}" if argument.required else f"[{name}]{dots}"


def _folded_panels(command: Any) -> list[str]:
    panels = (param.rich_help_panel or "Options" for param in command.params if param.hidden)
    return list(dict.fromkeys(panels))


def _show_all(ctx: Any, param: Any, value: bool) -> None:
    """--help-all: the help with the folded options shown, then exit."""
    if not value or ctx.resilient_parsing:
        return
    hidden = [item for item in ctx.command.params if item.hidden]
    for item in hidden:
        item.hidden = False
    try:
        typer.echo(ctx.get_help(), color=ctx.color)
    finally:
        for item in hidden:
            item.hidden = True
    ctx.exit()


class _Tidied:
    """A command or group whose help, -h's included, follows the rules above."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _tidy(self)

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)  # type: ignore[misc]
        return None if option is None else _tidy_param(option)


class HelpCommand(_Tidied, TyperCommand):
    """A command whose help follows the rules above."""

    _help_all: Any = None

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        help_option = self.get_help_option(ctx)
        if help_option is None:
            return params
        if self._help_all is None:  # -h's twin (the same eager flag), built once
            self._help_all = copy.copy(help_option)
            self._help_all.name, self._help_all.callback = "help_all", _show_all
            self._help_all.opts, self._help_all.secondary_opts = [HELP_ALL], []
            self._help_all.help = "Show every option, and exit."
        # Every command takes it; only one with folded panels lists it.
        self._help_all.hidden = not _folded_panels(self)
        return [*params, self._help_all]

    def format_help(self, ctx: Any, formatter: Any) -> None:
        panels = _folded_panels(self)
        if panels and self.epilog is None:
            self.epilog = f"More options ({', '.join(panels)}): {ctx.command_path} {HELP_ALL}"
            try:
                return super().format_help(ctx, formatter)
            finally:
                self.epilog = None
        return super().format_help(ctx, formatter)


class HelpGroup(_Tidied, TyperGroup):
    """A group (collbench, import, topo) whose help follows the rules above."""


def use_help_classes(app: typer.Typer) -> None:
    """Build every command of `app` as a HelpCommand and every group as a HelpGroup (unless
    one names a class of its own: typer's defaults are not)."""
    if _is_default(app.info.cls, TyperGroup):
        app.info.cls = HelpGroup
    for info in app.registered_commands:
        if _is_default(info.cls, TyperCommand):
            info.cls = HelpCommand
    for group in app.registered_groups:
        if _is_default(group.cls, TyperGroup):
            group.cls = HelpGroup
        use_help_classes(group.typer_instance)


def _is_default(cls: Any, default: type) -> bool:
    """Whether `cls` is typer's default class (None, a placeholder, or `default` itself)."""
    return not isinstance(cls, type) or cls is default
