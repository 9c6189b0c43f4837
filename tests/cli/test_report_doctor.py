"""`collbench report RUN` on a doctor run directory (rows of kind "doctor", meta.json's
"doctor" entry, doctor.json beside them): a Doctor section with the pair matrix as a heat
map, the per-node bars and the findings; the rest of the report does not trip over a run
without sweep rows. The run directories are written here by hand, as a doctor writes them."""

from __future__ import annotations

import base64
import json
import re

import pytest

from collbench.cli.report import report
from collbench.render.report.doctor_section import DOCTOR_JSON
from tests.cli.test_analysis_cli import write_run as write_sweep
from tests.helpers import collbench
from tests.rows import write_run
from tests.unit.render.test_doctor_render import (
    FLEET,
    LINK,
    NODE,
    diagnosis,
    doctor_json,
    doctor_meta,
    doctor_rows,
)

PNG = b"\x89PNG"


def _doctor_dir(tmp_path, name="doctor-a", document=True, findings=(NODE,)):
    path = write_run(tmp_path / name, doctor_rows(), doctor_meta())
    if document:
        content = doctor_json(diagnosis(findings), "doctor-1", FLEET)
        (path / DOCTOR_JSON).write_text(json.dumps(content))
    return path


def _report(tmp_path, *runs, fmt="html"):
    out = tmp_path / f"report.{fmt}"
    report(list(runs), out=out, report_format=fmt, topology=None, labels=None, title=None)
    return out


def _images(html_text):
    return [base64.b64decode(data) for data in re.findall(r"base64,([A-Za-z0-9+/=]+)", html_text)]


def test_html_has_doctor_section_with_heat_map_bars_and_findings(tmp_path):
    text = _report(tmp_path, _doctor_dir(tmp_path)).read_text()
    assert "<h2>Doctor</h2>" in text
    assert 'alt="doctor-a: pair matrix"' in text
    assert 'alt="doctor-a: per node"' in text
    images = _images(text)
    assert len(images) == 2 and all(image.startswith(PNG) for image in images)
    assert "<caption>findings (doctor.json)</caption>" in text
    assert "drain the node" in text
    assert '<td class="flag">node</td>' in text  # the finding's kind stands out
    assert '<td class="flag">cbnode2</td>' in text  # so does the flagged node's line
    assert "Flagged: 1 finding(s) (expectation source: fleet median)." in text
    assert "shuffle stage not run (--shuffle-rounds 0)" in text  # doctor.json's notes
    assert "bisect stage skipped: not asked for (--bisect)" in text  # meta.json's skipped
    assert "0.1 with cbnode0" in text  # cbnode2's slowest pair, from the rows


@pytest.mark.slow
def test_markdown_links_the_heat_map_and_bars(tmp_path):
    out = _report(tmp_path, _doctor_dir(tmp_path), fmt="md")
    text = out.read_text()
    assert "## Doctor" in text
    for stem in ("doctor_doctor-a_pairs", "doctor_doctor-a_nodes"):
        assert f"(report_files/{stem}.png)" in text
        assert (tmp_path / "report_files" / f"{stem}.png").read_bytes().startswith(PNG)
    assert "| kind | hosts | ranks | addresses |" in text


def test_healthy_run_says_so(tmp_path):
    text = _report(tmp_path, _doctor_dir(tmp_path, findings=())).read_text()
    assert "healthy: no node, rail, link or rank below expectation" in text
    assert "findings (doctor.json): none, the run was healthy" in text


def test_unjudged_run_says_why_not_healthy(tmp_path):
    path = write_run(tmp_path / "doctor-u", doctor_rows(), doctor_meta())
    reason = "no stage could be judged (intra: a fleet median needs 3 nodes, this run has 1)"
    unjudged = diagnosis(healthy=None, reason=reason)
    (path / DOCTOR_JSON).write_text(json.dumps(doctor_json(unjudged, "doctor-u", FLEET)))
    text = _report(tmp_path, path).read_text()
    assert f"unjudged (no health check): {reason}." in text
    assert "findings (doctor.json): none, nothing could be judged" in text
    assert "healthy: no node" not in text


def test_without_doctor_json_the_rows_alone(tmp_path):
    text = _report(tmp_path, _doctor_dir(tmp_path, document=False)).read_text()
    assert "<h2>Doctor</h2>" in text and len(_images(text)) == 2
    assert "no doctor.json beside the rows" in text
    assert "findings (doctor.json)" not in text


def test_unreadable_doctor_json_is_a_warning(tmp_path, capsys):
    path = _doctor_dir(tmp_path, document=False)
    (path / DOCTOR_JSON).write_text("{not json")
    text = _report(tmp_path, path).read_text()
    assert "doctor.json left out" in capsys.readouterr().err
    assert "<h2>Doctor</h2>" in text


@pytest.mark.slow
def test_two_doctor_runs_and_a_sweep_in_one_report(tmp_path):
    first = _doctor_dir(tmp_path, "doctor-a", findings=(NODE, LINK))
    second = _doctor_dir(tmp_path, "doctor-b", findings=())
    sweep = write_sweep(tmp_path / "sweep-a", {2**k: 20.0 + 2**k / 2e3 for k in range(10, 20)})
    text = _report(tmp_path, first, second, sweep).read_text()
    assert "<h2>Doctor: doctor-a</h2>" in text and "<h2>Doctor: doctor-b</h2>" in text
    assert "<h2>all_reduce (in_place)</h2>" in text
    assert text.index("Doctor: doctor-a") < text.index("all_reduce (in_place)</h2>")
    assert "reseat or replace the cable" in text


def test_fit_and_compare_on_a_doctor_run_say_there_are_no_sweep_rows(tmp_path):
    path = _doctor_dir(tmp_path)
    fitted = collbench("fit", str(path))
    assert fitted.returncode == 2 and "Traceback" not in fitted.stderr
    assert "no sweep rows" in fitted.stderr
    compared = collbench("compare", str(path), str(path))
    assert compared.returncode == 2 and "Traceback" not in compared.stderr
