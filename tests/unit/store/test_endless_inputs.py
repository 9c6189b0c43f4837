"""Endless, huge or deep inputs (issue 29): every file collbench reads back is a regular file
read within core.limits, so /dev/zero, /dev/urandom, a FIFO, an endless line, JSON or YAML
nested thousands deep, a duplicated topology key and a size beyond int64 are one SpecError
naming the file, in bounded time, before anything is written. In-process; the real-process
case of each class is in tests/cli/test_endless_inputs_cli.py."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from collbench.analysis.imports.nccl_logs import parse_text_lines, parse_text_log
from collbench.core.errors import SpecError
from collbench.core.limits import (
    LOG_MAX_BYTES,
    LOG_MAX_LINE_BYTES,
    MAX_NESTING_DEPTH,
    ROWS_MAX_LINE_BYTES,
    TOPOLOGY_MAX_BYTES,
    nesting_depth,
    too_deep,
)
from collbench.run.import_logs import import_logs
from collbench.store.job import Job
from collbench.store.load import load_run
from collbench.store.reading import iter_lines, load_json_object
from collbench.topologies.loader import load_topology
from tests.helpers import collbench
from tests.rows import make_row, write_run

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nccl-tests"
GOOD_LOG = FIXTURES / "current_all_gather_2node.log"
DEEP = "[" * 5000 + "]" * 5000
# Every case below must fail within this many seconds: a FIFO read would block for ever.
NO_HANG = pytest.mark.timeout(30)


def _spec_error(call: Callable[[], object]) -> SpecError:
    with pytest.raises(SpecError) as caught:
        call()
    assert "\n" not in str(caught.value)
    return caught.value


# --- the depth pre-scan -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, toml, depth",
    [
        ("{}", False, 1),
        ('{"a": [1, {"b": []}]}', False, 4),
        ('{"a": "[[[[[[[[[[["}', False, 1),  # brackets inside a string do not nest
        ('{"a": "\\"[[[["}', False, 1),  # nor after an escaped quote
        ("a = '[[[[[' # [[[[[\nb = [[1]]", True, 2),  # TOML literal strings and comments
        (DEEP, False, 5000),
        ("plain text", False, 0),
    ],
)
def test_nesting_depth_counts_brackets_outside_strings(text, toml, depth):
    assert nesting_depth(text, toml) == depth
    assert too_deep(text, toml) is (depth > MAX_NESTING_DEPTH)


def test_many_shallow_brackets_are_not_deep():
    text = json.dumps([[i] for i in range(50_000)])
    assert not too_deep(text) and nesting_depth(text) == 2


# --- import: the log reader -------------------------------------------------------------------


def _fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe.log"
    os.mkfifo(path)
    return path


def _sparse(tmp_path: Path, n_bytes: int, name: str = "huge.log") -> Path:
    path = tmp_path / name
    with open(path, "wb") as file:
        file.truncate(n_bytes)  # no disk used: the size is refused before a byte is read
    return path


def _log_with(tmp_path: Path, old: str, new: str, name: str = "edited.log") -> Path:
    text = GOOD_LOG.read_text()
    assert old in text
    path = tmp_path / name
    path.write_text(text.replace(old, new, 1))
    return path


def _text(tmp_path: Path, text: str, name: str = "all_reduce.log") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


BAD_LOGS = [
    ("dev-zero", lambda tmp: Path("/dev/zero"), "character device"),
    ("dev-urandom", lambda tmp: Path("/dev/urandom"), "character device"),
    ("fifo", _fifo, "named pipe (FIFO)"),
    ("directory", lambda tmp: tmp, "a directory"),
    ("over-size-limit", lambda tmp: _sparse(tmp, LOG_MAX_BYTES + 1), "over collbench's limit"),
    (
        "endless-line",
        lambda tmp: _text(tmp, "# nccl-tests\n" + "x" * (LOG_MAX_LINE_BYTES + 1) + "\n"),
        "line 2 is longer than 64 KiB",
    ),
    (
        "line-without-newline",
        lambda tmp: _text(tmp, "y" * (2 * LOG_MAX_LINE_BYTES)),
        "line 1 is longer than 64 KiB",
    ),
    ("deep-json", lambda tmp: _text(tmp, '{"results": ' + DEEP + "}"), "nested deeper than 100"),
    (
        "json-number-of-5000-digits",
        lambda tmp: _text(tmp, '{"results": [' + "9" * 5000 + "]}"),
        "number too long",
    ),
    (
        "text-number-of-5000-digits",
        lambda tmp: _log_with(tmp, "iters: 50", "iters: " + "9" * 5000),
        "line 3 holds a number too long",
    ),
    (
        "size-beyond-int64",
        lambda tmp: _log_with(tmp, "     1048576         32768", f"{2**64} 32768"),
        f"line 20: size_bytes {2**64} lies beyond the 64-bit integer range",
    ),
    (
        "count-beyond-int64",
        lambda tmp: _log_with(tmp, "     1048576         32768", f"1048576 {2**63}"),
        f"count {2**63} lies beyond the 64-bit integer range",
    ),
    (  # collbench's rows hold no negative #wrong: refused here, not on reading the run back
        "negative-wrong",
        lambda tmp: _log_with(tmp, "38.76      0", "38.76     -5"),
        "line 20: n_wrong -5 is below 0",
    ),
    (
        "iters-beyond-int64",
        lambda tmp: _log_with(tmp, "iters: 50", f"iters: {2**70}"),
        f"gives iters '{2**70}', not an integer within the 64-bit range",
    ),
    (
        "json-size-beyond-int64",
        lambda tmp: _text(
            tmp,
            json.dumps(
                {
                    "results": [
                        {
                            "size": 2**65,
                            "count": 1,
                            "type": "float",
                            "in_place": {"time": 1.0, "alg_bw": 1.0, "bus_bw": 1.0},
                        }
                    ]
                }
            ),
        ),
        f"size_bytes {2**65} lies beyond",
    ),
    ("empty", lambda tmp: _text(tmp, ""), "is empty"),
]


@NO_HANG
@pytest.mark.parametrize("make, needle", [c[1:] for c in BAD_LOGS], ids=[c[0] for c in BAD_LOGS])
def test_import_refuses_endless_huge_or_deep_logs_before_writing(tmp_path, make, needle):
    log = make(tmp_path)
    out = tmp_path / "run"
    error = _spec_error(lambda: import_logs([log], out=out))
    assert error.field == "LOG" and needle in str(error), str(error)
    assert not out.exists()  # nothing written


def test_a_size_above_2_to_the_53_is_imported_exactly(tmp_path):
    size = 2**53 + 1  # a float cannot hold it: the log's digits are kept
    log = _log_with(tmp_path, "     1048576         32768", f"{size} 32768", "all_gather.log")
    result = import_logs([log], out=tmp_path / "run")
    assert size in {row.size_bytes for row in result.rows}
    assert size in {row.size_bytes for row in load_run(result.run_dir).rows}


@pytest.mark.parametrize("name", sorted(path.name for path in FIXTURES.glob("*.log")))
@pytest.mark.parametrize("ending", ["\n", "\r\n"])
def test_a_log_read_a_line_at_a_time_parses_as_the_whole_text(name, ending):
    text = (FIXTURES / name).read_text().replace("\n", ending)
    chunks = text.splitlines(keepends=True)  # what the stream gives, one line per chunk
    assert parse_text_lines(chunks, name) == parse_text_log(text, name)
    cut = text.rstrip("\r\n")[:-3]  # a log stopped mid-line
    assert parse_text_lines(cut.splitlines(keepends=True), name) == parse_text_log(cut, name)


def test_iter_lines_stops_at_the_line_limit_without_reading_on(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b"ok\n" + b"z" * 100 + b"\nnever read\n")
    lines = iter_lines(path, "rows.jsonl", max_line_bytes=50, max_bytes=10_000)
    assert next(lines) == (1, b"ok\n")
    error = _spec_error(lambda: next(lines))
    assert "line 2 is longer than 50 bytes" in str(error)
    # a line of exactly the limit, newline included, is fine
    path.write_bytes(b"a" * 50 + b"\n")
    assert list(iter_lines(path, "f", 50, 10_000)) == [(1, b"a" * 50 + b"\n")]


# --- the store's reader: rows.jsonl, meta.json, job.json ------------------------------------


def _run(tmp_path: Path) -> Path:
    return write_run(tmp_path / "run", [make_row(size_bytes=8)], {"run_id": "run", "state": "x"})


def _replace(path: Path, make: Callable[[Path], object]) -> None:
    path.unlink(missing_ok=True)
    make(path)


def _write(content: str | bytes) -> Callable[[Path], object]:
    def write(path: Path) -> None:
        data = content.encode() if isinstance(content, str) else content
        path.write_bytes(data)

    return write


STORE_FILES = [
    ("rows-dev-zero", "rows.jsonl", lambda p: p.symlink_to("/dev/zero"), "character device"),
    ("rows-dev-urandom", "rows.jsonl", lambda p: p.symlink_to("/dev/urandom"), "character device"),
    ("rows-fifo", "rows.jsonl", os.mkfifo, "named pipe (FIFO)"),
    ("rows-random-bytes", "rows.jsonl", _write(b"\xff\xfe\x80" * 1000 + b"\n{}\n"), "not UTF-8"),
    ("rows-deep", "rows.jsonl", _write(DEEP + "\n"), "nests deeper than 100"),
    (
        "rows-endless-line",
        "rows.jsonl",
        _write(b"[" + b"1," * (ROWS_MAX_LINE_BYTES // 2) + b"1]\n"),
        "line 1 is longer than 16 MiB",
    ),
    ("rows-big-number", "rows.jsonl", _write("[" + "9" * 5000 + "]\n{}\n"), "line 1"),
    ("meta-fifo", "meta.json", os.mkfifo, "named pipe (FIFO)"),
    ("meta-dev-zero", "meta.json", lambda p: p.symlink_to("/dev/zero"), "character device"),
    ("meta-deep", "meta.json", _write('{"a": ' + DEEP + "}"), "nests deeper than 100"),
]


@NO_HANG
@pytest.mark.parametrize(
    "name, make, needle", [c[1:] for c in STORE_FILES], ids=[c[0] for c in STORE_FILES]
)
def test_load_run_refuses_endless_or_deep_run_files(tmp_path, name, make, needle):
    run = _run(tmp_path)
    _replace(run / name, make)
    error = _spec_error(lambda: load_run(run))
    assert needle in str(error) and str(run / name) in str(error), str(error)


JOB_FILES = [
    ("list", _write("[1, 2, 3]"), "holds a JSON list, not an object"),
    ("number", _write("7"), "holds a JSON number, not an object"),
    ("spec-list", _write('{"spec": []}'), "spec is [], not an object"),
    ("fifo", os.mkfifo, "named pipe (FIFO)"),
    ("dev-zero", lambda p: p.symlink_to("/dev/zero"), "character device"),
    ("deep", _write('{"spec": ' + DEEP + "}"), "nests deeper than 100"),
]


@NO_HANG
@pytest.mark.parametrize("make, needle", [c[1:] for c in JOB_FILES], ids=[c[0] for c in JOB_FILES])
def test_job_json_of_the_wrong_shape_is_refused(tmp_path, make, needle):
    run = _run(tmp_path)
    make(run / "job.json")
    error = _spec_error(lambda: Job.load(run))
    assert error.field == "job.json" and needle in str(error), str(error)


def _loads(name: str) -> Callable[[Path], object]:
    """What reads the JSON file `name` in a run or tune directory."""
    from collbench.store.doctor_report import load_doctor_report
    from collbench.store.noise_floor import load_noise_floor
    from collbench.store.tune_result import load_tune_result

    return {
        "meta.json": load_run,
        "job.json": Job.load,
        "tune.json": lambda run: load_tune_result(run, "RUN"),
        "doctor.json": load_doctor_report,
        "floor.json": lambda run: load_noise_floor(run / "floor.json"),
    }[name]


@NO_HANG
@pytest.mark.parametrize(
    "name, limit",
    [("meta.json", "16 MiB"), ("job.json", "1 MiB"), ("tune.json", "8 MiB")]
    + [("doctor.json", "32 MiB"), ("floor.json", "1 MiB")],
)
def test_a_json_file_over_its_own_limit_is_refused_before_it_is_read(tmp_path, name, limit):
    run = _run(tmp_path)  # each limit what a real file needs: a 200 MiB one took 2.2 GiB
    n_bytes = int(limit.split()[0]) * 2**20 + 1
    _sparse(run, n_bytes, name)
    error = _spec_error(lambda: _loads(name)(run))
    assert f"is {n_bytes} bytes, over collbench's limit of {limit} for this file" in str(error)


def test_load_json_object_refuses_a_list(tmp_path):
    path = tmp_path / "tune.json"
    path.write_text("[]")
    assert "holds a JSON list" in str(_spec_error(lambda: load_json_object(path, "tune.json")))


@NO_HANG
@pytest.mark.parametrize("make, needle", [c[1:] for c in JOB_FILES], ids=[c[0] for c in JOB_FILES])
def test_finalize_refuses_a_bad_job_json_and_writes_nothing(tmp_path, make, needle):
    run = write_run(tmp_path / "run", [make_row(size_bytes=8)], {"run_id": "r", "state": "running"})
    make(run / "job.json")
    before = {path.name: path.read_bytes() for path in run.iterdir() if path.name != "job.json"}
    result = collbench("finalize", str(run))
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "job.json" in result.stderr
    after = {path.name: path.read_bytes() for path in run.iterdir() if path.name != "job.json"}
    assert after == before


# --- topology files ---------------------------------------------------------------------------

CPU_LOCAL = (Path(__file__).resolve().parents[3] / "topologies" / "cpu-local.yaml").read_text()


def _topology(text: str, suffix: str = ".yaml") -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        path = tmp / f"fabric{suffix}"
        path.write_text(text)
        return path

    return make


def _fifo_topology(tmp: Path) -> Path:
    path = tmp / "fabric.yaml"
    os.mkfifo(path)
    return path


BAD_TOPOLOGIES = [
    ("duplicate-nodes", _topology(CPU_LOCAL + "\nnodes: 4\n"), "gives the key 'nodes' twice"),
    (
        "duplicate-nested",
        _topology(CPU_LOCAL.replace("scale_up:\n", "scale_up:\n  kind: pcie\n", 1)),
        "gives the key 'kind' twice",
    ),
    ("deep-flow", _topology(f"name: x\nextra: {DEEP}\n"), "nests deeper than 100 levels"),
    (
        "deep-block",
        _topology(
            "name: x\n" + "".join(" " * i + f"k{i}:\n" for i in range(300)) + " " * 300 + "v\n"
        ),
        "nests deeper than 100 levels",
    ),
    ("deep-toml", _topology(f"name = 'x'\nextra = {DEEP}\n", ".toml"), "nests deeper than 100"),
    (
        "over-size-limit",
        _topology(CPU_LOCAL + "".join(f"unknown_{i}: {i}\n" for i in range(70_000))),
        f"over the {TOPOLOGY_MAX_BYTES // 2**20} MiB limit",
    ),
    ("fifo", _fifo_topology, "is not a file"),
]


@NO_HANG
@pytest.mark.parametrize(
    "make, needle", [c[1:] for c in BAD_TOPOLOGIES], ids=[c[0] for c in BAD_TOPOLOGIES]
)
def test_topology_files_that_are_deep_huge_or_duplicated_are_refused(tmp_path, make, needle):
    path = make(tmp_path)
    error = _spec_error(lambda: load_topology(path))
    assert needle in str(error) and str(path) in str(error), str(error)


def test_the_catalog_still_loads():
    assert load_topology("cpu-local").name == "cpu-local"
