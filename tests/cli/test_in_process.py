"""The in-process runner (tests.helpers.collbench) answers as the real `python -m collbench`
does, and gives back what it borrowed from the test process."""

from __future__ import annotations

import os
import sys
import warnings

import pytest

from tests.helpers import _fresh_process_state, collbench, collbench_process

# A usage error with its nccl-tests hint, a SpecError, and a clean exit: each path of main().
SAME_AS_A_PROCESS = (
    ("sweep", "-c", "1", "--print"),
    ("topo", "show", "no-such-fabric"),
    ("--version",),
)


@pytest.mark.slow
@pytest.mark.parametrize("args", SAME_AS_A_PROCESS, ids=" ".join)
def test_in_process_gives_what_the_real_process_gives(args):
    here, real = collbench(*args), collbench_process(*args)
    assert (here.returncode, here.stdout, here.stderr) == (
        real.returncode,
        real.stdout,
        real.stderr,
    )


def test_environment_argv_and_directory_are_given_back(tmp_path):
    before = (dict(os.environ), list(sys.argv), os.getcwd())
    done = collbench(
        "sweep", "--knob", "NCCL_ALGO=Ring", "-e", "64", "--print", "--out", str(tmp_path / "r"),
        env={"COLLBENCH_TEST_MARK": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (dict(os.environ), list(sys.argv), os.getcwd()) == before


def test_output_of_child_processes_and_warnings_is_captured():
    with _fresh_process_state((), None) as (out, err):
        os.system("echo from-a-child; echo child-err >&2")  # noqa: S605, S607
        print("from-python")
        warnings.warn("a fresh interpreter shows this", RuntimeWarning, stacklevel=1)
    assert out.text.split() == ["from-a-child", "from-python"]
    assert "child-err" in err.text and "RuntimeWarning: a fresh interpreter shows" in err.text


def test_what_only_a_process_can_do_is_refused():
    with pytest.raises(ValueError, match="use collbench_process"):
        collbench("--version", env={"PYTHONWARNINGS": "error"})
    with _fresh_process_state((), None), pytest.raises(AssertionError, match="collbench_process"):
        os._exit(3)
