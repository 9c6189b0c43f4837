"""Real sweeps: `collbench sweep` spawning real gloo ranks on loopback (no mocks)."""

import json

import pandas as pd
import pytest

from collbench.core.collectives import REGISTRY
from collbench.core.dtypes import DTYPES
from collbench.store.rows import ROW_COLUMNS
from tests.helpers import collbench_process as collbench
from tests.helpers import meta_of, rows_of

ALL = ",".join(REGISTRY)


SLOW = pytest.mark.slow  # real gloo ranks; the first case below stays in the fast loop


@pytest.mark.parametrize(
    "nproc, dtype, op",
    [
        (2, "float32", "sum"),  # the fast loop's smoke test: every collective on 2 real ranks
        pytest.param(3, "bfloat16", "sum", marks=SLOW),  # odd world size: factor, alignment bugs
        pytest.param(3, "int32", "prod", marks=SLOW),
        pytest.param(2, "float16", "max", marks=SLOW),
        pytest.param(3, "bfloat16", "avg", marks=SLOW),
        pytest.param(3, "int8", "min", marks=SLOW),
    ],
)
def test_every_collective_and_placement_checks_clean(tmp_path, nproc, dtype, op):
    out = tmp_path / "run"
    done = collbench(
        "sweep",
        "-c",
        ALL,
        "-b",
        "4",
        "-e",
        "96K",
        "-f",
        "5",
        "-w",
        "1",
        "-n",
        "3",
        "--nproc",
        str(nproc),
        "-d",
        dtype,
        "-o",
        op,
        "--repeats",
        "1",
        "--out",
        str(out),
        "--quiet",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    rows = rows_of(out)
    sizes = [4, 20, 100, 500, 2500, 12500, 62500]
    expected = sum(len(REGISTRY[name].placements) * len(sizes) for name in REGISTRY)
    assert len(rows) == expected
    elem = DTYPES[dtype].elem_bytes
    for row in rows:
        assert tuple(row) == ROW_COLUMNS
        coll = REGISTRY[row["collective"]]
        assert row["n_wrong"] == 0, row
        assert (row["world_size"], row["nodes"], row["ranks_per_node"]) == (nproc, 1, nproc)
        assert row["dtype"] == dtype and row["backend"] == "gloo"
        assert row["op"] == (op if coll.reduces else None)
        assert row["time_us"] > 0 and row["time_us_min"] <= row["time_us_p50"] <= row["time_us_max"]
        samples = row["time_us_samples"]
        assert len(samples) == 3 and min(samples) == pytest.approx(row["time_us_min"], abs=1e-3)
        # the batch figure is the mean of back-to-back iterations: it equals the mean of
        # the samples for a single rank, and stays within their range across ranks
        assert row["time_us_min"] * 0.5 <= row["time_us"] <= row["time_us_max"] * 2
        if row["size_bytes"]:
            factor = coll.bus_factor(nproc)
            assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * factor)
            assert row["algbw_gbps"] == pytest.approx(row["size_bytes"] / row["time_us"] / 1e3)
        if row["collective"] in ("all_gather", "reduce_scatter", "all_to_all"):
            assert row["size_bytes"] % (nproc * elem) == 0
            assert row["count"] * nproc * elem == row["size_bytes"]
    frame = pd.read_parquet(out / "rows.parquet")
    assert len(frame) == len(rows)
    meta = meta_of(out)
    assert meta["state"] == "completed" and meta["world_size"] == nproc
    assert meta["timing_method"] == "perf_counter"
    assert meta["versions"]["torch"] and meta["versions"]["collbench"]
    assert len(meta["ranks"]) == nproc and meta["hosts"]
    assert meta["command_line"][:2] == ["collbench", "sweep"]


@SLOW
def test_table_output_is_nccl_tests_shaped(tmp_path):
    done = collbench(
        "sweep",
        "-c",
        "all_reduce,all_gather",
        "-b",
        "1K",
        "-e",
        "8K",
        "-n",
        "2",
        "--repeats",
        "1",
        "--out",
        str(tmp_path / "run"),
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith("# nThread 1 nGpus 0 minBytes 1024 maxBytes 8192") for line in lines)
    data = [line for line in lines if line and not line.startswith("#")]
    assert len(data) == 8  # 4 sizes x 2 collectives, one line per size
    for line in data:
        fields = line.split()
        assert len(fields) == 13
    all_reduce_line = data[0].split()
    assert all_reduce_line[:5] == ["1024", "256", "float", "sum", "-1"]
    assert all_reduce_line[5:9] == ["n/a"] * 4  # torch has no out-of-place all_reduce
    assert all_reduce_line[12] == "0"
    assert lines.count("# Out of bounds values : 0 OK") == 2
    assert sum(line.startswith("# Peak bus bandwidth") for line in lines) == 2
    assert lines[-1] == f"# Results: {tmp_path / 'run'}"


@SLOW
def test_json_mode_prints_exactly_the_rows(tmp_path):
    out = tmp_path / "run"
    done = collbench(
        "sweep",
        "-c",
        "reduce_scatter",
        "-b",
        "1K",
        "-e",
        "4K",
        "-n",
        "2",
        "--json",
        "--no-check",
        "--rank-stat",
        "max",
        "--repeats",
        "1",
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    printed = [json.loads(line) for line in done.stdout.splitlines()]
    assert printed == rows_of(out)
    assert all(row["n_wrong"] is None for row in printed)
    assert printed[0]["knobs"]["settings"]["rank_stat"] == "max"


@SLOW
def test_step_bytes_and_single_placement(tmp_path):
    out = tmp_path / "run"
    done = collbench(
        "sweep",
        "-c",
        "all_gather",
        "-b",
        "1K",
        "-e",
        "3K",
        "-i",
        "1K",
        "--placement",
        "in_place",
        "-n",
        "2",
        "--quiet",
        "--repeats",
        "1",
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    rows = rows_of(out)
    assert [row["size_bytes"] for row in rows] == [1024, 2048, 3072]
    assert {row["placement"] for row in rows} == {"in_place"}


@SLOW
def test_knobs_record_communication_environment(tmp_path):
    out = tmp_path / "run"
    done = collbench(
        "sweep",
        "-c",
        "all_reduce",
        "-b",
        "8",
        "-e",
        "8",
        "-n",
        "1",
        "--quiet",
        "--repeats",
        "1",
        "--out",
        str(out),
        env={"NCCL_ALGO": "Ring", "GLOO_SOCKET_IFNAME": "lo"},
    )
    assert done.returncode == 0, done.stderr
    knobs = rows_of(out)[0]["knobs"]
    assert knobs["env"]["NCCL_ALGO"] == "Ring" and knobs["env"]["GLOO_SOCKET_IFNAME"] == "lo"
    assert meta_of(out)["knobs"]["NCCL_ALGO"] == "Ring"


@SLOW
def test_wrong_data_is_reported_in_rows_and_exit_status(tmp_path):
    out = tmp_path / "run"
    done = collbench(
        "sweep",
        "-c",
        "all_gather",
        "-b",
        "1K",
        "-e",
        "2K",
        "-n",
        "2",
        "--nproc",
        "3",
        "--repeats",
        "1",
        "--out",
        str(out),
        env={"COLLBENCH_TEST_CORRUPT_RANK": "2"},
    )
    assert done.returncode == 3
    assert "data check failed: 4 wrong element(s) in 4 row(s)" in done.stderr
    assert "# Out of bounds values : 4 FAILED" in done.stdout
    assert [row["n_wrong"] for row in rows_of(out)] == [1, 1, 1, 1]


@SLOW
def test_topology_name_is_recorded_in_rows_and_meta(tmp_path):
    out = tmp_path / "run"
    done = collbench(
        "sweep",
        "-c",
        "all_reduce",
        "-b",
        "1K",
        "-e",
        "2K",
        "-n",
        "1",
        "--quiet",
        "--topology",
        "cpu-local",
        "--repeats",
        "1",
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    assert {row["topology"] for row in rows_of(out)} == {"cpu-local"}
    assert meta_of(out)["topology"] == "cpu-local"
