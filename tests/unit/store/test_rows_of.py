"""Row kinds are a closed set with one selector (store.rows.rows_of / Run.rows_of): an
overlap or doctor row is a ResultRow too, so isinstance cannot pick sweep rows, and a kind
spelled as a string outside the store would drift from the set."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from collbench.store.load import Run
from collbench.store.meta import RunMeta
from collbench.store.rows import (
    DOCTOR,
    OVERLAP,
    ROW_KINDS,
    SWEEP,
    DoctorRow,
    ProbeRow,
    ResultRow,
    row_is,
    rows_of,
)
from tests.rows import make_row

ROOT = Path(__file__).resolve().parents[3]
SOURCES = ("collbench", "analysis")
STORE = ROOT / "collbench" / "store"
# `.kind` attributes that are not a row's: a spec's step (core.spec.Step, sweep or overlap).
NOT_ROWS = {"step"}


def _rows() -> list[ResultRow]:
    sweep = make_row()
    probe = ProbeRow(**{**sweep.to_dict(), "kind": OVERLAP}, **_none(ProbeRow, ResultRow))
    doctor = DoctorRow(**{**sweep.to_dict(), "kind": DOCTOR}, **_none(DoctorRow, ResultRow))
    return [probe, sweep, doctor]


def _none(kind: type, base: type) -> dict[str, None]:
    from dataclasses import fields

    own = {item.name for item in fields(base)}
    return {item.name: None for item in fields(kind) if item.name not in own}


def test_rows_of_selects_each_kind_though_every_row_is_a_result_row():
    rows = _rows()
    assert all(isinstance(row, ResultRow) for row in rows)  # why isinstance cannot select
    assert rows_of(rows, SWEEP) == [rows[1]]
    assert rows_of(rows, OVERLAP) == [rows[0]]
    assert rows_of(rows, DOCTOR) == [rows[2]]
    run = Run("x", RunMeta(), rows)
    assert run.rows_of(SWEEP) == run.sweep_rows == [rows[1]]
    assert run.probe_rows == [rows[0]]
    assert set(ROW_KINDS) == {SWEEP, OVERLAP, DOCTOR}


def test_a_kind_outside_the_set_is_refused_not_an_empty_selection():
    with pytest.raises(ValueError, match="not a row kind"):
        rows_of(_rows(), "swep")
    with pytest.raises(ValueError, match="not a row kind"):
        row_is(make_row(), "probe")


def row_kind_literals(source: str) -> list[int]:
    """Lines comparing a `.kind` (or `["kind"]` / `.get("kind")`) with a row kind spelled as
    a string: `row.kind == "sweep"`, `"overlap" != r.kind`, `row.kind in ("sweep", ...)`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        if any(_is_kind(side) for side in sides) and any(_row_kind_text(side) for side in sides):
            found.append(node.lineno)
    return found


def _is_kind(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute) and node.attr in ("kind", "_kind"):
        owner = node.value
        return not (isinstance(owner, ast.Name) and owner.id in NOT_ROWS)
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "kind"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        args = node.args
        return node.func.attr == "get" and bool(args) and _text(args[0]) == "kind"
    return False


def _row_kind_text(node: ast.AST) -> bool:
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_row_kind_text(item) for item in node.elts)
    return _text(node) in ROW_KINDS


def _text(node: ast.AST) -> object:
    return node.value if isinstance(node, ast.Constant) else None


def test_the_check_finds_a_row_kind_literal():
    assert row_kind_literals('if row.kind == "sweep":\n    pass\n') == [1]
    assert row_kind_literals('x = [r for r in rows if "overlap" != r.kind]\n') == [1]
    assert row_kind_literals('ok = row.get("kind") in ("doctor", "sweep")\n') == [1]
    assert row_kind_literals("ok = row.kind == SWEEP\n") == []  # the store's constant
    assert row_kind_literals('ok = finding.kind == "node"\n') == []  # not a row kind
    assert row_kind_literals('ok = step.kind == "overlap"\n') == []  # a spec's step


def test_no_row_kind_literal_outside_the_store():
    found = []
    for folder in SOURCES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if STORE in path.parents:
                continue
            for line in row_kind_literals(path.read_text(encoding="utf-8")):
                found.append(f"{path.relative_to(ROOT)}:{line}")
    assert not found, f"select rows with store.rows.rows_of / row_is, not a string: {found}"
