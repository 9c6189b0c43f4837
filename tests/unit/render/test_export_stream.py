"""`collbench export RUN` reads rows.jsonl a row at a time (render/export.py: export_run) and writes
the bytes that building each document from every row at once gives (the reference below)."""

from __future__ import annotations

import csv
import io
import json

from collbench.render.export import (
    csv_columns,
    csv_record,
    export_run,
    json_paths,
    nccl_entry,
    nccl_head,
    per_iter_series,
    same_line,
)
from collbench.store.load import load_run
from collbench.store.rows import OVERLAP, SWEEP
from tests.helpers import collbench
from tests.rows import make_row, write_run

META = {"run_id": "run-a", "backend": "gloo", "started_utc": "2025-01-01T00:00:00Z"}


def _rows(rank_stat="max"):
    knobs = {"env": {"NCCL_ALGO": "=Ring"}, "settings": {"rank_stat": rank_stat}}
    rows = []
    for repeat in (0, 1):
        for collective in ("all_reduce", "broadcast"):  # interleaved: grouped per collective
            for size in (1024, 4096):
                for placement in ("out_of_place", "in_place"):
                    time_us = size / 100 + repeat + (placement == "in_place")
                    rows.append(
                        make_row(
                            collective=collective,
                            size_bytes=size,
                            placement=placement,
                            repeat=repeat,
                            time_us=time_us,
                            n_wrong=repeat,
                            knobs=knobs,
                            time_us_samples=[time_us + step / 7 for step in range(5)],
                        )
                    )
    return rows


def _reference(run, csv_path, json_path):
    """The files as export wrote them from every row loaded at once."""
    files = {}
    stream = io.StringIO(newline="")
    writer = csv.writer(stream)
    columns = csv_columns(bool(run.rows_of(OVERLAP)))
    writer.writerow(columns)
    for row in run.rows:
        writer.writerow(csv_record(row, columns))
    files[csv_path] = stream.getvalue().encode()
    sweep = run.rows_of(SWEEP)
    for collective, path in json_paths(json_path, [row.collective for row in sweep]).items():
        rows = [row for row in sweep if row.collective == collective]
        entries = [nccl_entry(group) for group in _groups(rows)]
        per_iter = all(per_iter_series(row) is not None for row in rows)
        document = {**nccl_head(run.meta, per_iter), "results": entries}
        document.update(_footer(entries))
        files[path] = (json.dumps(document, indent=1) + "\n").encode()
    return files


def _groups(rows):
    """Consecutive rows of one nccl-tests line (same_line)."""
    groups = []
    for row in rows:
        if groups and same_line(groups[-1], row):
            groups[-1].append(row)
        else:
            groups.append([row])
    return groups


def _footer(entries):
    """nccl-tests' footer: the wrong values, and the average busbw over every placement."""
    places = ("out_of_place", "in_place")
    bodies = [entry[place] for entry in entries for place in places if entry.get(place)]
    wrong = int(sum(body["nwrong"] or 0 for body in bodies))
    average = sum(body["bus_bw"] for body in bodies) / len(bodies) if bodies else 0.0
    return {
        "out_of_bounds": {"count": wrong, "okay": "true" if wrong == 0 else "false"},
        "average_bus_bandwidth": {"bandwidth": average, "okay": "unchecked"},
        "errors": [],
        "end_time": None,
    }


def _export_matches_reference(tmp_path, rows):
    run_dir = write_run(tmp_path / "run", rows, META)
    csv_path, json_path = tmp_path / "out.csv", tmp_path / "out.json"
    done = collbench("export", str(run_dir), "--csv", str(csv_path), "-J", str(json_path))
    assert done.returncode == 0, done.stderr
    expected = _reference(load_run(run_dir), csv_path, json_path)
    assert sorted(expected) == sorted(tmp_path.glob("out*"))
    for path, data in expected.items():
        assert path.read_bytes() == data, path


def test_export_writes_the_bytes_of_a_whole_run_load(tmp_path):
    _export_matches_reference(tmp_path, _rows())


def test_export_with_a_probe_row_and_without_per_iteration_times(tmp_path):
    probe = make_row(kind="overlap", collective="all_reduce", time_us=9.0, compute_streams=2)
    _export_matches_reference(tmp_path, [*_rows("mean"), probe])


def test_export_keeps_no_row_once_its_size_is_written():
    def rows():
        yield from _rows()

    built = export_run(rows(), "x.csv", "x.json")
    assert built.rows == 16
    # Only each collective's size in progress is held (at most its two placements).
    assert all(len(state.pending) <= 2 for state in built.collectives.values())
    assert [len(state.entries) for state in built.collectives.values()] == [3, 3]
