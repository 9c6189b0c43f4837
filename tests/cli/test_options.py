"""The declared command-line options: each fills a real field, and help texts quote the
defaults of the dataclasses that own them."""

from __future__ import annotations

import dataclasses

import pytest

from collbench.cli.launch_options import TORCHRUN_OPTIONS
from collbench.cli.measure import SWEEP_OPTIONS
from collbench.cli.mfu import MFU_OPTIONS
from collbench.cli.options import FROM_OWNER, Option, given_fields, listing
from collbench.core.spec import SweepSpec
from collbench.launchers.mpi import MpiLauncher, MpiSettings
from collbench.launchers.slurm import SlurmLauncher, SlurmSettings
from collbench.launchers.torchrun import TorchrunLauncher, TorchrunSettings


@pytest.mark.parametrize("option", [*SWEEP_OPTIONS, *MFU_OPTIONS], ids=lambda o: o.flags[0])
def test_every_owned_option_names_a_field_of_its_owner(option):
    if option.owner is not None:
        assert option.field in {item.name for item in dataclasses.fields(option.owner)}


@pytest.mark.parametrize(
    ("launcher", "settings"),
    [
        (TorchrunLauncher, TorchrunSettings),
        (SlurmLauncher, SlurmSettings),
        (MpiLauncher, MpiSettings),
    ],
)
def test_each_launcher_accepts_exactly_the_options_declared_for_it(launcher, settings):
    fields = {option.field for option in SWEEP_OPTIONS if option.owner is settings}
    extras = {"print_sbatch"} if launcher is SlurmLauncher else set()
    assert fields | extras == set(launcher.options)


def test_help_quotes_every_default_itself():
    # typer's own "[default: X]" is cut mid-word by rich when long: the help says it instead.
    by_flag = {option.flag: option for option in SWEEP_OPTIONS}
    assert by_flag["--min-bytes"].help_text.endswith(f"(default: {SweepSpec.min_bytes})")
    assert by_flag["--timeout"].help_text.endswith("(default: 300)")
    assert by_flag["--check"].help_text.endswith("(default: check)")
    assert by_flag["--max-bytes"].help_text.endswith("(default: 16M on gloo, 1G on nccl/rccl)")
    assert by_flag["--launcher"].help_text.endswith("(default: auto)")  # FROM_OWNER too
    assert by_flag["--collective"].help_text.endswith(
        "(default: all_reduce, all_gather, reduce_scatter)"
    )
    assert all(not option.info().show_default for option in SWEEP_OPTIONS)
    assert "(default:" not in by_flag["--exclusive"].help_text  # False says nothing
    port = next(option for option in TORCHRUN_OPTIONS if option.flag == "--master-port")
    assert port.help_text.endswith("(default: 29500)")


def test_given_fields_leave_out_what_was_not_given_and_parse_the_rest():
    options = (
        Option(("--a",), "", SweepSpec, "min_bytes", parse=lambda text, flag: int(text)),
        Option(("--b",), "", SweepSpec, "iters", kind=int),
        Option(("--c",), "", SweepSpec, "warmup", default=FROM_OWNER),
    )
    values = {"min_bytes": "64", "iters": None, "warmup": 5}
    assert given_fields(SweepSpec, options, values) == {"min_bytes": 64, "warmup": 5}


def test_listing():
    assert listing(("a", "b", "c")) == "a, b, c"
    assert listing(("a", "b", "c"), {"a": "note"}, " or ") == "a (note), b or c"
    assert listing(("a",), last=" or ") == "a"
