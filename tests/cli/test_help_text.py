"""Every command's help, at 80 and 120 columns (cli/help.py, cli/options.py): metavars in the
ecosystem's words (no typer `<bool>`, `<int>`, `<list[str]>` ...; a flag shows none; an
argument's usage `RUN...`, not `{RUN...}...`),
`collbench --help` summarising each command by its first sentence with no line cut inside
it, help text on every option, and the common path on about one screen (`--help-all` shows
the rest)."""

from __future__ import annotations

import re

import pytest
import typer

from collbench.cli.app import app
from collbench.cli.help import HELP_ALL, first_sentence
from tests.helpers import collbench

COLUMNS = (80, 120)
# typer's own type labels: <bool>, <int>, <float>, <str>, <path>, <list[Path]>, <int range> ...
TYPER_METAVAR = re.compile(
    r"<(bool|int|float|str|text|path|file|dir|uuid|datetime|list\[[^\]]*\]|[\w|]+ range)>",
    re.IGNORECASE,
)
# Lines at 80 columns: the commands with many options keep -h to one screen.
ONE_SCREEN = {("sweep",): 60, ("overlap",): 60, ("tune", "run"): 60, (): 60}
ANY_COMMAND = 80


def _walk(group, prefix: tuple[str, ...] = ()):
    """(path, click command) of every group and command under `group`, itself first."""
    yield prefix, group
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            yield from _walk(command, (*prefix, name))
        else:
            yield (*prefix, name), command


ROOT = typer.main.get_command(app)
PATHS = dict(_walk(ROOT))
COMMANDS = {path: command for path, command in PATHS.items() if not hasattr(command, "commands")}


def _help(path: tuple[str, ...], columns: int, flag: str = "--help") -> str:
    done = collbench(*path, flag, env={"COLUMNS": str(columns), "TERM": "dumb", "NO_COLOR": "1"})
    assert done.returncode == 0, (path, done.stderr)
    return done.stdout


def test_the_walk_finds_every_command():
    assert {("sweep",), ("tune", "run"), ("import", "nccl-tests"), ("topo", "detect")} <= set(
        COMMANDS
    )
    assert {(), ("import",), ("topo",), ("tune",)} <= set(PATHS) and len(COMMANDS) >= 20


# The most options one command or subcommand may list in its full help (--help-all; -h and
# --help-all themselves not counted): more belong in a config file or a subcommand.
MOST_OPTIONS = 60


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=" ".join)
def test_no_command_lists_more_than_60_options(path):
    options = [param for param in COMMANDS[path].params if param.param_type_name == "option"]
    assert len(options) <= MOST_OPTIONS, f"{' '.join(path)}: {len(options)} options"


@pytest.mark.parametrize("columns", COLUMNS)
@pytest.mark.parametrize("path", sorted(PATHS), ids=lambda path: " ".join(path) or "collbench")
def test_no_typer_type_metavar_anywhere(path, columns):
    flags = ("--help", HELP_ALL) if path in COMMANDS else ("--help",)
    for flag in flags:
        text = _help(path, columns, flag)
        assert "Usage:" in text and "…" not in text
        assert not TYPER_METAVAR.findall(text), (path, flag, TYPER_METAVAR.findall(text))
        # Arguments in the usage line as click writes them: RUN, RUN..., [RUN...]
        usage = next(line for line in text.splitlines() if "Usage:" in line)
        assert "{" not in usage and "......" not in usage and "...]..." not in usage, usage


def _params(command, ctx):
    return [param for param in command.get_params(ctx) if not getattr(param, "hidden", False)]


@pytest.mark.parametrize("path", sorted(PATHS), ids=lambda path: " ".join(path) or "collbench")
def test_flags_show_no_metavar_and_every_value_names_its_own(path):
    command = PATHS[path]
    ctx = typer.main.get_command(app).make_context("collbench", [], resilient_parsing=True)
    for param in command.get_params(ctx):
        if param.param_type_name != "option":
            continue
        if param.is_flag:
            assert param.metavar == "", (path, param.opts)
        else:
            assert param.metavar and not param.metavar.startswith("<"), (path, param.opts)


@pytest.mark.parametrize("path", sorted(PATHS), ids=lambda path: " ".join(path) or "collbench")
def test_every_option_and_argument_has_help_text(path):
    command = PATHS[path]
    ctx = ROOT.make_context("collbench", [], resilient_parsing=True)
    missing = [param.name for param in command.get_params(ctx) if not (param.help or "").strip()]
    assert missing == [], f"{' '.join(path)}: no help for {missing}"


def _summaries(text: str) -> dict[str, str]:
    """The Commands panel of a group's help: each command's summary, its lines joined."""
    rows: dict[str, str] = {}
    panel = text.split("─ Commands ", 1)[1].split("╰", 1)[0]
    name = ""
    for line in panel.splitlines()[1:]:
        cell = line.strip("│ ")
        if not line.startswith("│ "):
            continue
        if not line.startswith("│  "):  # a new row: the command's name, then its summary
            name, _, cell = cell.partition(" ")
        rows[name] = f"{rows.get(name, '')} {cell.strip()}".strip()
    return rows


@pytest.mark.parametrize("columns", COLUMNS)
@pytest.mark.parametrize("group", [(), ("import",), ("topo",)], ids=["collbench", "import", "topo"])
def test_each_summary_is_the_first_sentence_uncut(group, columns):
    rows = _summaries(_help(group, columns))
    commands = PATHS[group].commands
    assert set(rows) == set(commands)
    for name, command in commands.items():
        # No line break inside a paragraph (rich keeps it, cutting the sentence there).
        assert "\n" not in command.short_help
        assert all("\n" not in part for part in (command.help or "").split("\n\n")), name
        summary = first_sentence(command.help or "")
        assert rows[name] == summary, (name, columns)
        assert summary.endswith("."), (name, summary)


def test_first_sentence():
    assert first_sentence("Fit it.\nThen say so. More.") == "Fit it."
    assert first_sentence("Set a knob, e.g. NCCL_ALGO=Ring. Then run.") == (
        "Set a knob, e.g. NCCL_ALGO=Ring."
    )
    assert first_sentence("Print `x` (see `collbench topo`). `y` too.") == (
        "Print `x` (see `collbench topo`)."
    )
    assert first_sentence("No full stop") == "No full stop"


@pytest.mark.parametrize("columns", COLUMNS)
@pytest.mark.parametrize("path", sorted(PATHS), ids=lambda path: " ".join(path) or "collbench")
def test_help_fits_its_line_budget(path, columns):
    lines = _help(path, columns).splitlines()
    budget = ONE_SCREEN.get(path, ANY_COMMAND)
    assert len(lines) <= budget, f"{' '.join(path)} -h: {len(lines)} lines at {columns} columns"


@pytest.mark.parametrize(
    "path", [("sweep",), ("overlap",), ("tune", "run"), ("tune", "verify"), ("doctor",), ("mfu",)]
)
def test_help_all_shows_what_h_folds(path):
    command = COMMANDS[path]
    folded = [param for param in command.params if param.hidden]
    assert folded, "this command folds its rarer panels"
    short, full = _help(path, 120), _help(path, 120, HELP_ALL)
    for param in command.params:
        if param.param_type_name != "option":
            continue
        row = re.compile(rf"^│[ *]+{re.escape(max(param.opts, key=len))} ", re.MULTILINE)
        assert row.search(full), (path, param.opts)
        assert (param in folded) == (not row.search(short)), (path, param.opts)
    assert HELP_ALL in short and "More options (" in short and "More options" not in full


def test_help_all_is_help_where_nothing_is_folded():
    assert _help(("fit",), 120, HELP_ALL) == _help(("fit",), 120)
    assert HELP_ALL not in _help(("fit",), 120)


@pytest.mark.parametrize("path", [("overlap",), ("doctor",), ("tune", "run"), ("tune", "verify")])
def test_commands_that_take_one_dtype_do_not_offer_several(path):
    # They refuse `-d float32,float16` and `-d all`: their help says one (issue 38.7).
    helps = {
        name: param.help
        for param in COMMANDS[path].params
        for name in param.opts
        if name in ("--dtype", "--op")
    }
    assert "--dtype" in helps, path
    for name, text in helps.items():
        assert "several" not in text and ": one" in text, (path, name, text)
