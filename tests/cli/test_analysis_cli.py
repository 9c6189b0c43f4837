"""collbench compare and report through the real command line, on small run directories
written here (rows.jsonl + meta.json as a sweep writes them)."""

import json

import pytest

from tests.helpers import collbench
from tests.rows import make_row
from tests.rows import write_run as write_run_dir


def write_run(path, times_us, iters=20, knobs=None, collective="all_reduce", samples=True):
    meta = {
        "run_id": path.name,
        "timing_method": "perf_counter",
        "spec": {"rank_stat": "avg"},
        "versions": {"torch": "2.13.0"},
        "knobs": knobs or {},
        "hosts": ["box"],
        "backend": "gloo",
        "world_size": 2,
        "state": "completed",
    }
    rows = [
        make_row(
            run_id=path.name,
            collective=collective,
            placement="in_place",
            size_bytes=size,
            time_us=time_us,
            busbw_gbps=size / time_us / 1e3,
            time_us_samples=[time_us * (1 + 0.01 * (i % 5)) for i in range(iters)]
            if samples
            else [],
            iters=iters,
            count=size // 4,
            knobs={"env": knobs or {}},
        )
        for size, time_us in times_us.items()
    ]
    return write_run_dir(path, rows, meta)


def test_compare_prints_ratios_verdicts_and_bands(tmp_path):
    base = write_run(tmp_path / "a", {1024: 100.0, 2**20: 1000.0})
    cand = write_run(tmp_path / "b", {1024: 50.0, 2**20: 2000.0}, knobs={"NCCL_ALGO": "Ring"})
    done = collbench("compare", str(base), str(cand))
    assert done.returncode == 0, done.stderr
    assert "METHODOLOGY" not in done.stdout
    lines = done.stdout.splitlines()
    assert any(line.split()[:4] == ["1024", "0.01024", "0.02048", "2.000x"] for line in lines)
    assert any("0.500x" in line and "slower" in line for line in lines)
    assert "#   env.NCCL_ALGO: (unset) -> Ring" in lines
    assert any(line.startswith("#   all_reduce in_place small") for line in lines)


@pytest.mark.slow  # three compare commands, ~4 s
def test_compare_flags_methodology_and_strict_refuses(tmp_path):
    base = write_run(tmp_path / "a", {1024: 100.0})
    cand = write_run(tmp_path / "b", {1024: 100.0}, iters=50)
    done = collbench("compare", str(base), str(cand), "--json")
    assert done.returncode == 0, done.stderr
    (result,) = json.loads(done.stdout)
    assert result["methodology_differs"] is True
    assert {"field": "iters", "baseline": 20, "candidate": 50, "kind": "methodology"} in result[
        "differences"
    ]
    assert result["sizes"][0]["verdict"] == "same"
    done = collbench("compare", str(base), str(cand))
    assert "# !!! METHODOLOGY DIFFERS" in done.stdout and "# !!!   iters: 20 -> 50" in done.stdout
    strict = collbench("compare", str(base), str(cand), "--strict")
    assert strict.returncode == 2
    assert strict.stderr.strip().splitlines()[-1] == (
        "collbench: error: runs measured differently (iters 20 vs 50); "
        "drop --strict to compare anyway"
    )


def test_compare_without_samples_says_so(tmp_path):
    base = write_run(tmp_path / "a", {1024: 100.0})
    cand = write_run(tmp_path / "b", {1024: 80.0}, samples=False)
    (result,) = json.loads(collbench("compare", str(base), str(cand), "--json").stdout)
    assert result["sizes"][0]["verdict"] == "unjudged"  # no samples, no threshold: no call
    assert "no per-iteration samples" in result["sizes"][0]["decision"]["reason"]
    assert result["sizes"][0]["ratio"] == pytest.approx(1.25)
    gated = collbench("compare", str(base), str(cand), "--json", "--fail-if-slower", "10")
    (result,) = json.loads(gated.stdout)
    assert result["sizes"][0]["verdict"] == "faster"  # +25%, decided by the threshold alone
    assert result["sizes"][0]["decision"]["basis"] == "threshold"


@pytest.mark.parametrize(
    "make, needle",
    [
        (lambda t: [write_run(t / "a", {8: 1.0})], "needs a baseline and at least one run"),
        (lambda t: [write_run(t / "a", {8: 1.0}), t / "missing"], "is not a run directory"),
        (
            lambda t: [write_run(t / "a", {8: 1.0}), (t / "empty").mkdir() or t / "empty"],
            "holds no result rows",
        ),
        (
            lambda t: [write_run(t / "a", {8: 1.0}), write_run(t / "b", {16: 1.0})],
            "nothing to compare",
        ),
        (
            lambda t: [
                write_run(t / "a", {8: 1.0}),
                write_run(t / "b", {8: 1.0}, collective="all_gather"),
            ],
            "nothing to compare",
        ),
    ],
)
def test_bad_compare_input_is_one_line_and_exit_2(tmp_path, make, needle):
    runs = [str(path) for path in make(tmp_path)]
    done = collbench("compare", *runs)
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("collbench: error: ") and needle in lines[0]


def test_compare_bad_alpha(tmp_path):
    base = write_run(tmp_path / "a", {8: 1.0})
    done = collbench("compare", str(base), str(base), "--alpha", "2")
    assert done.returncode == 2 and "--alpha: 2.0 must be between 0 and 1" in done.stderr


@pytest.mark.slow  # two report commands, ~5 s
def test_report_writes_html_and_markdown(tmp_path):
    run = write_run(tmp_path / "a", {2**k: 20.0 + 2**k / 5e3 for k in range(3, 22)})
    done = collbench("report", str(run), "--out", str(tmp_path / "r.html"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"# Report: {tmp_path / 'r.html'} (2 charts)"
    assert (tmp_path / "r.html").read_text().count("data:image/png;base64,") == 2
    done = collbench("report", str(run), "--format", "md", "--out", str(tmp_path / "r.md"))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "r_files").iterdir()) == [
        "all_reduce_in_place_busbw.png",
        "all_reduce_in_place_latency.png",
    ]


@pytest.mark.parametrize(
    "args, needle",
    [
        (["RUN", "--format", "pdf"], "--format: 'pdf' is not one of html, md"),
        (["RUN", "--out", "/no/such/dir/r.html"], "is in a folder that does not exist"),
        (["MISSING"], "is not a run directory"),
        (["EMPTY"], "holds no result rows"),
    ],
)
def test_bad_report_input_is_one_line_and_exit_2(tmp_path, args, needle):
    run = write_run(tmp_path / "a", {8: 1.0, 16: 2.0})
    (tmp_path / "empty").mkdir()
    names = {
        "RUN": str(run),
        "MISSING": str(tmp_path / "missing"),
        "EMPTY": str(tmp_path / "empty"),
    }
    done = collbench("report", *[names.get(arg, arg) for arg in args])
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0]


@pytest.mark.slow  # two fit commands, ~3 s
def test_fit_refuses_to_pool_runs_measured_differently(tmp_path):
    sizes = {2**k: 20.0 + 2**k / 5e3 for k in range(3, 20)}
    base = write_run(tmp_path / "a", sizes)
    other = write_run(tmp_path / "b", sizes)
    meta = json.loads((other / "meta.json").read_text())
    (other / "meta.json").write_text(json.dumps({**meta, "timing_method": "cuda_events"}))
    done = collbench("fit", str(base), str(other))
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert (
        "(one fit group: all_reduce, gloo, 2 ranks) measured differently "
        "(timing_method 'perf_counter' vs 'cuda_events'); fit them separately"
    ) in line
    same = write_run(tmp_path / "c", sizes)
    done = collbench("fit", str(base), str(same), "--json")
    assert done.returncode == 0, done.stderr
    (group,) = json.loads(done.stdout)
    assert group["runs"] == ["a", "c"] and group["n_points"] == 2 * len(sizes)


def test_a_report_that_fails_to_write_leaves_nothing_behind(tmp_path):
    from collbench.core.errors import SpecError
    from collbench.run.report import write_report as _write_report

    (tmp_path / "r.md").mkdir()  # the report's own write fails, after its images
    files = {tmp_path / "r_files" / "a.png": b"png", tmp_path / "r.md": b"# report"}
    with pytest.raises(SpecError) as error:
        _write_report(files, tmp_path / "r.md")
    assert str(error.value).startswith(f"--out: '{tmp_path / 'r.md'}' cannot be written")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["r.md"]
