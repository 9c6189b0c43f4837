"""`collbench fit`: the command body on tiny synthetic run directories."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from collbench.cli_fit import fit
from collbench.errors import SpecError

FACTOR = 1.75  # all-reduce on 8 ranks
SIZES = [2**power for power in range(3, 31)]  # 8 B .. 1 GiB


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command("fit")(fit)

    @app.callback()
    def _root() -> None:
        """Keeps `fit` a subcommand, as in collbench's own app."""

    return app


def _invoke(*args: str):
    return CliRunner().invoke(_app(), ["fit", *args])


def _time_us(size: int) -> float:
    """LL below 1 MiB (10 us, 20 GB/s busbw), Simple from there (40 us, 180 GB/s)."""
    alpha_us, busbw_gbps = (10.0, 20.0) if size < 2**20 else (40.0, 180.0)
    return alpha_us + size * FACTOR / (busbw_gbps * 1e3)


def _write_run(path: Path, run_id: str, rows: list[dict] | None = None, scale: float = 1.0,
               **key) -> Path:
    path.mkdir(parents=True)
    base = {"kind": "sweep", "collective": "all_reduce", "backend": "gloo", "world_size": 8,
            "topology": None, "placement": "out_of_place", "dtype": "float32",
            "knobs": {"env": {}}, "run_id": run_id}
    if rows is None:
        rows = [{**base, **key, "size_bytes": size, "time_us": _time_us(size) * scale}
                for size in [0, *SIZES]]
    (path / "rows.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    (path / "meta.json").write_text(json.dumps({"run_id": run_id}))
    return path


def test_table_shows_alpha_peak_regimes_and_outliers(tmp_path):
    run = _write_run(tmp_path / "a", "run-a")
    done = _invoke(str(run))
    assert done.exit_code == 0, done.output
    assert "all_reduce | gloo | 8 ranks | float32 | out_of_place" in done.output
    assert "alpha 10 us" in done.output and "peak busbw 180 GB/s" in done.output
    assert "8 B .. 512 KiB" in done.output and "1 MiB .. 1 GiB" in done.output
    assert "outliers: none" in done.output and "28 points from 1 run" in done.output


def test_json_lists_groups_and_predictions(tmp_path):
    run = _write_run(tmp_path / "a", "run-a")
    done = _invoke(str(run), "--json", "--predict", "3M,48M,4,4G")
    assert done.exit_code == 0, done.output
    (group,) = json.loads(done.output)
    assert group["runs"] == ["run-a"] and group["n_points"] == len(SIZES)
    assert group["breakpoints"] == [741456] and len(group["regimes"]) == 2
    assert group["alpha_us"] == pytest.approx(10.0, rel=1e-3)
    assert group["busbw_peak_gbps"] == pytest.approx(180.0, rel=1e-3)
    by_size = {item["size_bytes"]: item for item in group["predictions"]}
    assert by_size[3 * 2**20]["time_us"] == pytest.approx(_time_us(3 * 2**20), rel=1e-3)
    assert by_size[3 * 2**20]["regime_index"] == 1 and by_size[3 * 2**20]["extrapolated"] is None
    assert by_size[4]["regime_index"] == 0 and by_size[4]["extrapolated"] == "below"
    assert by_size[4 * 2**30]["extrapolated"] == "above"
    assert by_size[4 * 2**30]["busbw_gbps"] == pytest.approx(180.0, rel=0.01)


def test_predict_in_the_table_says_when_it_extrapolates(tmp_path):
    run = _write_run(tmp_path / "a", "run-a")
    done = _invoke(str(run), "--predict", "3M,4G")
    assert done.exit_code == 0, done.output
    lines = [line for line in done.output.splitlines() if line.strip().startswith(("3 MiB",
                                                                                   "4 GiB"))]
    assert len(lines) == 2 and "extrapolated" not in lines[0]
    assert "extrapolated above the largest measured size, 1 GiB" in lines[1]


def test_runs_of_one_group_are_pooled_and_other_groups_kept_apart(tmp_path):
    first = _write_run(tmp_path / "a", "run-a")
    second = _write_run(tmp_path / "b", "run-b", scale=1.01)
    other = _write_run(tmp_path / "c", "run-c", placement="in_place")
    done = _invoke(str(first), str(second), str(other), "--json")
    assert done.exit_code == 0, done.output
    groups = {group["placement"]: group for group in json.loads(done.output)}
    assert groups["out_of_place"]["runs"] == ["run-a", "run-b"]
    assert groups["out_of_place"]["n_points"] == 2 * len(SIZES)
    assert groups["in_place"]["runs"] == ["run-c"]


@pytest.mark.parametrize("make, needle", [
    (lambda path: path.mkdir(), "holds no result rows"),
    (lambda path: None, "holds no result rows"),
    (lambda path: _write_run(path, "x", rows=[{"kind": "overlap", "size_bytes": 8,
                                                "time_us": 1.0}]), "no sweep rows"),
])
def test_a_run_without_sweep_rows_is_a_spec_error(tmp_path, make, needle):
    make(tmp_path / "run")
    done = _invoke(str(tmp_path / "run"))
    assert isinstance(done.exception, SpecError) and needle in str(done.exception)
    assert "\n" not in str(done.exception)


@pytest.mark.parametrize("predict", ["3Q", "0", ","])
def test_a_bad_predict_size_is_a_spec_error(tmp_path, predict):
    run = _write_run(tmp_path / "a", "run-a")
    done = _invoke(str(run), "--predict", predict)
    assert isinstance(done.exception, SpecError) and "--predict" in str(done.exception)


def test_the_real_cli_exits_2_with_one_line(tmp_path):
    from collbench import cli

    if "fit" not in {command.name for command in cli.app.registered_commands}:
        pytest.skip("collbench.cli does not register `fit` yet")
    (tmp_path / "empty").mkdir()
    done = subprocess.run([sys.executable, "-m", "collbench", "fit", str(tmp_path / "empty")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "holds no result rows" in done.stderr


def test_importing_the_command_stays_light():
    code = ("import sys, collbench.cli_fit; heavy = {'numpy', 'scipy', 'pandas', 'torch'};"
            "print(sorted(heavy & set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=120)
    assert done.stdout.strip() == "[]"
