"""collbench compare through its command line: the CI gate --fail-if-slower, --strict's one
line, and two real 2-rank vs 4-rank gloo sweeps compared on one quantity.

The quick tests call the console-script entry point in this process (the same argument
parsing, error lines and exit codes, without a Python start per call); the real sweeps run
as subprocesses."""

import json
import math
import random
from pathlib import Path

import pytest

from collbench.analysis.compare.comparison import EXIT_SLOWER
from collbench.analysis.rules.bands import BAND_NAMES as BANDS
from collbench.core.errors import EXIT_UNJUDGED
from tests.helpers import collbench, collbench_process
from tests.rows import make_row, write_run

SIZES = (1024, 65536, 1 << 20, 1 << 24)


def _write(path, times_us, iters=20, world_size=2, spread=0.01, seed=None, repeats=1):
    """A run directory: per size (and repeat) `iters` iteration times with `spread` relative
    noise around the size's time; time_us is their mean, as a sweep's batch time is."""
    rng = random.Random(path.name if seed is None else seed)
    rows = []
    for size, time_us in times_us.items():
        for repeat in range(repeats):
            samples = [time_us * math.exp(rng.gauss(0.0, spread)) for _ in range(iters)]
            rows.append(
                make_row(
                    run_id=path.name,
                    placement="in_place",
                    size_bytes=size,
                    time_us=sum(samples) / iters,
                    world_size=world_size,
                    iters=iters,
                    time_us_samples=samples,
                    repeat=repeat if repeats > 1 else None,
                )
            )
    meta = {"run_id": path.name, "timing_method": "perf_counter", "state": "completed"}
    return str(write_run(path, rows, meta))


@pytest.fixture
def runs(tmp_path):
    base = _write(tmp_path / "base", dict.fromkeys(SIZES, 100.0))
    # 20% less busbw at 1 MiB and 16 MiB, 3% less at 64 KiB, the same at 1 KiB
    slow = _write(tmp_path / "slow", {1024: 100.0, 65536: 103.0, 1 << 20: 125.0, 1 << 24: 125.0})
    return base, slow


def test_fail_if_slower_names_each_offending_size_and_exits_4(runs):
    done = collbench("compare", *runs, "--fail-if-slower", "10")
    assert done.returncode == EXIT_SLOWER == 4, done.stderr
    lines = done.stderr.strip().splitlines()
    failed = [line for line in lines if ": FAILED: " in line]
    assert [line.split(": FAILED: ")[1].split(":")[0] for line in failed] == [
        "all_reduce in_place 1 MiB",
        "all_reduce in_place 16 MiB",
    ]
    assert "-20." in failed[0] and "noise floor" in failed[0] and "no p-value: slower" in failed[0]
    assert lines[-1].startswith("collbench: error: --fail-if-slower 10: ")
    assert (
        "2 of 4 size(s) (every size) slower than the baseline by more than 10% busbw" in lines[-1]
    )
    assert "# all_reduce (in_place)" in done.stdout  # the comparison itself is still printed


def test_fail_if_slower_passes_under_the_threshold_and_outside_the_band(runs):
    for extra in (["--fail-if-slower", "25"], ["--fail-if-slower", "10", "--band", "small"]):
        done = collbench("compare", *runs, *extra, "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)[0]["quantity"] == "busbw"
        assert done.stderr.strip().splitlines()[-1].endswith(": passed")
    done = collbench("compare", *runs, "--fail-if-slower", "1", "--sizes", ":64K")
    assert done.returncode == EXIT_SLOWER and "1 of 2 size(s) (sizes 0 B .. 64 KiB)" in done.stderr


def test_without_the_gate_a_regression_still_exits_0(runs):
    done = collbench("compare", *runs)
    assert done.returncode == 0
    # one repeat a side: the header says why there is no p-value and what decided
    assert "# one repeat on a side: no p-value is offered" in done.stdout
    assert "collbench noise" in done.stdout
    (line,) = [row for row in done.stdout.splitlines() if row.split()[:1] == ["1048576"]]
    assert "noise floor" in line and "(iteration-batch spread)" in line and "slower" in line


def test_identical_runs_pass_the_gate_and_a_30_percent_slowdown_fails(tmp_path):
    """A/A: two runs drawn from one distribution (2% iteration noise) pass; a run 30% slower
    fails at every size."""
    sizes = [1024 << (2 * index) for index in range(8)]
    base = _write(tmp_path / "a1", dict.fromkeys(sizes, 100.0), spread=0.02)
    again = _write(tmp_path / "a2", dict.fromkeys(sizes, 100.0), spread=0.02)
    slow = _write(tmp_path / "b", dict.fromkeys(sizes, 100.0 / 0.7), spread=0.02)
    done = collbench("compare", base, again, "--fail-if-slower", "10")
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1].endswith(": passed")
    done = collbench("compare", base, slow, "--fail-if-slower", "5")
    assert done.returncode == EXIT_SLOWER, done.stderr
    assert f"{len(sizes)} of {len(sizes)} size(s) (every size)" in done.stderr


def test_repeats_give_holm_p_values_and_intervals(tmp_path):
    times = dict.fromkeys(SIZES, 100.0)
    base = _write(tmp_path / "a", times, repeats=4, spread=0.02)
    slow = _write(tmp_path / "b", {**times, 1 << 24: 130.0}, repeats=4, spread=0.02)
    done = collbench("compare", base, slow, "--fail-if-slower", "10")
    assert done.returncode == EXIT_SLOWER, done.stderr
    (failed,) = [line for line in done.stderr.splitlines() if ": FAILED: " in line]
    assert "16 MiB" in failed and "repeats 4 vs 4, Holm p=" in failed
    assert "# repeats on both sides: Welch's t on the repeats" in done.stdout
    assert "on NCCL/RCCL what varies between processes" in done.stdout  # issue 40 item 8
    assert "no p-value" not in done.stdout
    (result,) = json.loads(collbench("compare", base, slow, "--json").stdout)
    (item,) = [item for item in result["sizes"] if item["size_bytes"] == 1 << 24]
    decision = item["decision"]
    assert decision["basis"] == "repeats" and item["p_value"] == decision["p_value"]
    assert decision["low_pct"] < decision["effect_pct"] < decision["high_pct"] < 0


def test_imported_logs_are_decided_by_the_threshold_alone(tmp_path):
    def log_run(name, time_us):
        rows = [make_row(run_id=name, size_bytes=1 << 20, time_us=time_us)]
        meta = {"run_id": name, "timing_method": "cuda_events", "source": "nccl-tests"}
        return str(write_run(tmp_path / name, rows, meta))

    base, slow = log_run("a", 100.0), log_run("b", 112.0)
    done = collbench("compare", base, slow, "--fail-if-slower", "5")
    assert done.returncode == EXIT_SLOWER
    assert "# no per-iteration samples (imported logs): decided by the threshold alone" in (
        done.stdout
    )
    assert "threshold 5%" in done.stderr and ": FAILED: " in done.stderr


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--band", "small"], "--band: 'small' only applies with --fail-if-slower PCT"),
        (["--fail-if-slower", "5", "--band", "huge"], "is not a size band: use small, medium"),
        (["--fail-if-slower", "5", "--sizes", "1G:1M"], "ends below where it starts"),
        (["--fail-if-slower", "5", "--sizes", "1:2", "--band", "small"], "give one of them"),
        (["--fail-if-slower", "120"], "must be a percentage in [0, 100)"),
        (["--fail-if-slower", "5", "--sizes", "1G:"], "the gate would check nothing"),
    ],
)
def test_bad_gate_input_is_one_line_and_exit_2(runs, extra, needle):
    done = collbench("compare", *runs, *extra)
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("collbench: error: ") and needle in lines[0]
    assert done.stdout == ""


def test_a_run_still_being_written_is_refused_not_gated(runs):
    meta = json.loads(Path(runs[1], "meta.json").read_text())
    for run in runs:  # the candidate, and the baseline
        for other in runs:
            state = "running" if other == run else "completed"
            Path(other, "meta.json").write_text(json.dumps({**meta, "state": state}))
        done = collbench("compare", *runs, "--fail-if-slower", "10")
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert f"RUN: '{run}' is still being written (state running;" in done.stderr


def test_strict_refuses_in_one_plain_line(tmp_path):
    base = _write(tmp_path / "a", {1024: 100.0})
    other = _write(tmp_path / "b", {1024: 100.0}, iters=50, world_size=4)
    done = collbench("compare", base, other, "--strict")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "collbench: error: runs measured differently (iters 20 vs 50, ranks_per_node 2 vs 4, "
        "world_size 2 vs 4); drop --strict to compare anyway"
    ]


def test_a_shared_gpu_test_run_is_refused_against_a_real_one(tmp_path):
    """COLLBENCH_SHARED_GPU=1 runs (issue 40 item 3) compare with each other, never with a
    run whose ranks had a GPU each."""
    real = _write(tmp_path / "real", {1024: 100.0})
    shared = [_write(tmp_path / name, {1024: 100.0}) for name in ("s1", "s2")]
    for run in shared:
        meta = json.loads((tmp_path / run / "meta.json").read_text())
        (tmp_path / run / "meta.json").write_text(json.dumps({**meta, "shared_gpu": "test"}))
    done = collbench("compare", real, shared[0])
    assert done.returncode == 2 and done.stdout == ""
    assert "(shared_gpu False vs True)" in done.stderr and "COLLBENCH_SHARED_GPU=1" in done.stderr
    assert collbench("compare", *shared).returncode == 0


def test_help_documents_the_gate():
    text = " ".join(collbench("compare", "--help").stdout.split())
    assert "--fail-if-slower" in text and f"exit {EXIT_SLOWER}" in text
    assert "Holm" in text and "--band" in text and "--sizes" in text
    assert "--noise-floor" in text and "independent" in text and "Mann-Whitney" not in text


@pytest.mark.slow  # two real gloo sweeps, ~15 s
def test_real_2_and_4_rank_sweeps_compare_on_busbw(tmp_path):
    paths = []
    for ranks in (2, 4):
        out = tmp_path / f"n{ranks}"
        done = collbench_process(
            "sweep", "-g", str(ranks), "--collective", "all_reduce", "--min-bytes", "1K",
            "--max-bytes", "1M", "--iters", "10", "--warmup", "2", "--repeats", "1", "--out", str(out), "--quiet",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        paths.append(str(out))
    done = collbench_process("compare", *paths, "--json")
    assert done.returncode == 0, done.stderr
    (result,) = json.loads(done.stdout)
    assert result["quantity"] == "busbw" and result["methodology_differs"]
    assert {"world_size", "ranks_per_node"} <= {d["field"] for d in result["differences"]}
    for item in result["sizes"]:
        assert item["quantity"] == "busbw" and item["baseline_busbw_gbps"] > 0
        direction = {"faster": item["ratio"] > 1, "slower": item["ratio"] < 1}
        assert direction.get(item["verdict"], True), item
    strict = collbench_process("compare", *paths, "--strict")
    assert strict.returncode == 2 and "world_size 2 vs 4" in strict.stderr


def test_an_nccl_tests_log_against_an_rccl_tests_log_raises_no_methodology_alarm(tmp_path):
    # rccl-tests is nccl-tests' fork: same timer, same busbw; only the tool differs (listed).
    from tests.nccl_log import nccl_tests_log

    sizes = [1024 * 4**i for i in range(6)]
    text = nccl_tests_log("all_reduce", 8, 1, sizes, lambda size: 10 + size / 1e4)
    (tmp_path / "nccl.log").write_text(text)
    rccl = text.replace("# nccl-tests version 2.17.6", "# rccl-tests: Version develop:4e1b6ea")
    (tmp_path / "rccl.log").write_text(rccl.replace("NVIDIA H100 80GB HBM3", "AMD MI300X"))
    for name in ("nccl", "rccl"):
        done = collbench("import", "nccl-tests", str(tmp_path / f"{name}.log"), "--out",
                         str(tmp_path / name))  # fmt: skip
        assert done.returncode == 0, done.stderr
    done = collbench("compare", str(tmp_path / "nccl"), str(tmp_path / "rccl"))
    assert done.returncode == 0, done.stderr
    assert "METHODOLOGY DIFFERS" not in done.stdout
    assert "tool" in done.stdout and "rccl-tests" in done.stdout


def test_a_gate_that_cannot_see_the_threshold_says_so_and_does_not_pass(tmp_path):
    """A recorded floor of 60% (a busy machine) blinds a 5% gate: a run taking 40% longer is
    within it, so the gate exits EXIT_UNJUDGED naming the blind sizes, never 0 with "passed"."""
    sizes = [1024 << (2 * index) for index in range(4)]
    base = _write(tmp_path / "a", dict.fromkeys(sizes, 100.0), spread=0.01, seed=1)
    slow = _write(tmp_path / "b", dict.fromkeys(sizes, 140.0), spread=0.01, seed=2)
    floor = tmp_path / "floor.json"
    floor.write_text(json.dumps({"source": "hogs", "pct_by_band": dict.fromkeys(BANDS, 60.0)}))
    gate = ["--fail-if-slower", "5", "--noise-floor", str(floor)]
    done = collbench("compare", base, slow, *gate)
    assert done.returncode == EXIT_UNJUDGED, done.stderr
    blind = [line for line in done.stderr.splitlines() if ": BLIND: " in line]
    assert len(blind) == len(sizes) - sum(": not failed: " in x for x in done.stderr.splitlines())
    assert "4 size(s) blind" in done.stderr and "could not tell" in done.stderr
    assert "passed" not in done.stderr
    # the JSON carries each size's power: 60% floor -> 37.5% is the smallest slowdown seen
    (result,) = json.loads(collbench("compare", base, slow, *gate, "--json").stdout)
    powers = [item["decision"]["detectable_pct"] for item in result["sizes"]]
    assert powers == pytest.approx([100 * 60 / 160] * len(sizes))
    # without the floor the same runs are seen and fail
    assert collbench("compare", base, slow, "--fail-if-slower", "5").returncode == EXIT_SLOWER


@pytest.mark.slow  # a real 2-rank gloo sweep
def test_a_real_shared_gpu_sweep_records_the_mode_and_is_refused_against_a_real_run(tmp_path):
    """The writing side of the test mode: each rank a host of its own, meta.json's
    `shared_gpu`, and compare's refusal of it against a run whose ranks did not share."""
    out = tmp_path / "shared"
    args = ["-c", "all_reduce", "-b", "1K", "-e", "1K", "-n", "2", "-w", "1", "--repeats", "1"]
    done = collbench_process(
        "sweep", *args, "-q", "--out", str(out), env={"COLLBENCH_SHARED_GPU": "1"}
    )
    assert done.returncode == 0, done.stderr
    assert "COLLBENCH_SHARED_GPU=1: test mode" in done.stderr
    meta = json.loads((out / "meta.json").read_text())
    assert meta["shared_gpu"] and [host.rsplit("~", 1)[1] for host in meta["hosts"]] == ["r0", "r1"]
    real = _write(tmp_path / "real", {1024: 100.0})
    refused = collbench("compare", real, str(out))
    assert refused.returncode == 2 and "(shared_gpu False vs True)" in refused.stderr
