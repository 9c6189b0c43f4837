"""Fixtures shared by the CLI tests."""

from __future__ import annotations

import subprocess

import pytest

from collbench.cli import main


@pytest.fixture
def collbench(capsys):
    """`collbench ARGS` in this process (fast: no interpreter start), as a CompletedProcess.
    Tests that need a real process import tests.helpers.collbench instead."""

    def run(*args: str) -> subprocess.CompletedProcess:
        with pytest.raises(SystemExit) as done:
            main(list(args))
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(["collbench", *args], done.value.code, out, err)

    return run
