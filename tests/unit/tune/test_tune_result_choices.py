"""A launched tune's result (run.tune.launch.tune_result) hands the baseline's lines of choices.jsonl and
the tuned communicator's shape to nccl_tuner.conf: a range won by a setting that names no
algorithm/protocol (NCCL_MIN_CTAS) gets NCCL's own pair from the baseline's choices, and the
rules name nNodes/nRanks; without the baseline's choices the file is not written. The
measuring is not run here: the settings' rows are given, the result is computed and written
by tune's own code."""

import json

from collbench.core.spec import SweepSpec
from collbench.core.tune_grid import BASELINE, KnobAxis, Setting
from collbench.run.sweep import RunOptions
from collbench.run.tune.launch import Measured, TunePlan, Tuner, tune_result
from collbench.store.tune_result import CHOICES_FILE
from tests.rows import make_row

SIZES = (1024, 1 << 20, 1 << 26)
CTAS = Setting.from_mapping({"NCCL_MIN_CTAS": "24"})


NOISE = (1.01, 1.0, 0.99)  # each repeat's time off by up to 1%


def _rows(knobs, factor_large):
    rows = []
    for repeat in range(3):
        for size in SIZES:
            time_us = (10.0 + size / 1e4) * (factor_large if size == SIZES[-1] else 1.0)
            time_us *= NOISE[repeat]
            rows.append(
                make_row(
                    backend="nccl",
                    size_bytes=size,
                    time_us=time_us,
                    world_size=16,
                    nodes=2,
                    iters=20,
                    repeat=repeat,
                    knobs=dict(knobs),
                    time_us_samples=[time_us] * 20,
                )
            )
    return tuple(rows)


def _tune(tmp_path, choices):
    out = tmp_path / "tuned"
    out.mkdir()
    if choices:
        (out / CHOICES_FILE).write_text("".join(json.dumps(line) + "\n" for line in choices))
    spec = SweepSpec(collectives=("all_reduce",), backend="nccl", repeats=1)
    plan = TunePlan((KnobAxis("NCCL_MIN_CTAS", ("24",)),), out, record_choices=False)
    tuner = Tuner(spec, RunOptions(), plan, ["collbench", "tune"], None, lambda line: None)
    items = [
        Measured(BASELINE, 0, _rows({}, 1.0), run_dirs=["settings/00"]),
        Measured(CTAS, 1, _rows(CTAS.as_dict(), 0.6), run_dirs=["settings/01"]),
    ]
    return tune_result(tuner, items, []), out


def _line(setting, collective, size, protocol):
    return {
        "setting": setting.id,
        "collective": collective,
        "size_bytes": size,
        "size_is_logged": False,
        "algorithm": "ring",
        "protocol": protocol,
        "channels": 16,
        "count": 1,
    }


def test_the_baseline_choices_and_the_shape_reach_nccl_tuner_conf(tmp_path):
    from collbench.analysis.tune.tuner_conf_rules import parse_tuner_conf
    from tests.unit.tune.tuner_plugin import lookup

    choices = [_line(BASELINE, "all_reduce", size, "simple") for size in SIZES]
    choices.append(_line(CTAS, "all_reduce", SIZES[-1], "ll128"))  # another setting's: unused
    choices.append(_line(BASELINE, "all_gather", 8, "ll"))  # not tuned (a control call)
    result, out = _tune(tmp_path, choices)
    assert result.document.tuner_conf.written, result.warnings
    (won,) = [record for record in result.best if not record.default_is_best]
    assert won.knobs == CTAS.as_dict() and won.min_bytes <= SIZES[-1] <= won.max_bytes
    assert any("names no algorithm/protocol" in note for note in result.notes)
    rules = parse_tuner_conf((out / "nccl_tuner.conf").read_text())
    assert {(rule.nnodes, rule.nranks) for rule in rules} == {(2, 16)}
    assert {rule.collective for rule in rules} == {"allreduce"}
    large = lookup(rules, "all_reduce", SIZES[-1], 2, 16)
    assert (large.algorithm, large.protocol, large.channels) == ("ring", "simple", 0)


def test_without_the_baseline_choices_the_file_says_what_it_needs(tmp_path):
    result, out = _tune(tmp_path, [])
    assert not (out / "nccl_tuner.conf").exists()
    assert "NCCL's own choice there is not known" in result.document.tuner_conf.reason
