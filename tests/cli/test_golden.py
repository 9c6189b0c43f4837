"""The CLI's output for a fixed script matches the golden files (see tests/cli/golden_cli.py)."""

import difflib

import pytest

from tests.cli.golden_cli import CASES, GOLDEN_DIR, run_all


@pytest.fixture(scope="module")
def outputs():
    return run_all()


# In this process (~3 s cold, 0.5 s warm); COLLBENCH_TESTS_IN_PROCESS=0 runs real processes.
@pytest.mark.parametrize("name", [name for name, _ in CASES])
def test_output_matches_golden(outputs, name):
    golden = GOLDEN_DIR / f"{name}.txt"
    assert golden.is_file(), f"{golden} is missing: python -m tests.cli.golden_cli --regold"
    expected = golden.read_text(encoding="utf-8")
    diff = "".join(
        difflib.unified_diff(
            expected.splitlines(True), outputs[name].splitlines(True), "golden", "now"
        )
    )
    assert not diff, f"{name} changed:\n{diff}"


def test_every_golden_file_belongs_to_a_case():
    names = {name for name, _ in CASES}
    assert {path.stem for path in GOLDEN_DIR.glob("*.txt")} == names
