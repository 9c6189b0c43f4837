import errno
import json
import os
import threading

import pandas as pd
import pytest

from collbench.bench.runner import Measured
from collbench.core.collectives import REGISTRY
from collbench.core.errors import SpecError
from collbench.core.knobs import OWN_ENV_VAR, knob_env, own_env
from collbench.core.spec import SweepSpec
from collbench.core.stats import TimeStats
from collbench.store.load import load_run
from collbench.store.meta import IMPORT_LAYOUT, SWEEP_LAYOUT, RunMeta
from collbench.store.rows import (
    ALL_COLUMNS,
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
    remove_temp_files,
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


def test_a_garbled_middle_line_is_an_error_not_a_truncated_row(tmp_path, capsys):
    writer = ResultWriter(tmp_path)
    writer.append(make_row(size_bytes=8))
    writer.close()
    with open(tmp_path / "rows.jsonl", "a") as rows:
        rows.write('{"a": 3, "b"\n')  # terminated: a later write followed it
        rows.write(json.dumps(make_row(size_bytes=16).to_dict()) + "\n")
    with pytest.raises(SpecError) as error:
        load_rows(tmp_path)
    assert f"{tmp_path / 'rows.jsonl'} line 2 is not JSON" in str(error.value)
    assert "truncated" not in capsys.readouterr().err


@pytest.mark.parametrize(
    "data, column",
    [
        ({"foo": 1}, "collective"),
        ({"collective": "all_reduce", "size_bytes": "big"}, "size_bytes"),
        ({"collective": "all_reduce", "size_bytes": True}, "size_bytes"),
        ({"collective": "all_reduce", "size_bytes": -1}, "size_bytes"),
        ({"collective": "all_reduce", "size_bytes": 8, "time_us": "1"}, "time_us"),
        (
            {"collective": "all_reduce", "size_bytes": 8, "time_us_samples": ["x"]},
            "time_us_samples",
        ),
        (
            {"kind": "overlap", "collective": "all_reduce", "size_bytes": 8, "t_comm_us": []},
            "t_comm_us",
        ),
    ],
)
def test_a_row_is_checked_against_its_columns_types(data, column):
    with pytest.raises(SpecError) as error:
        row_from_dict(data, "f line 7")
    assert error.value.field == column and "f line 7" in str(error.value)


def test_a_loaded_row_names_a_collective_collbench_knows(tmp_path):
    (tmp_path / "rows.jsonl").write_text('{"collective": "gossip", "size_bytes": 8}\n')
    with pytest.raises(SpecError, match="collective: 'gossip' in .* line 1 is not a collective"):
        load_rows(tmp_path)


def test_columns_are_the_row_types_fields():
    assert ROW_COLUMNS[:4] == ("schema_version", "run_id", "timestamp_utc", "kind")
    assert ROW_COLUMNS[-3:] == ("topology", "knobs", "time_us_samples")
    probe_columns = ALL_COLUMNS[len(ROW_COLUMNS) :]  # probe rows carry these after ROW_COLUMNS
    assert ALL_COLUMNS[: len(ROW_COLUMNS)] == ROW_COLUMNS
    assert probe_columns[0] == "compute_ratio" and probe_columns[-1] == "probe_samples_us"
    assert "t_comm_during_cv" in probe_columns


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
    (tmp_path / "empty").mkdir()
    assert prepare_run_dir(tmp_path / "empty", "x").is_dir()  # empty: accepted
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "rows.jsonl").write_text("")
    with pytest.raises(SpecError) as error:
        prepare_run_dir(tmp_path / "full", "x")
    assert error.value.field == "--out"


def test_a_run_dir_is_claimed_by_exactly_one_run(tmp_path):
    """Two runs on one --out: the second is refused even before the first writes a file."""
    assert prepare_run_dir(tmp_path / "a" / "b", "x").is_dir()
    with pytest.raises(SpecError, match="is not an empty directory"):
        prepare_run_dir(tmp_path / "a" / "b", "y")
    barrier, outcomes = threading.Barrier(8), []

    def claim(index):
        barrier.wait()
        try:
            prepare_run_dir(tmp_path / "raced", f"run-{index}")
            outcomes.append("claimed")
        except SpecError as error:
            outcomes.append(error.field)

    threads = [threading.Thread(target=claim, args=(index,)) for index in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["--out"] * 7 + ["claimed"]


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


def test_a_meta_key_of_the_wrong_type_reads_unknown_and_is_kept():
    # each once a traceback in fit, compare or export (found by fuzzing damaged runs)
    data = {"ranks": [1, 2], "source": ["x"], "knobs": [], "versions": None, "world_size": True}
    meta = RunMeta.from_dict({**data, "hosts": ["h0"], "nodes": 2, "command_line": "a b"})
    assert (meta.ranks, meta.source, meta.knobs, meta.versions, meta.world_size) == (
        [],
        None,
        {},
        {},
        None,
    )
    assert (meta.hosts, meta.nodes, meta.command_line) == (["h0"], 2, "a b")
    assert meta.extra == data  # nothing dropped


def test_an_atomic_write_that_fails_leaves_no_file(tmp_path):
    def fail(tmp):
        tmp.write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError):
        write_atomically(tmp_path / "x.json", fail)
    assert list(tmp_path.iterdir()) == []


def test_an_atomic_write_survives_another_node_s_clean_up_taking_its_temp_file(tmp_path):
    """Two nodes finalize one shared run directory: one's remove_temp_files may delete the
    other's temporary file between its write and its rename; the write is made again."""
    calls = []

    def write(tmp):
        tmp.write_text("{}")
        calls.append(tmp)
        if len(calls) == 1:
            remove_temp_files(tmp_path)  # the other node's clean-up, at the worst moment

    write_atomically(tmp_path / "x.json", write)
    assert len(calls) == 2 and (tmp_path / "x.json").read_text() == "{}"
    assert not list(tmp_path.glob("*.tmp*"))


def test_an_atomic_write_fsyncs_the_file_and_its_directory(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync

    def fsync(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    write_atomically(tmp_path / "x.json", lambda tmp: tmp.write_text("{}"))
    assert synced[0].startswith(str(tmp_path / "x.json.tmp")) and synced[1] == str(tmp_path)


def _enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_full_disk_leaves_no_temp_file_and_still_sets_the_state(tmp_path, monkeypatch):
    from collbench.core.spec import SweepSpec
    from collbench.launchers.base import LaunchResult
    from collbench.launchers.supervise import finalize
    from collbench.store.job import Job

    writer = ResultWriter(tmp_path)
    for size in (8, 16, 32):
        writer.append(make_row(size_bytes=size))
    writer.close()
    write_meta(tmp_path, RunMeta(run_id="r1", state="running"))
    (tmp_path / "ranks").mkdir()
    (tmp_path / "ranks" / "rank-00000.json.tmp123").write_text("")  # a killed rank's
    monkeypatch.setattr("pandas.DataFrame.to_parquet", _enospc)
    monkeypatch.setattr("pathlib.Path.write_text", _enospc)  # no room for meta.json's copy
    job = Job(SweepSpec().with_backend("gloo"), tmp_path, "r1", "local", 2)
    result = finalize(job, LaunchResult(1, "rank 0 (pid 1) on h failed: exit code 1"))
    assert result.error == (
        f"disk full: no space left on the device holding {tmp_path} (could not write "
        f"rows.parquet); 3 finished row(s) kept in {tmp_path / 'rows.jsonl'}"
    )
    assert read_meta(tmp_path).state == "failed"  # written over meta.json's own blocks
    assert "disk full" in read_meta(tmp_path).extra["error"]
    assert not list(tmp_path.rglob("*.tmp*")) and not (tmp_path / "rows.parquet").exists()


def test_a_full_disk_when_only_the_parquet_is_left_fails_the_completed_run(tmp_path, monkeypatch):
    from collbench.core.spec import SweepSpec
    from collbench.launchers.base import LaunchResult
    from collbench.launchers.supervise import finalize
    from collbench.store.job import Job

    writer = ResultWriter(tmp_path)  # forked ranks: rank 0 left the parquet to the launcher
    for size in (8, 16):
        writer.append(make_row(size_bytes=size))
    writer.close()
    write_meta(tmp_path, RunMeta(run_id="r1", state="completed"))
    monkeypatch.setattr("pandas.DataFrame.to_parquet", _enospc)
    job = Job(SweepSpec().with_backend("gloo"), tmp_path, "r1", "local", 2)
    result = finalize(job, LaunchResult(0, None))
    assert (result.code, result.error) == (
        1,
        f"disk full: no space left on the device holding {tmp_path} (could not write "
        f"rows.parquet); 2 finished row(s) kept in {tmp_path / 'rows.jsonl'}",
    )
    assert read_meta(tmp_path).state == "failed"  # not `completed` without its parquet
    assert "rows.parquet" in read_meta(tmp_path).extra["error"]


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


def test_what_collbench_set_itself_is_never_a_knob():
    """OMP_NUM_THREADS set by the local launcher is collbench's setting (recorded apart);
    the same variable exported by the user is a knob."""
    env = {"OMP_NUM_THREADS": "1", "NCCL_ALGO": "Tree", OWN_ENV_VAR: "OMP_NUM_THREADS"}
    assert knob_env(env) == {"NCCL_ALGO": "Tree"}
    assert own_env(env) == {"OMP_NUM_THREADS": "1"}
    assert knob_env({"OMP_NUM_THREADS": "1"}) == {"OMP_NUM_THREADS": "1"}
