"""`collbench fit`: the command body on tiny synthetic run directories."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli import app
from collbench.core.errors import SpecError
from collbench.store.rows import ResultRow
from tests.rows import make_row, write_run

FACTOR = 1.75  # all-reduce on 8 ranks
SIZES = [2**power for power in range(3, 31)]  # 8 B .. 1 GiB


def _invoke(*args: str):
    """`collbench fit ARGS` through collbench's own typer app, in this process."""
    return CliRunner().invoke(app, ["fit", *args])


def _time_us(size: int) -> float:
    """LL below 1 MiB (10 us, 20 GB/s busbw), Simple from there (40 us, 180 GB/s)."""
    alpha_us, busbw_gbps = (10.0, 20.0) if size < 2**20 else (40.0, 180.0)
    return alpha_us + size * FACTOR / (busbw_gbps * 1e3)


def _write_run(
    path: Path, run_id: str, rows: list[ResultRow] | None = None, scale: float = 1.0, **key
) -> Path:
    base = {
        "collective": "all_reduce",
        "backend": "gloo",
        "world_size": 8,
        "nodes": None,  # unknown unless a test says: placed in order on a topology
        "ranks_per_node": None,
        "topology": None,
        "placement": "out_of_place",
        "dtype": "float32",
        "knobs": {"env": {}},
        "run_id": run_id,
    }
    if rows is None:
        rows = [
            make_row(**{**base, **key, "size_bytes": size, "time_us": _time_us(size) * scale})
            for size in [0, *SIZES]
        ]
    return write_run(path, rows, {"run_id": run_id})


def test_table_shows_alpha_peak_regimes_and_outliers(tmp_path):
    run = _write_run(tmp_path / "a", "run-a")
    done = _invoke(str(run))
    assert done.exit_code == 0, done.output
    assert "all_reduce | gloo | 8 ranks | float32 | out_of_place" in done.output
    assert "alpha 10 us" in done.output and "peak busbw 180 GB/s" in done.output
    assert "8 B .. 512 KiB" in done.output and "1 MiB .. 1 GiB" in done.output
    assert "outliers: none" in done.output and "28 points from 1 run" in done.output


def test_absurd_times_give_a_poor_fit_without_numpy_warnings(tmp_path):
    """A time of 1e-300 us among real ones (a damaged log, imported as it is) is an outlier
    off by ~1e300 %: said in 1e notation, and no RuntimeWarning reaches the user."""
    times = {2**20: 1e-300, 2**21: 30.0, 2**22: 50.0, 2**23: 90.0}
    rows = [make_row(collective="all_reduce", world_size=8, run_id="x", size_bytes=size,
                     time_us=time) for size, time in times.items()]  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        done = _invoke(str(write_run(tmp_path / "x", rows, {"run_id": "x"})))
    assert done.exit_code == 0, done.output
    assert "fit quality poor" in done.output
    outlier = next(line for line in done.output.splitlines() if "1.000e-300" in line)
    assert outlier.endswith("e+303%") and len(outlier) < 70, outlier


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
    lines = [
        line for line in done.output.splitlines() if line.strip().startswith(("3 MiB", "4 GiB"))
    ]
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


@pytest.mark.parametrize(
    "make, needle",
    [
        (lambda path: path.mkdir(), "holds no result rows"),
        (lambda path: None, "holds no result rows"),
        (
            lambda path: _write_run(
                path, "x", rows=[make_row(kind="overlap", size_bytes=8, time_us=1.0)]
            ),
            "no sweep rows",
        ),
    ],
)
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


@pytest.mark.slow
def test_the_real_cli_exits_2_with_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "collbench", "fit", str(tmp_path / "empty")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "holds no result rows" in done.stderr


@pytest.mark.slow
def test_importing_the_command_stays_light():
    code = (
        "import sys, collbench.cli.fit; heavy = {'numpy', 'scipy', 'pandas', 'torch'};"
        "print(sorted(heavy & set(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "[]"


# ---------------------------------------------------------------- --topology


def _write_topology(path: Path, nodes: int = 1, scale_out: bool = False) -> Path:
    """8 accelerators per node at 200 GB/s, 1 us per hop; optionally 8 x 100 Gb/s NICs."""
    import yaml

    data = {
        "name": "test-fabric",
        "nodes": nodes,
        "accelerators_per_node": 8,
        "accelerator": {"name": "gpu", "peak_bf16_tflops": 100.0},
        "scale_up": {
            "kind": "nvlink",
            "bandwidth_gbytes_s": 200.0,
            "latency_us": 1.0,
            "domain_size": 8,
        },
    }
    if scale_out:
        data["scale_out"] = {
            "kind": "roce",
            "nics_per_node": 8,
            "nic_gbits_s": 100.0,
            "latency_us": 5.0,
        }
    path.write_text(yaml.safe_dump(data))
    return path


def test_topology_reports_each_band_as_percent_of_the_model(tmp_path):
    run = _write_run(tmp_path / "a", "run-a", nodes=1, ranks_per_node=8)
    done = _invoke(str(run), "--topology", str(_write_topology(tmp_path / "fabric.yaml")))
    assert done.exit_code == 0, done.output
    assert (
        "vs topology test-fabric (1 node x 8 ranks, 8 per scale-up domain): "
        "% of model speed = predicted time / measured time"
    ) in done.output
    lines = [line.strip() for line in done.output.splitlines()]
    bands = [line for line in lines if line.startswith(("small (", "medium (", "large ("))]
    assert [line.split(" (")[0] for line in bands] == ["small", "medium", "large"]
    assert bands[0].startswith("small (8 B .. 32 KiB, 13 sizes): ")
    # 1 GiB: the ring's bound is the 200 GB/s link (and 14 hops of 1 us), the synthetic run
    # reaches 180 (after 40 us of latency)
    assert lines[lines.index(bands[2]) + 1] == (
        "at 1 GiB: 90% of model speed: measured busbw 179.3 GB/s, model 199.7 GB/s "
        "(ring, scale_up bound)"
    )
    assert "alpha 10 us" in done.output  # the fit is still there


def test_topology_json_adds_vs_topology_and_keeps_the_other_keys(tmp_path):
    run = _write_run(tmp_path / "a", "run-a", nodes=1, ranks_per_node=8)
    fabric = _write_topology(tmp_path / "fabric.yaml")
    plain = json.loads(_invoke(str(run), "--json").output)
    done = _invoke(str(run), "--json", "--topology", str(fabric))
    assert done.exit_code == 0, done.output
    (group,) = json.loads(done.output)
    versus = group.pop("vs_topology")
    assert [group] == plain
    assert versus["measure"] == (
        "% of model speed = predicted time / measured time (= measured busbw / predicted busbw)"
    )
    assert (versus["topology"], versus["nodes"], versus["ranks_per_node"]) == ("test-fabric", 1, 8)
    assert [band["band"] for band in versus["bands"]] == ["small", "medium", "large"]
    large = versus["bands"][-1]
    predicted_us = 14 + 1.75 * 2**30 / 200e3  # 2(p-1) hops of 1 us, 2(p-1)/p S at 200 GB/s
    assert large["at_max_bytes"]["pct_of_model_speed"] == pytest.approx(
        100 * predicted_us / _time_us(2**30), rel=1e-5
    )
    assert large["at_max_bytes"]["predicted_peak_busbw_gbps"] == pytest.approx(200.0)
    assert large["at_max_bytes"]["algorithm"] == "ring"
    assert len(versus["sizes"]) == len(SIZES) and versus["notes"] == []
    first = versus["sizes"][0]
    assert first["pct_of_model_speed"] == pytest.approx(
        100 * first["predicted_time_us"] / first["measured_time_us"], rel=1e-5
    )


def test_a_run_bigger_than_the_topology_is_compared_on_its_own_placement(tmp_path):
    rows = [
        make_row(
            backend="nccl",
            world_size=32,
            nodes=4,
            ranks_per_node=8,
            knobs={},
            run_id="big",
            size_bytes=size,
            time_us=_time_us(size),
        )
        for size in SIZES
    ]
    run = _write_run(tmp_path / "big", "big", rows=rows)
    done = _invoke(
        str(run),
        "--json",
        "--topology",
        str(_write_topology(tmp_path / "f.yaml", nodes=2, scale_out=True)),
    )
    assert done.exit_code == 0, done.output
    versus = json.loads(done.output)[0]["vs_topology"]
    assert versus["nodes"] == 4 and versus["ranks_per_node"] == 8
    assert "the run has 32 ranks, topology test-fabric describes 16" in versus["notes"][0]
    # 4 nodes: the tree's inner nodes carry 2S, so the ring's 100 GB/s is as good
    at_max = versus["bands"][-1]["at_max_bytes"]
    assert at_max["algorithm"] == "ring" and at_max["predicted_peak_busbw_gbps"] == 100.0


@pytest.mark.parametrize(
    "topology, needle",
    [
        ("no-such-fabric", "--topology: 'no-such-fabric' is neither a file nor a catalog name"),
        ("missing.yaml", "is not a file"),
    ],
)
def test_an_unknown_topology_is_a_spec_error(tmp_path, topology, needle):
    run = _write_run(tmp_path / "a", "run-a")
    done = _invoke(str(run), "--topology", topology)
    assert isinstance(done.exception, SpecError) and needle in str(done.exception)
    assert "\n" not in str(done.exception)


def test_a_multi_node_run_on_a_topology_without_scale_out_is_a_spec_error(tmp_path):
    run = _write_run(tmp_path / "a", "run-a", world_size=16, nodes=2, ranks_per_node=8)
    done = _invoke(str(run), "--topology", str(_write_topology(tmp_path / "f.yaml")))
    assert isinstance(done.exception, SpecError) and "scale_out" in str(done.exception)


def test_the_cli_exits_2_on_an_unknown_topology(tmp_path):
    from tests.helpers import collbench

    run = _write_run(tmp_path / "a", "run-a")
    done = collbench("fit", str(run), "--topology", "no-such-fabric")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "no-such-fabric" in done.stderr


def test_the_topology_a_sweep_recorded_is_used_without_the_option(tmp_path):
    run = _write_run(tmp_path / "a", "run-a", nodes=1, ranks_per_node=8, topology="dgx-h100")
    done = _invoke(str(run))
    assert done.exit_code == 0, done.output
    assert "vs topology dgx-h100 (1 node x 8 ranks" in done.output
    plain = _write_run(tmp_path / "b", "run-b", nodes=1, ranks_per_node=8)
    assert "vs topology" not in _invoke(str(plain)).output


def test_a_recorded_topology_that_cannot_describe_the_run_is_only_a_warning(tmp_path):
    from tests.helpers import collbench

    run = _write_run(
        tmp_path / "a", "run-a", world_size=16, nodes=2, ranks_per_node=8, topology="cpu-local"
    )  # one host, no scale-out: cannot hold 2 nodes
    done = collbench("fit", str(run))
    assert done.returncode == 0, done.stderr
    assert "peak busbw" in done.stdout and "vs topology" not in done.stdout
    assert "warning: not compared with the recorded topology: scale_out" in done.stderr
