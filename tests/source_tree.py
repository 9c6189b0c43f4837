"""The package's own source files, for the tests that read code as text (AST checks)."""

from __future__ import annotations

import os
from pathlib import Path

import collbench

PACKAGE = Path(collbench.__file__).resolve().parent


def package_sources() -> list[Path]:
    """Every .py file of the installed package, through collbench/analysis, launchers and
    topologies, which are links to the top-level folders (Path.rglob does not follow them)."""
    return sorted(
        Path(folder, name)
        for folder, _, names in os.walk(PACKAGE, followlinks=True)
        for name in names
        if name.endswith(".py")
    )
