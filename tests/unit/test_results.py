import json

import pandas as pd
import pytest

from collbench.bench.runner import Measured
from collbench.core.collectives import REGISTRY
from collbench.core.errors import SpecError
from collbench.core.knobs import knob_env
from collbench.core.spec import SweepSpec
from collbench.core.stats import TimeStats
from collbench.store.load import load_run
from collbench.store.meta import IMPORT_LAYOUT, SWEEP_LAYOUT, RunMeta
from collbench.store.rows import (
    ALL_COLUMNS,
    PROBE_COLUMNS,
    ROW_COLUMNS,
    ProbeRow,
    ResultRow,
    RowBuilder,
    row_from_dict,
)
from collbench.store.rundir import (
    ResultWriter,
    load_rows,
    prepare_run_dir,
    read_meta,
    update_meta,
    write_atomically,
    write_meta,
    write_parquet,
)
from tests.rows import make_row


def _measured(size=1 << 20, time_us=100.0):
    geometry = REGISTRY["all_gather"].geometry(size, 4, 4, 0)
    stats = TimeStats(time_us, time_us, time_us, time_us, time_us, 0.0, (time_us, time_us))
    return Measured(geometry, stats, 0)


def test_row_has_every_design_column_and_nccl_math():
    spec = SweepSpec().with_backend("gloo")
    builder = RowBuilder("run-1", spec, 4, 2, {"env": {}, "settings": {}})
    row = builder.build("all_gather", "out_of_place", _measured())
    assert type(row) is ResultRow and tuple(row.to_dict()) == ROW_COLUMNS
    assert row.algbw_gbps == pytest.approx((1 << 20) / 100e-6 / 1e9)
    assert row.busbw_gbps == pytest.approx(row.algbw_gbps * 0.75)
    assert (row.nodes, row.ranks_per_node, row.op, row.root) == (2, 2, None, -1)


def test_writer_streams_rows_and_loader_skips_a_truncated_tail(tmp_path, capsys):
    first, second = make_row(size_bytes=8), make_row(size_bytes=16)
    writer = ResultWriter(tmp_path)
    writer.append(first)
    # visible on disk before close: nothing is lost if the process dies now
    assert load_rows(tmp_path) == [first]
    writer.append(second)
    writer.close()
    with open(tmp_path / "rows.jsonl", "a") as rows:
        rows.write('{"a": 3, "b"')
    assert load_rows(tmp_path) == [first, second]
    assert "truncated" in capsys.readouterr().err


def test_columns_are_the_row_types_fields():
    assert ROW_COLUMNS[:4] == ("schema_version", "run_id", "timestamp_utc", "kind")
    assert ROW_COLUMNS[-3:] == ("topology", "knobs", "time_us_samples")
    assert ALL_COLUMNS == (*ROW_COLUMNS, *PROBE_COLUMNS)
    assert PROBE_COLUMNS[0] == "compute_ratio" and PROBE_COLUMNS[-1] == "probe_samples_us"
    assert "t_comm_during_cv" in PROBE_COLUMNS


def test_a_json_row_becomes_its_type_and_back_unchanged():
    sweep = make_row().to_dict()
    assert row_from_dict(sweep).to_dict() == sweep and list(sweep) == list(ROW_COLUMNS)
    probe = make_row(kind="overlap", overlap_pct=40.0)
    assert type(probe) is ProbeRow and probe.kind == "overlap" and probe.overlap_pct == 40.0
    assert list(probe.to_dict()) == list(ALL_COLUMNS)


def test_an_older_row_reads_with_its_missing_columns_as_none():
    row = row_from_dict({"collective": "all_reduce", "size_bytes": 8, "time_us": 1.0})
    assert type(row) is ResultRow and row.kind == "sweep"
    assert row.root is None and row.time_us_samples is None and row.schema_version is None


def test_a_row_of_an_unknown_kind_is_refused_naming_file_and_line(tmp_path):
    writer = ResultWriter(tmp_path)
    writer.append(make_row())
    writer.close()
    with open(tmp_path / "rows.jsonl", "a") as rows:
        rows.write('{"kind": "tune", "size_bytes": 8}\n')
    with pytest.raises(SpecError) as error:
        load_rows(tmp_path)
    assert error.value.field == "kind" and "\n" not in str(error.value)
    assert f"{tmp_path / 'rows.jsonl'} line 2" in str(error.value)
    with pytest.raises(SpecError, match="is not a JSON object"):
        row_from_dict([1, 2], "x line 1")


def test_load_run_reads_meta_and_typed_rows(tmp_path):
    writer = ResultWriter(tmp_path)
    writer.append(make_row(kind="overlap"))
    writer.close()
    run = load_run(tmp_path)
    assert run.meta == RunMeta() and run.run_id == str(tmp_path)
    assert run.probe_rows == list(run.rows) and run.sweep_rows == []
    write_meta(tmp_path, RunMeta(run_id="r1"))
    assert load_run(tmp_path).run_id == "r1"


def test_load_run_names_the_field_when_there_are_no_rows(tmp_path):
    assert load_run(tmp_path / "missing").rows == []
    with pytest.raises(SpecError) as error:
        load_run(tmp_path, "--curves", ": hint")
    assert (
        str(error.value)
        == f"--curves: {str(tmp_path)!r} holds no result rows (no rows.jsonl): hint"
    )


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
    write_meta(tmp_path, RunMeta(state="running", run_id="r"))
    update_meta(tmp_path, state="completed", n_wrong_total=0)
    meta = read_meta(tmp_path)
    assert (meta.state, meta.run_id, meta.extra) == ("completed", "r", {"n_wrong_total": 0})
    typed = [key for key in SWEEP_LAYOUT if key in RunMeta.__dataclass_fields__]
    assert list(json.loads((tmp_path / "meta.json").read_text())) == [*typed, "n_wrong_total"]
    assert not list(tmp_path.glob("*.tmp*"))


@pytest.mark.parametrize(
    "data",
    [
        {"run_id": "s", "state": "completed", "cwd": "/x", "spec": {}, "rows": 3, "error": None},
        {"run_id": "i", "source": "nccl-tests", "logs": [], "warnings": ["w"], "topology": None},
    ],
)
def test_meta_keeps_every_key_in_its_sources_order(data):
    layout = IMPORT_LAYOUT if data.get("source") else SWEEP_LAYOUT
    written = RunMeta.from_dict(data).to_dict()
    assert {key: written[key] for key in data} == data
    placed = [key for key in written if key in layout]
    assert placed == [key for key in layout if key in written]
    assert RunMeta.from_dict(written).to_dict() == written


def test_an_atomic_write_that_fails_leaves_no_file(tmp_path):
    def fail(tmp):
        tmp.write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError):
        write_atomically(tmp_path / "x.json", fail)
    assert list(tmp_path.iterdir()) == []


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
