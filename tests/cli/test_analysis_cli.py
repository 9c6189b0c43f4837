"""collbench compare and report through the real command line, on small run directories
written here (rows.jsonl + meta.json as a sweep writes them)."""

import json

import pytest

from tests.helpers import collbench


def write_run(path, times_us, iters=20, knobs=None, collective="all_reduce", samples=True):
    path.mkdir(parents=True)
    meta = {"run_id": path.name, "timing_method": "perf_counter", "spec": {"rank_stat": "avg"},
            "versions": {"torch": "2.13.0"}, "knobs": knobs or {}, "hosts": ["box"],
            "backend": "gloo", "world_size": 2, "state": "completed"}
    (path / "meta.json").write_text(json.dumps(meta))
    rows = []
    for size, time_us in times_us.items():
        rows.append({"kind": "sweep", "run_id": path.name, "collective": collective,
                     "placement": "in_place", "size_bytes": size, "time_us": time_us,
                     "busbw_gbps": size / time_us / 1e3, "algbw_gbps": size / time_us / 1e3,
                     "time_us_samples": [time_us * (1 + 0.01 * (i % 5)) for i in range(iters)]
                     if samples else [], "dtype": "float32", "op": "sum", "iters": iters,
                     "warmup": 5, "world_size": 2, "nodes": 1, "ranks_per_node": 2,
                     "backend": "gloo", "n_wrong": 0, "count": size // 4, "root": -1,
                     "knobs": {"env": knobs or {}}})
    (path / "rows.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_compare_prints_ratios_verdicts_and_bands(tmp_path):
    base = write_run(tmp_path / "a", {1024: 100.0, 2 ** 20: 1000.0})
    cand = write_run(tmp_path / "b", {1024: 50.0, 2 ** 20: 2000.0}, knobs={"NCCL_ALGO": "Ring"})
    done = collbench("compare", str(base), str(cand))
    assert done.returncode == 0, done.stderr
    assert "METHODOLOGY" not in done.stdout
    lines = done.stdout.splitlines()
    assert any(line.split()[:4] == ["1024", "0.01024", "0.02048", "2.000x"] for line in lines)
    assert any("0.500x" in line and "slower" in line for line in lines)
    assert "#   env.NCCL_ALGO: (unset) -> Ring" in lines
    assert any(line.startswith("#   all_reduce in_place small") for line in lines)


def test_compare_flags_methodology_and_strict_refuses(tmp_path):
    base = write_run(tmp_path / "a", {1024: 100.0})
    cand = write_run(tmp_path / "b", {1024: 100.0}, iters=50)
    done = collbench("compare", str(base), str(cand), "--json")
    assert done.returncode == 0, done.stderr
    (result,) = json.loads(done.stdout)
    assert result["methodology_differs"] is True
    assert {"field": "iters", "baseline": 20, "candidate": 50,
            "kind": "methodology"} in result["differences"]
    assert result["sizes"][0]["verdict"] == "same"
    done = collbench("compare", str(base), str(cand))
    assert "# !!! METHODOLOGY DIFFERS" in done.stdout and "# !!!   iters: 20 -> 50" in done.stdout
    strict = collbench("compare", str(base), str(cand), "--strict")
    assert strict.returncode == 2
    assert strict.stderr.strip().splitlines()[-1] == (
        "collbench: error: --strict: True refuses runs measured differently: iters 20 vs 50")


def test_compare_without_samples_says_so(tmp_path):
    base = write_run(tmp_path / "a", {1024: 100.0})
    cand = write_run(tmp_path / "b", {1024: 80.0}, samples=False)
    (result,) = json.loads(collbench("compare", str(base), str(cand), "--json").stdout)
    assert result["sizes"][0]["verdict"] == "no samples"
    assert result["sizes"][0]["ratio"] == pytest.approx(1.25)


@pytest.mark.parametrize("make, needle", [
    (lambda t: [write_run(t / "a", {8: 1.0})], "needs a baseline and at least one run"),
    (lambda t: [write_run(t / "a", {8: 1.0}), t / "missing"], "is not a run directory"),
    (lambda t: [write_run(t / "a", {8: 1.0}), (t / "empty").mkdir() or t / "empty"],
     "holds no result rows"),
    (lambda t: [write_run(t / "a", {8: 1.0}), write_run(t / "b", {16: 1.0})],
     "nothing to compare"),
    (lambda t: [write_run(t / "a", {8: 1.0}),
                write_run(t / "b", {8: 1.0}, collective="all_gather")], "nothing to compare"),
])
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
