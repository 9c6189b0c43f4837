"""A tune on NCCL judges each setting per collective before launching it: a pairing NCCL
cannot run (NCCL_ALGO=Tree for an all-gather) is left out of that setting's sweep, said in
one progress line and recorded for tune.json; a setting left with no collective is not run.

--backend nccl needs GPUs to launch, so the launch (the subprocess boundary) is replaced by
a recorder of the sweep each setting would run."""

from pathlib import Path

import collbench.run.tune.launch as tune_module
from collbench.core.spec import SweepSpec
from collbench.core.tune_grid import KnobAxis, Setting
from collbench.launchers.base import LaunchResult
from collbench.run.sweep import RunOptions
from collbench.run.tune.launch import TunePlan, Tuner
from collbench.store.tune_result import TuneResult


def _tune(tmp_path, monkeypatch, algo: str, collectives, backend="nccl", repeats=1):
    launched: list[tuple[str, tuple[str, ...]]] = []
    lines: list[str] = []

    def run_sweep(spec, options, command_line, make_sink):
        launched.append((Path(options.out).parent.name, spec.collectives))
        return LaunchResult(0), Path(options.out)

    monkeypatch.setattr(tune_module, "run_sweep", run_sweep)
    plan = TunePlan(
        (KnobAxis("NCCL_ALGO", tuple(algo.split("|"))),),
        out=tmp_path / "tuned",
        repeats=repeats,
        record_choices=False,
    )
    spec = SweepSpec(
        collectives=tuple(collectives), min_bytes=1024, max_bytes=1024, backend=backend
    )
    tuner = Tuner(spec, RunOptions(launcher="local"), plan, ["collbench"], None, lines.append)
    tuner.grid()
    return tuner, launched, lines


THREE = ("all_reduce", "all_gather", "reduce_scatter")


def test_tree_runs_all_reduce_only_and_says_why(tmp_path, monkeypatch):
    tuner, launched, lines = _tune(tmp_path, monkeypatch, "Ring|Tree", THREE, repeats=2)
    assert (
        launched
        == [
            ("settings", THREE),  # the baseline: never judged
            ("settings", THREE),  # Ring runs everywhere
            ("settings", ("all_reduce",)),  # Tree: all-reduce only
        ]
        * 2
    )
    said = [line for line in lines if "skips" in line]
    assert said == [
        "tune: NCCL_ALGO=Tree skips all_gather, reduce_scatter: NCCL runs all_gather only "
        "with Ring, PAT, NVLS, CollNetDirect; NCCL runs reduce_scatter only with Ring, PAT, "
        "NVLS, CollNetDirect (NCCL 2.24+ takes NCCL_ALGO=allreduce:tree, which leaves "
        "all_gather, reduce_scatter to NCCL's own choice)"
    ]  # once, not once per repeat
    runs = tuner.measured[Setting.from_mapping({"NCCL_ALGO": "Tree"})].runs().to_dict()
    assert [entry["collective"] for entry in runs["skipped"]] == ["all_gather", "reduce_scatter"]
    assert runs["skipped"][0]["reason"].startswith("NCCL runs all_gather only with Ring")
    assert tuner.not_run == []


def test_a_setting_with_no_collective_left_is_not_run(tmp_path, monkeypatch):
    tuner, launched, lines = _tune(tmp_path, monkeypatch, "Tree", ("all_gather", "broadcast"))
    assert launched == [("settings", ("all_gather", "broadcast"))]  # the baseline alone
    (entry,) = tuner.not_run
    assert entry["label"] == "NCCL_ALGO=Tree"
    assert "NCCL cannot run any of its collectives" in entry["reason"]
    assert "broadcast only with Ring" in entry["reason"]
    assert Setting.from_mapping({"NCCL_ALGO": "Tree"}) not in tuner.measured


def test_gloo_is_never_judged(tmp_path, monkeypatch):
    _, launched, lines = _tune(tmp_path, monkeypatch, "Tree", THREE, backend="gloo")
    assert launched == [("settings", THREE), ("settings", THREE)]
    assert not [line for line in lines if "skips" in line]


def test_old_tune_json_without_the_new_keys_still_loads():
    old = {
        "settings": [
            {"knobs": {}, "status": "ok", "error": None, "id": "a", "label": "baseline",
             "baseline": True, "rows": 2, "repeats": 1, "run_dir": "settings/00-a",
             "run_dirs": ["settings/00-a"], "probes": [], "dropped": None,
             "repeat_errors": [], "duration_s": 1.0},
        ],
        "best": [],
    }  # fmt: skip
    (setting,) = TuneResult.from_dict(old).settings
    assert setting.runs.skipped == () and setting.runs.failed_in is None
    again = TuneResult.from_dict(TuneResult.from_dict(old).to_dict()).settings[0]
    assert again.runs.skipped == () and again.runs.failed_in is None


def test_the_new_keys_round_trip():
    entry = {"knobs": {"NCCL_ALGO": "Tree"}, "status": "failed", "error": "x", "id": "b",
             "label": "NCCL_ALGO=Tree", "baseline": False, "rows": 2, "repeats": 1,
             "run_dir": "settings/01-b", "run_dirs": ["settings/01-b"],
             "skipped": [{"collective": "broadcast", "reason": "NCCL runs broadcast only with Ring"}],
             "failed_in": {"collective": "all_gather", "error": "x"}}  # fmt: skip
    result = TuneResult.from_dict({"settings": [entry], "best": []})
    assert result.to_dict()["settings"][0]["skipped"] == entry["skipped"]
    assert result.to_dict()["settings"][0]["failed_in"] == entry["failed_in"]
