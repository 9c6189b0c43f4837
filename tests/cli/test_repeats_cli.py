"""`--repeats R` on sweep and overlap: refused in one line when out of range, carried into the
argv every rank receives, listed in the help with its default."""

import pytest

from tests.helpers import collbench


@pytest.mark.parametrize("command", ["sweep", "overlap"])
@pytest.mark.parametrize("value", ["0", "1001"])
def test_repeats_out_of_range_is_one_line_and_exit_2(tmp_path, command, value):
    done = collbench(command, "--repeats", value, "--print", "--out", str(tmp_path / "run"))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"collbench: error: --repeats: {value} must be from 1 to 1,000"
    ]


@pytest.mark.parametrize("command", ["sweep", "overlap"])
def test_every_rank_is_given_the_repeats(tmp_path, command):
    done = collbench(
        command, "-g", "2", "-b", "1K", "-e", "4K", "--repeats", "3", "--print",
        "--out", str(tmp_path / "run"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    ranks = [line for line in done.stdout.splitlines() if "-m collbench" in line]
    assert len(ranks) == 2 and all(" --repeats 3 " in line for line in ranks)


def test_help_says_the_default_repeats():
    done = collbench("sweep", "--help-all")  # Measurement: a panel -h folds
    text = " ".join(done.stdout.replace("│", " ").split())
    assert "--repeats" in text and "every row records its repeat" in text
    assert "(default: 3)" in text.split("--repeats", 1)[1].split("--", 1)[0]
