"""The command line stays thin: each command parses, calls one use-case (collbench/run/),
and renders (collbench/render/). No function in collbench/cli/ runs long, and none reads
or writes a file itself: that belongs to collbench/run/ or collbench/store/. Checking that
a path given exists (.exists(), .is_dir()) is parsing and allowed."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import collbench.cli

CLI_DIR = Path(collbench.cli.__file__).parent
MAX_BODY_LINES = 40

# Methods and functions that read, write, make or remove files.
FILE_METHODS = {
    "read_text",
    "read_bytes",
    "write_text",
    "write_bytes",
    "mkdir",
    "rmdir",
    "unlink",
    "touch",
    "rename",
    "open",
}  # not .replace: str.replace is everywhere, Path.replace nowhere in the CLI
FILE_CALLS = {
    "open",
    "json.dump",
    "json.load",
    "os.remove",
    "os.unlink",
    "os.rename",
    "os.replace",
    "os.makedirs",
    "os.mkdir",
    "shutil.rmtree",
    "shutil.copy",
    "shutil.copyfile",
    "shutil.move",
    "tempfile.mkstemp",
    "tempfile.mkdtemp",
    "tempfile.NamedTemporaryFile",
}


def _body_lines(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines of a function's body, its docstring left out."""
    body = function.body
    if (
        len(body) > 1
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        body = body[1:]
    return body[-1].end_lineno - body[0].lineno + 1


def _called(node: ast.Call) -> str:
    """The name a call is made by: open, json.dump, path.write_text -> .write_text."""
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        if isinstance(func.value, ast.Name) and f"{func.value.id}.{func.attr}" in FILE_CALLS:
            return f"{func.value.id}.{func.attr}"
        return f".{func.attr}"
    return ""


def long_functions(source: str) -> list[str]:
    tree = ast.parse(source)
    return [
        f"{node.name} ({_body_lines(node)} lines)"
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and _body_lines(node) > MAX_BODY_LINES
    ]


def file_io(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = _called(node)
        if name in FILE_CALLS or name.lstrip(".") in FILE_METHODS and name.startswith("."):
            found.append((node.lineno, f"line {node.lineno}: {name}("))
    return [text for _, text in sorted(found)]


CLI_FILES = sorted(CLI_DIR.glob("*.py"))


def test_the_cli_files_are_found():
    names = {path.name for path in CLI_FILES}
    assert {"app.py", "compare.py", "report.py", "options.py"} <= names


@pytest.mark.parametrize("path", CLI_FILES, ids=lambda path: path.name)
def test_no_cli_function_runs_long(path):
    assert not long_functions(path.read_text(encoding="utf-8")), path


@pytest.mark.parametrize("path", CLI_FILES, ids=lambda path: path.name)
def test_no_cli_code_reads_or_writes_files(path):
    assert not file_io(path.read_text(encoding="utf-8")), path


def test_the_checks_catch_what_they_are_for():
    body = "\n".join(f"    x{number} = {number}" for number in range(MAX_BODY_LINES + 1))
    assert long_functions(f'def f():\n    """Doc."""\n{body}\n') == [
        f"f ({MAX_BODY_LINES + 1} lines)"
    ]
    assert long_functions("def f():\n    return 1\n") == []
    source = (
        "import json\n"
        "def f(path, out, text):\n"
        "    with open(path) as handle:\n"
        "        json.load(handle)\n"
        "    out.write_text(text)\n"
        "    out.parent.mkdir()\n"
        "    return path.exists() and path.is_dir()\n"
    )
    assert file_io(source) == [
        "line 3: open(",
        "line 4: json.load(",
        "line 5: .write_text(",
        "line 6: .mkdir(",
    ]
