"""`--config FILE` and `--print-config`, for the commands built with `command(config=True)`
(cli/options.py): a YAML file holds what the flags hold, keyed by the long option names.

The method, in full: docs/architecture.md#collbench-cli-config-py.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from collbench.core.errors import SpecError

NAMES = ("config", "print_config")
CONFIG_HELP = (
    "Options from a YAML file, keyed by long option name without dashes (min-bytes: 1M; a "
    "flag: true or false; a repeatable option: a list); options given here override it."
)
PANEL = "Config file"  # folded: -h names it, --help-all shows it


def _key(param: Any) -> str:
    """A parameter's key in a config file: its long flag without dashes, or its name."""
    return next((opt[2:] for opt in param.opts if opt.startswith("--")), param.name)


def _params(command: Any) -> dict[str, Any]:
    return {_key(param): param for param in command.params if param.name not in NAMES}


def read_config(path: Path, command: Any) -> dict[str, Any]:
    """The file's values by parameter name; SpecError (exit 2) for a file that is not
    YAML, a key the command has no option for, or a value of the wrong shape."""
    import yaml

    from collbench.core.limits import CONFIG_MAX_BYTES
    from collbench.store.reading import check_depth, read_text

    text = read_text(path, "--config", CONFIG_MAX_BYTES)
    check_depth(text, "--config", str(path))  # a parser would recurse that deep
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise SpecError(
            "--config", str(path), f"cannot be read as YAML: {' '.join(str(error).split())}"
        ) from None
    if not isinstance(data, dict):
        raise SpecError("--config", str(path), "must map option names to values")
    params, values = _params(command), {}
    for key, value in data.items():
        param = params.get(key)
        if param is None:
            raise SpecError(
                "--config", str(path), f"has no option {key!r} (keys: {', '.join(params)})"
            )
        several = param.multiple or param.nargs == -1
        items = value if several and isinstance(value, list) else [value]
        flag = getattr(param, "is_flag", False)
        if several != isinstance(value, list) or not all(
            isinstance(item, bool) if flag else isinstance(item, (str, int, float))
            for item in items
        ):
            wanted = "true or false" if flag else "a list" if several else "one value"
            raise SpecError("--config", str(path), f"{key}: {value!r} is not {wanted}")
        values[param.name] = value
    return values


def _load(ctx: typer.Context, param: Any, path: Path | None) -> Path | None:
    if path is not None and not ctx.resilient_parsing:
        ctx.default_map = {**(ctx.default_map or {}), **read_config(path, ctx.command)}
    return path


def dump_config(ctx: typer.Context) -> str:
    """The YAML of what the command line (and any --config) gave: the options left at
    their defaults are left out."""
    import yaml

    given = {}
    for key, param in _params(ctx.command).items():
        value = ctx.params.get(param.name)
        if ctx.get_parameter_source(param.name).name == "DEFAULT" or value in (None, [], ()):
            continue
        if isinstance(value, (list, tuple)):
            value = [str(item) if isinstance(item, Path) else item for item in value]
        if isinstance(value, str) and value.isdecimal() and str(int(value[:19])) == value:
            value = int(value)  # `pp: 4`, not `pp: '4'` (--pp takes a number or a layout)
        given[key] = str(value) if isinstance(value, Path) else value
    return yaml.safe_dump(given, sort_keys=False, allow_unicode=True).rstrip("\n")


def config_parameters() -> list[inspect.Parameter]:
    """The typer parameters of --config and --print-config (and the context they read)."""
    keyword = inspect.Parameter.KEYWORD_ONLY
    config = typer.Option(
        "--config",
        help=CONFIG_HELP,
        metavar="FILE",
        is_eager=True,
        callback=_load,
        rich_help_panel=PANEL,
        hidden=True,
    )
    printing = typer.Option(
        "--print-config",
        help="Print the --config file this command line amounts to, and exit.",
        rich_help_panel=PANEL,
        hidden=True,
    )
    return [
        inspect.Parameter(
            "config", keyword, default=None, annotation=Annotated[Optional[Path], config]
        ),  # noqa: UP045
        inspect.Parameter(
            "print_config", keyword, default=False, annotation=Annotated[bool, printing]
        ),
        inspect.Parameter("ctx", keyword, annotation=typer.Context),
    ]
