"""The sbatch script and the printed command lines run nothing an option says (issue 29,
security): a control character in any value that reaches a script or a command line (Slurm's
options, `--slurm-arg` keys and values, torchrun's and mpirun's settings, --out, a
--topology path, tune's Slurm driver) is refused with one line and exit 2, before anything
is made; odd but legal values (spaces, quotes, `$`, `#`, backslashes) are quoted so that bash
parses the script and sbatch reads each `#SBATCH` value back exactly (a real cluster checks
the last)."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from collbench.core.errors import SpecError
from collbench.launchers.base import check_command
from collbench.launchers.slurm import SlurmSettings, sbatch_directives, sbatch_quote
from collbench.launchers.slurm_batch import driver_script
from tests.helpers import collbench

CONTROL = {"newline": "\n", "CR": "\r", "NUL": "\x00", "tab": "\t", "escape": "\x1b", "DEL": "\x7f"}
ATTACK = "x\ntouch PWNED #"
SLURM = ("sweep", "--launcher", "slurm", "--print-sbatch")
# option, value with ATTACK in it, the flag the error names
OPTIONS = [
    (SLURM, "--partition", f"p{ATTACK}", "--partition"),
    (SLURM, "--partition", "p\n#SBATCH --qos=high", "--partition"),
    (SLURM, "--account", ATTACK, "--account"),
    (SLURM, "--qos", ATTACK, "--qos"),
    (SLURM, "--constraint", ATTACK, "--constraint"),
    (SLURM, "--time", "30\n#SBATCH --qos=high", "--time"),
    (SLURM, "--slurm-arg", f"comment={ATTACK}", "--slurm-arg"),
    (SLURM, "--slurm-arg", "comment\n=x", "--slurm-arg"),
    (SLURM, "--out", f"/tmp/r{ATTACK}", "--out"),
    (("sweep", "--launcher", "torchrun", "--print", "--nnodes", "2"), "--master-addr",
     ATTACK, "--master-addr"),
    (("sweep", "--launcher", "torchrun", "--print"), "--rdzv-endpoint", f"h:1{ATTACK}",
     "--rdzv-endpoint"),
    (("sweep", "--launcher", "torchrun", "--print"), "--out", ATTACK, "--out"),
    (("sweep", "--launcher", "mpi", "--print"), "--mpi-arg", f"--x '{ATTACK}'", "--mpi-arg"),
    (("sweep", "--launcher", "mpi", "--print"), "--out", ATTACK, "--out"),
    (("sweep", "--launcher", "srun", "--print"), "--out", ATTACK, "--out"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("command", "flag", "value", "named"), OPTIONS, ids=[f"{o[0][2]} {o[1]}" for o in OPTIONS]
)
def test_a_control_character_in_an_option_is_refused_in_one_line(
    tmp_path, monkeypatch, command, flag, value, named
):
    monkeypatch.chdir(tmp_path)
    done = collbench(*command, flag, value)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"collbench: error: {named}: "), done.stderr
    assert "control character" in lines[0]
    assert done.stdout == "" and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("launcher", ["slurm", "torchrun", "mpi", "srun"])
def test_a_topology_file_with_a_newline_in_its_path_is_refused(tmp_path, monkeypatch, launcher):
    """The file exists (a legal name): its path still cannot go on a printed line."""
    monkeypatch.chdir(tmp_path)
    source = Path(__file__).resolve().parents[2] / "topologies" / "cpu-local.yaml"
    topology = tmp_path / f"t{ATTACK}.yaml"
    topology.write_bytes(source.read_bytes())
    show = "--print-sbatch" if launcher == "slurm" else "--print"
    done = collbench("sweep", "--launcher", launcher, show, "--topology", str(topology))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]
    assert "--topology" in done.stderr and "control character" in done.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == [topology.name]


@pytest.mark.parametrize("char", CONTROL.values(), ids=CONTROL)
@pytest.mark.parametrize(
    "field", ["partition", "account", "qos", "constraint", "time", "slurm_args"]
)
def test_slurm_settings_refuse_every_control_character(field, char):
    value = f"30{char}" if field == "time" else f"v{char}w"
    given = {field: (f"comment={value}",) if field == "slurm_args" else value}
    with pytest.raises(SpecError, match="control character") as error:
        SlurmSettings(**given)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("char", CONTROL.values(), ids=CONTROL)
def test_every_script_and_line_builder_refuses_it(tmp_path, char):
    with pytest.raises(SpecError):
        sbatch_directives({"comment": f"a{char}b"})
    with pytest.raises(SpecError):
        sbatch_directives({f"comment{char}": "x"})
    with pytest.raises(SpecError):
        sbatch_quote(f"a{char}b")
    with pytest.raises(SpecError):
        check_command(["collbench", "--out", f"a{char}b"])
    with pytest.raises(SpecError):
        check_command(["collbench"], {"NCCL_X": f"a{char}b"})
    settings = SlurmSettings()
    with pytest.raises(SpecError):
        driver_script(["collbench", "tune", "--out", f"o{char}"], settings, tmp_path)
    with pytest.raises(SpecError):
        driver_script(["collbench"], settings, tmp_path / f"d{char}")


# Legal, one line, and hostile to a shell or to sbatch's own parser.
ODD = {
    "spaces": "a b  c",
    "single quote": "it's",
    "double quote": 'say "hi"',
    "dollar": "$HOME ${PATH} $(touch PWNED)",
    "backtick": "`touch PWNED`",
    "hash": "a #b",
    "backslash": "a\\b\\",
    "semicolon": "x; touch PWNED",
}


def _sbatch_values(script: str) -> dict[str, str]:
    """The `#SBATCH --key=value` options as sbatch reads them (src/sbatch/opt.c,
    _get_argument): quotes of either kind group, a backslash escapes, an unquoted # ends."""
    options = {}
    for line in script.splitlines():
        if not line.startswith("#SBATCH "):
            continue
        text, argument, quote, escaped = line[len("#SBATCH ") :].lstrip(), "", "", False
        for char in text:
            if escaped:
                argument, escaped = argument + char, False
            elif char == "\\":
                escaped = True
            elif quote:
                quote, argument = ("", argument) if char == quote else (quote, argument + char)
            elif char in "'\"":
                quote = char
            elif char == "#" or char.isspace():
                break
            else:
                argument += char
        assert not quote, line
        key, _, value = argument.partition("=")
        options[key.removeprefix("--")] = value
    return options


def test_odd_but_legal_values_keep_the_script_parseable_and_exact(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = [f"comment={ODD['dollar']} {ODD['backslash']}", f"mail-user={ODD['double quote']}"]
    args += [f"reservation={ODD['hash']}", f"licenses={ODD['single quote']}"]
    done = collbench(
        *SLURM, "--partition", ODD["spaces"], "--account", ODD["semicolon"],
        "--qos", ODD["backtick"], *(arg for item in args for arg in ("--slurm-arg", item)),
        "--out", str(tmp_path / "it's a $dir"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    script = tmp_path / "job.sbatch"
    script.write_text(done.stdout)
    checked = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    directives = [line for line in done.stdout.splitlines() if line.startswith("#SBATCH")]
    assert all(re.fullmatch(r"#SBATCH --[a-z-]+(=.*)?", line) for line in directives)
    values = _sbatch_values(done.stdout)
    assert values["partition"] == ODD["spaces"] and values["account"] == ODD["semicolon"]
    assert values["qos"] == ODD["backtick"]
    assert values["comment"] == f"{ODD['dollar']} {ODD['backslash']}"
    assert values["mail-user"] == ODD["double quote"]
    assert values["reservation"] == ODD["hash"] and values["licenses"] == ODD["single quote"]
    # the srun line: bash reads the --out path back whole
    (srun,) = [line for line in done.stdout.splitlines() if line.startswith("srun ")]
    words = shlex.split(srun.replace("${SLURM_JOB_ID}", "7"))
    out = tmp_path / "it's a $dir"
    assert words[words.index("--out") + 1] == f"{out}-7"
    assert not list(tmp_path.glob("PWNED*"))


@pytest.mark.parametrize("value", ODD.values(), ids=ODD)
def test_sbatch_quote_round_trips_through_sbatchs_parser(value):
    assert _sbatch_values(f"#SBATCH --comment={sbatch_quote(value)}") == {"comment": value}


@pytest.mark.slow  # a real collbench process
def test_the_issues_attack_in_a_real_process(tmp_path):
    from tests.helpers import collbench_process

    for flag, value in (("--slurm-arg", f"comment={ATTACK}"), ("--partition", "p\n#SBATCH -x")):
        done = collbench_process(*SLURM, flag, value, "--out", str(tmp_path / "r"))
        assert done.returncode == 2 and done.stdout == "", done.stdout
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow  # a real Slurm cluster
def test_sbatch_reads_odd_values_back_exactly(tmp_path, slurm_cluster, monkeypatch):
    """The printed script submitted to a real sbatch (held, so nothing runs): Slurm's own
    record of the job holds each value exactly as given."""
    from tests.helpers import collbench_process

    monkeypatch.chdir(tmp_path)
    comment = 'a b "c" it\'s $HOME `x` #d \\e; f'
    printed = collbench_process(
        *SLURM, "--slurm-arg", f"comment={comment}", "--slurm-arg", "hold",
        "--out", str(tmp_path / "it's a $dir"), env=slurm_cluster.env,
    )  # fmt: skip
    assert printed.returncode == 0, printed.stderr
    script = tmp_path / "job.sbatch"
    script.write_text(printed.stdout)
    env = slurm_cluster.client_env()
    submitted = subprocess.run(
        ["sbatch", "--parsable", str(script)], capture_output=True, text=True, env=env
    )
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip().split(";")[0]
    try:
        shown = subprocess.run(
            ["squeue", "-h", "-j", job_id, "-o", "%k"], capture_output=True, text=True, env=env
        )
        assert shown.stdout.rstrip("\n") == comment
    finally:
        subprocess.run(["scancel", job_id], capture_output=True, env=env)
    assert not list(tmp_path.glob("PWNED*"))
