"""pyproject.toml declares what the package imports, and nothing it does not: an offline
install must not fetch a library no code uses, and no import may rest on a package that
happens to be installed."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import tomllib

from tests.source_tree import package_sources

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
# Distribution name -> the module it installs, where they differ.
MODULE_OF = {"pyyaml": "yaml"}
# Standard library modules and the package itself.
OWN = {"collbench", *sys.stdlib_module_names}
# Imported but not declared, on purpose: click is typer's own (its exceptions are typer's
# API); the GPU vendors' management libraries are read when a site has them installed
# (bench/device_clocks.py falls back without them).
UNDECLARED = {"click", "pynvml", "amdsmi"}


def _imported() -> set[str]:
    names = set()
    for path in package_sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module.split(".")[0])
    return names


def _declared() -> set[str]:
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    requirements = [*project["dependencies"], *project["optional-dependencies"]["mpi"]]
    names = {re.match(r"[A-Za-z0-9_.-]+", text).group(0).lower() for text in requirements}
    return {MODULE_OF.get(name, name) for name in names}


def test_every_import_is_declared_and_every_declaration_imported():
    imported = _imported() - OWN - UNDECLARED
    assert imported - _declared() == set(), "imported but not declared in pyproject.toml"
    assert _declared() - imported == set(), "declared in pyproject.toml but imported nowhere"
