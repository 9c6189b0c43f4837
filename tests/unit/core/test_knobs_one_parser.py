"""One `--knob` parser (core/knobs.py) for every command that takes knobs: a typo, a bad
value of a known knob and a repeated knob get the same one-line refusal (exit 2) from sweep,
overlap, doctor, import and tune (issue 25)."""

from pathlib import Path

import pytest

from collbench.core.errors import SpecError
from collbench.core.knobs import knob_args, parse_knob_settings
from tests.helpers import collbench

LOG = (
    Path(__file__).resolve().parents[2] / "fixtures" / "nccl-tests" / "current_all_gather_2node.log"
)
COMMANDS = {
    "sweep": ["sweep", "--print"],
    "overlap": ["overlap", "--print"],
    "doctor": ["doctor", "--print"],
    "import": ["import", "nccl-tests", str(LOG)],
    "tune": ["tune", "run", "--out", "/nonexistent/tune"],  # refused before anything starts
}
REFUSED = {
    "a typo of a known name": (["NCCL_ALG=Ring"], "did you mean NCCL_ALGO?"),
    "lower case": (["nccl_algo=Ring"], "did you mean NCCL_ALGO?"),
    "no knob at all": (["HOME=/tmp"], "does not name a communication knob"),
    "a bad value of a known knob": (["NCCL_ALGO=Rnig"], "value 'Rnig' names no"),
    "a bad number": (["NCCL_MIN_NCHANNELS=many"], "is not a whole number"),
}


@pytest.mark.parametrize("case", REFUSED)
@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_refuses_a_bad_knob_the_same_way(command, case):
    knobs, said = REFUSED[case]
    done = collbench(*COMMANDS[command], *(arg for k in knobs for arg in ("--knob", k)))
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "--knob" in line and said in line, line


@pytest.mark.slow
@pytest.mark.parametrize("command", ["sweep", "overlap", "doctor", "import"])
def test_a_knob_given_twice_is_refused(command):
    done = collbench(*COMMANDS[command], "--knob", "NCCL_ALGO=Ring", "--knob", "NCCL_ALGO=Tree")
    assert done.returncode == 2, done.stderr
    assert "repeats NCCL_ALGO" in done.stderr


def test_values_are_exported_as_the_library_reads_them():
    settings, warnings = parse_knob_settings(
        ["NCCL_BUFFSIZE=4M", "NCCL_SOCKET_IFNAME==eth0,eth1", "NCCL_NEW_THING=1"]
    )
    # NCCL reads NCCL_BUFFSIZE with strtoll: "4M" would be 4 bytes
    assert settings == (
        ("NCCL_BUFFSIZE", "4194304"),
        ("NCCL_SOCKET_IFNAME", "=eth0,eth1"),  # one value: its comma is NCCL's list
        ("NCCL_NEW_THING", "1"),
    )
    assert len(warnings) == 1 and "NCCL_NEW_THING is not a variable collbench knows" in warnings[0]
    assert parse_knob_settings(knob_args(settings)[1::2]) == (settings, warnings)


def test_the_tune_grid_uses_the_same_name_check():
    from collbench.core.tune_grid import parse_knobs

    with pytest.raises(SpecError, match="did you mean NCCL_ALGO"):
        parse_knobs(["NCCL_ALG=Ring,Tree"])
    with pytest.raises(SpecError, match="did you mean NCCL_ALGO"):
        parse_knob_settings(["NCCL_ALG=Ring"])
