"""nccl_tuner.conf through the command line (issue 26): two nccl-tests logs imported with
`--knob NCCL_ALGO=... --knob NCCL_PROTO=...` labels give, through `tune from`, tree where
tree wins and ring where ring wins at every measured size, with the tuned communicator's
nNodes/nRanks, read as NCCL's example plugin reads it (and, where COLLBENCH_TUNER_EXAMPLE
names the plugin's source, by the compiled plugin itself); `--nccl-log` gives NCCL's own
pair where the winner names none; `--tuner-shape any` writes -1."""

from __future__ import annotations

import json
import os

import pytest

from collbench.analysis.tune.tuner_conf_rules import parse_tuner_conf
from tests.cli.test_tune_from_cli import _times, _write
from tests.helpers import collbench
from tests.nccl_log import write_nccl_tests_log
from tests.unit.tune.tuner_plugin import lookup, plugin_rules, uncovered

KIB, MIB = 1024, 1024**2
SIZES = [4**power for power in range(5, 15)]  # 1 KiB .. 256 MiB
RANKS, NODES = 64, 8


def _ring_us(size):
    return 30.0 + size / 4.0e4


def _tree_us(size):
    """30% faster up to 1 MiB, 30% slower above."""
    return _ring_us(size) * (0.7 if size <= MIB else 1.3)


def _imported(tmp_path, name, time_us, algo):
    log = write_nccl_tests_log(tmp_path / f"{name}.log", "all_reduce", RANKS, NODES, SIZES, time_us)
    out = tmp_path / name
    labels = ["--knob", f"NCCL_ALGO={algo}", "--knob", "NCCL_PROTO=Simple"]
    done = collbench("import", "nccl-tests", str(log), "--out", str(out), *labels)
    assert done.returncode == 0, done.stderr
    return str(out)


@pytest.fixture
def ring_tree(tmp_path):
    return [
        _imported(tmp_path, "ring", _ring_us, "Ring"),
        _imported(tmp_path, "tree", _tree_us, "Tree"),
    ]


def test_ring_tree_pair_gives_the_winner_at_every_size_with_the_shape(ring_tree, tmp_path):
    out = tmp_path / "tuned"
    done = collbench("tune", "from", *ring_tree, "--out", str(out), "--channels", "0")
    assert done.returncode == 0, done.stderr
    conf = out / "nccl_tuner.conf"
    assert conf.exists(), done.stderr  # needs the setting to be the whole environment
    text = conf.read_text()
    rules = parse_tuner_conf(text)
    assert plugin_rules(text) == rules  # no plugin fallback in play
    assert {(rule.nnodes, rule.nranks) for rule in rules} == {(NODES, RANKS)}
    assert uncovered(rules, "all_reduce", NODES, RANKS) == []
    for size in SIZES:
        rule = lookup(rules, "all_reduce", size, NODES, RANKS)
        wanted = "tree" if size <= MIB else "ring"
        assert (rule.algorithm, rule.protocol, rule.channels) == (wanted, "simple", 0), size
    # another shape matches none: said in the file and in the notes
    assert uncovered(rules, "all_reduce", 1, 8) != []
    assert f"Rules match only communicators of {NODES} node(s) and {RANKS} rank(s)" in text
    notes = json.loads((out / "tune.json").read_text())["tuner_conf"]["notes"]
    assert any("matches none and runs every collective on 1 channel" in note for note in notes)
    if os.environ.get("COLLBENCH_TUNER_EXAMPLE"):
        _check_with_the_compiled_plugin(tmp_path, text)


def _check_with_the_compiled_plugin(tmp_path, text):
    """NCCL's example plugin itself, compiled (tests/unit/tune/test_tune_conf_plugin.py's driver):
    at every measured size the pair it sets and the channels it returns."""
    import subprocess

    from tests.unit.tune.test_tune_conf_plugin import DRIVER, EXAMPLE, _plugin

    source = tmp_path / "driver.c"
    source.write_text(DRIVER)
    binary = tmp_path / "driver"
    include = [f"-I{EXAMPLE}", f"-I{os.path.join(EXAMPLE, 'nccl')}"]
    subprocess.run(["cc", "-std=gnu99", *include, "-o", str(binary), str(source)], check=True)
    allreduce = 4  # ncclFuncAllReduce
    queries = [(allreduce, size, -1, -1) for size in SIZES]
    _, answers = _plugin(binary, text, RANKS, NODES, queries, tmp_path)
    for size, (algorithm, protocol, channels) in zip(SIZES, answers, strict=True):
        wanted = "tree" if size <= MIB else "ring"
        assert (algorithm, protocol, channels) == (wanted, "simple", "0"), size
    _, other = _plugin(binary, text, 8, 1, queries[:1], tmp_path)  # a TP group: no rule
    assert other == [["-", "-", "1"]]


def _debug_log(path, pairs):
    """An NCCL 2.24+ debug log of the baseline: one TUNING line per (size, algo, proto)."""
    lines = ["node-00:4000:4000 [0] NCCL INFO NCCL version 2.26.2+cuda12.8"]
    lines += [
        f"node-00:4000:4010 [0] NCCL INFO AllReduce: {size} Bytes -> Algo {algo} proto {proto} "
        "channel{Lo..Hi}={0..15}"
        for size, algo, proto in pairs
    ]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.fixture
def ctas_win_large(tmp_path):
    """The default, and a setting that names no pair (CTAs, QPs) 30% faster at large sizes."""
    base = _write(tmp_path / "base", _times())
    knobs = {"NCCL_MIN_CTAS": "24", "NCCL_IB_QPS_PER_CONNECTION": "2"}
    return base, _write(tmp_path / "ctas", _times((1.0, 1.0, 0.7)), knobs)


def test_nccl_log_gives_ncclS_own_pair_where_the_winner_names_none(ctas_win_large, tmp_path):
    without = collbench("tune", "from", *ctas_win_large, "--out", str(tmp_path / "t1"))
    assert without.returncode == 0, without.stderr
    assert "nccl_tuner.conf not written" in without.stderr and "--nccl-log" in without.stderr
    pairs = [(1024, "RING", "LL"), (1 << 20, "RING", "LL128"), (1 << 26, "RING", "SIMPLE")]
    log = _debug_log(tmp_path / "nccl-debug.log", pairs)
    out = tmp_path / "t2"
    done = collbench("tune", "from", *ctas_win_large, "--out", str(out), "--nccl-log", log)
    assert done.returncode == 0, done.stderr
    text = (out / "nccl_tuner.conf").read_text()
    rules = parse_tuner_conf(text)
    for size, _, proto in pairs:
        rule = lookup(rules, "all_reduce", size, 1, 2)
        assert (rule.algorithm, rule.protocol, rule.channels) == ("ring", proto.lower(), 0)
    assert {(rule.nnodes, rule.nranks) for rule in rules} == {(1, 2)}
    for line in text.splitlines():  # no rule claims what CTAs or QPs measured
        if "MIN_CTAS" in line or "QPS_PER_CONNECTION" in line:
            assert line.startswith("#") and "needs best.env, not this rule" in line, line
    anyone = collbench(
        "tune", "from", *ctas_win_large, "--out", str(tmp_path / "t3"), "--nccl-log", log,
        "--tuner-shape", "any",
    )  # fmt: skip
    assert anyone.returncode == 0, anyone.stderr
    rules = parse_tuner_conf((tmp_path / "t3" / "nccl_tuner.conf").read_text())
    assert {(rule.nnodes, rule.nranks) for rule in rules} == {(-1, -1)}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tuner-shape", "8x64"], "--tuner-shape: '8x64' must be one of tuned, any"),
        (["--nccl-log", "LOG"], "holds no line saying what NCCL chose"),
        (["--nccl-log", "MISSING"], "cannot be read"),
    ],
)
def test_bad_conf_options_are_one_line_and_exit_2(ctas_win_large, tmp_path, args, message):
    log = tmp_path / "plain.log"
    log.write_text("node-00:4000:4000 [0] NCCL INFO NCCL version 2.26.2+cuda12.8\n")
    args = [str(log) if arg == "LOG" else arg for arg in args]
    args = [str(tmp_path / "missing.log") if arg == "MISSING" else arg for arg in args]
    out = tmp_path / "tuned"
    done = collbench("tune", "from", *ctas_win_large, "--out", str(out), *args)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and message in done.stderr
    assert not out.exists() or not any(out.iterdir())
