import json

import pandas as pd
import pytest

from collbench.bench.provenance import knob_env
from collbench.bench.runner import Measured
from collbench.core.collectives import REGISTRY
from collbench.core.errors import SpecError
from collbench.core.spec import SweepSpec
from collbench.core.stats import TimeStats
from collbench.store.rundir import (
    ROW_COLUMNS,
    ResultWriter,
    RowBuilder,
    load_rows,
    prepare_run_dir,
    read_meta,
    update_meta,
    write_meta,
    write_parquet,
)


def _measured(size=1 << 20, time_us=100.0):
    geometry = REGISTRY["all_gather"].geometry(size, 4, 4, 0)
    stats = TimeStats(time_us, time_us, time_us, time_us, time_us, 0.0, (time_us, time_us))
    return Measured(geometry, stats, 0)


def test_row_has_every_design_column_and_nccl_math():
    spec = SweepSpec().with_backend("gloo")
    builder = RowBuilder("run-1", spec, 4, 2, {"env": {}, "settings": {}})
    row = builder.build("all_gather", "out_of_place", _measured())
    assert tuple(row) == ROW_COLUMNS
    assert row["algbw_gbps"] == pytest.approx((1 << 20) / 100e-6 / 1e9)
    assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * 0.75)
    assert (row["nodes"], row["ranks_per_node"], row["op"], row["root"]) == (2, 2, None, -1)


def test_writer_streams_rows_and_loader_skips_a_truncated_tail(tmp_path, capsys):
    writer = ResultWriter(tmp_path)
    writer.append({"a": 1})
    # visible on disk before close: nothing is lost if the process dies now
    assert load_rows(tmp_path) == [{"a": 1}]
    writer.append({"a": 2})
    writer.close()
    with open(tmp_path / "rows.jsonl", "a") as rows:
        rows.write('{"a": 3, "b"')
    assert load_rows(tmp_path) == [{"a": 1}, {"a": 2}]
    assert "truncated" in capsys.readouterr().err


def test_parquet_copy_matches_rows(tmp_path):
    spec = SweepSpec().with_backend("gloo")
    builder = RowBuilder("run-1", spec, 4, 1, {"env": {"NCCL_ALGO": "Ring"}, "settings": {}})
    writer = ResultWriter(tmp_path)
    for size in (1024, 2048):
        writer.append(builder.build("all_gather", "in_place", _measured(size)))
    writer.close()
    frame = pd.read_parquet(write_parquet(tmp_path))
    assert list(frame.columns) == list(ROW_COLUMNS)
    assert frame["size_bytes"].tolist() == [1024, 2048]
    assert json.loads(frame["knobs"][0])["env"] == {"NCCL_ALGO": "Ring"}


def test_run_dir_must_be_new_or_empty(tmp_path):
    assert prepare_run_dir(tmp_path / "a" / "b", "x").is_dir()
    assert prepare_run_dir(tmp_path / "a" / "b", "x").is_dir()  # empty: accepted
    (tmp_path / "a" / "b" / "rows.jsonl").write_text("")
    with pytest.raises(SpecError) as error:
        prepare_run_dir(tmp_path / "a" / "b", "x")
    assert error.value.field == "--out"


def test_meta_updates_are_atomic_merges(tmp_path):
    write_meta(tmp_path, {"state": "running", "run_id": "r"})
    update_meta(tmp_path, state="completed")
    assert read_meta(tmp_path) == {"state": "completed", "run_id": "r"}
    assert not list(tmp_path.glob("*.tmp*"))


def test_knob_env_keeps_only_communication_knobs():
    env = {
        "NCCL_ALGO": "Tree",
        "RCCL_MSCCL_ENABLE": "0",
        "GLOO_SOCKET_IFNAME": "lo",
        "TORCH_NCCL_BLOCKING_WAIT": "1",
        "HOME": "/root",
        "PATH": "/bin",
        "OMP_NUM_THREADS": "1",
    }
    assert knob_env(env) == {k: v for k, v in env.items() if k not in ("HOME", "PATH")}
