"""`--config FILE` and `--print-config` (cli/config.py): for each command that takes them, a
command line, the file `--print-config` writes for it, and that file given back with
`--config` parse to the same values; flags given beside the file override it; a bad file is
one line and exit 2."""

from __future__ import annotations

import pytest
import typer

from collbench.cli.app import app
from tests.helpers import collbench

ROOT = typer.main.get_command(app)
# A command line of each command with a config file, touching every kind of option: lists
# (repeatable), flags both ways, sizes, durations, paths, launcher settings and arguments.
LINES = {
    ("sweep",): [
        "-c", "all_reduce,all_gather", "-b", "1K", "-e", "1M", "--no-check", "--nproc", "2",
        "--knob", "NCCL_ALGO=Ring", "--knob", "NCCL_PROTO=LL", "--launcher", "slurm",
        "--partition", "gpu", "--slurm-arg", "mem=0", "--exclusive", "-t", "10", "--out", "r",
    ],
    ("doctor",): [
        "--size", "64M", "--bisect", "--repeats", "3", "--launcher", "torchrun", "--nnodes",
        "2", "--master-addr", "n0", "--tolerance", "0.2", "--json",
    ],
    ("mfu",): [
        "-T", "dgx-h100", "-T", "dgx-a100", "--model", "llama3-8b", "--global-batch", "512",
        "--tp", "8", "--pp", "2", "--no-dp-overlap", "--price", "dgx-h100=2.5", "--explain",
    ],
    ("tune", "run"): [
        "--knob", "NCCL_ALGO=Ring,Tree", "--repeats", "5", "--search", "halving", "--budget",
        "10m", "--no-choices", "--ranges", "bands", "-c", "all_reduce", "--launcher", "mpi",
        "--mpi-arg", "--bind-to none", "--out", "t",
    ],
    ("tune", "from"): ["r1", "r2", "--out", "t", "--channels", "4", "--nccl-log", "a.log"],
    ("tune", "verify"): ["d", "--repeats", "2", "--out", "v", "-n", "5", "--launcher", "local"],
}  # fmt: skip


# An option each line gives, and its parameter: given again beside the file, it wins.
OVERRIDE = {
    ("sweep",): ("--nproc", "nproc"),
    ("doctor",): ("--repeats", "repeats"),
    ("mfu",): ("--tp", "tp"),
    ("tune", "run"): ("--repeats", "repeats"),
    ("tune", "from"): ("--channels", "channels"),
    ("tune", "verify"): ("--repeats", "repeats"),
}


def _command(path):
    command = ROOT
    for name in path:
        command = command.commands[name]
    return command


def _parsed(path, args):
    """The values click parses from `args` (what the command would run with)."""
    context = _command(path).make_context(" ".join(path), list(args))
    return {name: value for name, value in context.params.items() if "config" not in name}


@pytest.mark.parametrize("path", LINES, ids=" ".join)
def test_a_command_line_and_its_printed_config_parse_alike(path, tmp_path):
    args = LINES[path]
    done = collbench(*path, *args, "--print-config")
    assert done.returncode == 0, done.stderr
    config = tmp_path / "config.yaml"
    config.write_text(done.stdout)
    given = _parsed(path, args)
    assert _parsed(path, ["--config", str(config)]) == given
    # and the file a config file amounts to is that file
    assert collbench(*path, "--config", str(config), "--print-config").stdout == done.stdout
    # a flag beside the file overrides it
    flag, name = OVERRIDE[path]
    assert _parsed(path, ["--config", str(config), flag, "7"]) == {**given, name: 7}


def test_keys_are_the_long_option_names_in_kebab_case(tmp_path):
    config = tmp_path / "sweep.yaml"
    config.write_text("min-bytes: 1K\nslurm-arg: [mem=0]\nexclusive: true\nknob: [A=1]\n")
    values = _parsed(("sweep",), ["--config", str(config)])
    assert values["min_bytes"] == "1K" and values["slurm_args"] == ["mem=0"]
    assert values["exclusive"] is True and values["knob"] == ["A=1"]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("min_bytes: 1K\n", "has no option 'min_bytes'"),
        ("bogus: 1\n", "has no option 'bogus'"),
        ("iters: [1, 2]\n", "is not one value"),
        ("knob: A=1\n", "is not a list"),
        ("exclusive: 1\n", "is not true or false"),
        ("iters: many\n", "Invalid value for '--iters'"),
        ("- iters\n", "must map option names to values"),
        ("iters: [\n", "cannot be read as YAML"),
    ],
)
def test_a_bad_config_file_is_one_line_and_exit_2(tmp_path, text, words):
    config = tmp_path / "bad.yaml"
    config.write_text(text)
    done = collbench("sweep", "--config", str(config))
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and words in done.stderr, done.stderr


def test_a_number_given_to_a_text_option_is_written_as_a_number():
    # --pp takes a stage count or a layout: the file says `pp: 2`, not `pp: '2'`
    done = collbench("mfu", *LINES[("mfu",)], "--print-config")
    assert "\npp: 2\n" in done.stdout, done.stdout


@pytest.mark.parametrize(
    ("line", "words"),
    [
        (["sweep", "-b", "12Q"], "--min-bytes: '12Q' is not a size"),
        (["sweep", "-c", "nope"], "--collective: 'nope' is unknown"),
        (["doctor", "--size", "12Q"], "--size: '12Q' is not a size"),
        (["tune", "run", "--knob", "NCCL_ALGO=Ring", "--repeats", "0"], "--repeats: 0 must be"),
        (["tune", "run", "--knob", "NCCL_ALGO"], "--knob: 'NCCL_ALGO' is not NAME=V1,V2"),
        (["tune", "verify", "d", "--launcher", "none"], "--launcher: 'none' does not apply"),
        (
            ["mfu", "-T", "dgx-h100", "-m", "llama3-8b", "--global-batch", "8", "--tp", "0"],
            "--tp: 0",
        ),
    ],
)
def test_print_config_refuses_what_the_command_would(line, words):
    done = collbench(*line, "--print-config")
    assert done.returncode == 2 and not done.stdout, done.stdout
    assert done.stderr.count("\n") == 1 and words in done.stderr, done.stderr


def test_a_partial_config_prints():
    # no --global-batch: the command line that reads the file gives it (and the rest)
    done = collbench("mfu", "-T", "dgx-h100", "--tp", "3", "--print-config")
    assert done.returncode == 0 and done.stdout == "topology:\n- dgx-h100\ntp: 3\n", done.stderr
    # tune run without --knob and --out: checked as far as it goes
    done = collbench("tune", "run", "-b", "1K", "--repeats", "3", "--print-config")
    assert done.returncode == 0 and done.stdout == "repeats: 3\nmin-bytes: 1K\n", done.stderr
