"""The import graph of collbench and of benchmarks/, function-local and type-only imports
included (grimp reads every import statement, not only the module-level ones, and an import
under `if TYPE_CHECKING:` still ties two modules together): no cycles, and no module reaches
into an analysis sub-package's private names or modules.

lint-imports checks the layers; a cycle inside one layer (two rank-layer modules importing
each other, one of them inside a function) is invisible to it, and so is a private name
imported from a public module."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import grimp
import pytest

import collbench
from tests.source_tree import package_sources

PACKAGE = "collbench"
ANALYSIS = "collbench.analysis"
ROOT = Path(collbench.__file__).resolve().parent
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


# Cycles other branches of issue 37 remove; each must go, none may join them.
@cache
def _graph() -> grimp.ImportGraph:
    return grimp.build_graph(PACKAGE, exclude_type_checking_imports=False, cache_dir=None)


def _script_graph(folder: Path) -> grimp.ImportGraph:
    """The scripts of a folder that is no package (benchmarks/ runs them by path and they
    import each other by bare name), every import statement an edge."""
    graph = grimp.ImportGraph()
    scripts = {path.stem: path for path in folder.glob("*.py")}
    for name in scripts:
        graph.add_module(name)
    for name, path in scripts.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported = [node.module]
            else:
                continue
            for other in imported:
                if other in scripts and other != name:
                    graph.add_import(importer=name, imported=other)
    return graph


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module, each sorted."""
    seen: set[str] = set()
    found = []
    for module in sorted(graph.modules):
        if module in seen:
            continue
        component = (
            graph.find_upstream_modules(module) & graph.find_downstream_modules(module)
        ) | {module}
        seen |= component
        if len(component) > 1:
            found.append(sorted(component))
    return found


def test_no_import_cycle():
    cycles = _cycles(_graph())
    assert cycles == [], f"import cycles (function-local and type-only imports included): {cycles}"


@pytest.mark.slow
def test_no_import_cycle_in_benchmarks():
    assert {"gpu_acceptance", "gpu_acceptance_steps"} <= _script_graph(BENCHMARKS).modules
    assert _cycles(_script_graph(BENCHMARKS)) == []


def test_the_cycle_finder_sees_function_local_and_type_only_imports(tmp_path, monkeypatch):
    """A cycle closed by an import inside a function is one (the bench.doctor <-> bench.worker
    cycle was such a one), and so is one closed under TYPE_CHECKING."""
    package = tmp_path / "cyclepkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from cyclepkg.b import B\n")
    (package / "b.py").write_text("B = 1\n\ndef late():\n    from cyclepkg import a\n")
    (package / "c.py").write_text("from cyclepkg.d import D\n")
    (package / "d.py").write_text(
        "from typing import TYPE_CHECKING\nD = 1\nif TYPE_CHECKING:\n    from cyclepkg import c\n"
    )
    (package / "e.py").write_text("E = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = grimp.build_graph("cyclepkg", exclude_type_checking_imports=False, cache_dir=None)
    assert _cycles(graph) == [["cyclepkg.a", "cyclepkg.b"], ["cyclepkg.c", "cyclepkg.d"]]
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "main.py").write_text("def run():\n    from steps import STEPS\n")
    (scripts / "steps.py").write_text("import json\nfrom main import Kit\n")
    (scripts / "alone.py").write_text("import main\n")
    assert _cycles(_script_graph(scripts)) == [["main", "steps"]]


def _sub_package(module: str) -> str | None:
    """collbench.analysis.<pkg> for a module inside that sub-package, else None."""
    parts = module.split(".")
    if len(parts) >= 3 and ".".join(parts[:2]) == ANALYSIS:
        return ".".join(parts[:3])
    return None


def _private_module(module: str) -> bool:
    """A module below an analysis sub-package with a component named `_x` (not __init__)."""
    package = _sub_package(module)
    if package is None:
        return False
    rest = module[len(package) + 1 :].split(".") if module != package else []
    return any(part.startswith("_") and not part.startswith("__") for part in rest)


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _module_name(path: Path) -> str:
    parts = [PACKAGE, *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _reach_ins(path: Path) -> list[str]:
    """Each place the module at `path` names a private module or a private name of an
    analysis sub-package it is not part of: `from pkg.mod import _x`, `import pkg._mod`,
    `mod._x` on a module it imported."""
    importer = _module_name(path)
    own = _sub_package(importer)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    modules: dict[str, str] = {}  # local name -> analysis module it stands for
    found = []

    def foreign(module: str) -> bool:
        package = _sub_package(module)
        return package is not None and package != own

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if not foreign(node.module):
                continue
            if _private_module(node.module):
                found.append(f"{importer}:{node.lineno} imports {node.module}")
            for alias in node.names:
                if _is_private(alias.name):
                    found.append(f"{importer}:{node.lineno} imports {node.module}.{alias.name}")
                else:
                    modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if foreign(alias.name) and _private_module(alias.name):
                    found.append(f"{importer}:{node.lineno} imports {alias.name}")
                elif foreign(alias.name) and alias.asname:
                    modules[alias.asname] = alias.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and _is_private(node.attr)
        ):
            found.append(f"{importer}:{node.lineno} uses {modules[node.value.id]}.{node.attr}")
    return found


def test_the_walk_reaches_the_analysis_sub_packages():
    names = {_module_name(path) for path in package_sources()}
    assert {"collbench.analysis.rules.methodology", "collbench.cli.compare"} <= names


@pytest.mark.slow
def test_no_module_reaches_into_an_analysis_sub_package_private_names():
    found = [line for path in package_sources() for line in _reach_ins(path)]
    assert found == []


def test_no_module_imports_a_private_module_of_another_analysis_sub_package():
    """The same by the import graph (every import statement grimp sees, relative ones too)."""
    graph = _graph()
    found = [
        f"{importer} imports {imported}"
        for imported in sorted(graph.modules)
        if _private_module(imported)
        for importer in sorted(graph.find_modules_that_directly_import(imported))
        if _sub_package(importer) != _sub_package(imported)
    ]
    assert found == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from collbench.analysis.rules.methodology import _one\n", "imports"),
        ("from collbench.analysis.tune import _helpers\n", "imports"),
        ("import collbench.analysis.fit._private\n", "imports"),
        ("from collbench.analysis.rules import methodology\nmethodology._one([], 'x')\n", "uses"),
        ("def f():\n    from collbench.analysis.rules.decision import _spread\n", "imports"),
    ],
)
def test_the_private_check_sees_each_way_in(tmp_path, monkeypatch, source, expected):
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    path = tmp_path / "cli" / "example.py"
    path.parent.mkdir()
    path.write_text(source)
    (line,) = _reach_ins(path)
    assert line.startswith("collbench.cli.example:") and f" {expected} " in line


def test_a_sub_package_may_use_its_own_private_names(tmp_path, monkeypatch):
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    path = tmp_path / "analysis" / "rules" / "example.py"
    path.parent.mkdir(parents=True)
    path.write_text("from collbench.analysis.rules.methodology import _one\n")
    assert _reach_ins(path) == []
