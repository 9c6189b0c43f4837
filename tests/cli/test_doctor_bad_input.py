"""collbench doctor: bad input is one line and exit 2, before any rank starts."""

import pytest

from tests.helpers import collbench
from tests.rows import make_row, write_run


def _refused(*args: str) -> str:
    result = collbench("doctor", *args)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def test_two_expectations_conflict(tmp_path):
    line = _refused("--expect-busbw", "10", "--baseline", str(tmp_path))
    assert "--expect-busbw" in line and "--baseline" in line


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--size", "12Q"], "--size"),
        (["--size", "0"], "--size"),
        (["--shuffle-rounds", "-1"], "--shuffle-rounds"),
        (["--repeats", "0"], "--repeats"),
        (["--expect-busbw", "0"], "--expect-busbw"),
        (["--tolerance", "100"], "--tolerance"),
        (["--topology", "no-such-fabric"], "no-such-fabric"),
        (["--dtype", "float128"], "--dtype"),
    ],
)
def test_bad_values_are_named(args, named):
    assert named in _refused(*args)


def test_a_baseline_that_is_no_run(tmp_path):
    assert "--baseline" in _refused("--baseline", str(tmp_path / "nowhere"))


def test_a_baseline_without_doctor_rows(tmp_path):
    run = write_run(tmp_path / "sweep", [make_row(world_size=2)], {"backend": "gloo"})
    assert "no doctor rows" in _refused("--baseline", str(run))
