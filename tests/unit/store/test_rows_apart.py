"""Rows read with their samples apart (store/columns.py, issue 31): column-wise from a faithful
rows.parquet they are exactly the rows rows.jsonl gives, a stale or damaged copy is never
read, and compare says the same from either, and from rows that hold their samples."""

from __future__ import annotations

import json
from dataclasses import fields, replace
from pathlib import Path

import numpy as np
import pytest

from collbench.analysis.compare.comparison import compare
from collbench.analysis.rules.decision import (
    evidence_of,
    sample_summary,
    spread_pct,
)
from collbench.core.errors import SpecError
from collbench.render.compare import render_comparisons
from collbench.run.compare import CompareRequest, compare_runs
from collbench.store.columns import read_copy, read_rows_apart
from collbench.store.load import load_run
from collbench.store.row_values import Samples
from collbench.store.rows import ROW_TYPES, row_from_dict
from collbench.store.rundir import (
    COPY_OF,
    PARQUET_FILE,
    PARQUET_GROUP_ROWS,
    ROWS_FILE,
    load_rows,
    write_parquet,
)
from tests.rows import make_row, write_run

RNG = np.random.default_rng(31)


def _keep(row, times):
    """A reduce that keeps everything: the samples as a list, and the row's size."""
    return (row.size_bytes, times.tolist())


def _by_jsonl(run: Path) -> list[tuple]:
    """What read_rows_apart must give, from rows.jsonl's rows that hold their samples."""
    return [
        (replace(row, time_us_samples=Samples()), (row.size_bytes, list(row.time_us_samples or [])))
        for row in load_rows(run)
    ]


def _typed(pairs: list[tuple]) -> list[tuple]:
    """Each row's columns with their types (an integer column read as floats is a change
    that == alone would miss), and what reduce made. A float column's value is a float: a
    whole number that rows.jsonl wrote as an integer comes back from the copy as a float."""
    return [
        ({name: _typed_value(row, name, value) for name, value in row.__dict__.items()}, made)
        for row, made in pairs
    ]


def _typed_value(row, name: str, value):
    floats = _FLOAT_COLUMNS.get(type(row), ())
    value = float(value) if name in floats and isinstance(value, int) else value
    return (type(value), value)


_FLOAT_COLUMNS = {
    row_type: {field.name for field in fields(row_type) if str(field.type).startswith("float")}
    for row_type in ROW_TYPES.values()
}


def _doctor_row(size: int):
    data = make_row(size_bytes=size, time_us_samples=[2.0, 3.0]).to_dict()
    extra = {"stage": "pairs", "group": "a<->b", "round_index": 0, "group_hosts": ["a", "b"]}
    extra |= {"group_ranks": [0, 8], "rank_time_us": [1.5, 2.5], "rank_last_count": [3, 0]}
    return row_from_dict({**data, "kind": "doctor", **extra})


def _mixed_rows():
    """Every kind, with what a copy may store differently: an int column with nulls
    (doubles in parquet), samples that are integers, empty or missing, knobs in any order."""
    return [
        make_row(size_bytes=8, time_us_samples=[1.0, 2.5, 3], count=None, repeat=None),
        make_row(size_bytes=16, count=4, repeat=1, knobs={"env": {"B": "1", "A": "2"}}),
        make_row(size_bytes=32, time_us_samples=[], iters=None, time_us=7),
        make_row(size_bytes=64, kind="overlap", t_comm_us=3.0, probe_samples_us={"t_comm": [1.0]}),
        _doctor_row(128),
        make_row(size_bytes=0, time_us_samples=[0.0, 4.0, 5.0], world_size=4, nodes=2),
    ]


def test_the_copy_reads_exactly_what_rows_jsonl_holds(tmp_path):
    run = write_run(tmp_path / "run", _mixed_rows())
    write_parquet(run)
    from_copy = read_copy(run, _keep)
    assert from_copy is not None, "a fresh copy is read"
    assert _typed(from_copy) == _typed(_by_jsonl(run))
    assert _typed(read_rows_apart(run, _keep)) == _typed(_by_jsonl(run))


def test_a_copy_of_many_row_groups_keeps_the_order_and_each_rows_samples(tmp_path):
    rows = [
        make_row(size_bytes=index, time_us_samples=RNG.uniform(1, 2, index % 7).tolist())
        for index in range(2 * PARQUET_GROUP_ROWS + 5)
    ]
    run = write_run(tmp_path / "run", rows)
    write_parquet(run, load_rows(run))
    from_copy = read_copy(run, _keep)
    assert from_copy is not None
    assert _typed(from_copy) == _typed(_by_jsonl(run))


def test_rows_jsonl_is_read_when_there_is_no_copy(tmp_path):
    run = write_run(tmp_path / "run", _mixed_rows())
    assert read_copy(run, _keep) is None
    assert _typed(read_rows_apart(run, _keep)) == _typed(_by_jsonl(run))


def test_a_copy_older_than_a_row_appended_after_it_is_not_read(tmp_path):
    run = write_run(tmp_path / "run", _mixed_rows())
    write_parquet(run)
    with open(run / ROWS_FILE, "a") as rows:
        rows.write(json.dumps(make_row(size_bytes=4096).to_dict()) + "\n")
    assert read_copy(run, _keep) is None
    pairs = read_rows_apart(run, _keep)
    assert [row.size_bytes for row, _ in pairs][-1] == 4096
    assert _typed(pairs) == _typed(_by_jsonl(run))


def test_a_bad_row_appended_after_the_copy_is_named_by_its_line(tmp_path):
    run = write_run(tmp_path / "run", _mixed_rows())
    write_parquet(run)
    with open(run / ROWS_FILE, "a") as rows:
        rows.write('{"collective": "all_reduce", "size_bytes": -8}\n')
    with pytest.raises(SpecError, match=f"{run / ROWS_FILE} line 7"):
        read_rows_apart(run, _keep)


def test_a_last_line_cut_short_is_read_and_warned_of_from_rows_jsonl(tmp_path, capsys):
    run = write_run(tmp_path / "run", _mixed_rows())
    with open(run / ROWS_FILE, "a") as rows:
        rows.write('{"collective": "all_re')  # a write cut short
    write_parquet(run)  # as finalize writes it: the rows load_rows reads
    capsys.readouterr()
    assert read_copy(run, _keep) is None
    assert _typed(read_rows_apart(run, _keep)) == _typed(_by_jsonl(run))
    assert "skipped a truncated row" in capsys.readouterr().err


def test_a_copy_without_a_stamp_is_not_read(tmp_path):
    """A copy an older collbench wrote (or anyone else) says nothing of which rows.jsonl."""
    import pyarrow.parquet as pq

    run = write_run(tmp_path / "run", _mixed_rows())
    write_parquet(run)
    table = pq.read_table(run / PARQUET_FILE)
    metadata = {k: v for k, v in table.schema.metadata.items() if COPY_OF.encode() not in v}
    pq.write_table(table.replace_schema_metadata(metadata), run / PARQUET_FILE)
    assert read_copy(run, _keep) is None


@pytest.mark.parametrize("sample", [-1.0, float("nan")])
def test_a_copy_holding_what_the_row_check_refuses_is_not_read(tmp_path, sample):
    """The same stamp, a value rows.jsonl does not hold: the copy is not believed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    run = write_run(tmp_path / "run", _mixed_rows())
    write_parquet(run)
    table = pq.read_table(run / PARQUET_FILE)
    samples = table.column("time_us_samples").to_pylist()
    samples[0] = [sample, *samples[0][1:]]
    index = table.schema.get_field_index("time_us_samples")
    table = table.set_column(index, "time_us_samples", pa.array(samples, pa.list_(pa.float64())))
    pq.write_table(table, run / PARQUET_FILE)  # the schema's metadata, the stamp too, kept
    assert read_copy(run, _keep) is None
    assert _typed(read_rows_apart(run, _keep)) == _typed(_by_jsonl(run))


def test_the_summary_is_what_the_rule_reads_of_the_samples():
    for count in (0, 5, 12, 13, 2000):
        samples = RNG.uniform(5, 6, count).tolist()
        rows = [make_row(size_bytes=1 << 20, time_us_samples=samples, time_us=5.5)]
        whole = evidence_of(rows)
        lean = [replace(row, time_us_samples=Samples()) for row in rows]
        summaries = [sample_summary(rows[0], np.array(samples, dtype=np.float64))]
        reduced = evidence_of(lean, summaries)
        assert reduced.has_samples == whole.has_samples
        assert spread_pct(reduced) == spread_pct(whole)
        assert reduced.repeats == whole.repeats


def _sampled_run(path: Path, repeats: int, shift: float, count: int) -> Path:
    rows = []
    for size in (0, 8, 1 << 10, 1 << 20, 1 << 26):
        for repeat in range(repeats):
            time_us = (5 + size / 2e3) * shift * float(np.exp(RNG.normal(0, 0.02)))
            samples = (time_us * np.exp(RNG.normal(0, 0.03, count))).tolist()
            for placement in ("out_of_place", "in_place"):
                rows.append(
                    make_row(
                        size_bytes=size,
                        placement=placement,
                        time_us=time_us,
                        time_us_samples=samples,
                        repeat=repeat if repeats > 1 else None,
                    )
                )
    return write_run(path, rows, {"run_id": path.name})


def _printed(paths: list[Path]) -> tuple[str, str]:
    compared = compare_runs(CompareRequest(runs=tuple(paths)))
    texts = [
        render_comparisons(compared.comparisons, compared.baseline, compared.paths, as_json=json)
        for json in (False, True)
    ]
    return texts[0], texts[1]


@pytest.mark.parametrize("repeats", [1, 3])
def test_compare_says_the_same_from_the_copy_rows_jsonl_and_whole_rows(tmp_path, repeats):
    paths = [
        _sampled_run(tmp_path / "a", repeats, 1.0, 40),
        _sampled_run(tmp_path / "b", repeats, 1.05, 40),
    ]
    without_copy = _printed(paths)
    for path in paths:
        write_parquet(path)
        assert read_copy(path, _keep) is not None
    assert _printed(paths) == without_copy
    # ... and what compare says of runs whose rows hold their samples
    whole = [load_run(path) for path in paths]
    assert whole[0].reduced is None and whole[0].rows[0].time_us_samples
    direct = compare(whole[0], whole[1]).to_dict()
    apart = compare_runs(CompareRequest(runs=tuple(paths))).comparisons[0].to_dict()
    assert apart == direct
    assert json.loads(without_copy[1])  # the JSON form is one document
