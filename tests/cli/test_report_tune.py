"""`collbench report DIR` on a tune directory: the settings' runs go through the ordinary
report (labelled by setting), and a Tuning section shows busbw per setting, the winner per
collective and band, failed and dropped settings, and what NCCL chose.

The tune directories are built as the contract lays them out (tune.json, settings/NN-<id>/),
from rows written here (fast) or from real sweeps (slow)."""

import json
import sys
from dataclasses import replace

import pytest

from collbench.analysis.tune.outputs import tune_document
from collbench.analysis.tune.select import SettingOutcome, select_best
from collbench.cli.report import report
from collbench.core.errors import SpecError
from collbench.core.tune_grid import Setting
from collbench.render.report.tune_section import (
    SETTINGS_LEGEND_MAX,
    RangeMark,
    SettingCurve,
    setting_curves,
    settings_chart,
    tune_section,
)
from collbench.run.run_dirs import expand_runs, load_tune_dir
from collbench.run.tune.from_runs import tune_from
from collbench.store.load import load_run
from tests.cli.test_analysis_cli import write_run
from tests.helpers import collbench, collbench_process

SIZES = [2**k for k in range(10, 25, 2)]  # 1 KiB .. 16 MiB: all three bands
LO = {"GLOO_SOCKET_IFNAME": "lo"}
FAST = {"GLOO_SOCKET_IFNAME": "fast"}
BROKEN = {"GLOO_SOCKET_IFNAME": "nosuch0"}
SLOW_KNOB = {"GLOO_SOCKET_IFNAME": "slow"}
ERROR = "rank 0 failed during start-up: Unable to find address for: nosuch0"


def _times(speedup_large: float) -> dict[int, float]:
    """all_reduce times: 20 us + size / 2 GB/s, sizes from 1 MiB up `speedup_large` faster."""
    return {size: (20.0 + size / 2e3) / (speedup_large if size >= 2**20 else 1.0) for size in SIZES}


def _write_tune(tune_dir, entries, **extra):
    """tune.json by the contract: entries are (knobs, times or None, error, dropped); a
    setting with times gets settings/NN-<id>/ written from them."""
    outcomes, details = [], []
    for index, (knobs, times, error, dropped) in enumerate(entries):
        setting = Setting.from_mapping(knobs)
        run_dir = None
        rows = ()
        if times is not None:
            run_dir = f"settings/{index:02d}-{setting.id}"
            write_run(tune_dir / run_dir, times, knobs=knobs)
            rows = tuple(load_run(tune_dir / run_dir).sweep_rows)
        outcomes.append(SettingOutcome(setting, rows, error))
        details.append(
            {"run_dir": run_dir, "probes": [], "dropped": dropped, "duration_s": 1.5 + index}
        )
    best = select_best(outcomes)
    document = tune_document(
        outcomes, best, extra={"kind": "tune", "search": "grid", **extra}
    ).to_dict()
    for entry, detail in zip(document["settings"], details, strict=True):
        entry.update(detail)
    tune_dir.mkdir(parents=True, exist_ok=True)
    (tune_dir / "tune.json").write_text(json.dumps(document))
    return document


@pytest.fixture
def tune_dir(tmp_path):
    """A grid of four: the baseline, `fast` (twice as fast from 1 MiB), one failed and one
    dropped by the search, with NCCL's choices recorded for the first two."""
    path = tmp_path / "tune-a"
    document = _write_tune(
        path,
        [
            ({}, _times(1.0), None, None),
            (FAST, _times(2.0), None, None),
            (BROKEN, None, ERROR, None),
            (SLOW_KNOB, None, None, "round 1: slowest half of 2"),
        ],
    )
    ids = [entry["id"] for entry in document["settings"]]
    lines = [
        {"setting": ids[0], "collective": "all_reduce", "size_bytes": 1024, "algorithm": "Ring",
         "protocol": "LL", "channels": 2},
        {"setting": ids[1], "collective": "all_reduce", "size_bytes": 1 << 20,
         "algorithm": "Tree", "protocol": "Simple", "channels": 8},
    ]  # fmt: skip
    (path / "choices.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _report(tmp_path, *runs, fmt="html"):
    out = tmp_path / f"report.{fmt}"
    report(list(runs), out=out, report_format=fmt, topology=None, labels=None, title=None)
    return out


def test_tune_dir_expands_to_its_settings_runs_baseline_first(tune_dir):
    expanded = expand_runs([tune_dir])
    assert [expanded.labels[run.path] for run in expanded.runs] == [
        "baseline",
        "GLOO_SOCKET_IFNAME=fast",
    ]  # the failed setting has no run, the dropped one no full sweep
    (source,) = expanded.tunes
    assert source.document.baseline.label == "baseline" and source.warnings == ()
    assert len(source.choices) == 2


def test_one_curve_per_setting_the_baseline_marked_and_the_winner(tune_dir):
    source = load_tune_dir(tune_dir)[0]
    curves = setting_curves(source, "all_reduce", "in_place")
    assert [(curve.label, curve.baseline, curve.winner) for curve in curves] == [
        ("baseline", True, False),
        ("GLOO_SOCKET_IFNAME=fast", False, True),
    ]
    assert curves[0].sizes == tuple(SIZES)
    large = SIZES.index(2**24)
    assert curves[1].busbw_gbps[large] == pytest.approx(2 * curves[0].busbw_gbps[large])


@pytest.mark.slow
def test_the_report_has_the_tuning_section_winners_failures_and_choices(tmp_path, tune_dir, capsys):
    text = _report(tmp_path, tune_dir).read_text()
    assert capsys.readouterr().out.strip().endswith("charts)")
    assert "<title>collbench report: tune tune-a</title>" in text
    tuning = text[text.index("<h2>Tuning</h2>") : text.index("<h2>all_reduce (in_place)</h2>")]
    assert tuning.count("<img ") == 1  # one collective: one chart of every setting
    assert 'alt="all_reduce in_place: busbw per setting"' in tuning
    winners = tuning[tuning.index("the winner per collective") :].split("</table>")[0]
    # the ranges end where the winner changes: fast from 1 MiB up
    assert "<td>all_reduce</td><td>1 MiB .. 16 MiB</td><td>GLOO_SOCKET_IFNAME=fast</td>" in (
        winners
    )
    assert "<td>all_reduce</td><td>1 KiB .. 256 KiB</td><td>default is best</td>" in winners
    assert "+100.0%" in winners
    assert f'<td class="flag">{ERROR}</td>' in tuning  # the failed setting and its error
    assert "<td>GLOO_SOCKET_IFNAME=slow</td><td>round 1: slowest half of 2</td>" in tuning
    assert "what NCCL chose (choices.jsonl, 2 lines)" in tuning
    assert "<td>GLOO_SOCKET_IFNAME=fast</td><td>all_reduce</td><td>1 MiB</td><td>Tree</td>" in (
        tuning
    )
    # the settings' runs went through the ordinary report, named by their settings
    assert "<h2>Compare: GLOO_SOCKET_IFNAME=fast against baseline (the baseline)</h2>" in text
    assert "<h3>baseline</h3>" in text and "<h3>GLOO_SOCKET_IFNAME=fast</h3>" in text


@pytest.mark.slow
def test_markdown_report_of_a_tune_dir(tmp_path, tune_dir):
    text = _report(tmp_path, tune_dir, fmt="md").read_text()
    assert "## Tuning" in text and "**failed settings**" in text
    assert (tmp_path / "report_files" / "tune_tune-a_all_reduce_in_place.png").is_file()


def test_every_setting_failed_gives_the_tuning_section_alone(tmp_path):
    path = tmp_path / "tune-b"
    _write_tune(path, [({}, None, "exit code 1", None), (LO, None, ERROR, None)])
    text = _report(tmp_path, path).read_text()
    assert "<h2>Tuning</h2>" in text and "no sweep rows" in text
    assert '<td>baseline</td><td class="flag">exit code 1</td>' in text
    assert "<h2>Provenance</h2>" in text


@pytest.mark.slow
def test_tune_from_result_expands_its_runs_and_warns_about_a_missing_one(tmp_path, capsys):
    base = write_run(tmp_path / "run-base", _times(1.0))
    fast = write_run(tmp_path / "run-fast", _times(2.0), knobs=FAST)
    again = write_run(tmp_path / "run-fast-2", _times(2.0), knobs=FAST)
    gone = write_run(tmp_path / "run-gone", _times(0.5), knobs=LO)
    tune_from([base, fast, again, gone], tmp_path / "from")
    for file in gone.iterdir():
        file.unlink()
    gone.rmdir()
    expanded = expand_runs([tmp_path / "from"])
    assert [expanded.labels[run.path] for run in expanded.runs] == [
        "baseline",
        "GLOO_SOCKET_IFNAME=fast (run-fast)",
        "GLOO_SOCKET_IFNAME=fast (run-fast-2)",
    ]
    (source,) = expanded.tunes
    assert sorted(source.setting_rows) == ["GLOO_SOCKET_IFNAME=fast", "baseline"]
    assert len(source.setting_rows["GLOO_SOCKET_IFNAME=fast"]) == 2 * len(SIZES)
    (warning,) = source.warnings
    assert warning.startswith(f"tune from RUN {gone} left out: RUN: ")
    text = _report(tmp_path, tmp_path / "from").read_text()
    assert f"collbench: warning: tune from RUN {gone} left out" in capsys.readouterr().err
    assert "from runs already measured (tune --from)" in text  # render/report_tune.py's words
    assert '<p class="warn">tune from RUN' in text


@pytest.mark.slow  # a report of five runs and two tunes, ~3 s
def test_a_tune_dir_with_ordinary_runs_and_a_second_tune(tmp_path, tune_dir):
    other = tmp_path / "tune-c"
    _write_tune(other, [({}, _times(1.0), None, None), (LO, _times(0.5), None, None)])
    plain = write_run(tmp_path / "plain", _times(1.5))
    expanded = expand_runs([tune_dir, plain, other])
    names = [expanded.labels.get(run.path, "-") for run in expanded.runs]
    assert names == [
        "tune-a: baseline",
        "tune-a: GLOO_SOCKET_IFNAME=fast",
        "-",
        "tune-c: baseline",
        "tune-c: GLOO_SOCKET_IFNAME=lo",
    ]
    text = _report(tmp_path, tune_dir, plain, other).read_text()
    assert "<title>collbench report: tune tune-a, tune tune-c and 1 other run(s)</title>" in text
    assert "<h2>Tuning: tune-a</h2>" in text and "<h2>Tuning: tune-c</h2>" in text
    assert "<h2>Compare: plain against tune-a: baseline (the baseline)</h2>" in text


def test_tuning_section_without_best_says_so(tune_dir):
    source = load_tune_dir(tune_dir)[0]
    source = replace(source, document=replace(source.document, best=()))
    section = tune_section(source)
    (best, *_) = section.tables
    assert best.rows == [] and best.caption.endswith("the default measured)")
    assert len(section.charts) == 1  # curves still drawn


@pytest.mark.parametrize(
    "content, needle",
    [
        ("{not json", "has a tune.json that cannot be read"),
        ('{"kind": "tune"}', "has a tune.json without a settings list: not a tune directory"),
    ],
)
def test_a_broken_tune_json_is_one_line_and_exit_2(tmp_path, content, needle):
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "tune.json").write_text(content)
    with pytest.raises(SpecError, match="not a tune directory|cannot be read"):
        expand_runs([tmp_path / "t"])
    done = collbench("report", str(tmp_path / "t"), "--out", str(tmp_path / "r.html"))
    assert done.returncode == 2, (done.stdout, done.stderr)
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("collbench: error: RUN: ") and needle in line, line
    assert not (tmp_path / "r.html").exists()


# --- real sweeps -----------------------------------------------------------------------------

SWEEP = ["sweep", "-c", "all_reduce", "-b", "1K", "-e", "64K", "-n", "3", "-w", "1", "--nproc", "2"]
SWEEP += ["--repeats", "1"]  # as tune runs each setting's sweep: one pass per process


def _sweep(out, knobs):
    args = [arg for name, value in knobs.items() for arg in ("--knob", f"{name}={value}")]
    return collbench_process(*SWEEP, *args, "--out", str(out), timeout=300)


@pytest.mark.slow  # three real 2-rank sweeps (one fails at start-up) and a report, ~30 s
def test_report_of_a_tune_dir_built_from_real_sweeps(tmp_path):
    path = tmp_path / "tune-real"
    entries, outcomes = [], []
    for index, knobs in enumerate([{}, LO, BROKEN]):
        setting = Setting.from_mapping(knobs)
        run_dir = f"settings/{index:02d}-{setting.id}"
        done = _sweep(path / run_dir, knobs)
        error = done.stderr.strip().splitlines()[-1] if done.returncode else None
        rows = () if error else tuple(load_run(path / run_dir).sweep_rows)
        outcomes.append(SettingOutcome(setting, rows, error))
        entries.append({"run_dir": run_dir, "dropped": None, "duration_s": 9.0})
    assert outcomes[2].error and "nosuch0" in outcomes[2].error, outcomes[2]
    document = tune_document(outcomes, select_best(outcomes), extra={"search": "grid"}).to_dict()
    for entry, extra in zip(document["settings"], entries, strict=True):
        entry.update(extra)
    (path / "tune.json").write_text(json.dumps(document))
    out = tmp_path / "tune.html"
    done = collbench("report", str(path), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr  # the failed setting is listed, not warned about
    text = out.read_text()
    tuning = text[text.index("<h2>Tuning</h2>") : text.index("<h2>all_reduce (in_place)</h2>")]
    assert tuning.count("<img ") == 1
    # ranges by the sizes they hold (how many depends on this box's noise)
    assert "<td>all_reduce</td><td>1 KiB" in tuning
    assert "Unable to find address for: nosuch0" in tuning
    assert "<h2>Compare: GLOO_SOCKET_IFNAME=lo against baseline (the baseline)</h2>" in text
    print(out, file=sys.stderr)


def test_settings_chart_for_a_crowded_grid_and_none_without_sizes():
    curves = [
        SettingCurve(f"NCCL_MIN_NCHANNELS={index}", (1024, 2048), (1.0, 2.0 + index), index == 0)
        for index in range(SETTINGS_LEGEND_MAX + 3)
    ]
    png = settings_chart("grid", curves, [RangeMark("small", 0), RangeMark("medium", 2048)])
    assert png.startswith(b"\x89PNG")
    assert settings_chart("nothing", [SettingCurve("baseline", (0,), (0.0,), True)]) is None
