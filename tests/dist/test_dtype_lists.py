"""nccl-tests' `-d all` / `-o all`: one real 2-rank gloo sweep measures every size in each
dtype and, for the collectives that reduce, with each reduction; every row checked, and one
table per collective whose type and redop columns tell the rows apart."""

import pytest

from tests.helpers import collbench_process as collbench
from tests.helpers import meta_of, rows_of


@pytest.mark.slow
def test_dtype_and_op_lists_measure_every_pair_and_check_each(tmp_path):
    out = tmp_path / "run"
    done = collbench(
        "sweep", "-c", "all_reduce,all_gather", "-b", "8", "-e", "64", "-f", "8",
        "-d", "float32,int32", "-o", "sum,max,avg", "-w", "1", "-n", "2", "-g", "2",
        "--repeats", "1", "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = rows_of(out)
    pairs = {(row["collective"], row["dtype"], row["op"]) for row in rows}
    # avg needs a floating-point dtype: int32 runs sum and max only; all-gather reduces nothing
    assert pairs == {
        ("all_reduce", "float32", "sum"),
        ("all_reduce", "float32", "max"),
        ("all_reduce", "float32", "avg"),
        ("all_reduce", "int32", "sum"),
        ("all_reduce", "int32", "max"),
        ("all_gather", "float32", None),
        ("all_gather", "int32", None),
    }
    # sizes 8 and 64; all-reduce in place only, all-gather both placements
    assert len(rows) == 5 * 2 * 1 + 2 * 2 * 2 and all(row["n_wrong"] == 0 for row in rows)
    assert meta_of(out)["spec"]["dtype"] == "float32,int32"
    lines = done.stdout.splitlines()
    assert sum(line.startswith("# Collective:") for line in lines) == 2
    table = [line.split() for line in lines if line and not line.startswith("#")]
    assert {(cells[2], cells[3]) for cells in table} >= {("int32", "max"), ("float", "avg")}


def test_all_expands_to_every_dtype_and_op():
    from collbench.core.dtypes import DTYPES
    from collbench.core.spec import REDUCE_OPS, SweepSpec

    spec = SweepSpec(dtype="all", op="all", collectives=("all_reduce",), max_bytes=8, repeats=1)
    assert spec.dtypes == tuple(DTYPES) and spec.ops == REDUCE_OPS
    floats = sum(DTYPES[name].is_float for name in DTYPES)
    assert len(spec.steps()) == len(DTYPES) * 4 + floats  # avg with floats only
    assert SweepSpec(**spec.to_dict()) == spec
    again = SweepSpec(dtype="half,float32", op="sum")
    assert again.dtype == "float16,float32" and again.dtypes == ("float16", "float32")


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"dtype": "float32,nope"}, "--dtype: 'float32,nope' names 'nope', which is unknown"),
        ({"dtype": "float32,float"}, "names a dtype twice"),
        ({"op": "sum,nope"}, "names 'nope', which is not one of"),
        ({"op": "avg", "dtype": "int8,int32"}, "needs a floating-point --dtype"),
        ({"dtype": "all", "overlap": {}}, "overlap probes take one at a time"),
    ],
)
def test_bad_lists_are_one_line_errors(fields, message):
    from collbench.core.errors import SpecError
    from collbench.core.spec import SweepSpec

    with pytest.raises(SpecError, match=message.replace("(", r"\(")):
        SweepSpec(**fields)


def test_tune_and_overlap_refuse_a_list_in_one_line(tmp_path):
    from tests.helpers import collbench as collbench_quick

    done = collbench_quick(
        "tune", "run", "--knob", "NCCL_ALGO=Ring,Tree", "-d", "float32,bfloat16", "-b", "8", "-e", "64",
        "--out", str(tmp_path / "tune"),
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[0] == (
        "collbench: error: --dtype: 'float32,bfloat16' lists several; tune one at a time"
    )
    done = collbench_quick("overlap", "-o", "all", "-b", "8", "-e", "64", "--print")
    assert done.returncode == 2 and "--op: 'sum,prod,min,max,avg' lists several" in done.stderr
