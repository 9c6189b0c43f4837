"""Every command that writes refuses an output path it cannot use, in one line and a
documented exit code, before anything runs, and leaves nothing half-written
(collbench/store/outputs.py): a name too long, a read-only folder, a full disk, a dangling
symbolic link, a path under a file, an existing file without --force, one path for --csv
and -J, and any path inside a run directory it reads or writes.

The table WRITERS walks every writing command; `test_the_table_names_every_writing_option`
fails when a command grows an output option the table does not cover. Each case runs in
this process; `test_each_class_in_a_real_process` runs one real process per class.
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from collbench.core.spec import SweepSpec
from collbench.render.console import ConsoleSink
from collbench.render.export import ExportSink
from collbench.store.meta import RunMeta
from collbench.store.outputs import OutputError, write_output
from tests.helpers import collbench, collbench_process
from tests.rows import make_row

LOG = (
    Path(__file__).resolve().parents[1] / "fixtures" / "nccl-tests" / "current_all_gather_2node.log"
)
SWEEP = ("-n", "2", "-c", "all_reduce", "-b", "1K", "-e", "1K")
PREDICT = ("-T", "cpu-local", "-c", "all_reduce", "-b", "1K", "-e", "4K")


@dataclass(frozen=True)
class World:
    """What the commands read: two imported runs that differ in a knob, a tune result
    chosen from them, a plain file and an empty folder (for sweep's own --out)."""

    root: Path
    run_a: Path
    run_b: Path
    tune: Path
    file: Path


@dataclass(frozen=True)
class Writer:
    """One writing option of one command: its argv with OUT (and the world) filled in."""

    name: str
    flag: str
    argv: Callable[[World, str], list[str]]
    kind: str = "file"  # "file" or "dir" (a new run or result directory)
    # The run directory the command reads or writes, that OUT must not be inside.
    input_run: Callable[[World], Path] | None = None


def _run_a(world: World) -> Path:
    return world.run_a


WRITERS = (
    Writer(
        "report", "--out", lambda w, out: ["report", str(w.run_a), "--out", out], "file", _run_a
    ),
    Writer("topo detect", "--out", lambda w, out: ["topo", "detect", "--out", out]),
    Writer(
        "export", "--csv", lambda w, out: ["export", str(w.run_a), "--csv", out], "file", _run_a
    ),
    Writer("export", "-J", lambda w, out: ["export", str(w.run_a), "-J", out], "file", _run_a),
    Writer("wait", "--csv", lambda w, out: ["wait", str(w.run_a), "--csv", out], "file", _run_a),
    Writer("wait", "-J", lambda w, out: ["wait", str(w.run_a), "-J", out], "file", _run_a),
    Writer(
        "noise",
        "--out",
        lambda w, out: ["noise", str(w.run_a), str(w.run_b), "--out", out],
        "file",
        _run_a,
    ),
    Writer(
        "sweep",
        "--csv",
        lambda w, out: ["sweep", *SWEEP, "--out", str(w.root / "own"), "--csv", out],
        "file",
        lambda w: w.root / "own",
    ),
    Writer(
        "sweep",
        "-J",
        lambda w, out: ["sweep", *SWEEP, "--out", str(w.root / "own"), "-J", out],
        "file",
        lambda w: w.root / "own",
    ),
    Writer(
        "overlap",
        "--csv",
        lambda w, out: ["overlap", *SWEEP, "--out", str(w.root / "own"), "--csv", out],
        "file",
        lambda w: w.root / "own",
    ),
    Writer("sweep", "--out", lambda w, out: ["sweep", *SWEEP, "--out", out], "dir"),
    Writer("overlap", "--out", lambda w, out: ["overlap", *SWEEP, "--out", out], "dir"),
    Writer("doctor", "--out", lambda w, out: ["doctor", "--out", out], "dir"),
    Writer(
        "import nccl-tests",
        "--out",
        lambda w, out: ["import", "nccl-tests", str(LOG), "--out", out],
        "dir",
    ),
    Writer(
        "import rccl-tests",
        "--out",
        lambda w, out: ["import", "rccl-tests", str(LOG), "--out", out],
        "dir",
    ),
    Writer("gemm", "--out", lambda w, out: ["gemm", "--shape", "8x8x8", "--out", out], "dir"),
    Writer("predict", "--html", lambda w, out: ["predict", *PREDICT, "--html", out]),
    Writer(
        "tune from",
        "--out",
        lambda w, out: ["tune", "from", str(w.run_a), str(w.run_b), "--out", out],
        "dir",
        _run_a,
    ),
    Writer(
        "tune run",
        "--out",
        lambda w, out: ["tune", "run", "--knob", "GLOO_SOCKET_IFNAME=lo", *SWEEP, "--out", out],
        "dir",
    ),
    Writer(
        "tune verify",
        "--out",
        lambda w, out: ["tune", "verify", str(w.tune), "--out", out],
        "dir",
    ),
)
FILE_WRITERS = [writer for writer in WRITERS if writer.kind == "file"]
IDS = [f"{writer.name} {writer.flag}" for writer in WRITERS]
FILE_IDS = [f"{writer.name} {writer.flag}" for writer in FILE_WRITERS]
INPUT_WRITERS = [writer for writer in WRITERS if writer.input_run is not None]
INPUT_IDS = [f"{writer.name} {writer.flag}" for writer in INPUT_WRITERS]
# Writers whose --force run is cheap (no ranks): an existing file is written over. One
# policy (docs/errors.md, "Output paths"): every output file a user names is refused if it exists,
# unless --force (noise's --force: tests/cli/test_noise_cli.py, with identical runs).
FORCED = ("report", "topo detect", "export", "predict")


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> World:
    root = tmp_path_factory.mktemp("outputs")
    run_a, run_b, tune = root / "run-a", root / "run-b", root / "tune"
    for run, algo in ((run_a, "Ring"), (run_b, "Tree")):
        done = collbench(
            "import", "nccl-tests", str(LOG), "--out", str(run), "--knob", f"NCCL_ALGO={algo}"
        )
        assert done.returncode == 0, done.stderr
    done = collbench("tune", "from", str(run_a), str(run_b), "--out", str(tune))
    assert done.returncode == 0, done.stderr
    (root / "own").mkdir()
    (root / "a-file").write_text("a file, not a folder\n")
    return World(root, run_a, run_b, tune, root / "a-file")


def _mount(where: Path, options: str) -> None:
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")


def _umount(where: Path) -> None:
    subprocess.run(["umount", "-l", str(where)], capture_output=True)


@pytest.fixture(scope="module")
def read_only(tmp_path_factory):
    """A read-only file system (root ignores file modes: a read-only mount it cannot)."""
    where = tmp_path_factory.mktemp("ro") / "mnt"
    _mount(where, "ro,size=64k")
    yield where
    _umount(where)


@pytest.fixture(scope="module")
def full_disk(tmp_path_factory):
    """A 64 KiB file system filled to the last byte."""
    where = tmp_path_factory.mktemp("full") / "mnt"
    _mount(where, "size=64k")
    try:
        _fill(where)
        yield where
    finally:
        _umount(where)


def _fill(where: Path) -> None:
    with open(where / "fill", "ab", buffering=0) as filler:
        try:
            while True:
                filler.write(b"\0" * 512)
        except OSError as error:
            assert error.errno == errno.ENOSPC


def _refused(done: subprocess.CompletedProcess, code: int, needle: str) -> None:
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert "Traceback" not in done.stderr and len(lines) == 1, done.stderr
    assert lines[0].startswith("collbench: error: ") and needle in lines[0], lines[0]


def _digest(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


@pytest.mark.parametrize("writer", WRITERS, ids=IDS)
def test_a_name_too_long_is_refused(world, writer):
    out = world.root / ("n" * 300)
    _refused(collbench(*writer.argv(world, str(out))), 2, "at most 255 are allowed")
    deep = world.root / "/".join(["d" * 200] * 25)  # every name fits; the path does not
    _refused(collbench(*writer.argv(world, str(deep))), 2, "is too long")


@pytest.mark.parametrize("writer", WRITERS, ids=IDS)
def test_a_read_only_file_system_is_refused(world, read_only, writer):
    _refused(collbench(*writer.argv(world, str(read_only / "out"))), 2, "Read-only file system")
    assert list(read_only.iterdir()) == []


@pytest.mark.parametrize("writer", WRITERS, ids=IDS)
def test_a_full_disk_is_one_line_exit_1_and_leaves_nothing(world, full_disk, writer):
    _refused(collbench(*writer.argv(world, str(full_disk / "out"))), 1, "the disk is full")
    assert [path.name for path in full_disk.iterdir()] == ["fill"]


@pytest.mark.parametrize("writer", WRITERS, ids=IDS)
def test_a_dangling_symbolic_link_is_refused(world, writer, tmp_path):
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "nowhere")
    _refused(collbench(*writer.argv(world, str(link))), 2, "is a symbolic link to")
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("writer", WRITERS, ids=IDS)
def test_a_path_under_a_file_is_refused(world, writer):
    _refused(collbench(*writer.argv(world, str(world.file / "out"))), 2, "which is not a folder")
    assert world.file.read_text() == "a file, not a folder\n"


@pytest.mark.slow
@pytest.mark.parametrize("writer", FILE_WRITERS, ids=FILE_IDS)
def test_an_existing_file_is_kept_unless_force(world, writer, tmp_path):
    existing = tmp_path / "existing"
    existing.write_text("keep me\n")
    _refused(collbench(*writer.argv(world, str(existing))), 2, "exists: remove it")
    assert existing.read_text() == "keep me\n"
    if writer.name in FORCED and writer.name != "report":  # report's: a slow test below
        _forced(world, writer, existing)


def _forced(world: World, writer: Writer, existing: Path) -> None:
    done = collbench(*writer.argv(world, str(existing)), "--force")
    assert done.returncode == 0, done.stderr
    assert existing.read_text() != "keep me\n"
    assert sorted(path.name for path in existing.parent.iterdir()) == ["existing"]  # no temp


@pytest.mark.slow  # draws charts
def test_report_force_writes_over_an_existing_file(world, tmp_path):
    existing = tmp_path / "existing"
    existing.write_text("keep me\n")
    _forced(world, WRITERS[0], existing)


@pytest.mark.parametrize("name", ["rows.jsonl", "meta.json", "rows.parquet", ".claimed", "new.txt"])
@pytest.mark.parametrize("writer", INPUT_WRITERS, ids=INPUT_IDS)
def test_nothing_is_written_inside_a_run_it_reads_or_writes(world, writer, name):
    run = writer.input_run(world)
    before = _digest(run)
    out = run / name if writer.kind == "file" else run / "sub"
    for force in ((), ("--force",)) if writer.name in FORCED else ((),):
        _refused(collbench(*writer.argv(world, str(out)), *force), 2, "write elsewhere")
    assert _digest(run) == before


@pytest.mark.parametrize(
    "name", ["rows.jsonl", "meta.json", "rows.parquet", "job.json", "notes.txt"]
)
def test_no_command_writes_into_any_run_even_with_force(world, name):
    """Not an input either: a run's folder is never an output (topo detect reads no run)."""
    before = _digest(world.run_b)
    done = collbench("topo", "detect", "--out", str(world.run_b / name), "--force")
    _refused(done, 2, "collbench never writes into a run's files")
    assert _digest(world.run_b) == before


@pytest.mark.parametrize(
    "argv",
    [
        ["export", "{run}", "--csv", "{out}", "-J", "{out}"],
        ["sweep", *SWEEP, "--out", "{root}/new-run", "--csv", "{out}", "-J", "{out}"],
        ["wait", "{run}", "--csv", "{out}", "-J", "{out}"],
    ],
    ids=["export", "sweep", "wait"],
)
def test_one_path_for_csv_and_json_is_refused(world, argv, tmp_path):
    names = {"run": world.run_a, "out": tmp_path / "both", "root": world.root}
    _refused(collbench(*(arg.format(**names) for arg in argv)), 2, "give each output its own path")
    assert list(tmp_path.iterdir()) == []
    assert not (world.root / "new-run").exists()


def test_the_table_names_every_writing_option():
    """A command that grows --out, --csv, -J or --html is added to WRITERS (and so to every
    class)."""
    from tests.cli.test_option_owners import COMMANDS, _declared

    writing = set()
    for path, callback in COMMANDS.items():
        for _name, info, _default in _declared(callback):
            flags = set(getattr(info, "param_decls", None) or ())
            for flag in flags & {"--out", "--csv", "-J", "--html"}:
                writing.add((" ".join(path), flag))
    covered = {(writer.name.split(" --")[0], writer.flag) for writer in WRITERS}
    assert writing - covered == set()


def test_write_output_leaves_no_temporary_file_on_a_full_disk(full_disk):
    with pytest.raises(OutputError, match="the disk is full"):
        write_output("--out", full_disk / "big", b"x" * (1 << 20))
    assert [path.name for path in full_disk.iterdir()] == ["fill"]


def test_a_side_file_that_fills_the_disk_is_removed_and_said(tmp_path_factory):
    """The --csv / -J files of a sweep: the disk fills while rows stream in; the file is
    removed (no half file) and named, and the run's own rows go on."""
    where = tmp_path_factory.mktemp("side") / "mnt"
    _mount(where, "size=64k")
    try:
        spec = SweepSpec(collectives=("all_reduce",), backend="gloo", max_bytes=64)
        inner = ConsoleSink(spec, "quiet", stream=io.StringIO())
        sink = ExportSink(inner, where / "rows.csv", where / "nccl.json")
        sink.start(RunMeta(backend="gloo", spec=spec.to_dict()))
        sink.row(make_row(size_bytes=8))
        _fill(where)
        for size in range(16, 16 * 400, 16):
            sink.row(make_row(size_bytes=size, knobs={"pad": "x" * 4000}))
        sink.finish()
        assert sink.failures and all("the disk is full" in line for line in sink.failures)
        assert not (where / "rows.csv").exists() and not (where / "nccl.json").exists()
        assert sink.written == []
    finally:
        _umount(where)


CLASSES = {
    "too long": (lambda w, ro, full, tmp: str(w.root / ("p" * 300)), 2, "at most 255"),
    "read-only": (lambda w, ro, full, tmp: str(ro / "r.html"), 2, "Read-only file system"),
    "full disk": (lambda w, ro, full, tmp: str(full / "r.html"), 1, "the disk is full"),
    "dangling link": (lambda w, ro, full, tmp: _dangling(tmp), 2, "is a symbolic link to"),
    "under a file": (lambda w, ro, full, tmp: str(w.file / "r.html"), 2, "not a folder"),
    "exists": (lambda w, ro, full, tmp: str(w.file), 2, "exists: remove it"),
    "inside the run": (lambda w, ro, full, tmp: str(w.run_a / "rows.jsonl"), 2, "write elsewhere"),
}


def _dangling(tmp: Path) -> str:
    link = tmp / "dangling.html"
    link.symlink_to(tmp / "nowhere.html")
    return str(link)


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CLASSES))
def test_each_class_in_a_real_process(world, read_only, full_disk, tmp_path, case):
    path_of, code, needle = CLASSES[case]
    before = _digest(world.run_a)
    out = path_of(world, read_only, full_disk, tmp_path)
    _refused(collbench_process("report", str(world.run_a), "--out", out), code, needle)
    assert _digest(world.run_a) == before


@pytest.mark.slow
def test_one_path_for_csv_and_json_in_a_real_process(world, tmp_path):
    out = str(tmp_path / "both")
    done = collbench_process("export", str(world.run_a), "--csv", out, "-J", out)
    _refused(done, 2, "give each output its own path")
    assert list(tmp_path.iterdir()) == []
