"""One rule for "is B different from A" (ARCHITECTURE.md, "Contracts"): every decision site calls
analysis/rules/decision.py, and no second test statistic appears anywhere else in the package."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[4]
PACKAGE_DIRS = ("collbench", "analysis", "launchers", "topologies")
RULE_MODULE = ROOT / "analysis" / "rules" / "decision.py"
# Names of hypothesis tests, corrections and their hand-written cousins.
TEST_STATISTICS = {
    "mannwhitneyu",
    "ttest_ind",
    "ttest_rel",
    "ttest_1samp",
    "wilcoxon",
    "ks_2samp",
    "kruskal",
    "ranksums",
    "brunnermunzel",
    "permutation_test",
    "bootstrap",
    "anderson_ksamp",
    "multipletests",
    "holm",
    "significance",
}
# Each site that decides "is B different from A", and the module it must import the rule in.
DECISION_SITES = {
    "compare": "analysis/compare/comparison.py",
    "CI gate": "analysis/compare/gate.py",
    "tune's winner and confidence": "analysis/tune/select.py",
    "tune's halving search": "analysis/tune/search.py",
    "tune verify": "collbench/run/tune/verify.py",
    "doctor --baseline and the majority rule": "analysis/doctor/judge.py",
}


def _sources() -> list[Path]:
    return [
        path
        for folder in PACKAGE_DIRS
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path != RULE_MODULE
    ]


def _defined_or_called(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.alias):
            names.add(node.name.rsplit(".", 1)[-1])
    return names


@pytest.mark.slow
def test_no_second_test_statistic_outside_the_rule():
    found = []
    for path in _sources():
        tree = _parse(path)
        hits = sorted(_defined_or_called(tree) & TEST_STATISTICS)
        # importing `holm` from the rule module is using the rule, not a second one
        imported = _imported_from_rule(tree)
        hits = [name for name in hits if name not in imported]
        if hits:
            found.append(f"{path.relative_to(ROOT)}: {', '.join(hits)}")
    assert not found, "a test statistic outside analysis/rules/decision.py: " + "; ".join(found)


@pytest.mark.parametrize("site", sorted(DECISION_SITES))
def test_every_decision_site_uses_the_rule(site):
    """The site calls decision.judge, or decides through a module that does (the gate
    reads compare's verdicts, tune verify tune's): importing a name is not enough."""
    path = ROOT / DECISION_SITES[site]
    tree = _parse(path)
    judges = {_module_of(source) for source in _sources() if _calls_judge(_parse(source))}
    through = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert _calls_judge(tree) or through & judges, (
        f"{site} ({path.relative_to(ROOT)}) neither calls decision.judge nor decides through "
        f"a module that does ({', '.join(sorted(judges))})"
    )


@functools.cache  # every site reads the whole tree: parse each file once per session
def _parse(path: Path) -> ast.AST:
    return ast.parse(path.read_text(), str(path))


def _calls_judge(tree: ast.AST) -> bool:
    return "judge" in _imported_from_rule(tree) and any(
        isinstance(node, ast.Call) and getattr(node.func, "id", None) == "judge"
        for node in ast.walk(tree)
    )


def _module_of(path: Path) -> str:
    """collbench.analysis.X for analysis/X.py, collbench.run.X for collbench/run/X.py."""
    relative = path.relative_to(ROOT).with_suffix("")
    parts = relative.parts if relative.parts[0] == "collbench" else ("collbench", *relative.parts)
    return ".".join(parts)


def _imported_from_rule(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "collbench.analysis.rules.decision":
            names |= {alias.name for alias in node.names}
        if isinstance(node, ast.ImportFrom) and node.module == "collbench.analysis.rules":
            names |= {"decision"} & {alias.name for alias in node.names}
    return names
