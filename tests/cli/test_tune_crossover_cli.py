"""`collbench tune from` on a pair of imported nccl-tests logs with a real cluster's shape
(64 ranks on 8 nodes; a setting +20..30% faster from 1 GiB up and 10..25% slower from
16 MiB to 512 MiB): the default ranges follow the crossover, best.env names the ranges it
does not follow, and no tuner rule claims what CTAs or QPs did."""

from __future__ import annotations

import json
import math

import pytest

from collbench.analysis.tune.tuner_conf import parse_tuner_conf
from tests.helpers import collbench
from tests.nccl_log import write_nccl_tests_log

MIB, GIB = 1024**2, 1024**3
SIZES = [2**power for power in range(10, 34)]  # 1 KiB .. 8 GiB
TUNED = ("NCCL_MIN_CTAS=24", "NCCL_IB_QPS_PER_CONNECTION=2")


def _base_us(size):
    return 25.0 + size / 4.0e4  # 25 us latency, ~40 GB/s algbw


def _tuned_us(size):
    if size >= GIB:  # +20% at 1 GiB .. +30% at 8 GiB
        return _base_us(size) / (1.2 + 0.1 * math.log2(size / GIB) / 3)
    if 16 * MIB <= size <= 512 * MIB:  # 10% slower at 16 MiB .. 25% at 512 MiB
        return _base_us(size) * (1.1 + 0.15 * math.log2(size / (16 * MIB)) / 5)
    return _base_us(size)


@pytest.fixture
def tuned_pair(tmp_path):
    runs = []
    for name, time_us, knobs in (("default", _base_us, ()), ("tuned", _tuned_us, TUNED)):
        log = write_nccl_tests_log(tmp_path / f"{name}.log", "all_reduce", 64, 8, SIZES, time_us)
        out = tmp_path / name
        args = ["import", "nccl-tests", str(log), "--out", str(out)]
        for knob in knobs:
            args += ["--knob", knob]
        done = collbench(*args)
        assert done.returncode == 0, done.stderr
        runs.append(str(out))
    return runs


def test_default_ranges_follow_the_crossover_on_a_64_rank_pair(tuned_pair, tmp_path):
    out = tmp_path / "tune"
    done = collbench("tune", "from", *tuned_pair, "--out", str(out), "--channels", "0")
    assert done.returncode == 0, done.stderr
    best = json.loads((out / "tune.json").read_text())["best"]
    tuned = {"NCCL_MIN_CTAS": "24", "NCCL_IB_QPS_PER_CONNECTION": "2"}
    for size in SIZES:
        (record,) = [item for item in best if item["min_bytes"] <= size <= item["max_bytes"]]
        if size >= GIB:
            assert record["knobs"] == tuned and not record["default_is_best"], size
        elif size >= 16 * MIB:
            assert record["default_is_best"], size
    # the table reads as sizes a person writes, with units
    assert "1 GiB .. 8 GiB" in done.stdout and "busbw GB/s" in done.stdout
    assert "724.077" not in done.stdout
    # best.env exports the setting of the largest range and names the range it does not follow
    env = (out / "best.env").read_text()
    assert "export NCCL_MIN_CTAS=24" in env and "export NCCL_IB_QPS_PER_CONNECTION=2" in env
    assert "1 KiB .. 512 MiB" in env and "Not followed here" in env
    # nccl_tuner.conf (if it can be written) never claims what CTAs or QPs measured
    conf = out / "nccl_tuner.conf"
    if conf.exists():
        text = conf.read_text()
        parse_tuner_conf(text)
        for line in text.splitlines():
            if "MIN_CTAS" in line or "QPS_PER_CONNECTION" in line:
                assert line.startswith("#") and "best.env" in line, line
    else:
        assert "nccl_tuner.conf not written" in done.stderr
