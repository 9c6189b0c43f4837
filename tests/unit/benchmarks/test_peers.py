"""benchmarks/peers.py: its pure helpers, and one short real run with two gloo ranks (slow)."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "peers.py"


def _load():
    spec = importlib.util.spec_from_file_location("benchmarks_peers", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


peers = _load()


def test_param_p50_over_two_ranks_is_their_mean():
    # PARAM's p50 is over ranks, not iterations: with 2 ranks it cannot differ from the mean.
    assert peers.combine([3.0, 5.0], "p50") == peers.combine([3.0, 5.0], "avg") == 4.0


@pytest.mark.parametrize(
    ("values", "how", "expected"),
    [([1.0, 2.0, 9.0], "p50", 2.0), ([1.0, 2.0, 9.0], "avg", 4.0), ([7.0], "p50", 7.0)],
)
def test_combine(values, how, expected):
    assert peers.combine(values, how) == expected


def test_combine_refuses_unknown_statistic_and_empty_input():
    with pytest.raises(ValueError, match="unknown rank statistic"):
        peers.combine([1.0], "max")
    with pytest.raises(ValueError, match="no values"):
        peers.combine([], "avg")


def test_ratio_summary_is_median_and_quartiles_of_per_round_ratios():
    values = [1.0, 2.0, 3.0, 4.0, 5.0]
    reference = [1.0, 1.0, 1.0, 1.0, 1.0]
    assert peers.ratio_summary(values, reference) == (3.0, 2.0, 4.0)
    # per-round, not ratio of medians: a slow round slows both and cancels
    assert peers.ratio_summary([2.0, 20.0], [4.0, 40.0]) == (0.5, 0.5, 0.5)
    assert peers.ratio_summary([3.0], [2.0]) == (1.5, 1.5, 1.5)


def test_rotated_puts_every_method_in_every_slot():
    items = ["a", "b", "c"]
    firsts = {peers.rotated(items, index)[0] for index in range(len(items))}
    assert firsts == set(items)
    assert sorted(peers.rotated(items, 4)) == items


def test_every_row_and_factor_names_a_row_a_method_produces():
    labels = {label for label, _ in peers.ROWS}
    assert peers.REFERENCE in labels
    for _, numerator, denominator in peers.FACTORS:
        assert {numerator, denominator} <= labels
    for name in peers.METHODS:  # a method's rows carry its name
        assert any(label == name or label.startswith(f"{name}-") for label in labels), name


def test_methods_option_runs_the_reference_first_and_refuses_unknown_names(capsys):
    args = peers.parse_args(["--methods", "osu,collbench,osu"])
    assert args.methods == ["collbench", "osu"]
    with pytest.raises(SystemExit) as exit_info:
        peers.parse_args(["--methods", "osu,nope"])
    assert exit_info.value.code == 2
    assert "unknown nope" in capsys.readouterr().err


@pytest.mark.slow
def test_script_runs_with_two_gloo_ranks():
    env = {**os.environ, "PYTHONPATH": str(SCRIPT.parents[1])}
    argv = ["--sizes", "1K", "--rounds", "2", "--warmup", "1", "--iters", "2"]
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    for label, _ in peers.ROWS:
        assert f"\n{label} " in done.stdout
    assert "param-z0 / nccl-tests" in done.stdout
