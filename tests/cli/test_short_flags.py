"""A short flag means one thing across commands: walking every command's options, a letter
that stands for two long names fails here (nccl-tests' letters win in the measuring
commands: -o is --op, so the file and directory options elsewhere are --out only), unless
the table below names it with the reason nccl-tests forces it. `import` takes -q too."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer

from collbench.cli.app import HABITS, app
from tests.helpers import collbench

# Short flags allowed two long names, each with the nccl-tests reason. None today.
FORCED_BY_NCCL_TESTS: dict[str, str] = {}
# The table the project keeps (docs/sweep.md, "Short flags"): nccl-tests' letters first.
TABLE = {
    "-b": "--min-bytes",
    "-e": "--max-bytes",
    "-f": "--factor",
    "-i": "--step-bytes",
    "-c": "--collective",
    "-d": "--dtype",
    "-o": "--op",
    "-a": "--rank-stat",
    "-n": "--iters",
    "-w": "--warmup",
    "-g": "--nproc",
    "-J": "--nccl-json",
    "-T": "--topology",
    "-N": "--nodes",
    "-p": "--partition",
    "-A": "--account",
    "-t": "--time",
    "-C": "--constraint",
    "-m": "--model",
    "-s": "--size",
    "-q": "--quiet",
    "-h": "--help",
}
LOG = (
    Path(__file__).resolve().parents[1] / "fixtures" / "nccl-tests" / "current_all_gather_2node.log"
)


def _commands(group, prefix: tuple[str, ...] = ()):
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            yield from _commands(command, (*prefix, name))
        else:
            yield (*prefix, name), command


def _short_flags() -> dict[str, dict[str, list[str]]]:
    """short flag -> {long name: [commands that give it that meaning]}."""
    root = typer.main.get_command(app)
    ctx = root.make_context("collbench", [], resilient_parsing=True)
    meanings: dict[str, dict[str, list[str]]] = {}
    for path, command in _commands(root):
        for param in command.get_params(ctx):
            if param.param_type_name != "option":
                continue
            names = [*param.opts, *getattr(param, "secondary_opts", [])]
            longs = [name for name in names if name.startswith("--")]
            for short in (name for name in names if not name.startswith("--")):
                long = longs[0] if longs else short
                meanings.setdefault(short, {}).setdefault(long, []).append(" ".join(path))
    return meanings


def test_a_short_flag_has_one_long_name_across_commands():
    clashes = {
        short: longs
        for short, longs in _short_flags().items()
        if len(longs) > 1 and short not in FORCED_BY_NCCL_TESTS
    }
    assert clashes == {}, "; ".join(
        f"{short}: " + ", ".join(f"{long} in {'/'.join(paths)}" for long, paths in longs.items())
        for short, longs in clashes.items()
    )


def test_the_table_is_every_short_flag_and_what_it_means():
    meanings = {short: next(iter(longs)) for short, longs in _short_flags().items()}
    assert meanings == TABLE


def test_nccl_tests_letters_keep_their_meaning_where_collbench_measures():
    assert TABLE["-o"] == "--op" and TABLE["-d"] == "--dtype" and TABLE["-c"] == "--collective"
    assert TABLE["-b"] == "--min-bytes" and TABLE["-e"] == "--max-bytes"
    # A habit names a letter's collbench meaning: the table's, or none at all.
    for habit in HABITS:
        assert habit.field is None or TABLE.get(habit.flag) == habit.field, habit.flag


@pytest.mark.parametrize("command", [["gemm", "--shape", "8x8x8"], ["report", "x"]])
def test_o_is_no_longer_an_output(command, tmp_path):
    done = collbench(*command, "-o", str(tmp_path / "out"))
    assert done.returncode == 2 and "-o" in done.stderr
    assert done.stderr.splitlines()[1] == (
        "collbench: hint: -o is --op in collbench (nccl-tests' letter); the output is --out"
    )
    assert not (tmp_path / "out").exists()


def test_import_quiet_prints_nothing_but_warnings_and_errors(tmp_path):
    loud = collbench("import", "nccl-tests", str(LOG), "--out", str(tmp_path / "b"))
    assert loud.returncode == 0 and loud.stdout
    done = collbench("import", "nccl-tests", str(LOG), "--out", str(tmp_path / "a"), "-q")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", loud.stderr)
    assert all(line.startswith("collbench: warning: ") for line in done.stderr.splitlines())
    assert (tmp_path / "a" / "rows.jsonl").is_file()
    json_quiet = collbench(
        "import", "nccl-tests", str(LOG), "--out", str(tmp_path / "c"), "-q", "--json"
    )
    assert json_quiet.returncode == 0 and json_quiet.stdout == ""
    done = collbench("import", "nccl-tests", str(LOG), "--out", str(tmp_path / "a"), "--quiet")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("collbench: error: --out: ")
