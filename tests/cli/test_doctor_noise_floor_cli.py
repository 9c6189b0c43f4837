"""collbench doctor --noise-floor: a file that is not a floor is one line and exit 2, before
any rank starts."""

import pytest

from tests.helpers import collbench


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (None, "cannot be read"),
        ("{not json", "is not JSON"),
        ('{"runs": 3}', "is not a noise-floor file"),
        ('{"pct_by_band": {"large": -1}}', "must be >= 0"),
        ('{"pct_by_band": {}}', "holds no floor of a known band"),
    ],
)
def test_a_bad_noise_floor_is_one_line_and_exit_2(tmp_path, text, says):
    path = tmp_path / "floor.json"
    if text is not None:
        path.write_text(text)
    result = collbench("doctor", "-g", "2", "--expect-busbw", "1", "--noise-floor", str(path))
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert "--noise-floor" in lines[0] and str(path) in lines[0] and says in lines[0]
