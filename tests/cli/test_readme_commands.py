"""Every `collbench ...` command line in the shell blocks of the README and of the docs site
(docs/**/*.md) names commands and options that exist, so a command copied from the
documentation is not answered `No such command`; every relative link of the README leads to
a file of the repository (the docs site's own links are checked by `mkdocs build --strict`)."""

from __future__ import annotations

import functools
import re
import shlex
from pathlib import Path

import pytest
import typer

from collbench.cli import app
from tests.helpers import collbench

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").rglob("*.md"))
_SHELL_BLOCK = re.compile(r"^( *)```(?:bash|sh|shell|console)\n(.*?)^\1```", re.M | re.S)
_NOT_COLLBENCH = {"git", "cd", "pip"}  # lines that name the folder or the package, not the command
_ENDS_COMMAND = {"&&", "||", "|", ";", ">", ">>", "2>&1"}
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def command_lines(path: Path) -> list[str]:
    """The collbench invocations in a Markdown file's shell blocks, comments cut off."""
    lines = []
    for match in _SHELL_BLOCK.finditer(path.read_text(encoding="utf-8")):
        block = re.sub(rf"^{match.group(1)}", "", match.group(2), flags=re.M)
        for raw in block.replace("\\\n", " ").splitlines():
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


def readme_command_lines() -> list[str]:
    return command_lines(README)


@functools.cache
def _root() -> object:
    return typer.main.get_command(app)


def _is_group(command: object) -> bool:
    # typer >= 0.26 ships its own copy of click: test for a group by what it holds
    return hasattr(command, "commands")


def resolve(args: list[str]) -> tuple[object, list[str]]:
    """The (sub)command the arguments name, and the arguments left for it: `tune run ...`
    walks into the group `tune` and its subcommand `run`."""
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


def check_line(line: str) -> None:
    command, args = resolve(shlex.split(line)[1:])
    assert not _is_group(command), f"{line!r} stops at a group: {command.name}"
    known = option_names(command)
    for arg in args:
        option = arg.strip("[]").split("=", 1)[0]
        if option.startswith("-") and option != "-":
            assert option in known, f"{line!r}: {option} is not an option of {command.name}"


LINES = readme_command_lines()
DOC_LINES = [(str(path.relative_to(ROOT)), line) for path in DOCS for line in command_lines(path)]


def test_the_readme_has_collbench_commands_to_check():
    assert len(LINES) >= 10
    assert "collbench sweep" in LINES


def test_the_docs_have_collbench_commands_to_check():
    assert len(DOCS) >= 20
    assert len(DOC_LINES) >= 50
    pages = {page for page, _ in DOC_LINES}
    assert {"docs/doctor.md", "docs/tune.md", "docs/compare.md", "docs/predict.md"} <= pages


@pytest.mark.parametrize("line", LINES)
def test_readme_command_names_real_commands_and_options(line):
    check_line(line)


@pytest.mark.parametrize(("page", "line"), DOC_LINES)
def test_docs_command_names_real_commands_and_options(page, line):
    check_line(line)


def test_every_relative_link_of_the_readme_leads_to_a_file():
    for target in _LINK.findall(README.read_text(encoding="utf-8")):
        if "://" in target or target.startswith("#"):
            continue
        path = target.split("#", 1)[0]
        assert (ROOT / path).is_file(), f"README links to {target}, which is not in the repository"


def test_the_rccl_tests_import_the_docs_suggest_is_a_command():
    text = " ".join((ROOT / "docs" / "import.md").read_text(encoding="utf-8").split())
    assert "collbench import rccl-tests" in text
    command, _ = resolve(["import", "rccl-tests"])
    assert command.name == "rccl-tests"


PRINTED_CONFIGS = sorted(
    {line for path in (README, *DOCS) for line in command_lines(path) if "--print-config" in line}
)


@pytest.mark.parametrize("line", [line for line in PRINTED_CONFIGS if "..." not in line])
def test_a_documented_print_config_line_is_a_job_the_command_accepts(line):
    # --print-config parses the line as its command would (a job that does not fit, a size
    # of 12Q: exit 2), so a documented one must be one collbench would run
    done = collbench(*shlex.split(line)[1:])
    assert done.returncode == 0, (line, done.stderr)
