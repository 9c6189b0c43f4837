"""--csv and -J (nccl-tests' JSON layout): written as rows finish, by `sweep` and by
`collbench export RUN`, and read back here against what nccl-tests itself writes."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import time
from pathlib import Path

import pytest

from collbench.core.spec import SweepSpec
from collbench.render.console import ConsoleSink
from collbench.render.export import ExportSink, iteration_stats, json_paths
from collbench.store.meta import RunMeta
from tests.helpers import collbench, rows_of, start
from tests.rows import make_row

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-tests"
# A file nccl-tests wrote (-J, JSON_FILE_VERSION 2). Version 3 adds config.per_iter_skip.
NCCL_TESTS_JSON = FIXTURE / "nccl_tests_sendrecv.json"


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """The nccl-tests file as a collbench run directory (collbench import)."""
    run = tmp_path_factory.mktemp("import") / "run"
    done = collbench("import", "nccl-tests", str(NCCL_TESTS_JSON), "--out", str(run))
    assert done.returncode == 0, done.stderr
    return run


def _layout(value):
    """A JSON value's shape: key order of objects, the kind of every leaf (str, number,
    null); list items are all alike, so the first stands for the rest."""
    if isinstance(value, dict):
        return {key: _layout(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_layout(value[0])] if value else []
    if value is None:
        return None
    return "str" if isinstance(value, str) else "number"


def _without_v3_keys(layout):
    config = dict(layout["config"])
    config.pop("per_iter_skip")
    return {**layout, "config": config}


def test_export_of_an_imported_nccl_tests_file_gives_back_its_layout_and_numbers(
    tmp_path, imported
):
    reference = json.loads(NCCL_TESTS_JSON.read_text())
    done = collbench("export", str(imported), "-J", str(tmp_path / "back.json"))
    assert done.returncode == 0, done.stderr
    back = json.loads((tmp_path / "back.json").read_text())

    assert back["version"] == 3
    # Same keys in the same order, same kinds of value (booleans are "true"/"false" strings,
    # root a 6-wide string), except what this tool cannot know: the log's start/end time.
    shape, expected = _without_v3_keys(_layout(back)), _layout(reference)
    for unknown in ("start_time", "end_time"):
        assert back[unknown] is None
        shape[unknown] = expected[unknown]
    assert shape == expected
    keys = list(back["config"])
    assert keys[keys.index("per_iter_timing") + 1] == "per_iter_skip"  # where v3 writes it
    numbers = ("size", "count", "type", "redop", "root", "out_of_place", "in_place")
    for mine, theirs in zip(back["results"], reference["results"], strict=True):
        assert {key: mine[key] for key in numbers} == {key: theirs[key] for key in numbers}
    assert back["config"]["devices"] == reference["config"]["devices"]
    assert back["nccl_version"] == reference["nccl_version"]
    assert back["average_bus_bandwidth"] == reference["average_bus_bandwidth"]


@pytest.mark.slow  # a real 2-rank sweep, ~4 s
def test_sweep_writes_csv_and_nccl_json_that_match_its_rows(tmp_path):
    run, table, doc = tmp_path / "run", tmp_path / "rows.csv", tmp_path / "nccl.json"
    done = collbench(
        "sweep", "-c", "all_gather,broadcast", "-e", "64", "-n", "3", "-w", "1", "-a", "max",
        "--repeats", "1", "--out", str(run), "--csv", str(table), "-J", str(doc),
        "--knob", "NCCL_MAX_NCHANNELS=4",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    # The backend was auto: the knob is judged once the ranks have resolved it (gloo).
    warnings = [line for line in done.stderr.splitlines() if "warning" in line]
    assert warnings == [
        "collbench: warning: --knob NCCL_MAX_NCHANNELS does not apply to --backend gloo "
        "(NCCL_MAX_NCHANNELS is read by nccl/rccl, not by gloo); set and recorded anyway"
    ]
    rows = rows_of(run)
    with open(table, newline="") as stream:
        records = list(csv.DictReader(stream))
    assert len(records) == len(rows) == 12  # all_gather: both placements; broadcast: in place
    for record, row in zip(records, rows, strict=True):
        for column in ("collective", "size_bytes", "placement", "time_us", "busbw_gbps"):
            assert record[column] == str(row[column])
        assert json.loads(record["knobs"]) == row["knobs"]
        assert "time_us_samples" not in record

    paths = json_paths(doc, ["all_gather", "broadcast"])
    reference = _layout(json.loads(NCCL_TESTS_JSON.read_text()))
    for collective, path in paths.items():
        written = json.loads(path.read_text())
        assert list(written) == list(reference)
        assert written["config"]["per_iter_timing"] == "true"  # -a max: nccl-tests' i_* figures
        measured = [row for row in rows if row["collective"] == collective]
        for entry in written["results"]:
            for placement in ("out_of_place", "in_place"):
                same = [
                    row
                    for row in measured
                    if row["size_bytes"] == entry["size"] and row["placement"] == placement
                ]
                body = entry[placement]
                assert (body is None) == (not same)
                if same:
                    assert body["time"] == same[0]["time_us"]
                    assert entry[f"{placement}_per_iter"]["times_us"] == same[0]["time_us_samples"]
        assert [entry["size"] for entry in written["results"]] == [8, 16, 32, 64]
        assert written["end_time"]

    # The same run exported afterwards gives the same files.
    again = collbench(
        "export", str(run), "--csv", str(tmp_path / "a.csv"), "-J", str(tmp_path / "a.json")
    )
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "a.csv").read_text() == table.read_text()
    for collective, path in json_paths(tmp_path / "a.json", ["all_gather", "broadcast"]).items():
        assert (
            json.loads(path.read_text())["results"]
            == json.loads(paths[collective].read_text())["results"]
        )


def _sink(tmp_path):
    spec = SweepSpec(collectives=("all_reduce",), backend="gloo", max_bytes=64)
    inner = ConsoleSink(spec, "quiet", stream=io.StringIO())
    sink = ExportSink(inner, tmp_path / "rows.csv", tmp_path / "nccl.json")
    sink.start(RunMeta(backend="gloo", spec=spec.to_dict()))
    return sink


def test_a_run_cut_short_leaves_every_finished_row_in_both_files(tmp_path):
    sink = _sink(tmp_path)
    rows = [
        make_row(size_bytes=size, placement=placement, time_us=10.0 + size)
        for size in (8, 16)
        for placement in ("out_of_place", "in_place")
    ]
    for count, row in enumerate([*rows, make_row(size_bytes=32)], start=1):
        sink.row(row)
        # Read back as a killed run would leave them: no finish() was called.
        with open(tmp_path / "rows.csv", newline="") as stream:
            assert len(list(csv.DictReader(stream))) == count
        written = json.loads((tmp_path / "nccl.json").read_text())
        placements = sum(
            entry[placement] is not None
            for entry in written["results"]
            for placement in ("out_of_place", "in_place")
        )
        assert placements == count
        assert "end_time" not in written  # the mark of a file whose run did not end
    assert [entry["size"] for entry in written["results"]] == [8, 16, 32]
    sink.finish("interrupted")
    written = json.loads((tmp_path / "nccl.json").read_text())
    assert written["end_time"] and written["errors"] == ["run interrupted"]
    assert [entry["size"] for entry in written["results"]] == [8, 16, 32]


def test_per_iteration_figures_only_where_they_mean_what_nccl_tests_means(tmp_path):
    # nccl-tests' i_* series is each iteration's slowest rank: collbench's with -a max only.
    samples = [5.0, 1.0, 3.0]
    by_max = make_row(time_us_samples=samples, knobs={"env": {}, "settings": {"rank_stat": "max"}})
    by_avg = make_row(
        size_bytes=16, time_us_samples=samples, knobs={"settings": {"rank_stat": "avg"}}
    )
    sink = _sink(tmp_path)
    sink.row(by_max)
    sink.row(by_avg)
    sink.finish()
    first, second = json.loads((tmp_path / "nccl.json").read_text())["results"]
    assert first["out_of_place_per_iter"]["times_us"] == samples
    assert "out_of_place_per_iter" not in second


def test_iteration_stats_are_nccl_tests_own():
    # nccl-tests: p50 = sorted[n/2], p95/p99 nearest rank, population stdev.
    stats = iteration_stats([float(value) for value in range(100, 0, -1)])
    assert (stats["min_us"], stats["max_us"], stats["avg_us"]) == (1.0, 100.0, 50.5)
    assert (stats["p50_us"], stats["p95_us"], stats["p99_us"]) == (51.0, 95.0, 99.0)
    assert stats["stdev_us"] == pytest.approx(28.866, abs=1e-3)
    assert stats["cv_pct"] == pytest.approx(28.866 / 50.5 * 100, abs=1e-2)
    three = iteration_stats([1.0, 2.0, 3.0])
    assert (three["p50_us"], three["p95_us"]) == (2.0, 3.0)


def test_json_paths_one_file_per_collective():
    assert json_paths(Path("out/r.json"), ["all_reduce"]) == {"all_reduce": Path("out/r.json")}
    assert json_paths(Path("r.json"), ["all_reduce", "reduce"]) == {
        "all_reduce": Path("r.all_reduce.json"),
        "reduce": Path("r.reduce.json"),
    }


@pytest.mark.parametrize(
    "args, needle",
    [
        (["export", "{run}"], "export: give --csv FILE, -J FILE or both"),
        (["export", "{run}", "--csv", "{existing}"], "exists: remove it or name another file"),
        (["export", "{run}", "-J", "{tmp}/no/such/dir/x.json"], "folder that does not exist"),
        (["export", "{tmp}/nowhere", "--csv", "{tmp}/x.csv"], "holds no result rows"),
        (["sweep", "--csv", "{existing}"], "--csv: "),
        (["wait", "{run}", "-J", "{existing}"], "-J: "),
        (["overlap", "-J", "{tmp}/x.json"], "No such option: -J"),
    ],
)
def test_export_refusals_are_one_line_and_exit_2(tmp_path, imported, args, needle):
    run = imported
    existing = tmp_path / "existing.csv"
    existing.write_text("keep me\n")
    names = {"run": run, "existing": existing, "tmp": tmp_path}
    done = collbench(*(arg.format(**names) for arg in args))
    assert done.returncode == 2
    assert needle in done.stderr and done.stderr.count("\n") == 1
    assert existing.read_text() == "keep me\n"


@pytest.mark.slow
def test_a_killed_sweep_leaves_its_finished_rows_in_csv_and_json(tmp_path):
    run, table, doc = tmp_path / "run", tmp_path / "rows.csv", tmp_path / "nccl.json"
    process = start(
        "sweep", "-c", "all_reduce", "-e", "4M", "-n", "3", "-w", "1", "--repeats", "1", "-q",
        "--out", str(run), "--csv", str(table), "-J", str(doc),
    )  # fmt: skip
    try:
        # The CSV is written by the launching process as it reads the ranks' rows, a little
        # behind rows.jsonl: wait for the export itself, not for the ranks.
        _wait_for_lines(table, 1 + 3, timeout=120)
    finally:
        os.kill(process.pid, signal.SIGKILL)  # no finish(), no clean-up: as a lost node
        process.wait()
    with open(table, newline="") as stream:
        kept = list(csv.DictReader(stream))
    written = json.loads(doc.read_text())  # still one whole JSON document
    placements = sum(
        entry[placement] is not None
        for entry in written["results"]
        for placement in ("out_of_place", "in_place")
    )
    assert len(kept) >= 3
    assert placements >= len(kept) - 1  # a kill may fall between the two files' writes
    assert "end_time" not in written


def _wait_for_lines(path: Path, count: int, timeout: float) -> None:
    """Until `path` holds `count` whole lines (AssertionError after `timeout` seconds)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().count("\n") >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} did not reach {count} lines in {timeout} s")
