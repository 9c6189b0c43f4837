"""tune.json and doctor.json as typed values: one save, one load, the on-disk format kept
(older files read), and a damaged or foreign file refused in one line that names it."""

from __future__ import annotations

import json

import pytest

from collbench.analysis.doctor.expect import Expectation
from collbench.analysis.doctor.findings import Diagnosis, Finding, doctor_report
from collbench.core.convert import convert, plain
from collbench.core.errors import SpecError
from collbench.store.doctor_report import (
    DOCTOR_JSON,
    DoctorReport,
    load_doctor_report,
    save_doctor_report,
)
from collbench.store.tune_result import (
    BEST_ENV,
    TUNE_JSON,
    TUNER_CONF,
    BestRecord,
    SettingRuns,
    TuneLaunch,
    TunerConfStatus,
    TuneResult,
    TuneSetting,
    load_tune_result,
    save_tune_result,
)

SETTING = {
    "knobs": {"NCCL_ALGO": "Ring"},
    "status": "ok",
    "error": None,
    "id": "a1b2",
    "label": "NCCL_ALGO=Ring",
    "baseline": False,
    "rows": 12,
    "repeats": 3,
}
# a best entry as tune writes it: every key of BestRecord, in its order
BEST = plain(BestRecord("all_reduce", 0, 65535, {"NCCL_ALGO": "Ring"}, 12.5, gain=0.12))
ENV = {"knobs": {"NCCL_ALGO": "Ring"}, "setting": "NCCL_ALGO=Ring", "why": "w", "conflicts": []}
LAUNCHED = {
    "settings": [
        {
            **SETTING,
            "run_dir": "settings/01-a1b2-r1",
            "run_dirs": ["settings/01-a1b2-r1", "settings/01-a1b2-r2"],
            "probes": [],
            "dropped": None,
            "repeat_errors": [],
            "duration_s": 4.5,
        }
    ],
    "best": [BEST],
    "env": ENV,
    "rule": {"granularity": "band"},
    "kind": "tune",
    "search": "grid",
    "repeats": 2,
    "budget_s": None,
    "command_line": ["collbench", "tune"],
    "spec": {"collectives": ["all_reduce"]},
    "launcher": "local",
    "not_run": [],
    "tuner_conf": {"written": False, "reason": "no plugin", "notes": []},
    "warnings": ["w1"],
    "elapsed_s": 9.0,
}
FROM = {
    "settings": [SETTING],
    "best": [BEST],
    "env": ENV,
    "rule": {"granularity": "size"},
    "from": ["runs/a", "runs/b"],
    "tuner_conf": {"written": True, "reason": None, "notes": ["n"]},
    "warnings": [],
}


@pytest.mark.parametrize("document", [LAUNCHED, FROM], ids=["launched", "from"])
def test_tune_json_reads_back_to_the_same_bytes(tmp_path, document):
    (tmp_path / TUNE_JSON).write_text(json.dumps(document))
    result = load_tune_result(tmp_path, "RUN")
    assert json.dumps(result.to_dict()) == json.dumps(document)  # same keys, same order


def test_a_typed_tune_result_is_saved_with_its_files(tmp_path):
    setting = TuneSetting(**SETTING, runs=SettingRuns(("settings/01-a1b2",), duration_s=1.0))
    result = TuneResult(
        (setting,),
        convert([BEST], tuple[BestRecord, ...], TUNE_JSON, "-"),
        launch=TuneLaunch(search="halving", repeats=3),
        tuner_conf=TunerConfStatus(True),
    )
    written = save_tune_result(tmp_path / "out", result, "# env\n", "# conf\n")
    assert [path.name for path in written] == [TUNE_JSON, BEST_ENV, TUNER_CONF]
    back = load_tune_result(tmp_path / "out", "--verify")
    assert back == result
    assert back.settings[0].run_dir == "settings/01-a1b2" and back.repeats == 3
    assert back.launch.search == "halving" and back.sources is None


def test_an_older_tune_json_without_the_launch_keys_still_reads(tmp_path):
    old = {"settings": [{"label": "baseline", "baseline": True, "run_dir": "s/00"}], "best": []}
    (tmp_path / TUNE_JSON).write_text(json.dumps(old))
    result = load_tune_result(tmp_path, "RUN")
    assert result.baseline.label == "baseline" and result.settings[0].run_dirs == ("s/00",)
    assert result.env.knobs == {} and result.launch is None


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (None, "is not a tune directory (no tune.json"),
        ("{not json", "has a tune.json that cannot be read"),
        ('{"kind": "tune"}', "has a tune.json without a settings list: not a tune directory"),
        ('{"settings": [], "best": {}}', "without a best list"),
        ('{"settings": [{"rows": "many"}], "best": []}', "with a value of the wrong type"),
        ("[1]", "that is not a JSON object"),
    ],
)
def test_a_damaged_tune_json_is_one_line_naming_the_directory(tmp_path, content, words):
    if content is not None:
        (tmp_path / TUNE_JSON).write_text(content)
    with pytest.raises(SpecError) as caught:
        load_tune_result(tmp_path, "--verify")
    message = str(caught.value)
    assert message.startswith(f"--verify: '{tmp_path}'") and words in message, message
    assert "\n" not in message


def _diagnosis() -> tuple[Diagnosis, Expectation]:
    finding = Finding("node", ("b",), (2, 3), ("10.0.0.2",), "slow", 1.0, 3.0, "fleet", 3, "drain")
    diagnosis = Diagnosis(
        healthy=False,
        findings=(finding,),
        hosts=("a", "b"),
        matrix_gbps=((None, 1.0), (1.0, None)),
        node_busbw_gbps={"a": 3.0, "b": float("nan")},
        rail_busbw_gbps={0: 2.0},
        pass_ratio={"a": 1.0},
        full_busbw_gbps=2.5,
        notes=("a note",),
    )
    return diagnosis, Expectation("fleet", {"pair": 3.0})


def test_doctor_json_is_saved_and_loaded_as_one_type(tmp_path):
    diagnosis, expectation = _diagnosis()
    report = doctor_report(diagnosis, "doctor-1", expectation)
    path = save_doctor_report(tmp_path, report)
    assert path == tmp_path / DOCTOR_JSON
    data = json.loads(path.read_text())
    assert data["nodes"] == {"a": 3.0, "b": None} and data["rails"] == {"0": 2.0}
    assert data["findings"][0]["hosts"] == ["b"] and data["healthy"] is False
    back = load_doctor_report(tmp_path)
    assert back.to_dict() == data and back.findings[0].ranks == (2, 3)
    assert load_doctor_report(tmp_path / "nowhere") is None  # no doctor.json: none


def test_an_older_doctor_json_without_the_newer_keys_still_reads():
    old = {"run_id": "r", "healthy": True, "findings": [], "notes": ["n"]}
    report = DoctorReport.from_dict(old, "old/doctor.json")
    assert report.healthy is True and report.judged == () and report.repeats == 0
    assert report.expectation is None and report.notes == ("n",)


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("{not json", "cannot be read"),
        ('{"findings": []}', "is not a doctor's result"),
        ('{"healthy": "yes"}', "not true/false/null"),
        ('{"healthy": null, "findings": [1]}', "not an object with a kind"),
        ('{"healthy": true, "nodes": {"a": "fast"}}', "wrong type"),
    ],
)
def test_a_damaged_doctor_json_is_one_line_naming_the_file(tmp_path, content, words):
    (tmp_path / DOCTOR_JSON).write_text(content)
    with pytest.raises(SpecError) as caught:
        load_doctor_report(tmp_path)
    message = str(caught.value)
    assert str(tmp_path / DOCTOR_JSON) in message and words in message, message
    assert "\n" not in message
