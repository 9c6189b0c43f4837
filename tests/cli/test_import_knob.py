"""`collbench import nccl-tests LOG --knob NAME=VALUE`: the labels say what a log was measured
with, are recorded where a sweep records its knobs (meta.json's and every row's `knobs.env`),
and make one log's imports different settings for `tune from`; bad labels exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.analysis.tune.from_runs import check_tunable, outcomes_from_runs, varying_knobs
from collbench.cli import app
from collbench.core.errors import SpecError
from collbench.store.load import load_run
from collbench.store.rundir import load_rows, read_meta
from tests.helpers import collbench

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-tests"
LOG = FIXTURES / "legacy_all_reduce_info.log"  # prints NCCL_IB_HCA=mlx5_0


def _import(out: Path, *knobs: str) -> Path:
    args = ["import", "nccl-tests", str(LOG), "--out", str(out)]
    for knob in knobs:
        args += ["--knob", knob]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return out


def test_one_log_imported_under_two_labels_is_two_settings(tmp_path):
    ring = _import(tmp_path / "ring", "NCCL_ALGO=Ring", "NCCL_MAX_NCHANNELS=8")
    tree = _import(tmp_path / "tree", "NCCL_ALGO=Tree", "NCCL_MAX_NCHANNELS=8")
    for run_dir, algo in ((ring, "Ring"), (tree, "Tree")):
        env = {"NCCL_IB_HCA": "mlx5_0", "NCCL_ALGO": algo, "NCCL_MAX_NCHANNELS": "8"}
        meta = read_meta(run_dir)
        assert meta.knobs["env"] == env
        assert meta.knobs["settings"] == {
            "imported": True,
            "knob_labels": ["NCCL_ALGO", "NCCL_MAX_NCHANNELS"],
        }
        rows = [json.loads(line) for line in (run_dir / "rows.jsonl").read_text().splitlines()]
        assert rows and all(row["knobs"] == meta.knobs for row in rows)
        assert all(row.knobs["env"] == env for row in load_rows(run_dir))  # rows.parquet too
    runs = [load_run(ring), load_run(tree)]
    assert check_tunable(runs) == []
    assert varying_knobs(runs) == ["NCCL_ALGO"]
    outcomes = outcomes_from_runs(runs)
    shared = {"NCCL_IB_HCA": "mlx5_0", "NCCL_MAX_NCHANNELS": "8"}  # stays in each setting
    assert [outcome.setting.as_dict() for outcome in outcomes] == [
        {**shared, "NCCL_ALGO": "Ring"},
        {**shared, "NCCL_ALGO": "Tree"},
    ]
    assert [outcome.setting.label for outcome in outcomes] == ["NCCL_ALGO=Ring", "NCCL_ALGO=Tree"]
    for outcome, run in zip(outcomes, runs, strict=True):
        assert {row.run_id for row in outcome.rows} == {run.run_id}
        assert len(outcome.rows) == len(run.sweep_rows) > 0


def test_a_label_wins_over_what_the_log_printed(tmp_path):
    meta = read_meta(_import(tmp_path / "run", "NCCL_IB_HCA=mlx5_1"))
    assert meta.knobs["env"] == {"NCCL_IB_HCA": "mlx5_1"}  # the log printed mlx5_0
    assert {row.knobs["env"]["NCCL_IB_HCA"] for row in load_rows(tmp_path / "run")} == {"mlx5_1"}


def test_without_knob_the_log_env_is_recorded_unlabelled(tmp_path):
    meta = read_meta(_import(tmp_path / "run"))
    assert meta.knobs == {"env": {"NCCL_IB_HCA": "mlx5_0"}, "settings": {"imported": True}}


@pytest.mark.parametrize(
    ("knobs", "reason"),
    [
        (["NCCL_ALGO"], "is not NAME=VALUE"),
        (["=Ring"], "is not NAME=VALUE"),
        (["nccl_algo=Ring"], "names no environment variable"),
        (["NCCL-ALGO=Ring"], "names no environment variable"),
        (["MY_FLAG=1"], "does not name a communication knob"),
        (["NCCL_ALGO=Ring", "NCCL_ALGO=Tree"], "repeats NCCL_ALGO: give each knob once"),
    ],
)
def test_bad_labels_are_refused_before_anything_is_written(tmp_path, knobs, reason):
    args = ["import", "nccl-tests", str(LOG), "--out", str(tmp_path / "run")]
    for knob in knobs:
        args += ["--knob", knob]
    result = CliRunner().invoke(app, args)
    assert isinstance(result.exception, SpecError), result.output
    assert result.exception.field == "--knob" and reason in str(result.exception)
    assert not (tmp_path / "run").exists()


def test_a_bad_label_exits_2_with_one_line(tmp_path):
    for command in ("nccl-tests", "rccl-tests"):
        done = collbench("import", command, str(LOG), "--knob", "FOO=1")
        assert done.returncode == 2
        assert done.stderr.strip().splitlines() == [
            "collbench: error: --knob: 'FOO=1' does not name a communication knob (NCCL_*, "
            "RCCL_*, HSA_*, HIP_*, GPU_*, CUDA_*, UCX_*, FI_*, TORCH_*, GLOO_*, "
            "ROCR_VISIBLE_DEVICES, AMD_SERIALIZE_KERNEL, AMD_SERIALIZE_COPY, OMP_NUM_THREADS)"
        ]
