"""`collbench predict` (fabrics side by side, --curves marking measured columns, --html) and
`collbench mfu --price` (cost per step and per million tokens), end to end; bad input is one
line and exit 2. The fabrics are tests/fixtures/topologies/predict-{a,b}.yaml, whose figures
tests/unit/analysis/model/test_fabric_compare.py computes by hand."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import collbench, collbench_process
from tests.rows import make_row, write_run

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "topologies"
A = str(FIXTURES / "predict-a.yaml")
B = str(FIXTURES / "predict-b.yaml")
GIB = 1 << 30


def _table_line(stdout: str, size: str) -> list[str]:
    return next(line.split() for line in stdout.splitlines() if line.split()[:1] == [size])


@pytest.mark.slow
def test_two_fabrics_side_by_side_in_a_real_process():
    done = collbench_process(
        *("predict", "-T", A, "-T", B, "-c", "all_reduce", "-b", "8", "-e", "8G", "-f", "1024"),
        *("--comm-efficiency", "1"),  # the hardware bound, the figures computed by hand
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "A = predict-a: 2 nodes x 4 = 8 ranks (its topology's node count)" in out
    assert "B = predict-b: 2 nodes x 4 = 8 ranks" in out
    assert "# all_reduce" in out and "B/A" in out
    # 8G: A 16 us + 2 S / 300 GB/s (tree, scale-up), B 32 us + 1.75 S / 150 GB/s (ring).
    cells = _table_line(out, "8G")
    size = 8 * GIB
    a_us, b_us = 16 + 2 * size / 300e3, 32 + 1.75 * size / 150e3
    assert cells[1:3] == [f"{a_us:.0f}", "p"]
    assert cells[3:7] == [f"{size / a_us / 1e3 * 1.75:.2f}", "scale-up", "262.5", "tree"]
    assert cells[7:9] == [f"{b_us:.0f}", "p"]
    assert cells[10:13] == ["scale-up", "150.0", "ring"]
    assert cells[-1] == f"{b_us / a_us:.3f}"
    assert _table_line(out, "8")[4] == "latency"
    assert done.stderr == ""


def test_the_issues_catalog_example_and_json():
    args = ["predict", "-T", "dgx-h100", "-T", "mi300x", "-c", "all_reduce", "-b", "1M", "-e", "8G"]
    done = collbench(*args)
    assert done.returncode == 0, done.stderr
    sizes = [line.split()[0] for line in done.stdout.splitlines() if line[:1].isdigit()]
    assert sizes == [
        "1M",
        "2M",
        "4M",
        "8M",
        "16M",
        "32M",
        "64M",
        "128M",
        "256M",
        "512M",
        "1G",
        "2G",
        "4G",
        "8G",
    ]
    data = json.loads(collbench(*args, "--json").stdout)
    assert [item["topology"] for item in data["fabrics"]] == ["dgx-h100", "mi300x"]
    assert data["fabrics"][0]["nodes_from"] == "topology"
    assert len(data["lines"]) == 14
    first = data["lines"][0]
    assert first["size_bytes"] == 1 << 20 and first["collective"] == "all_reduce"
    a, b = first["fabrics"]
    assert first["time_ratio_to_first"][1] == pytest.approx(b["time_us"] / a["time_us"], rel=1e-5)
    assert {a["source"], b["source"]} == {"predicted"}


def test_predict_prices_a_link_as_mfu_does():
    """One pricing (issue 38 item 6): predict's default is mfu's share of the link rates."""
    from collbench.analysis.mfu.inputs import cost_model_pricer
    from collbench.topologies.loader import load_topology

    data = json.loads(
        collbench("predict", "-T", A, "-c", "all_reduce", "-b", "1G", "-e", "1G", "--json").stdout
    )
    mfu_s = cost_model_pricer(load_topology(A))("all_reduce", GIB, 8, 1).time_s
    assert data["lines"][0]["fabrics"][0]["time_us"] == pytest.approx(mfu_s * 1e6, rel=1e-5)


def test_nodes_sets_every_fabrics_node_count_and_the_header_says_so():
    data = json.loads(
        collbench(
            "predict", "-T", A, "-T", "dgx-h100", "--nodes", "4", "-b", "1M", "-e", "1M", "--json"
        ).stdout
    )
    assert [(item["nodes"], item["ranks"], item["nodes_from"]) for item in data["fabrics"]] == [
        (4, 16, "--nodes"),
        (4, 32, "--nodes"),
    ]
    assert [line["collective"] for line in data["lines"]] == [
        "all_reduce",
        "all_gather",
        "reduce_scatter",
    ]
    done = collbench("predict", "-T", A, "--nodes", "4", "-b", "1M", "-e", "1M")
    assert "4 nodes x 4 = 16 ranks (--nodes)" in done.stdout


def _measured_run(tmp_path: Path) -> str:
    """predict-a's 8 ranks over 2 nodes, all_reduce at 1-4 MiB: 20 us + S x 1.75 / 100 GB/s."""
    rows = [
        make_row(size_bytes=size, time_us=20 + size * 1.75 / 1e5, world_size=8, nodes=2)
        for size in (1 << 20, 2 << 20, 4 << 20)
    ]
    return str(write_run(tmp_path / "measured", rows))


def test_curves_mark_the_measured_column(tmp_path):
    run = _measured_run(tmp_path)
    args = ["predict", "-T", A, "-T", B, "-c", "all_reduce", "-b", "512K", "-e", "8M"]
    done = collbench(*args, "--curves", f"predict-a={run}")
    assert done.returncode == 0, done.stderr
    assert "A = predict-a: 2 nodes x 4 = 8 ranks (its topology's node count); nvlink" in done.stdout
    assert f"measured: {run}" in done.stdout
    tags = {
        size: _table_line(done.stdout, size)[2]
        for size in ("512K", "1M", "3M", "4M", "8M")
        if size != "3M"
    }
    assert tags == {"512K": "m*", "1M": "m", "4M": "m", "8M": "m*"}
    assert _table_line(done.stdout, "1M")[1] == f"{20 + (1 << 20) * 1.75 / 1e5:.4g}"
    assert {_table_line(done.stdout, size)[8] for size in ("512K", "1M", "8M")} == {"p"}
    assert _table_line(done.stdout, "1M")[-1] == "p/m"  # B predicted over A measured: said
    data = json.loads(collbench(*args, "--curves", f"predict-a={run}", "--json").stdout)
    assert data["lines"][1]["time_ratio_kinds"] == ["m/m", "p/m"]
    steps = ["-c", "all_reduce", "-b", "1M", "-e", "4M", "-i", "1M"]
    between = collbench("predict", "-T", A, *steps, "--curves", run, "--json")  # plain RUN
    lines = json.loads(between.stdout)["lines"]
    sources = {line["size_bytes"]: line["fabrics"][0]["source"] for line in lines}
    assert sources[3 << 20] == "fitted" and sources[2 << 20] == "measured"
    assert lines[0]["fabrics"][0]["run"] == run


def test_an_extrapolation_past_the_models_bound_is_capped_at_it_and_says_so(tmp_path):
    """A run at 500 GB/s busbw (predict-a's bound at 80%: 210 GB/s, tree): measured cells stay
    as measured; its fit beyond 4M would pass the bound, so 8M is the bound, tagged m^."""
    rows = [
        make_row(size_bytes=size, time_us=20 + size * 1.75 / 5e5, world_size=8, nodes=2)
        for size in (1 << 20, 2 << 20, 4 << 20)
    ]
    run = str(write_run(tmp_path / "fast", rows))
    done = collbench(
        "predict", "-T", A, "-c", "all_reduce", "-b", "4M", "-e", "8M", "--curves", run
    )
    assert done.returncode == 0, done.stderr
    assert (
        _table_line(done.stdout, "4M")[2] == "m" and float(_table_line(done.stdout, "4M")[3]) > 210
    )
    assert _table_line(done.stdout, "8M")[2:6] == ["m^", "210.00", "scale-up", "210.0"]
    assert "m^: an m* past the bound, capped at it" in done.stdout


def test_a_runs_dtypes_are_never_pooled_one_is_chosen_and_said(tmp_path):
    """Issue 41 item 1: float32 and (2x slower) bfloat16 rows of one run: the cell is the
    chosen bfloat16 time (first by name at equal counts), not the two pooled, and said."""
    rows = [
        make_row(
            size_bytes=size,
            time_us=scale * (20 + size * 1.75 / 1e5),
            world_size=8,
            nodes=2,
            dtype=dtype,
        )
        for size in (1 << 20, 2 << 20, 4 << 20)
        for dtype, scale in (("float32", 1), ("bfloat16", 2))
    ]
    run = str(write_run(tmp_path / "dtypes", rows))
    done = collbench(
        "predict", "-T", A, "-c", "all_reduce", "-b", "1M", "-e", "1M", "--curves", run
    )
    assert done.returncode == 0, done.stderr
    assert _table_line(done.stdout, "1M")[1:3] == [f"{2 * (20 + (1 << 20) * 1.75 / 1e5):.4g}", "m"]
    assert (
        "holds 2 dtype/op sets (bfloat16 sum, float32 sum): priced with bfloat16 sum only"
        in done.stderr
    )


def test_curves_at_another_shape_stay_predicted_with_a_warning(tmp_path):
    run = _measured_run(tmp_path)
    done = collbench(
        "predict",
        "-T",
        A,
        "--nodes",
        "4",
        "-c",
        "all_reduce",
        "-b",
        "1M",
        "-e",
        "1M",
        "--curves",
        run,
    )
    assert done.returncode == 0
    assert _table_line(done.stdout, "1M")[2] == "p"
    assert "no timed all_reduce rows at 16 ranks over 4 nodes" in done.stderr
    assert f"; {run} measured no cell: all predicted" in done.stdout  # not "measured: RUN"


@pytest.mark.slow
def test_html_writes_a_report_and_refuses_to_overwrite(tmp_path):
    out = tmp_path / "predict.html"
    args = [
        "predict",
        "-T",
        A,
        "-T",
        B,
        "-c",
        "all_reduce,all_gather",
        "-b",
        "8",
        "-e",
        "64M",
        "--html",
        str(out),
        "--comm-efficiency",
        "1",
    ]
    done = collbench(*args)
    assert done.returncode == 0, done.stderr
    page = out.read_text(encoding="utf-8")
    assert page.count("<img") == 2 and "<h2>all_gather</h2>" in page
    assert "B/A time" in page and "262.5 tree" in page
    again = collbench(*args)
    assert again.returncode == 2 and "exists" in again.stderr
    assert collbench(*args, "--force").returncode == 0


LLAMA = ["--model", "llama3-8b", "--seq", "4096", "--global-batch", "16", "--tp", "4"]


def test_mfu_price_prints_cost_per_step_and_per_million_tokens():
    prices = ["--price", "predict-a=2.10", "--price", "predict-b=2.45"]
    done = collbench("mfu", "-T", A, "-T", B, *LLAMA, *prices)
    assert done.returncode == 0, done.stderr
    data = json.loads(collbench("mfu", "-T", A, "-T", B, *LLAMA, *prices, "--json").stdout)
    costs = []
    for fabric, usd in zip(data["fabrics"], (2.10, 2.45), strict=True):
        step = usd * fabric["accelerators"] * fabric["step_time_s"] / 3600
        cost = fabric["cost"]
        assert cost["usd_per_gpu_hour"] == usd
        assert cost["usd_per_step"] == pytest.approx(step, rel=1e-5)
        assert cost["usd_per_million_tokens"] == pytest.approx(step / (16 * 4096) * 1e6, rel=1e-5)
        costs.append(cost)
    table = done.stdout.split("cost (--price)", 1)[1].splitlines()
    assert table[1].split()[-2:] == ["2.10", "2.45"]
    assert table[2].split()[3:] == [
        f"{costs[0]['usd_per_step']:.4g}",
        "p",
        f"{costs[1]['usd_per_step']:.4g}",
        "p",
    ]
    change = costs[1]["usd_per_million_tokens"] / costs[0]["usd_per_million_tokens"] - 1
    assert "predict-b vs predict-a: GPU-hour +16.7%" in done.stdout
    assert f"cost per million tokens {change:+.1%}" in done.stdout


def test_mfu_without_price_prints_no_cost():
    done = collbench("mfu", "-T", A, *LLAMA)
    assert done.returncode == 0 and "cost (--price)" not in done.stdout
    data = json.loads(collbench("mfu", "-T", A, *LLAMA, "--json").stdout)
    assert "cost" not in data["fabrics"][0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["mfu", "-T", A, *LLAMA, "--price", "dgx-h100=2"],
            "--price: 'dgx-h100=2' names no --topology given",
        ),
        (
            ["mfu", "-T", A, *LLAMA, "--price", "predict-a=free"],
            "--price: 'predict-a=free' must be from 0.0001 to 10000",
        ),
        *(  # one --curves grammar: a catalog fabric not given is refused alike
            ([*command, "-T", A, "--curves", "dgx-h100=somewhere"], "--curves: 'dgx-h100=")
            for command in (["predict"], ["mfu", *LLAMA])
        ),
        (["predict", "-T", A, "--curves", "tuned=run"], "--curves: 'tuned=run' names no --top"),
        (["predict", "-T", A, "--curves", "predict-a="], "--curves: 'predict-a=' is not [NAME"),
        (["predict", "-T", A, "--nodes", "0"], "--nodes: 0 must be from 1 to"),
        (["predict", "-T", A, "-e", "12Q"], "--max-bytes: '12Q' is not a size"),
        (["predict", "-T", A, "-c", "all_reduce,nope"], "--collective: 'nope' is unknown"),
        # absurd numbers: one bounds table (core/units.py NUMBER_BOUNDS), checked at parse
        (["predict", "-T", A, "--comm-efficiency", "1.5"], "--comm-efficiency: 1.5 must be from"),
        (["predict", "-T", A, "--comm-efficiency", "1e-300"], "--comm-efficiency: 1e-300 must"),
        (["predict", "-T", A, "-e", "99999999999999999999999"], "--max-bytes: '9999999999999"),
        (["mfu", "-T", A, *LLAMA, "--price", "predict-a=1e308"], "--price: 'predict-a=1e308' mu"),
        (["predict", "-T", str(FIXTURES / "slow-link.yaml")], "scale_up.bandwidth_gbytes_s: 1e-"),
        (["predict", "-T", "no-such-fabric"], "--topology: 'no-such-fabric' is neither a file"),
        (["predict", "-T", "cpu-local", "--nodes", "2"], "--nodes: 2 does not fit cpu-local"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message):
    done = collbench(*args)
    assert done.returncode == 2
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"collbench: error: {message}")


@pytest.mark.slow
def test_predict_imports_neither_torch_nor_numpy():
    """What keeps it well under a second: the cost model is plain Python."""
    code = (
        "import sys; from collbench.cli.app import main\n"
        "try:\n    main(['predict', '-T', 'dgx-h100', '-T', 'mi300x', '-b', '1M', '-e', '8G'])\n"
        "except SystemExit as done:\n    assert done.code in (0, None), done.code\n"
        "print(sorted(m for m in ('torch', 'numpy', 'scipy', 'matplotlib') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]"
