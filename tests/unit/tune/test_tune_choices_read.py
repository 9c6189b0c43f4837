"""NCCL's own choices reaching nccl_tuner.conf: a launched tune's choices.jsonl read back for
the baseline setting (run.tune.choices.load_choices), a user's NCCL debug logs for tune from
--nccl-log (read_debug_logs), and TunerConfRequest putting them and the runs' shape together."""

import json

import pytest

from collbench.core.errors import SpecError
from collbench.core.tune_grid import BASELINE, Setting
from collbench.run.tune.choices import load_choices, read_debug_logs
from collbench.run.tune.from_runs import TunerConfRequest
from tests.rows import make_row

TREE = Setting.from_mapping({"NCCL_ALGO": "Tree"})


def _line(setting, size, algorithm):
    return {
        "setting": setting.id,
        "collective": "all_reduce",
        "size_bytes": size,
        "size_is_logged": False,
        "algorithm": algorithm,
        "protocol": "simple",
        "channels": 8,
        "count": 1,
    }


def test_the_baseline_lines_of_choices_jsonl(tmp_path):
    path = tmp_path / "choices.jsonl"
    lines = [
        _line(BASELINE, 1024, "ring"),
        _line(TREE, 1024, "tree"),
        _line(BASELINE, 2048, "ring"),
    ]
    text = "\n".join(json.dumps(line) for line in lines) + "\n" + '{"setting": "cut'
    path.write_text(text)
    assert load_choices(path, BASELINE.id) == [lines[0], lines[2]]
    assert load_choices(path, TREE.id) == [lines[1]]
    assert load_choices(tmp_path / "none.jsonl", BASELINE.id) == []


def test_debug_logs_are_read_as_ncclS_choices(tmp_path):
    log = tmp_path / "nccl.log"
    log.write_text(
        "host:1:1 [0] NCCL INFO NCCL version 2.26.2+cuda12.8\n"
        "host:1:2 [0] NCCL INFO AllReduce: 4096 Bytes -> Algo TREE proto LL channel{Lo..Hi}={0..1}\n"
        "host:1:2 [0] NCCL INFO AllGather: 1024 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..3}\n"
    )
    summaries = read_debug_logs([log], world_size=8)
    found = {(item.collective, item.size_bytes) for item in summaries}
    assert found == {("all_reduce", 4096), ("all_gather", 8192)}  # per-rank bytes x 8 ranks
    plain = tmp_path / "plain.log"
    plain.write_text("nothing here\n")
    # before 2.23 a TUNING line names no collective: the hint asks for COLL too (issue 40.8)
    with pytest.raises(SpecError, match="NCCL_DEBUG_SUBSYS=COLL,TUNING") as caught:
        read_debug_logs([log, plain], world_size=8)
    assert caught.value.field == "--nccl-log" and "plain.log" in str(caught.value)


def test_conf_request_gives_the_shape_and_the_choices(tmp_path):
    rows = [make_row(world_size=16, nodes=2)]
    recorded = [_line(BASELINE, 1024, "ring")]
    inputs = TunerConfRequest().inputs(rows, recorded)
    assert inputs.shape == (2, 16) and inputs.choices == tuple(recorded)
    assert TunerConfRequest(shape="any").inputs(rows).shape == (None, None)
    with pytest.raises(SpecError, match="--tuner-shape"):
        TunerConfRequest(shape="all")
