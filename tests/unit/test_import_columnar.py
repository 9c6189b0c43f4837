"""Imports made a column at a time write what the row-by-row importer wrote.

- Every case of tests/import_cases.py (fixtures and synthetic logs: several tables, blank
  and N/A placements, #wrong with asterisks, malformed and cut lines, NaN rows, -J JSON,
  rccl-tests columns, --knob labels) is imported and compared with the files the row-wise
  importer wrote (tests/unit/golden_import): rows.jsonl byte for byte, meta.json, the
  rows.parquet table (schema, pandas metadata, rows, row groups), or the same refusal, with
  no run left behind.
- The columnar parse of whole table lines equals nccl_logs.parse_row's, line by line, for
  fields of every odd kind (or it hands those lines back to parse_row).
- store.row_block's lines and parquet equal ResultWriter's and write_parquet's for the same
  rows, whatever their values (floats of every magnitude, strings to escape, None).
"""

from __future__ import annotations

import json
import random

import pyarrow.parquet as pq
import pytest

from collbench.analysis.imports.log_columns import LogColumns, whole_lines_columns
from collbench.analysis.imports.nccl_logs import check_integers, layout_from_header, parse_row
from collbench.analysis.imports.nccl_rows import block_rows
from collbench.core.errors import SpecError
from collbench.store.row_block import RowBlock, block_lines, write_blocks_parquet
from collbench.store.rows import ResultRow
from collbench.store.rundir import COPY_OF, append_rows, rows_stamp, write_parquet
from tests.import_cases import GOLDEN, cases, parquet_summary, portable, run_case

CASES = sorted(path.name for path in GOLDEN.iterdir())


@pytest.fixture(scope="module")
def case_logs(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("logs")
    return folder, cases(folder)


@pytest.mark.parametrize("name", CASES)
def test_import_writes_what_the_row_wise_importer_wrote(name, case_logs, tmp_path):
    folder, found = case_logs
    golden = GOLDEN / name
    out = tmp_path / "run"
    done = run_case(found[name], out)
    if (golden / "error.txt").exists():
        assert "error" in done, f"{name}: imported, but the row-wise importer refused it"
        assert portable(done["error"], folder) + "\n" == (golden / "error.txt").read_text()
        assert not out.exists()  # nothing left behind
        return
    assert "error" not in done, done.get("error")
    assert (out / "rows.jsonl").read_bytes() == (golden / "rows.jsonl").read_bytes()
    meta = portable((out / "meta.json").read_text(encoding="utf-8"), folder)
    assert json.loads(meta) == json.loads((golden / "meta.json").read_text(encoding="utf-8"))
    written = json.loads(json.dumps(parquet_summary(out / "rows.parquet"), default=str))
    expected = json.loads((golden / "parquet.json").read_text(encoding="utf-8"))
    assert written == expected
    attrs = json.loads(pq.read_schema(out / "rows.parquet").metadata[b"PANDAS_ATTRS"])
    assert attrs[COPY_OF] == rows_stamp(out)
    # The rows the result hands out are the rows written.
    result = done["result"]
    assert [json.dumps(row.to_dict(), separators=(",", ":")) for row in result.rows] == [
        line for line in (out / "rows.jsonl").read_text().splitlines()
    ]


ODD_FIELDS = (
    "nan", "inf", "-inf", "N/A", "n/a", "3*", "1e0", "2.0", "0x10", "1_000", "-0", "+5",
    "\u0663", "oops", "9223372036854775808", "-9223372036854775809", "1e400", "7",
)  # fmt: skip


def _line(rng: random.Random, layout) -> list[str]:
    fields = [
        str(rng.choice([8, 1024, 1 << 40])),
        str(rng.choice([2, 256])),
        rng.choice(["float", "half", "int8"]),
        rng.choice(["sum", "none"]),
        rng.choice(["-1", "0"]),
    ]
    for _, names in layout.groups:
        fields += ["0" if name == "wrong" else f"{rng.uniform(0, 100):.2f}" for name in names]
    for _ in range(rng.choice([0, 0, 1, 2])):
        fields[rng.randrange(len(fields))] = rng.choice(ODD_FIELDS)
    return fields


def _row_wise(lines: list[list[str]], layout) -> LogColumns | None:
    rows = []
    for fields in lines:
        parsed = parse_row(fields, layout)
        if parsed is None:
            return None
        for row in parsed:
            check_integers(row, "log")
        rows += parsed
    return LogColumns.from_rows(rows)


@pytest.mark.parametrize("header", ["current", "hipevt", "one_group"])
def test_columnar_parse_equals_parse_row(header):
    columns = {
        "current": "size count type redop root time algbw busbw #wrong time algbw busbw #wrong",
        "hipevt": "size count type redop root time hipevt algbw busbw #wrong "
        "time hipevt algbw busbw #wrong",
        "one_group": "size count type redop root time algbw busbw #wrong",
    }[header].split()
    layout = layout_from_header(tuple(columns), (), "log")
    rng, taken = random.Random(31), 0
    for _ in range(400):
        lines = [_line(rng, layout) for _ in range(rng.choice([1, 3]))]
        fast = whole_lines_columns(lines, layout.prefix, layout.groups)
        if fast is None:  # handed back to parse_row
            continue
        taken += 1
        try:
            slow = _row_wise(lines, layout)
        except SpecError:
            pytest.fail(f"columnar parse kept {lines}, which parse_row refuses")
        assert slow is not None and repr(fast) == repr(slow), lines  # repr: nan == nan
        assert [type(v) for v in fast.time_us] == [float] * len(fast)
    assert taken > 50  # the columnar path did most of the work


def _block(values: dict) -> RowBlock:
    shared = {
        "run_id": "r%s\u00e9",
        "timestamp_utc": "2026",
        "collective": "all_reduce",
        "backend": None,
        "world_size": 4,
        "nodes": None,
        "ranks_per_node": None,
        "warmup": 5,
        "iters": 20,
        "time_us_p50": None,
        "time_us_p95": 1.5,
        "time_us_min": None,
        "time_us_max": None,
        "time_cv": None,
        "topology": None,
        "knobs": {"env": {"NCCL_ALGO": "Ring%d"}, "settings": {"imported": True}},
        "time_us_samples": [],
    }
    return RowBlock(ResultRow, {k: v for k, v in shared.items() if k not in values}, values)


def test_block_writers_equal_the_row_writers(tmp_path):
    rng = random.Random(5)
    n = 300
    floats = [rng.choice([0.0, -0.0, 1e-7, 1e16, 1e22, 123.456, 5e-324, 1.7976931348623157e308])
              * rng.random() for _ in range(n)]  # fmt: skip
    values = {
        "dtype": [rng.choice(["float32", 'we"ird\\', "\u00b5\u2028", "%s"]) for _ in range(n)],
        "op": [rng.choice([None, "sum"]) for _ in range(n)],
        "root": [rng.choice([-1, 0, 2**63 - 1]) for _ in range(n)],
        "size_bytes": [rng.randrange(2**40) for _ in range(n)],
        "count": [rng.choice([None, 7]) for _ in range(n)],
        "placement": [rng.choice(["in_place", "out_of_place"]) for _ in range(n)],
        "time_us": floats,
        "algbw_gbps": [float(rng.randrange(100)) for _ in range(n)],
        "busbw_gbps": [rng.choice([1, 2.5]) for _ in range(n)],  # int and float mixed
        "n_wrong": [rng.choice([None, 0, 3]) for _ in range(n)],
    }
    blocks = [_block(values), _block({name: column[:10] for name, column in values.items()})]
    rows = [row for block in blocks for row in block_rows(block)]
    by_rows, by_blocks = tmp_path / "rows", tmp_path / "blocks"
    by_rows.mkdir(), by_blocks.mkdir()
    append_rows(by_rows, rows)
    text = "".join(line for block in blocks for line in block_lines(block))
    (by_blocks / "rows.jsonl").write_text(text, encoding="utf-8")
    assert (by_blocks / "rows.jsonl").read_bytes() == (by_rows / "rows.jsonl").read_bytes()
    write_parquet(by_rows, rows)
    write_blocks_parquet(by_blocks, blocks)
    assert parquet_summary(by_blocks / "rows.parquet") == parquet_summary(by_rows / "rows.parquet")
    old, new = (pq.read_table(path / "rows.parquet") for path in (by_rows, by_blocks))
    assert old.equals(new) and old.schema.equals(new.schema, check_metadata=False)


def test_block_refuses_a_field_missing_or_twice_or_columns_of_two_lengths():
    own = {"dtype": ["x"], "op": [None], "root": [-1], "size_bytes": [8], "count": [2]}
    own |= {"placement": ["in_place"], "time_us": [1.0], "algbw_gbps": [1.0]}
    own |= {"busbw_gbps": [1.0], "n_wrong": [0]}
    block = _block(own)
    assert len(block) == 1 and block.shared["kind"] == "sweep"  # defaults filled in
    with pytest.raises(TypeError):
        _block({name: column for name, column in own.items() if name != "op"})
    with pytest.raises(TypeError):
        RowBlock(ResultRow, {**block.shared, "dtype": "x"}, own)
    with pytest.raises(ValueError):
        _block({**own, "count": [2, 3]})
