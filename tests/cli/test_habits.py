"""nccl-tests habits: a hint for a reflex flag, -h and --version everywhere, a `sweep --help`
whose common path fits one screen with nothing cut mid-word, and a warning for a --knob the
backend does not read."""

from __future__ import annotations

import re

import pytest
import typer
import typer.testing

from collbench import __version__
from collbench.cli.app import app
from collbench.cli.measure import SWEEP_OPTIONS
from collbench.core.knobs import knob_mismatch
from tests.helpers import collbench

HINT = "collbench: hint: "


@pytest.mark.parametrize(
    "args, hint",
    [
        (["-c", "1"], "nccl-tests' -c (check) is --check / --no-check"),
        (["-c1"], "nccl-tests' -c (check) is --check / --no-check"),
        (["-t", "1"], "-t is the Slurm --time limit here, not nccl-tests' threads"),
        (["-g", "1", "--launcher", "none"], "-g is --nproc here, the total number of ranks"),
        (["-g", "8", "--launcher", "slurm"], "-g is --nproc here, the total number of ranks"),
        (["-a", "1"], "nccl-tests' -a 0/1/2/3 is --rank-stat rank0/avg/min/max"),
        (["-z", "1"], "nccl-tests' -z (blocking) has no collbench option"),
        (["-N", "5"], "nccl-tests' -N (run cycles) is --repeats"),
        (["-I", "1"], "nccl-tests' -I (per-iteration timing) is always on here"),
        (["-R", "1"], "nccl-tests' -R (buffer registration) has no collbench option"),
        (["-G", "10"], "nccl-tests' -G N (CUDA graph launches) is --cuda-graph here"),
    ],
)
def test_an_nccl_tests_reflex_gets_a_hint_under_the_usual_error(args, hint):
    done = collbench("sweep", *args, "-e", "64", "--print")
    assert done.returncode == 2
    error, second = done.stderr.splitlines()
    assert error.startswith("collbench: error: ")
    assert second.startswith(HINT) and hint in second


@pytest.mark.parametrize(
    ("args", "now"), [(["--knob", "NCCL_ALGO=Ring"], "tune run"), (["--from", "a"], "tune from")]
)
def test_the_tune_syntax_of_before_the_subcommands_is_pointed_to_them(args, now):
    done = collbench("tune", *args)
    assert done.returncode == 2
    error, second = done.stderr.splitlines()
    assert error.startswith("collbench: error: No such option")
    assert second.startswith(HINT) and f"`{now} " in second


def test_no_hint_where_the_flag_is_collbench_s_own():
    # -T on mfu is its topology too, and mfu has no nccl-tests twin: no hint there.
    from collbench.cli.app import nccl_tests_hint

    assert nccl_tests_hint(["mfu", "-T", "8"], "--topology") is None
    assert nccl_tests_hint(["sweep", "-T", "8"], "--topology")
    assert nccl_tests_hint(["sweep", "-c", "all_reduce,allreduce"], "--collective") is None


def test_no_hint_when_the_long_option_was_meant():
    done = collbench("sweep", "--time", "1", "-e", "64", "--print")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "collbench: error: --time: '1' does not apply to --launcher local"
    ]


def test_version():
    done = collbench("--version")
    assert (done.returncode, done.stdout, done.stderr) == (0, f"collbench {__version__}\n", "")


def _command_paths(group, prefix: tuple[str, ...] = ()):
    """Every command's path under a click group (typer may ship its own click: duck-typed)."""
    for name, command in group.commands.items():
        yield (*prefix, name)
        if hasattr(command, "commands"):
            yield from _command_paths(command, (*prefix, name))


@pytest.mark.slow
def test_dash_h_is_help_for_the_root_and_every_command():
    paths = [(), *_command_paths(typer.main.get_command(app))]
    assert ("sweep",) in paths and ("export",) in paths and ("topo", "list") in paths
    runner = typer.testing.CliRunner()
    for path in paths:
        short = runner.invoke(app, [*path, "-h"], env={"COLUMNS": "120"})
        assert short.exit_code == 0, (path, short.output)
        assert short.output == runner.invoke(app, [*path, "--help"], env={"COLUMNS": "120"}).output


def _help(*args: str, columns: int, flag: str = "--help") -> str:
    done = collbench(*args, flag, env={"COLUMNS": str(columns), "TERM": "dumb", "NO_COLOR": "1"})
    assert done.returncode == 0, done.stderr
    return done.stdout


def _titles(lines: list[str]) -> list[str]:
    return [line.split("─ ")[1].split(" ─")[0] for line in lines if line.startswith("╭─ ")]


@pytest.mark.parametrize("columns", [80, 120])
def test_sweep_help_fits_the_common_path_on_one_screen_and_cuts_no_word(columns):
    lines = _help("sweep", columns=columns).splitlines()
    # -h: Options, then Output (the common path) on one screen; it names the rarer panels.
    assert _titles(lines) == ["Options", "Output"]
    assert len(lines) <= 60, f"sweep -h takes {len(lines)} lines at {columns} columns"
    for flag in ("--collective", "--min-bytes", "--max-bytes", "--nproc", "--out", "--csv"):
        assert any(flag in line for line in lines), flag
    more = " ".join(" ".join(lines).split())
    assert "More options (Measurement, Launch, torchrun, Slurm, MPI, Overlap probes, Config" in more
    assert "collbench sweep --help-all" in more
    # --help-all: every panel, the common path first. Nothing is cut: no ellipsis, and every
    # word of every help text (defaults included) appears whole (rich wraps between words,
    # never inside one, when there is room).
    text = _help("sweep", columns=columns, flag="--help-all")
    titles = _titles(text.splitlines())
    assert titles[:3] == ["Options", "Output", "Measurement"] and "Slurm" in titles
    assert "…" not in text and "More options" not in text
    words = set(re.sub(r"[│╭╮╰╯─]", " ", text).split())
    for option in SWEEP_OPTIONS:
        for word in option.help_text.split():
            assert word in words, (option.flag, word, columns)


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize(
    "path",
    [
        (),
        ("overlap",),
        ("export",),
        ("wait",),
        ("status",),
        ("finalize",),
        ("fit",),
        ("compare",),
        ("report",),
        ("mfu",),
        ("tune",),
        ("tune", "run"),
        ("tune", "from"),
        ("tune", "verify"),
        ("import", "nccl-tests"),
        ("topo", "show"),
        ("topo", "validate"),
        ("topo", "detect"),
    ],
)
def test_every_command_help_cuts_no_word(columns, path):
    runner = typer.testing.CliRunner()
    output = runner.invoke(app, [*path, "--help"], env={"COLUMNS": str(columns)}).output
    assert "Usage:" in output and "…" not in output


@pytest.mark.parametrize(
    "name, backend, applies",
    [
        ("NCCL_MAX_NCHANNELS", "gloo", False),
        ("NCCL_MAX_NCHANNELS", "nccl", True),
        ("NCCL_MAX_NCHANNELS", "rccl", True),  # RCCL reads NCCL_* too
        ("RCCL_MSCCL_ENABLE", "nccl", False),  # an NVIDIA build
        ("HSA_FORCE_FINE_GRAIN_PCIE", "nccl", False),
        ("FI_PROVIDER", "gloo", False),
        ("GLOO_SOCKET_IFNAME", "gloo", True),
        ("TORCH_NCCL_BLOCKING_WAIT", "gloo", True),  # TORCH_* may apply anywhere
        ("OMP_NUM_THREADS", "gloo", True),
        ("NCCL_ALGO", "auto", True),  # not known yet: no verdict
    ],
)
def test_knob_mismatch(name, backend, applies):
    why = knob_mismatch(name, backend)
    assert (why is None) == applies
    if why:
        assert name in why and backend in why


def test_a_knob_the_given_backend_does_not_read_is_warned_by_name():
    done = collbench(
        "sweep", "--backend", "gloo", "-e", "64", "--print",
        "--knob", "NCCL_MAX_NCHANNELS=4", "--knob", "GLOO_SOCKET_IFNAME=lo",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        "collbench: warning: --knob NCCL_MAX_NCHANNELS does not apply to --backend gloo "
        "(NCCL_MAX_NCHANNELS is read by nccl/rccl, not by gloo); set and recorded anyway"
    ]
