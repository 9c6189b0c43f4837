"""`collbench report --label/--title/--topology` through the real command line."""

import pytest

from tests.cli.test_analysis_cli import write_run
from tests.helpers import collbench

SIZES = {2**k: 20.0 + 2**k / 5e3 for k in range(3, 22)}


@pytest.mark.slow  # one report with a comparison and a model curve, ~6 s
def test_labels_title_and_topology_reach_the_report(tmp_path):
    base = write_run(tmp_path / "run-0001", SIZES)
    tuned = write_run(tmp_path / "run-0002", {size: 0.8 * t for size, t in SIZES.items()})
    out = tmp_path / "r.html"
    done = collbench(
        "report",
        str(base),
        str(tuned),
        "--label",
        f"{base}=stock",
        "--label",
        "run-0002=tuned",
        "--title",
        "Tuning, week 3",
        "--topology",
        "cpu-local",
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"# Report: {out} (3 charts)"  # busbw, latency, compare
    text = out.read_text()
    assert "<h1>Tuning, week 3</h1>" in text
    assert "<h2>Compare: tuned against stock (the baseline)</h2>" in text
    assert "<h3>stock</h3>" in text and "<h3>tuned</h3>" in text
    assert "topology cpu-local (catalog)" in text


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--label", "missing=x"], "--label: 'missing=x' names no run given (the runs are "),
        (["--label", "a"], "--label: 'a' needs RUN=NAME"),
        (["--label", "a="], "--label: 'a=' needs RUN=NAME"),
        (["--label", "a=x", "--label", "a=y"], "--label: 'a=y' labels "),
        (["--label", "a=x", "--label", "b=x"], "--label: 'b=x' gives a name another run has"),
        (["--title", " "], "--title: ' ' is empty"),
        (["--topology", "no-such-fabric"], "--topology: 'no-such-fabric' is neither a file"),
    ],
)
def test_bad_label_title_or_topology_is_one_line_and_exit_2(tmp_path, args, needle):
    run = write_run(tmp_path / "a", {8: 1.0, 16: 2.0})
    other = write_run(tmp_path / "b", {8: 1.0, 16: 2.0})
    done = collbench("report", str(run), str(other), *args, "--out", str(tmp_path / "r.html"))
    assert done.returncode == 2, (done.stdout, done.stderr)
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("collbench: error: ") and needle in line, line
    assert not (tmp_path / "r.html").exists()
