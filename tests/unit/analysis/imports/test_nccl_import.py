"""nccl-tests / rccl-tests import: every log format, header facts, checks and bad input.

The fixtures under tests/fixtures/nccl-tests are synthetic logs written in the tools'
formats; the real logs in shared/data/nccl-tests are read when that folder exists.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from typer.testing import CliRunner

from collbench.analysis.imports.nccl_logs import parse_text_log
from collbench.analysis.imports.nccl_rows import (
    block_rows,
    build_import,
    implied_world_size,
    resolve_collective,
)
from collbench.cli import app
from collbench.core.errors import SpecError
from collbench.run.import_logs import ImportResult, import_logs, read_log
from collbench.store.rows import ROW_COLUMNS, SCHEMA_VERSION
from collbench.store.rundir import PARQUET_FILE, load_rows, read_meta
from tests.helpers import SHARED_DATA, collbench, require_shared_data

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "nccl-tests"
REAL_LOGS = SHARED_DATA / "nccl-tests"
ALL_FIXTURES = sorted(path.name for path in FIXTURES.iterdir())


def run_import(tmp_path: Path, *names: str, collective: str | None = None):
    return written(
        import_logs(
            [FIXTURES / name for name in names], out=tmp_path / "run", collective=collective
        )
    )


def written(result: ImportResult) -> SimpleNamespace:
    """An import with its rows and meta as the run directory holds them (JSON objects)."""
    return SimpleNamespace(
        run_dir=result.run_dir,
        rows=[row.to_dict() for row in result.rows],
        meta=result.meta.to_dict(),
        warnings=result.warnings,
    )


def rows_where(rows, **match):
    return [row for row in rows if all(row[key] == value for key, value in match.items())]


# ---------------------------------------------------------------- what every import gives


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_every_fixture_becomes_a_run_directory_like_a_sweep(tmp_path, name):
    result = run_import(tmp_path, name)
    rows = [row.to_dict() for row in load_rows(result.run_dir)]
    assert rows == list(result.rows) and rows
    meta = read_meta(result.run_dir).to_dict()
    assert meta == json.loads(json.dumps(result.meta))
    for row in rows:
        assert list(row) == list(ROW_COLUMNS)
        assert row["kind"] == "sweep" and row["run_id"] == meta["run_id"]
        assert row["schema_version"] == SCHEMA_VERSION
        assert row["time_us_samples"] == []
        assert row["knobs"]["settings"] == {"imported": True}
        for column in (
            "time_us_p50",
            "time_us_p95",
            "time_us_min",
            "time_us_max",
            "time_cv",
            "topology",
        ):
            assert row[column] is None
        assert row["world_size"] == meta["world_size"] and row["backend"] == meta["backend"]
        assert row["placement"] in ("out_of_place", "in_place")
    frame = pd.read_parquet(result.run_dir / PARQUET_FILE)
    assert len(frame) == len(rows) and list(frame.columns) == list(ROW_COLUMNS)
    assert meta["state"] == "completed" and meta["timing_method"] == "nccl-tests"
    assert meta["source"] in ("nccl-tests", "rccl-tests")
    assert meta["backend"] == ("rccl" if meta["source"] == "rccl-tests" else "nccl")
    assert meta["imported_from"] == [str((FIXTURES / name).resolve())]
    assert meta["schema_version"] == SCHEMA_VERSION
    assert {"world_size", "nodes", "hosts", "header", "footer", "versions"} <= set(meta)


def test_current_format_header_facts_and_size_zero_rows(tmp_path):
    result = run_import(tmp_path, "current_all_gather_2node.log")
    meta, rows = result.meta, result.rows
    assert len(rows) == 12 and meta["collectives"] == {"all_gather": 12}
    assert (meta["world_size"], meta["nodes"], meta["ranks_per_node"]) == (8, 2, 4)
    assert meta["hosts"] == ["node-a01", "node-a02"]
    assert meta["header"] == {
        "n_threads": 1,
        "n_gpus": 1,
        "min_bytes": 0,
        "max_bytes": 4194304,
        "step_bytes": 1048576,
        "warmup_iters": 5,
        "iters": 50,
        "agg_iters": 1,
        "validation": 1,
        "graph": 0,
        "unalign": 0,
    }
    assert meta["ranks"][5] == {
        "rank": 5,
        "group": 0,
        "pid": 41101,
        "host": "node-a02",
        "device": 1,
        "bus_id": "0000:28:00",
        "device_name": "NVIDIA H100 80GB HBM3",
    }
    assert meta["versions"] == {"nccl_tests": "2.17.6", "nccl": "2.27.3"}
    assert meta["footer"] == {
        "out_of_bounds_values": 0,
        "out_of_bounds_ok": True,
        "avg_bus_bandwidth_gbps": 41.0171,
    }
    assert meta["footer_missing"] is False and meta["comment"] is None
    assert meta["logs"][0]["tables"][0]["layout"] == "current"
    zero = rows_where(rows, size_bytes=0)
    assert len(zero) == 4 and {row["count"] for row in zero} == {0}
    assert [row["time_us"] for row in zero] == [12.00, 12.30, 12.01, 12.31]
    row = rows_where(rows, size_bytes=3145728, placement="in_place")[0]
    assert (row["count"], row["time_us"], row["algbw_gbps"], row["busbw_gbps"]) == (
        98304,
        47.29,
        66.52,
        58.20,
    )
    assert (row["dtype"], row["op"], row["root"], row["n_wrong"]) == ("float32", None, -1, 0)
    assert (row["warmup"], row["iters"]) == (5, 50)
    assert not any("busbw" in warning for warning in result.warnings)


def test_legacy_format_with_interleaved_info_lines_and_na(tmp_path):
    result = run_import(tmp_path, "legacy_all_reduce_info.log")
    meta, rows = result.meta, result.rows
    assert len(rows) == 18  # 9 sizes x 2 placements; the INFO lines are not rows
    assert meta["logs"][0]["tables"][0]["layout"] == "legacy"
    assert all(row["n_wrong"] is None and row["root"] == -1 for row in rows)
    assert (meta["world_size"], meta["nodes"]) == (4, 1)  # one process, nGpus 4
    assert meta["versions"] == {"nccl": "2.7.8+cuda11.0"}
    assert meta["knobs"]["env"] == {"NCCL_IB_HCA": "mlx5_0"}
    assert rows[0]["knobs"]["env"] == {"NCCL_IB_HCA": "mlx5_0"}
    last = rows_where(rows, size_bytes=524288, placement="out_of_place")[0]
    assert (last["time_us"], last["algbw_gbps"], last["busbw_gbps"]) == (17.82, 29.42, 44.13)
    assert "legacy_errors" not in meta  # every error field was N/A
    assert any("took all_reduce from the file name" in warning for warning in result.warnings)


def test_legacy_error_column_is_kept_in_meta_not_in_n_wrong(tmp_path):
    result = run_import(tmp_path, "legacy_errors_all_reduce_2gpu.log")
    assert all(row["n_wrong"] is None for row in result.rows)
    errors = result.meta["legacy_errors"]
    assert len(errors) == 6
    assert errors[0] == {
        "log": str(FIXTURES / "legacy_errors_all_reduce_2gpu.log"),
        "collective": "all_reduce",
        "dtype": "float32",
        "size_bytes": 1024,
        "placement": "out_of_place",
        "max_error": 1e-07,
    }
    assert {error["max_error"] for error in errors} == {1e-07, 2e-07}
    assert result.meta["world_size"] == 2 and result.meta["nodes"] is None
    assert result.meta["command_line"] == "$ ./build/all_reduce_perf -b 1K -e 4M -f 64 -g 2 -c 1"
    assert any("nThread x nGpus = 2" in warning for warning in result.warnings)


def test_rccl_tests_banner_and_version_lines(tmp_path):
    result = run_import(tmp_path, "rccl_banner_alltoall.log")
    meta = result.meta
    assert meta["source"] == "rccl-tests" and meta["backend"] == "rccl"
    assert meta["versions"] == {
        "rccl_tests": "develop:1a2b3c4",
        "rccl": "2.20.5-HEAD:b20a1c6",
        "hip": "6.2.41133-dd7f95766",
        "rocm": "6.2.0.0-66-a0ea4e9",
    }
    assert "ROCm version : 6.2.0.0-66-a0ea4e9" in meta["version_lines"]
    assert meta["ranks"][1] == {
        "rank": 1,
        "group": 0,
        "pid": 90212,
        "host": "mi300-node-07",
        "device": 1,
        "bus_id": "0000:2c:00.0",
        "device_name": "AMD Instinct MI300X",
    }
    assert meta["collectives"] == {"all_to_all": 10}
    assert all(row["backend"] == "rccl" and row["op"] is None for row in result.rows)


def test_rccl_hipevt_column_is_an_extra_column(tmp_path):
    result = run_import(tmp_path, "rccl_hipevt_all_reduce.log")
    table = result.meta["logs"][0]["tables"][0]
    assert table["extra_columns"] == ["hipevt"]
    row = rows_where(result.rows, size_bytes=262144, placement="in_place")[0]
    assert (row["time_us"], row["algbw_gbps"], row["busbw_gbps"]) == (22.06, 11.88, 17.82)
    assert result.meta["command_line"].startswith("+ mpirun -np 4")


def test_hipevt_in_place_of_time_opens_the_group():
    text = "\n".join(
        [
            "# nThread 1 nGpus 2 minBytes 1024 maxBytes 1024 step: 2(factor) warmup iters: 1 "
            "iters: 5 agg iters: 1 validation: 1 graph: 0",
            "#       size         count      type   redop    root   hipevt   algbw   busbw #wrong"
            "   hipevt   algbw   busbw #wrong",
            "        1024           256     float     sum      -1    10.00    0.10    0.10      0"
            "    11.00    0.09    0.09      0",
            "",
        ]
    )
    table = parse_text_log(text).tables[0]
    assert list(zip(table.data.placement, table.data.time_us, strict=True)) == [
        ("out_of_place", 10.0),
        ("in_place", 11.0),
    ]


def test_per_iteration_and_timestamp_columns_are_tolerated():
    text = "\n".join(
        [
            "#       size         count      type   redop    root     time   algbw   busbw #wrong"
            "    i_min    i_max    i_p99    i_cv%     time   algbw   busbw #wrong    i_min    i_max"
            "    i_p99    i_cv%            timestamp",
            "     1048576        262144     float     sum      -1    20.00   52.43   91.75      0"
            "    19.10    25.00    24.90     3.10    21.00   49.93   87.38      0    20.00    26.00"
            "    25.50     2.90  2025-06-01 10:00:00",
            "",
        ]
    )
    table = parse_text_log(text, "all_reduce_perf.log").tables[0]
    data = table.data
    assert list(zip(data.placement, data.time_us, data.busbw_gbps, strict=True)) == [
        ("out_of_place", 20.0, 91.75),
        ("in_place", 21.0, 87.38),
    ]
    assert table.extra_columns == ("i_min", "i_max", "i_p99", "i_cv%", "timestamp")


def test_srun_labels_and_windows_line_ends():
    lines = (FIXTURES / "mpirun_reduce_scatter.log").read_text().splitlines()
    text = (
        "\r\n".join(
            f"{index % 2}: {line.split(':', 1)[1]}" if line.startswith("[1,") else line
            for index, line in enumerate(lines)
        )
        + "\r\n"
    )
    log = parse_text_log(text, "srun.log")
    assert len(log.tables[0].data) == 8 and log.tables[0].footer
    assert len(log.tables[0].ranks) == 4


def test_mpirun_prefixes_on_every_line(tmp_path):
    result = run_import(tmp_path, "mpirun_reduce_scatter.log")
    meta = result.meta
    assert len(result.rows) == 8 and meta["collectives"] == {"reduce_scatter": 8}
    assert (meta["world_size"], meta["nodes"], meta["hosts"]) == (4, 2, ["gpu-b01", "gpu-b02"])
    assert meta["versions"] == {"nccl": "2.21.5+cuda12.4"}
    assert (meta["header"]["warmup_iters"], meta["header"]["iters"]) == (2, 10)
    assert meta["footer"]["avg_bus_bandwidth_gbps"] == 3.2
    assert not result.warnings


def test_in_place_only_table(tmp_path):
    result = run_import(tmp_path, "inplace_only_broadcast.log")
    assert len(result.rows) == 5
    assert {row["placement"] for row in result.rows} == {"in_place"}
    last = result.rows[-1]
    assert (last["size_bytes"], last["root"], last["op"], last["time_us"]) == (
        16777216,
        0,
        None,
        388.2,
    )
    assert result.meta["collectives"] == {"broadcast": 5} and result.meta["world_size"] == 4


def test_truncated_log_keeps_its_rows_and_says_so(tmp_path):
    result = run_import(tmp_path, "truncated_all_reduce.log")
    rows, meta = result.rows, result.meta
    assert len(rows) == 7  # 3 whole lines, then the out-of-place half of the cut line
    assert (rows[-1]["size_bytes"], rows[-1]["placement"], rows[-1]["busbw_gbps"]) == (
        8388608,
        "out_of_place",
        133.58,
    )
    assert meta["footer_missing"] is True and meta["footer"] is None
    assert any("no footer" in warning for warning in meta["warnings"])
    assert any("cut short; kept 1 of its 2" in warning for warning in meta["warnings"])


def test_log_without_header_infers_the_layout():
    rows = [
        "  1048576  262144  float  sum  -1  20.00  52.43  78.64  0  21.00  49.93  74.90  0",
        "  2097152  524288  float  sum  -1  30.00  69.91  104.86  0  31.00  67.65  101.48  0",
    ]
    log = parse_text_log("\n".join([*rows, "# Out of bounds values : 0 OK", ""]), "x.log")
    assert log.tables[0].layout == "headerless" and len(log.tables[0].data) == 4
    blocks, meta = build_import([log], "run-1", "all_reduce", imported_utc="2025-01-01T00:00:00Z")
    built = block_rows(blocks[0])
    assert meta.world_size == 4  # busbw/algbw = 1.5 fits all_reduce on 4 ranks
    assert any("no table header" in warning for warning in meta.warnings)
    assert any("inferred from busbw/algbw" in warning for warning in meta.warnings)
    assert built[0].busbw_gbps == 78.64
    assert meta.imported_utc == built[0].timestamp_utc == "2025-01-01T00:00:00Z"
    assert meta.imported_from == ["x.log"]  # as parsed: the import resolves it


def test_json_output(tmp_path):
    result = run_import(tmp_path, "nccl_tests_sendrecv.json")
    meta, rows = result.meta, result.rows
    assert len(rows) == 7  # the 8-byte result ran in place only
    assert [row["placement"] for row in rows_where(rows, size_bytes=8)] == ["in_place"]
    row = rows_where(rows, size_bytes=256, placement="out_of_place")[0]
    assert (row["time_us"], row["algbw_gbps"], row["busbw_gbps"], row["n_wrong"]) == (
        7.510667,
        0.034085,
        0.034085,
        0,
    )
    assert (row["collective"], row["root"], row["op"]) == ("sendrecv", -1, None)
    assert meta["logs"][0]["format"] == "json"
    assert meta["versions"] == {"nccl": "2.27.3"}
    assert meta["knobs"]["env"] == {"NCCL_DEBUG": "WARN", "NCCL_IB_HCA": "mlx5_0,mlx5_1"}
    assert meta["command_line"].startswith("/opt/nccl-tests/build/sendrecv_perf -b 8")
    assert (meta["world_size"], meta["nodes"]) == (2, 2)
    assert meta["header"]["step_factor"] == 32 and meta["header"]["iters"] == 20
    assert meta["footer"]["avg_bus_bandwidth_gbps"] == 4.52


@pytest.mark.parametrize(
    "damage",
    [
        {"args": 5},
        {"env": 5},
        {"ngpus": "x", "devices": "h100-0"},  # in config: then no rank count, said in a line
        {"devices": [1, 2]},
        {"devices": [{"rank": 0, "hostname": ["h"], "pid": {"a": 1}}]},
    ],
)
def test_json_fields_of_the_wrong_type_read_as_absent(tmp_path, damage):
    # each once a traceback (found by fuzzing -J files)
    data = json.loads((FIXTURES / "nccl_tests_sendrecv.json").read_text())
    top = {key: value for key, value in damage.items() if key in ("args", "env")}
    data = {
        **data,
        **top,
        "config": {**data["config"], **{k: damage[k] for k in damage.keys() - top.keys()}},
    }
    (tmp_path / "damaged.json").write_text(json.dumps(data))
    log = read_log(tmp_path / "damaged.json")
    try:
        blocks, meta = build_import([log], "run-1", None, imported_utc="2025-01-01T00:00:00Z")
    except SpecError as error:  # a one-line error, exit 2
        assert "does not say how many ranks ran" in str(error)
    else:
        assert len(block_rows(blocks[0])) == 7 and meta.world_size >= 1


def test_json_cut_short_keeps_its_complete_results(tmp_path):
    text = (FIXTURES / "nccl_tests_sendrecv.json").read_text()
    cut = tmp_path / "cut.json"
    cut.write_text(text[: text.index('{"size":8192')] + '{"size":8192,"count"')
    log = read_log(cut)
    assert len(log.tables[0].data) == 3 and not log.tables[0].footer
    assert any("cut short" in warning for warning in log.warnings)


# ---------------------------------------------------------------- checks


def test_busbw_that_does_not_fit_the_world_size_is_kept_and_warned(tmp_path):
    result = run_import(tmp_path, "mismatch_all_reduce_16ranks.log")
    last = result.rows[-1]
    assert (last["world_size"], last["algbw_gbps"], last["busbw_gbps"]) == (16, 132.18, 231.31)
    warning = next(warning for warning in result.meta["warnings"] if "busbw" in warning)
    assert "busbw/algbw = 1.750" in warning and "on 16 ranks gives 1.875" in warning
    assert "fits 8 ranks" in warning


@pytest.mark.parametrize(
    "collective, world_size, ratio",
    [
        ("all_reduce", 8, 1.75),
        ("all_reduce", 16, 1.875),
        ("all_gather", 4, 0.75),
        ("all_to_all", 2, 0.5),
    ],
)
def test_implied_world_size(collective, world_size, ratio):
    assert implied_world_size(collective, ratio) == world_size


def test_implied_world_size_is_none_when_the_factor_is_constant():
    assert implied_world_size("broadcast", 1.0) is None


def test_several_logs_of_one_system_become_one_run(tmp_path):
    result = run_import(tmp_path, "current_all_gather_2node.log", "truncated_all_reduce.log")
    assert result.meta["collectives"] == {"all_gather": 12, "all_reduce": 7}
    assert len(result.meta["imported_from"]) == 2 and len(result.meta["logs"]) == 2
    assert len(load_rows(result.run_dir)) == 19


def test_compatible_logs_from_different_hosts_are_warned_about(tmp_path):
    other = tmp_path / "other_all_reduce.log"
    other.write_text(
        (FIXTURES / "truncated_all_reduce.log").read_text().replace("node-a0", "node-z0")
    )
    result = written(
        import_logs([FIXTURES / "current_all_gather_2node.log", other], out=tmp_path / "run")
    )
    warning = next(warning for warning in result.warnings if "different hosts" in warning)
    assert "node-a01, node-a02; node-z01, node-z02" in warning
    assert result.meta["nodes"] == 2 and len(result.meta["hosts"]) == 4


def test_collective_option_overrides_and_takes_sweep_names_or_programs(tmp_path):
    result = run_import(tmp_path, "mismatch_all_reduce_16ranks.log", collective="all_reduce")
    assert result.meta["collectives"] == {"all_reduce": 8}
    assert not any("file name" in warning for warning in result.warnings)
    assert resolve_collective("alltoall_perf") == "all_to_all"
    error = _spec_error(lambda: resolve_collective("allreduce"))  # as sweep -c refuses it
    assert "is unknown (did you mean all_reduce?)" in str(error)


# ---------------------------------------------------------------- bad input


def _spec_error(call) -> SpecError:
    with pytest.raises(SpecError) as raised:
        call()
    assert "\n" not in str(raised.value)
    return raised.value


@pytest.mark.parametrize(
    "content, needle",
    [
        ("", "is empty"),
        ("   \n\n", "is empty"),
        ("hello\nthis is not a benchmark\n", "no result table found"),
        (
            "# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 5 iters: 20\n"
            "#       size    count    type   redop    root     time   algbw   busbw #wrong\n",
            "header but no rows",
        ),
        ('{"version": 2, "config": {}}', "not nccl-tests -J output"),
        ('{"version": 2, "results": [', "not valid JSON"),
        ("  8  2  float  sum  -1  10.0  0.0\n", "fits no nccl-tests layout"),
    ],
)
def test_bad_logs_are_one_line_spec_errors_naming_log(tmp_path, content, needle):
    log = tmp_path / "all_reduce.log"
    log.write_text(content)
    error = _spec_error(lambda: import_logs([log], out=tmp_path / "run"))
    assert error.field == "LOG" and needle in str(error) and str(log) in str(error)
    assert not (tmp_path / "run").exists()


def _nan_log(tmp_path: Path, name: str, old: str, new: str, count: int = 1) -> Path:
    text = (FIXTURES / name).read_text()
    assert text.count(old) >= count
    log = tmp_path / name
    log.write_text(text.replace(old, new, count))
    return log


@pytest.mark.parametrize(
    "name, old, new",
    [
        ("legacy_all_reduce_info.log", "     9.07    0.23    0.35", "      nan    0.23    0.35"),
        ("legacy_all_reduce_info.log", "   11.65   17.48", "     inf     inf"),
        (
            "legacy_all_reduce_info.log",
            "# Avg bus bandwidth    : 3.11722",
            "# Avg bus bandwidth    : nan",
        ),
        ("nccl_tests_sendrecv.json", '"time":7.510667', '"time":NaN'),
        ("nccl_tests_sendrecv.json", '"bus_bw":0.034085', '"bus_bw":Infinity'),
    ],
)
def test_nan_and_inf_rows_are_dropped_with_a_warning_never_written(tmp_path, name, old, new):
    log = _nan_log(tmp_path, name, old, new)
    result = import_logs([log], out=tmp_path / "run")
    clean = import_logs([FIXTURES / name], out=tmp_path / "clean")
    dropped = len(clean.rows) - len(result.rows)
    assert dropped == (0 if "Avg bus" in old else 1)
    if dropped:
        assert any("dropped 1 row(s) with a NaN or infinite" in w for w in result.warnings)
    for path in (tmp_path / "run" / "rows.jsonl", tmp_path / "run" / "meta.json"):
        texts = path.read_text().splitlines() if path.suffix == ".jsonl" else [path.read_text()]
        for text in texts:
            json.loads(text, parse_constant=_no_constant)


def _table_of(tmp_path: Path, row: str) -> Path:
    """legacy_all_reduce_info.log with its table rows replaced by `row` (its 12 fields)."""
    text = (FIXTURES / "legacy_all_reduce_info.log").read_text()
    lines = [line if line[:1] in "#d" else row for line in text.splitlines()]
    (tmp_path / "all_reduce.log").write_text("\n".join(lines))
    return tmp_path / "all_reduce.log"


@pytest.mark.parametrize("time", ["    -9.07", "     0.00"])
def test_rows_without_a_time_are_dropped_and_a_log_of_only_those_is_refused(tmp_path, time):
    log = _nan_log(tmp_path, "legacy_all_reduce_info.log", "     9.07", time)
    result = import_logs([log], out=tmp_path / "run")
    assert any("dropped 1 row(s) with a NaN, infinite or negative" in w for w in result.warnings)
    assert len(load_rows(result.run_dir)) == len(result.rows)  # what every reader refuses
    for row, needle in (("-9.0 0.2 0.3 N/A", "row with usable"), ("N/A " * 4, "measured row")):
        log = _table_of(tmp_path, f"8 2 float sum {row} {row}")
        error = _spec_error(lambda log=log: import_logs([log], out=tmp_path / "none"))
        assert f"has no {needle}" in str(error) and not (tmp_path / "none").exists()


def test_compare_of_a_log_with_nan_and_inf_prints_only_numbers(tmp_path):
    log = _nan_log(tmp_path, "legacy_all_reduce_info.log", "   11.65   17.48", "     inf     inf")
    import_logs([log], out=tmp_path / "run")
    import_logs([FIXTURES / "legacy_all_reduce_info.log"], out=tmp_path / "clean")
    compare = collbench("compare", str(tmp_path / "clean"), str(tmp_path / "run"))
    assert compare.returncode == 0, compare.stderr
    table = [line for line in compare.stdout.splitlines() if not line.startswith("#")]
    words = {word.lower().strip("-x") for line in table for word in line.split()}
    assert table and not words & {"inf", "nan"}, compare.stdout


def _no_constant(name):
    raise AssertionError(f"bare {name} in JSON")


def test_a_log_of_only_nan_rows_is_refused(tmp_path):
    log = tmp_path / "all_reduce.log"
    text = (FIXTURES / "legacy_all_reduce_info.log").read_text()
    log.write_text(
        "\n".join(
            __import__("re").sub(r" \d+\.\d+", " nan", line) if " float " in line else line
            for line in text.splitlines()
        )
    )
    error = _spec_error(lambda: import_logs([log], out=tmp_path / "run"))
    assert error.field == "LOG" and "has no row with finite figures" in str(error)
    assert not (tmp_path / "run").exists()


def test_unreadable_logs(tmp_path):
    for path in (tmp_path / "missing.log", tmp_path):
        error = _spec_error(lambda path=path: import_logs([path], out=tmp_path / "run"))
        assert error.field == "LOG" and "cannot be read" in str(error)


def test_out_that_is_not_empty_is_refused(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "rows.jsonl").write_text("{}\n")
    error = _spec_error(lambda: run_import(tmp_path, "current_all_gather_2node.log"))
    assert error.field == "--out" and "not an empty directory" in str(error)


def test_logs_of_different_world_sizes_are_refused(tmp_path):
    error = _spec_error(
        lambda: run_import(tmp_path, "current_all_gather_2node.log", "legacy_all_reduce_info.log")
    )
    assert error.field == "LOG" and "mix world sizes" in str(error)
    assert "8: " in str(error) and "4: " in str(error)
    assert not (tmp_path / "run").exists()


def test_log_that_names_no_collective_needs_the_option(tmp_path):
    log = tmp_path / "run1.log"
    shutil.copy(FIXTURES / "legacy_all_reduce_info.log", log)
    error = _spec_error(lambda: import_logs([log], out=tmp_path / "run"))
    assert error.field == "LOG" and "pass --collective" in str(error)
    assert import_logs([log], out=tmp_path / "run", collective="all_reduce").rows


def test_program_without_a_collbench_collective_needs_the_option(tmp_path):
    log = tmp_path / "log.txt"
    text = (FIXTURES / "legacy_errors_all_reduce_2gpu.log").read_text()
    log.write_text(text.replace("all_reduce_perf", "gather_perf"))
    error = _spec_error(lambda: import_logs([log], out=tmp_path / "run"))
    assert "gather_perf" in str(error) and "pass --collective" in str(error)


def test_unknown_collective_option(tmp_path):
    error = _spec_error(
        lambda: run_import(tmp_path, "mpirun_reduce_scatter.log", collective="allgatherv")
    )
    assert error.field == "--collective" and "all_reduce" in str(error)


# ---------------------------------------------------------------- the real shared logs


@pytest.mark.parametrize(
    "name, rows, world_size, nodes, backend, last_busbw",
    [
        ("nccl_h100_a3mega_2node_tcpxo_allreduce.txt", 62, 16, 2, "nccl", 337.35),
        ("nccl_legacy_a100_1node_allreduce.txt", 68, 8, 1, "nccl", 235.03),
        ("rccl_mi300x_1node_xgmi_allreduce.txt", 62, 8, 1, "rccl", 315.91),
    ],
)
def test_real_logs(tmp_path, name, rows, world_size, nodes, backend, last_busbw):
    require_shared_data(REAL_LOGS)
    result = written(import_logs([REAL_LOGS / name], out=tmp_path / "run"))
    meta = result.meta
    assert len(result.rows) == rows == len(load_rows(result.run_dir))
    assert (meta["world_size"], meta["nodes"], meta["backend"]) == (world_size, nodes, backend)
    assert meta["collectives"] == {"all_reduce": rows}
    assert meta["comment"].startswith("SOURCE: github.com/")
    assert result.rows[-1]["busbw_gbps"] == last_busbw
    assert result.rows[-1]["size_bytes"] == 8589934592
    # Each log's busbw/algbw fits its own rank count (1.875 for 16 ranks, 1.75 for 8).
    assert not any("busbw disagrees" in warning for warning in meta["warnings"])


def test_real_a3mega_header_and_first_row(tmp_path):
    require_shared_data(REAL_LOGS)
    result = written(
        import_logs(
            [REAL_LOGS / "nccl_h100_a3mega_2node_tcpxo_allreduce.txt"], out=tmp_path / "run"
        )
    )
    first, meta = result.rows[0], result.meta
    assert (first["size_bytes"], first["count"], first["time_us"], first["n_wrong"]) == (
        8,
        2,
        135.8,
        0,
    )
    assert meta["hosts"] == ["ztan-mig-235z", "ztan-mig-gq73"]
    assert meta["header"]["max_bytes"] == 8589934592 and meta["header"]["step_factor"] == 2
    assert meta["footer"]["avg_bus_bandwidth_gbps"] == 70.742


def test_real_legacy_and_rccl_specifics(tmp_path):
    require_shared_data(REAL_LOGS)
    legacy = written(
        import_logs([REAL_LOGS / "nccl_legacy_a100_1node_allreduce.txt"], out=tmp_path / "legacy")
    )
    assert [row["size_bytes"] for row in legacy.rows[:4]] == [0, 0, 0, 0]
    assert all(row["n_wrong"] is None for row in legacy.rows)
    rccl = written(
        import_logs([REAL_LOGS / "rccl_mi300x_1node_xgmi_allreduce.txt"], out=tmp_path / "rccl")
    )
    assert rccl.meta["versions"]["rccl_tests"] == "develop:a7809b3"
    assert rccl.meta["source"] == "rccl-tests"


# ---------------------------------------------------------------- the command


def test_command_prints_a_summary_and_warnings(tmp_path):
    out = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        [
            "import",
            "nccl-tests",
            str(FIXTURES / "current_all_gather_2node.log"),
            str(FIXTURES / "truncated_all_reduce.log"),
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "imported 19 row(s) from 2 nccl-tests log(s): nccl, 8 ranks on 2 node(s)" in (
        result.stdout
    )
    assert "all_gather: 12 row(s), 5 size(s), peak busbw 62.57 GB/s at 4194304 B" in (result.stdout)
    assert f"run directory: {out}" in result.stdout
    assert "collbench: warning:" in result.stderr and "no footer" in result.stderr


def test_command_json_prints_meta(tmp_path):
    result = CliRunner().invoke(
        app,
        [
            "import",
            "nccl-tests",
            str(FIXTURES / "mismatch_all_reduce_16ranks.log"),
            "--out",
            str(tmp_path / "run"),
            "--json",
            "--collective",
            "all_reduce",
        ],
    )
    assert result.exit_code == 0, result.output
    meta = json.loads(result.stdout)
    assert meta == read_meta(tmp_path / "run").to_dict()
    assert "fits 8 ranks" in result.stderr


def test_command_bad_input_raises_spec_error(tmp_path):
    result = CliRunner().invoke(app, ["import", "nccl-tests", str(tmp_path / "none.log")])
    assert isinstance(result.exception, SpecError) and result.exception.field == "LOG"


@pytest.mark.slow
def test_cli_module_imports_nothing_heavy():
    code = (
        "import sys, collbench.cli.imports; "
        "print(sorted(m for m in ('pandas', 'torch', 'numpy') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_real_command_imports_and_refuses_a_missing_log(tmp_path):
    done = collbench(
        "import",
        "nccl-tests",
        str(FIXTURES / "inplace_only_broadcast.log"),
        "--out",
        str(tmp_path / "run"),
    )
    assert done.returncode == 0, done.stderr
    assert "broadcast: 5 row(s)" in done.stdout
    bad = collbench("import", "nccl-tests", str(tmp_path / "none.log"))
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        f"collbench: error: LOG: {str(tmp_path / 'none.log')!r} cannot be read: "
        "No such file or directory"
    ]


@pytest.mark.parametrize("name", ["rccl_banner_alltoall.log", "rccl_hipevt_all_reduce.log"])
def test_rccl_tests_command_imports_like_nccl_tests(tmp_path, name):
    """`collbench import rccl-tests` is the docs' command for rccl-tests users (docs/import.md)."""
    runs = {}
    for command in ("rccl-tests", "nccl-tests"):
        out = tmp_path / command
        result = CliRunner().invoke(
            app, ["import", command, str(FIXTURES / name), "--out", str(out)]
        )
        assert result.exit_code == 0, result.output
        assert "rccl-tests log(s): rccl" in result.stdout
        runs[command] = [
            {
                key: value
                for key, value in row.to_dict().items()
                if key not in ("run_id", "timestamp_utc")
            }
            for row in load_rows(out)
        ]
    assert runs["rccl-tests"] == runs["nccl-tests"] != []


def test_rccl_tests_command_reads_the_real_mi300x_log(tmp_path):
    require_shared_data(REAL_LOGS)
    log = REAL_LOGS / "rccl_mi300x_1node_xgmi_allreduce.txt"
    result = CliRunner().invoke(
        app, ["import", "rccl-tests", str(log), "--out", str(tmp_path / "r")]
    )
    assert result.exit_code == 0, result.output
    assert "imported 62 row(s) from 1 rccl-tests log(s): rccl, 8 ranks on 1 node(s)" in (
        result.stdout
    )
    assert read_meta(tmp_path / "r").to_dict()["versions"]["rccl_tests"] == "develop:a7809b3"
