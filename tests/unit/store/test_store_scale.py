"""The store at scale (issue 31): packed samples, whole-list checks that refuse what the
item-by-item checks refused, a row count that decodes no sample, group commit that loses no
row a killed process wrote, and rows.parquet written column by column as it was before."""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from collbench.core.errors import SpecError
from collbench.store.row_values import Samples
from collbench.store.rows import row_from_dict
from collbench.store.rundir import (
    PARQUET_FILE,
    ROWS_FILE,
    ResultWriter,
    count_rows,
    load_rows,
    write_parquet,
)
from tests.rows import make_row, write_run

ROOT = Path(__file__).resolve().parents[3]


def _row_dict(**columns) -> dict:
    return {**make_row().to_dict(), **columns}


# --- packed samples ----------------------------------------------------------------------


def test_a_loaded_rows_samples_are_packed_and_equal_the_list():
    row = row_from_dict(_row_dict(time_us_samples=[1.5, 2, 3.25]))
    assert isinstance(row.time_us_samples, Samples)
    assert row.time_us_samples == [1.5, 2.0, 3.25] and [1.5, 2.0, 3.25] == row.time_us_samples
    assert row.time_us_samples != [1.5, 2.0]
    assert row.to_dict()["time_us_samples"] == [1.5, 2.0, 3.25]
    assert type(row.to_dict()["time_us_samples"]) is list
    assert json.loads(json.dumps(row.to_dict()))["time_us_samples"] == [1.5, 2.0, 3.25]
    assert pickle.loads(pickle.dumps(row)) == row
    assert repr(row.time_us_samples) == "[1.5, 2.0, 3.25]"
    assert not row_from_dict(_row_dict(time_us_samples=[])).time_us_samples


@pytest.mark.parametrize(
    "samples, needle",
    [
        ([1.0, True], "is not a list of numbers"),
        ([1.0, "2"], "is not a list of numbers"),
        ([1.0, None], "is not a list of numbers"),
        ([1.0, [2.0]], "is not a list of numbers"),
        ({"a": 1.0}, "is not a list of numbers"),
        ([1.0, 10**400], "is not finite"),
        ([1.0, float("inf")], "is not finite"),
        ([1.0, -0.5], "must not be negative"),
    ],
)
def test_a_bad_sample_list_is_refused_as_before(samples, needle):
    with pytest.raises(SpecError, match=needle) as error:
        row_from_dict(_row_dict(time_us_samples=samples), "rows.jsonl line 3")
    assert "time_us_samples" in str(error.value) and "rows.jsonl line 3" in str(error.value)


@pytest.mark.parametrize("count", [3, 500])  # below and above the plain/numpy crossover
@pytest.mark.parametrize(
    "bad, needle",
    [
        (float("nan"), "is not finite"),
        (float("inf"), "is not finite"),
        (-0.5, "must not be negative"),
    ],
)
def test_a_short_and_a_long_sample_list_are_checked_alike(count, bad, needle):
    good = [1e308] * count  # sums past a float's range, yet every value is finite
    assert row_from_dict(_row_dict(time_us_samples=good)).time_us_samples == good
    with pytest.raises(SpecError, match=needle):
        row_from_dict(_row_dict(time_us_samples=[*good[:-1], bad]))


def test_a_float_subclass_in_a_list_is_still_a_number():
    row = row_from_dict(_row_dict(time_us_samples=[np.float64(2.5), 3.0]))
    assert row.time_us_samples == [2.5, 3.0]


def test_a_type_error_is_named_before_a_range_error_of_an_earlier_column():
    # world_size 0 (out of range) comes before dtype (wrong type): the type error is named.
    with pytest.raises(SpecError, match="dtype: 5"):
        row_from_dict(_row_dict(world_size=0, dtype=5))
    with pytest.raises(SpecError, match="world_size: 0"):
        row_from_dict(_row_dict(world_size=0, time_us=-1.0))


# --- counting rows without decoding them ---------------------------------------------------


def _run(tmp_path: Path, tail: bytes = b"", samples: int = 4) -> Path:
    rows = [make_row(size_bytes=8 << i, time_us_samples=[1.0] * samples) for i in range(5)]
    run = write_run(tmp_path / "run", rows)
    with open(run / ROWS_FILE, "ab") as file:
        file.write(tail)
    return run


@pytest.mark.parametrize(
    "tail",
    [
        b"",
        b"\n\n   \n",  # blank lines
        b'{"collective": "all_re',  # a write cut short: skipped
        json.dumps(make_row(size_bytes=3).to_dict()).encode(),  # whole, without its newline
        b"\xff\xfe",  # cut inside a character
    ],
)
def test_the_count_is_what_load_rows_reads(tmp_path, tail):
    run = _run(tmp_path, tail)
    assert count_rows(run, warn=False) == len(load_rows(run, warn=False))


@pytest.mark.slow
def test_a_line_longer_than_a_chunk_is_counted_once(tmp_path):
    run = _run(tmp_path, samples=400_000)  # each line ~ 1.6 MB: chunks end inside lines
    assert count_rows(run) == 5


@pytest.mark.parametrize(
    "line, needle",
    [
        (b"garbled{", "row: 'garbled{' in"),
        (b"null", "row: 'NoneType' in"),
        (b"[1, 2]", "row: 'list' in"),
        (b"\xff\x00\x80 not text", "are not UTF-8 text"),
    ],
)
def test_a_line_that_is_not_a_row_is_refused_by_the_count(tmp_path, line, needle):
    run = _run(tmp_path, line + b"\n" + json.dumps(make_row().to_dict()).encode() + b"\n")
    for read in (count_rows, load_rows):
        with pytest.raises(SpecError, match=needle) as error:
            read(run)
        assert f"{run / ROWS_FILE} line 6" in str(error.value)


def test_no_rows_file_counts_zero(tmp_path):
    assert count_rows(tmp_path) == 0


# --- group commit ------------------------------------------------------------------------


@pytest.fixture
def fsyncs(monkeypatch):
    """The real os.fsync, counted."""
    calls = []
    real = os.fsync

    def counted(fd):
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counted)
    return calls


def test_group_commit_syncs_a_group_a_step_and_the_rest_at_close(tmp_path, fsyncs):
    writer = ResultWriter(tmp_path, sync_rows=3, sync_seconds=3600)
    for size in range(5):
        writer.append(make_row(size_bytes=size))
        # written through at once: another reader sees every row appended so far
        assert count_rows(tmp_path) == size + 1
    assert len(fsyncs) == 1  # after the third row
    writer.append(make_row(size_bytes=9), sync=True)  # a sweep's finished size
    assert len(fsyncs) == 2
    writer.append(make_row(size_bytes=10))
    writer.close()
    assert len(fsyncs) == 3
    assert [row.size_bytes for row in load_rows(tmp_path)] == [0, 1, 2, 3, 4, 9, 10]


def test_group_commit_syncs_after_its_time(tmp_path, fsyncs):
    writer = ResultWriter(tmp_path, sync_rows=10**6, sync_seconds=0.0)
    writer.append(make_row())
    writer.append(make_row())
    assert len(fsyncs) == 2
    writer.close()
    assert len(fsyncs) == 2  # nothing left to sync


def test_a_killed_writer_loses_no_row_it_appended(tmp_path):
    """A real process appends rows with group commit (no sync due) and is killed with
    SIGKILL before it closes: every row it appended is in rows.jsonl."""
    script = textwrap.dedent(
        f"""
        import os, sys
        sys.path.insert(0, {str(ROOT)!r})
        from collbench.store.rundir import ResultWriter
        from tests.rows import make_row
        writer = ResultWriter({str(tmp_path)!r}, sync_rows=10**6, sync_seconds=3600)
        for size in range(50):
            writer.append(make_row(size_bytes=size))
        print("appended", flush=True)
        os.kill(os.getpid(), {int(signal.SIGKILL)})
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == -signal.SIGKILL and "appended" in result.stdout, result.stderr
    assert [row.size_bytes for row in load_rows(tmp_path)] == list(range(50))


# --- rows.parquet ------------------------------------------------------------------------


def test_parquet_is_the_frame_of_the_rows_dicts(tmp_path):
    """Written column by column, rows.parquet is what a frame of each row's dict gave."""
    import pandas as pd

    rows = [
        make_row(size_bytes=8, time_us_samples=[1.0, 2.0], count=None),
        make_row(size_bytes=16, count=4, knobs={"env": {"B": "1", "A": "2"}}),
        make_row(size_bytes=32, kind="overlap", t_comm_us=3.0, probe_samples_us={"t_comm": [1.0]}),
    ]
    run = write_run(tmp_path / "run", rows)
    write_parquet(run, load_rows(run))
    frame = pd.read_parquet(run / PARQUET_FILE)
    expected = pd.DataFrame([row.to_dict() for row in rows], columns=list(frame.columns))
    for column in ("knobs", "probe_samples_us"):
        expected[column] = expected[column].map(lambda value: json.dumps(value, sort_keys=True))
    expected = pd.read_parquet(_parquet_of(expected, tmp_path / "expected.parquet"))
    pd.testing.assert_frame_equal(frame, expected)


def _parquet_of(frame, path: Path) -> Path:
    frame.to_parquet(path, index=False)
    return path
