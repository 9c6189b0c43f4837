"""The one methodology check, `check(runs, purpose)` (analysis/rules/methodology.py): for each
command's purpose, a difference that refuses (one line naming every differing field) and one
that only warns or is listed; and no other module keeps its own list of fields (pure)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import collbench
from collbench.analysis.rules import methodology
from collbench.analysis.rules.methodology import (
    COMPARE,
    DOCTOR_BASELINE,
    FIT,
    KNOBS,
    METHODOLOGY,
    NOISE,
    PURPOSES,
    STRICT_COMPARE,
    TUNE_FROM,
    Purpose,
    check,
    describe_method,
)
from collbench.core.errors import SpecError
from collbench.store.rows import DOCTOR
from tests.rows import make_row, make_run
from tests.source_tree import package_sources

ROOT = Path(collbench.__file__).resolve().parent
META = {"timing_method": "perf_counter", "hosts": ["vm"], "backend": "gloo"}
META.update(world_size=2, nodes=1, ranks_per_node=2)


def _run(name, row=None, meta=None, kind=None):
    """A run of two sizes; `row` columns and `meta` keys over the defaults."""
    columns = {**({"kind": kind} if kind else {}), **(row or {})}
    rows = [make_row(run_id=name, size_bytes=size, **columns) for size in (1024, 4096)]
    return make_run(name, rows, run_id=name, **{**META, **(meta or {})})


# purpose, a change that refuses (the field named), a change that passes, and how it passes:
# a warning line ("warn"), returned for the command to show ("list"), or not looked at.
CASES = [
    (
        COMPARE,
        ({"meta": {"shared_gpu": "test"}}, "shared_gpu"),
        ({"row": {"iters": 50}}, "iters"),
        "warn",
    ),
    (
        STRICT_COMPARE,
        ({"row": {"iters": 50}}, "iters"),
        ({"meta": {"hosts": ["b"]}}, "hosts"),
        "list",
    ),
    (
        FIT,
        ({"meta": {"timing_method": "cuda_events"}}, "timing_method"),
        ({"meta": {"knobs": {"env": {"NCCL_ALGO": "Ring"}}}}, "env.NCCL_ALGO"),
        "ignored",
    ),
    (
        TUNE_FROM,
        ({"row": {"collective": "all_gather"}}, "collectives"),
        ({"row": {"warmup": 1}}, "warmup"),
        "warn",
    ),
    (
        NOISE,
        ({"meta": {"knobs": {"env": {"NCCL_ALGO": "Ring"}}}}, "env.NCCL_ALGO"),
        ({"meta": {"versions": {"torch": "9.9"}}}, "versions.torch"),
        "list",
    ),
    (
        DOCTOR_BASELINE,
        ({"row": {"backend": "nccl"}, "meta": {"backend": "nccl"}}, "backend"),
        # a doctor row's world size is its group's: the run's placement comes from meta.json
        ({"row": {"world_size": 8}, "meta": {"world_size": 4, "nodes": 2}}, "nodes world_size"),
        "warn",
    ),
]


def _case_id(value):
    return value.name if isinstance(value, Purpose) else None


def test_every_purpose_has_a_case():
    assert {case[0].name for case in CASES} == {purpose.name for purpose in PURPOSES}


@pytest.mark.parametrize(
    ("purpose", "refusing"), [(case[0], case[1]) for case in CASES if case[1]], ids=_case_id
)
def test_a_refusing_difference_is_one_line_naming_the_field(purpose, refusing):
    change, field = refusing
    kind = purpose.rows if purpose.rows == DOCTOR else None
    base, other = _run("a", kind=kind), _run("b", kind=kind, **change)
    with pytest.raises(SpecError, match="measured differently") as error:
        check([base, other], purpose)
    message = str(error.value)
    assert "\n" not in message and f"({field} " in message and purpose.hint in message
    assert check([base, _run("c", kind=kind)], purpose).differences == []


@pytest.mark.parametrize(
    ("purpose", "passing", "how"), [(c[0], c[2], c[3]) for c in CASES], ids=_case_id
)
def test_a_passing_difference_warns_or_is_listed(purpose, passing, how):
    change, fields = passing
    kind = purpose.rows if purpose.rows == DOCTOR else None
    checked = check([_run("a", kind=kind), _run("b", kind=kind, **change)], purpose)
    found = [diff.field for diff in checked.differences]
    assert found == ([] if how == "ignored" else fields.split())
    if how == "warn":
        (line,) = checked.warnings
        assert line.startswith(f"a and b measured differently ({found[0]} ")
        assert line.endswith(f": {purpose.goes_on}")
    else:
        assert checked.warnings == []


def test_compare_refuses_only_the_shared_gpu_test_mode_and_strict_what_it_flags():
    """A run whose ranks shared one GPU (COLLBENCH_SHARED_GPU=1, issue 40 item 3) tested code
    paths, not a fabric: compare refuses it against a real run; the rest is flagged."""
    assert COMPARE.refuse == ("shared_gpu",) and set(COMPARE.warn) == set(STRICT_COMPARE.refuse)


def test_every_purpose_acts_on_every_methodology_field():
    """A field that changes what a time means is never silently ignored by a command."""
    for purpose in PURPOSES:
        ignored = [name for name in METHODOLOGY if purpose.action(name) not in ("refuse", "warn")]
        assert ignored == [], purpose.name


def test_the_refusal_names_every_field_of_every_run():
    runs = [
        _run("a"),
        _run("b", row={"iters": 50, "dtype": "bfloat16"}),
        _run("c"),
        _run("d", meta={"timing_method": "cuda_events"}),
    ]
    with pytest.raises(SpecError) as error:
        check(runs, FIT)
    assert str(error.value) == (
        "runs measured differently (b: dtype 'float32' vs 'bfloat16', iters 20 vs 50; "
        "d: timing_method 'perf_counter' vs 'cuda_events'); fit them separately"
    )


def test_knobs_refuse_only_where_a_purpose_says_so():
    knobbed = _run("b", meta={"knobs": {"env": {"NCCL_PROTO": "LL"}}})
    assert NOISE.action("env.NCCL_PROTO") == "refuse" and KNOBS in NOISE.refuse
    assert DOCTOR_BASELINE.action("env.NCCL_PROTO") == "warn"
    assert [d.field for d in check([_run("a"), knobbed], STRICT_COMPARE).differences] == [
        "env.NCCL_PROTO"
    ]


def test_a_doctor_run_is_described_by_its_doctor_rows_and_meta_placement():
    run = _run(
        "a", kind=DOCTOR, row={"world_size": 2, "dtype": "bfloat16"}, meta={"world_size": 16}
    )
    facts = describe_method(run, DOCTOR)
    assert facts["dtype"] == "bfloat16" and facts["world_size"] == 16
    assert describe_method(run)["dtype"] is None  # no sweep rows


# --- no module outside the rule keeps its own subset of the fields -------------------------

FACTS = {*METHODOLOGY, "backend", "launcher", "hosts", "devices", methodology.COLLECTIVES, KNOBS}


def _own_rules(source: str, where: str) -> list[str]:
    """Places in `source` that rebuild the rule: a literal list of two or more method
    fields and nothing else, the name METHODOLOGY, or a test of a Difference's kind
    against "methodology"."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and node.elts:
            names = [elt.value for elt in node.elts if isinstance(elt, ast.Constant)]
            if len(names) == len(node.elts) >= 2 and set(names) <= FACTS:
                found.append(f"{where}:{node.lineno} lists {', '.join(map(str, names))}")
        elif isinstance(node, ast.Name) and node.id == "METHODOLOGY":
            found.append(f"{where}:{node.lineno} uses METHODOLOGY")
        elif isinstance(node, ast.alias) and node.name == "METHODOLOGY":
            found.append(f"{where} imports METHODOLOGY")
        elif isinstance(node, ast.Compare) and any(
            isinstance(part, ast.Constant) and part.value == "methodology"
            for part in node.comparators
        ):
            found.append(f"{where}:{node.lineno} tests a difference's kind")
    return found


@pytest.mark.slow
def test_no_module_but_the_rule_lists_the_fields_a_command_checks():
    rule = Path(methodology.__file__).resolve()
    sources = [path for path in package_sources() if path.resolve() != rule]
    assert any(path.name == "from_runs.py" for path in sources)  # the walk reaches analysis/
    found = [line for path in sources for line in _own_rules(path.read_text(), path.name)]
    assert found == []


@pytest.mark.parametrize(
    "source",
    [
        'TUNE_METHODOLOGY = ("world_size", "nodes", "dtype")\n',
        "from collbench.analysis.rules.methodology import METHODOLOGY\n",
        'refused = [d for d in found if d.kind == "methodology"]\n',
        'for name in ("collectives", "dtype"):\n    pass\n',
    ],
)
def test_the_scan_finds_a_rebuilt_subset(source):
    assert _own_rules(source, "example.py")


def test_nccl_tests_and_rccl_tests_are_one_method_and_the_tool_is_listed():
    # rccl-tests keeps nccl-tests' timer and busbw formulas: no methodology alarm between
    # them, the tool is an environment difference; collbench against either is one.
    timed = {"timing_method": "nccl-tests"}
    nccl = _run("nccl", meta={**timed, "source": "nccl-tests"})
    rccl = _run("rccl", meta={**timed, "source": "rccl-tests"})
    checked = check([nccl, rccl], COMPARE)
    assert checked.warnings == []
    assert [(d.field, d.kind) for d in checked.differences] == [("tool", "environment")]
    ours = _run("ours")
    checked = check([ours, rccl], COMPARE)
    assert "source 'collbench' vs 'nccl-tests'" in checked.warnings[0]
