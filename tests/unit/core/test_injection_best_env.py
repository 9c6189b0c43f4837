"""best.env runs nothing a knob says (issue 29, security): the one knob parser refuses control
characters in names and values (sweep/import/tune `--knob`, tune's axes, a recorded run's
knobs read back by `tune from`), and every line of best.env is made by one function that
shell-quotes an export and escapes a comment, so sourcing best.env built from hostile labels
and values runs nothing and exports the values byte for byte.

Sourcing is done by a real bash in a temporary directory: "nothing ran" means no file appeared
there and no variable other than the exported ones changed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from collbench.analysis.tune.outputs import best_env_line, render_best_env
from collbench.core.errors import SpecError
from collbench.core.knobs import check_knob_name, check_knob_value, parse_knob_settings
from collbench.core.safe_text import escape_control, find_control
from collbench.core.tune_grid import Setting, parse_knobs
from collbench.store.tune_result import EnvExport
from tests.helpers import collbench
from tests.rows import make_row, write_run

# A name collbench does not know and no typo of one: its values pass the catalog unchecked.
FREE = "NCCL_ZZ_COLLBENCH_PROBE"
CONTROL = {
    "newline": "\n",
    "CR": "\r",
    "NUL": "\x00",
    "tab": "\t",
    "escape": "\x1b",
    "DEL": "\x7f",
    "C1 NEL": "\x85",
    "line separator": "\u2028",
}
# Values a shell would run if they were not quoted; legal (one line), exported as written.
HOSTILE_BUT_ONE_LINE = {
    "command substitution": "$(touch PWNED_subst)",
    "backticks": "`touch PWNED_tick`",
    "semicolon": "x; touch PWNED_semi",
    "single quotes": "it's '$(touch PWNED_q1)'",
    "double quotes": '"$(touch PWNED_q2)"',
    "variable": "$HOME ${PATH}",
    "comment": "x # touch PWNED_hash",
    "backslash": "a\\b\\",
}


def _source(env_file: Path, names: list[str]) -> tuple[dict[str, str], list[str]]:
    """Source `env_file` in bash in its own directory: the variables `names` as exported
    (NUL-separated, so any byte survives) and the files that appeared there."""
    before = {path.name for path in env_file.parent.iterdir()}
    script = 'set -e; source ./best.env; for n in "$@"; do printf "%s\\0" "${!n-<unset>}"; done'
    done = subprocess.run(
        ["bash", "-c", script, "bash", *names],
        cwd=env_file.parent,
        capture_output=True,
        timeout=30,
        env={"PATH": "/usr/bin:/bin", "HOME": str(env_file.parent)},
    )
    assert done.returncode == 0, done.stderr
    values = done.stdout.decode("utf-8").split("\0")[:-1]
    appeared = sorted({path.name for path in env_file.parent.iterdir()} - before)
    return dict(zip(names, values, strict=True)), appeared


@pytest.mark.parametrize("char", CONTROL.values(), ids=CONTROL)
@pytest.mark.parametrize("where", ["value", "name", "after the name"])
def test_the_knob_parser_refuses_a_control_character(char, where):
    text = {
        "value": f"{FREE}=IB{char}touch PWNED",
        "name": f"NCCL_{char}ALGO=Ring",
        "after the name": f"NCCL_ALGO{char}=Ring",
    }[where]
    for parse in (
        lambda: parse_knob_settings([text]),
        lambda: parse_knobs([text]),
    ):
        with pytest.raises(SpecError) as error:
            parse()
        assert "\n" not in str(error.value) and error.value.field == "--knob"
        assert where == "name" or "control character" in str(error.value)


@pytest.mark.parametrize("char", CONTROL.values(), ids=CONTROL)
def test_the_checks_tune_axes_share_refuse_it_too(char):
    with pytest.raises(SpecError, match="control character"):
        check_knob_value(FREE, f"a{char}b", "text")
    with pytest.raises(SpecError, match="control character"):
        check_knob_name(f"{FREE}{char}", "text")
    # at the end of a value, where tune's strip() would have hidden it
    with pytest.raises(SpecError, match="control character"):
        parse_knobs([f"{FREE}=a,b{char}"])
    with pytest.raises(SpecError, match="control character"):
        Setting(((FREE, f"a{char}"),))


@pytest.mark.parametrize("value", HOSTILE_BUT_ONE_LINE.values(), ids=HOSTILE_BUT_ONE_LINE)
def test_one_line_values_pass_as_written(value):
    settings, _ = parse_knob_settings([f"{FREE}={value}"])
    assert settings == ((FREE, value),)


def test_escape_control_keeps_a_comment_on_its_line():
    for char in CONTROL.values():
        escaped = escape_control(f"a{char}b")
        assert find_control(escaped) is None and len(escaped.splitlines()) == 1


@pytest.mark.parametrize(
    "export",
    [
        ("NCCL_X", "a\nexport LD_PRELOAD=/tmp/evil.so"),
        ("NCCL_X", "a\rb"),
        ("NCCL_X$(touch PWNED)", "1"),
        ("NCCL X", "1"),
        ("1NCCL", "1"),
        ("", "1"),
    ],
    ids=repr,
)
def test_best_env_refuses_an_export_no_shell_takes_on_one_line(export):
    with pytest.raises(SpecError) as error:
        best_env_line(export=export)
    assert "\n" not in str(error.value)


def test_sourcing_best_env_built_from_hostile_labels_runs_nothing(tmp_path):
    knobs = {f"NCCL_ZZ_{index}": value for index, value in enumerate(HOSTILE_BUT_ONE_LINE.values())}
    hostile_label = "NCCL_ALGO=Ring\ntouch PWNED_label\nexport LD_PRELOAD=/x.so\n#"
    choice = EnvExport(
        knobs,
        setting=hostile_label,
        why="$(touch PWNED_why)\r\ntouch PWNED_why2",
        conflicts=["a\ntouch PWNED_conflict", "b\u2028touch PWNED_sep", "c\x00d"],
    )
    text = render_best_env(choice)
    assert all(line.startswith(("# ", "export ")) for line in text.splitlines())
    assert "touch PWNED_label" in text  # shown, escaped, inside its comment
    env_file = tmp_path / "best.env"
    env_file.write_text(text, encoding="utf-8")
    exported, appeared = _source(env_file, [*knobs, "LD_PRELOAD"])
    assert appeared == []  # nothing new beside it
    assert exported == {**knobs, "LD_PRELOAD": "<unset>"}


def _run(path: Path, knobs: dict[str, str], speed: float) -> str:
    """A measured run recorded with `knobs`: all_reduce, large sizes `speed` times faster."""
    sizes = (1024, 4096, 1 << 17, 1 << 20, 1 << 24, 1 << 26)
    rows = [
        make_row(
            run_id=path.name,
            backend="nccl",
            size_bytes=size,
            time_us=(10.0 + size / 1e4) * (speed if size >= 1 << 24 else 1.0),
            world_size=2,
            iters=20,
            knobs={"env": knobs},
            time_us_samples=[(10.0 + size / 1e4) * (speed if size >= 1 << 24 else 1.0)] * 20,
        )
        for size in sizes
    ]
    meta = {"run_id": path.name, "timing_method": "perf_counter", "knobs": {"env": knobs}}
    return str(write_run(path, rows, meta))


def test_tune_from_recorded_hostile_values_exports_them_inert(tmp_path):
    knobs = {f"NCCL_ZZ_{index}": value for index, value in enumerate(HOSTILE_BUT_ONE_LINE.values())}
    base = _run(tmp_path / "base", {}, 1.0)
    fast = _run(tmp_path / "fast", knobs, 0.5)
    out = tmp_path / "tuned"
    done = collbench("tune", "from", base, fast, "--out", str(out))
    assert done.returncode == 0, done.stderr
    exported, appeared = _source(out / "best.env", list(knobs))
    assert exported == knobs
    assert appeared == []


@pytest.mark.parametrize(
    "knobs",
    [
        {"NCCL_NET": "IB\ntouch PWNED\n#"},
        {"NCCL_NET": "IB\rexport LD_PRELOAD=/x.so"},
        {"NCCL_X\ntouch PWNED": "1"},
        {"NCCL_X$(touch PWNED)": "1"},
    ],
    ids=repr,
)
def test_tune_from_a_recorded_hostile_knob_is_refused_and_writes_nothing(tmp_path, knobs):
    base = _run(tmp_path / "base", {}, 1.0)
    hostile = _run(tmp_path / "hostile", knobs, 0.5)
    out = tmp_path / "tuned"
    done = collbench("tune", "from", base, hostile, "--out", str(out))
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not (out / "best.env").exists()
    assert not list(tmp_path.rglob("PWNED*"))


FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nccl-tests"
LOG = FIXTURES / "legacy_all_reduce_info.log"


@pytest.mark.parametrize(
    "command",
    [
        ("import", "nccl-tests", str(LOG)),
        ("sweep", "-c", "all_reduce", "-e", "64"),
        ("tune", "run", "-c", "all_reduce", "-e", "64"),
    ],
    ids=lambda command: command[0],
)
@pytest.mark.parametrize("knob", ["NCCL_NET=IB\ntouch PWNED\n#", "NCCL_NET=IB\r", "NCCL_\x00X=1"])
def test_every_command_refuses_the_knob_in_one_line(tmp_path, command, knob):
    out = tmp_path / "out"
    done = collbench(*command, "--knob", knob, "--out", str(out))
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith("collbench: error: --knob")
    assert not out.exists()


@pytest.mark.slow  # a real collbench process and a real tune from
def test_the_issues_attack_in_real_processes(tmp_path):
    from tests.helpers import collbench_process

    attack = "NCCL_NET=IB\ntouch PWNED\n#"
    out = str(tmp_path / "a")
    done = collbench_process("import", "nccl-tests", str(LOG), "--knob", attack, "--out", out)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    knobs = {"NCCL_ZZ_A": "`touch PWNED`; $(touch PWNED2)"}
    base, fast = _run(tmp_path / "base", {}, 1.0), _run(tmp_path / "fast", knobs, 0.5)
    tuned = collbench_process("tune", "from", base, fast, "--out", str(tmp_path / "t"))
    assert tuned.returncode == 0, tuned.stderr
    exported, appeared = _source(tmp_path / "t" / "best.env", ["NCCL_ZZ_A"])
    assert exported == knobs and appeared == []
    assert json.loads((tmp_path / "t" / "tune.json").read_text())["env"]["knobs"] == knobs
    assert not list(tmp_path.rglob("PWNED*")) and not Path("PWNED").exists()
