"""Run directories that lie or are damaged: every command that reads one exits 2 with one line
naming the file and line (or gives an honest status), never a traceback."""

import json

import pytest

from tests.helpers import collbench
from tests.rows import make_row, write_run

CASE_PER_PROCESS = pytest.mark.slow

# rows.jsonl lines that parse as JSON but are not rows, and what the error line says.
BAD_LINES = [
    ("null", "row: 'NoneType' in"),
    ('{"foo": 1}', "collective: None is missing in"),
    ('{"collective": "all_reduce", "size_bytes": "big"}', "size_bytes: 'big' in"),
    ('{"collective": "all_reduce", "size_bytes": -8}', "size_bytes: -8 in"),
    ('{"collective": "no_such", "size_bytes": 8}', "collective: 'no_such' in"),
    ('{"collective": "all_reduce", "size_bytes": 8, "time_us": "fast"}', "time_us: 'fast' in"),
    ('{"collective": "all_reduce", "size_bytes": 8, "knobs": [1]}', "knobs: [1] in"),
    ('{"collective": "all_reduce", "size_bytes": 8, "dtype": 5}', "dtype: 5 in"),
    ("garbled{", "row: 'garbled{' in"),  # a middle line, not a truncated tail
]


def _damaged_run(tmp_path, line, name="run"):
    run = write_run(tmp_path / name, [make_row(size_bytes=8)], {"run_id": name})
    with open(run / "rows.jsonl", "a") as rows:
        rows.write(line + "\n")
    with open(run / "rows.jsonl", "a") as rows:  # a good row after it: the bad one is mid-file
        rows.write(json.dumps(make_row(size_bytes=16).to_dict()) + "\n")
    return run


def _assert_one_line(result, needle):
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert needle in lines[0], lines[0]


def _commands(run, other):
    return {
        "fit": ["fit", str(run)],
        "report": ["report", str(run), "--out", str(run.parent / "r.md")],
        "compare": ["compare", str(other), str(run)],
        "mfu": [
            "mfu",
            "-T",
            "cpu-local",
            "-m",
            "llama3-8b",
            "--global-batch",
            "8",
            "--curves",
            str(run),
        ],
        "status": ["status", str(run)],
    }


@pytest.mark.parametrize("line, needle", BAD_LINES[:3])
def test_a_line_that_is_not_a_row_is_named_by_fit(tmp_path, line, needle):
    run = _damaged_run(tmp_path, line)
    result = collbench("fit", str(run))
    _assert_one_line(result, needle)
    assert f"{run / 'rows.jsonl'} line 2" in result.stderr


@CASE_PER_PROCESS
@pytest.mark.parametrize(
    "line, needle, command",
    [(line, needle, "fit") for line, needle in BAD_LINES[3:]]
    + [(line, needle, c) for line, needle in BAD_LINES[:3] for c in ("report", "compare", "mfu")],
)
def test_every_reader_refuses_a_line_that_is_not_a_row(tmp_path, line, needle, command):
    run = _damaged_run(tmp_path, line)
    other = write_run(tmp_path / "other", [make_row(size_bytes=8)], {"run_id": "other"})
    result = collbench(*_commands(run, other)[command])
    _assert_one_line(result, needle)
    assert f"{run / 'rows.jsonl'} line 2" in result.stderr


@pytest.mark.parametrize("text", ["junk{", "[1, 2]"])
def test_report_and_export_refuse_a_meta_json_that_is_not_an_object(tmp_path, text):
    run = write_run(tmp_path / "run", [make_row(size_bytes=8)])
    (run / "meta.json").write_text(text)
    for command in (["report", "--out"], ["export", "--csv"]):
        result = collbench(command[0], str(run), *command[1:], str(tmp_path / "out"))
        _assert_one_line(result, f"RUN: '{run}' has a damaged meta.json: not a JSON object")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["run"]


def test_a_meta_json_number_python_cannot_read_is_named_not_called_damaged(tmp_path):
    run = write_run(tmp_path / "run", [make_row(size_bytes=8)])
    (run / "meta.json").write_text('{"run_id": "run", "world_size": ' + "9" * 5000 + "}")
    for command in (["report", "--out", str(tmp_path / "out")], ["fit"], ["status"]):
        _assert_one_line(
            collbench(command[0], str(run), *command[1:]),
            f"meta.json: '{run / 'meta.json'}' is JSON with a number too long to read (over "
            "Python's 4,300 digits)",
        )


def _job_run(tmp_path, rows=0, launcher="local"):
    from collbench.core.spec import SweepSpec
    from collbench.store.job import Job

    run = write_run(tmp_path / "run", [make_row(size_bytes=8 << i) for i in range(rows)])
    Job(SweepSpec().with_backend("gloo"), run, "run-1", launcher, 2).save()
    return run


@pytest.mark.parametrize("text", ["{not json", "[]", '{"spec": {}}'])
def test_status_and_wait_refuse_a_corrupt_job_json(tmp_path, text):
    run = _job_run(tmp_path)
    (run / "job.json").write_text(text)
    for command in ("status", "wait"):
        _assert_one_line(collbench(command, str(run)), f"job.json: '{run / 'job.json'}' is corrupt")


@pytest.mark.parametrize("text", ['{"partition": "x"}', "{bad", '{"job_id": null}'])
def test_status_and_wait_refuse_a_slurm_record_without_a_job_id(tmp_path, text):
    run = _job_run(tmp_path, launcher="slurm")
    (run / "slurm.json").write_text(text)
    for command in ("status", "wait"):
        _assert_one_line(collbench(command, str(run)), f"slurm.json: '{run / 'slurm.json'}'")


def test_status_is_honest_about_an_unreadable_meta_json(tmp_path):
    run = _job_run(tmp_path, rows=30)
    (run / "meta.json").write_text('{"state": "runn')
    result = collbench("status", str(run))
    assert result.returncode == 0 and not result.stderr, result.stderr
    assert result.stdout.splitlines()[-1] == "meta.json unreadable; 30 row(s) on disk"


@pytest.fixture
def read_only_dir(tmp_path):
    """An empty directory this process cannot write to (a read-only tmpfs when root)."""
    import os
    import subprocess

    path = tmp_path / "ro"
    path.mkdir()
    if os.geteuid() != 0:
        path.chmod(0o555)
        yield path
        path.chmod(0o755)
        return
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(path)])
    if mounted.returncode != 0:
        pytest.skip("cannot mount a read-only tmpfs here")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)])


@pytest.mark.parametrize("inside", [False, True])
def test_an_unwritable_sweep_out_is_refused_up_front(read_only_dir, inside):
    out = read_only_dir / "run" if inside else read_only_dir
    result = collbench("sweep", "-c", "all_reduce", "-e", "64", "--out", str(out))
    _assert_one_line(result, f"--out: '{out}' cannot be created or written: Read-only")
