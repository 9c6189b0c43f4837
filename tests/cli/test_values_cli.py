"""Values that pass the parser and are still not data (issue 29, "Values that pass
validation and should not"), through the command line: each is refused in one line, exit 2,
before any rank starts or anything is written. In-process tables per class, and one real
process per class (marked slow). The values' own tables are tests/unit/core/test_values.py."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.helpers import collbench, collbench_process
from tests.rows import make_row, write_run


def _refused(done, *words: str) -> str:
    """The one error line of a refused command (exit 2, no traceback), holding `words`."""
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith("collbench: error: "), lines[0]
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


# --- rows out of range: fit, compare and mfu --curves read them ------------------------------


def _bad_run(tmp_path: Path, **columns) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    good = make_row().to_dict()
    lines = [good, {**good, "size_bytes": 2 << 20}, {**good, "size_bytes": 4 << 20, **columns}]
    (run / "rows.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return run


ROW_CASES = {
    "world size 0 (was ZeroDivisionError in fit)": ({"world_size": 0}, "world_size"),
    "negative size": ({"size_bytes": -8}, "size_bytes"),
    "NaN time": ({"time_us": math.nan}, "time_us"),
    "zero time": ({"time_us": 0.0}, "time_us"),
    "infinite busbw": ({"busbw_gbps": math.inf}, "busbw_gbps"),
}
READERS = (["fit"], ["compare"], ["mfu", "-T", "cpu-local", "-m", "llama3-8b", "--curves"])


@pytest.mark.parametrize("reader", READERS, ids=[r[0] for r in READERS])
@pytest.mark.parametrize("case", ROW_CASES, ids=list(ROW_CASES))
def test_a_row_out_of_range_is_one_line_naming_file_and_line(tmp_path, case, reader):
    columns, field = ROW_CASES[case]
    run = _bad_run(tmp_path, **columns)
    args = [*reader, str(run)] + ([str(run)] if reader == ["compare"] else [])
    args += ["--global-batch", "8", "--allow-oversubscribed-memory"] if "mfu" in reader else []
    _refused(collbench(*args), field, f"{run / 'rows.jsonl'} line 3")


@pytest.mark.slow  # a real process
def test_a_row_out_of_range_in_a_real_process(tmp_path):
    run = _bad_run(tmp_path, world_size=0)
    _refused(collbench_process("fit", str(run)), "world_size", "line 3", "must be 1 to 2^63-1")


# --- sweep --timeout -------------------------------------------------------------------------

TIMEOUTS = ("inf", "nan", "1e300", "-inf", "604801")


@pytest.mark.parametrize("timeout", TIMEOUTS)
def test_a_timeout_beyond_its_bound_is_refused(tmp_path, timeout):
    out = tmp_path / "out"
    done = collbench("sweep", "-g", "2", "--timeout", timeout, "--out", str(out))
    _refused(done, "--timeout", "at most 604,800 seconds")
    assert not out.exists()


@pytest.mark.slow  # a real process
def test_a_timeout_of_inf_in_a_real_process(tmp_path):
    out = tmp_path / "out"
    done = collbench_process("sweep", "-g", "2", "--timeout", "inf", "--out", str(out))
    _refused(done, "--timeout")
    assert not out.exists()


# --- overlap --matmul-shape beyond memory ----------------------------------------------------


@pytest.mark.slow  # real ranks: the capacity check runs where the memory is, before allocation
def test_an_overlap_matmul_beyond_memory_is_refused_before_allocation(tmp_path):
    out = tmp_path / "out"
    args = ("overlap", "-g", "2", "-c", "all_reduce", "-e", "1K", "--out", str(out))
    done = collbench_process(*args, "--matmul-shape", "99999x99999x99999", timeout=120)
    _refused(done, "--matmul-shape", "99999x99999x99999", "matmul operands")
    assert not (out / "rows.jsonl").exists()


# --- gemm and mfu workloads ------------------------------------------------------------------

GEMM = ("gemm", "--model", "llama3-8b", "--device", "cpu")
GEMM_CASES = {
    "tp 0 (ran until killed)": (["--tp", "0"], "--tp: 0"),
    "micro-batch 0 (ran until killed)": (["--micro-batch", "0"], "--micro-batch: 0"),
    "negative tp": (["--tp", "-2"], "--tp: -2"),
}


@pytest.mark.parametrize("case", GEMM_CASES, ids=list(GEMM_CASES))
def test_gemm_refuses_a_zero_workload(tmp_path, case):
    args, words = GEMM_CASES[case]
    out = tmp_path / "out"
    _refused(collbench(*GEMM, *args, "--out", str(out)), words, "integer >= 1")
    assert not out.exists()


MFU = ("mfu", "-T", "dgx-h100", "-m", "llama3-8b", "--global-batch", "480", "--dp", "4")
MFU_CASES = {
    "virtual stages with one stage": (
        ["--pp", "1", "--virtual-stages", "3"],
        "--virtual-stages: 3 interleaves pipeline stages: it needs --pp > 1",
    ),
    "virtual stages not dividing the layers": (
        ["--pp", "2", "--virtual-stages", "3"],
        "3 x --pp 2 = 6 model chunks do not divide the 32 layers (32 = 5 x 6 + 2)",
    ),
    "fsdp with zero 1": (["--fsdp", "--zero", "1"], "--zero: 1 conflicts with --fsdp"),
    "fsdp with zero 0": (["--fsdp", "--zero", "0"], "--zero: 0 conflicts with --fsdp"),
    "comm efficiency 1e-300": (["--comm-efficiency", "1e-300"], "from 0.01 to 1"),
    "comm efficiency nan": (["--comm-efficiency", "nan"], "--comm-efficiency"),
}


@pytest.mark.parametrize("case", MFU_CASES, ids=list(MFU_CASES))
def test_mfu_refuses_a_workload_with_the_arithmetic(case):
    args, words = MFU_CASES[case]
    _refused(collbench(*MFU, "--allow-oversubscribed-memory", *args), words)


def test_mfu_prices_uneven_stages_and_says_so():
    said = "uneven pipeline (--pp 5): 32 layers do not split evenly over 5 stages"
    done = collbench(*MFU, "--allow-oversubscribed-memory", "--pp", "5")
    assert done.returncode == 0, done.stderr
    assert f"assumed: {said}" in done.stdout + done.stderr
    done = collbench(*MFU, "--allow-oversubscribed-memory", "--pp", "5", "--json")
    for fabric in json.loads(done.stdout)["fabrics"]:
        assert any(said in text for text in fabric["assumptions"])
    even = collbench(*MFU, "--allow-oversubscribed-memory", "--pp", "4")
    assert even.returncode == 0 and "uneven" not in even.stdout + even.stderr
    both = collbench(*MFU, "--allow-oversubscribed-memory", "--fsdp", "--zero", "3")
    assert both.returncode == 0, both.stderr  # the same thing said twice


@pytest.mark.slow  # real processes
def test_gemm_and_mfu_refusals_in_real_processes():
    _refused(collbench_process(*GEMM, "--tp", "0"), "--tp")
    _refused(collbench_process(*MFU, "--pp", "1", "--virtual-stages", "3"), "--virtual-stages")


# --- doctor --size and --baseline ------------------------------------------------------------

DOCTOR = ("doctor", "-g", "2")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--size", "3"], "--size: 3 is less than one float32 element (4 bytes)"),
        (["--size", "7", "-d", "float64"], "--size: 7 is less than one float64 element (8"),
        (["--size", "1", "-d", "bfloat16"], "--size: 1 is less than one bfloat16 element (2"),
    ],
)
def test_doctor_refuses_a_size_of_less_than_one_element(tmp_path, args, words):
    out = tmp_path / "out"
    _refused(collbench(*DOCTOR, *args, "--out", str(out)), words)
    assert not out.exists()


def _doctor_run(tmp_path: Path, doctor_json: str | None, **columns) -> Path:
    """A baseline run directory of doctor rows (with `columns` over the second), and
    doctor.json's text (None: none)."""
    run = tmp_path / "base"
    run.mkdir()
    row = {**make_row(size_bytes=1 << 20).to_dict(), "kind": "doctor", "stage": "full"}
    row |= {"group": "all", "round_index": 0, "group_hosts": ["h", "h"], "group_ranks": [0, 1]}
    lines = [row, {**row, "round_index": 1, **columns}]
    (run / "rows.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    if doctor_json is not None:
        (run / "doctor.json").write_text(doctor_json)
    return run


VALID_REPORT = json.dumps({"healthy": True, "findings": []})
BASELINES = {
    "NaN busbw rows": (
        dict(doctor_json=VALID_REPORT, busbw_gbps=math.nan),
        "busbw_gbps",
    ),
    "NaN rank times": (
        dict(doctor_json=VALID_REPORT, rank_time_us=[1.0, math.nan]),
        "rank_time_us",
    ),
    "no doctor.json": (dict(doctor_json=None), "has no doctor.json"),
    "doctor.json not JSON": (dict(doctor_json="{junk"), "doctor.json that is not valid"),
    "doctor.json not a doctor's": (dict(doctor_json="[1, 2]"), "doctor.json that is not valid"),
    "doctor.json of the wrong types": (
        dict(doctor_json=json.dumps({"healthy": "yes", "findings": []})),
        "doctor.json that is not valid",
    ),
}


@pytest.mark.parametrize("case", BASELINES, ids=list(BASELINES))
def test_doctor_refuses_a_baseline_that_is_not_a_finished_doctor(tmp_path, case):
    kwargs, words = BASELINES[case]
    base = _doctor_run(tmp_path, **kwargs)
    out = tmp_path / "out"
    line = _refused(collbench(*DOCTOR, "--baseline", str(base), "--out", str(out)), words)
    assert line.startswith(f"collbench: error: --baseline: '{base}'")
    assert not out.exists()


def test_a_finished_doctor_baseline_passes_its_checks(tmp_path):
    from collbench.core.doctor_spec import DOCTOR
    from collbench.run.doctor_job import _baseline

    base = _doctor_run(tmp_path, VALID_REPORT)
    assert len(_baseline(str(base)).rows_of(DOCTOR)) == 2


@pytest.mark.slow  # real processes
def test_doctor_refusals_in_real_processes(tmp_path):
    _refused(collbench_process(*DOCTOR, "--size", "7", "-d", "float64"), "--size")
    base = _doctor_run(tmp_path, None)
    _refused(collbench_process(*DOCTOR, "--baseline", str(base)), "has no doctor.json")


# --- tune ------------------------------------------------------------------------------------

TUNE_CASES = {
    "an exclusion that leaves no protocol": (
        ["--knob", "NCCL_PROTO=^LL\\,LL128\\,Simple"],
        "excludes every one of LL, LL128, Simple",
    ),
    "channels 100000": (["--knob", "NCCL_ALGO=Ring", "--channels", "100000"], "--channels"),
    "channels 65 (NCCL has 64)": (
        ["--knob", "NCCL_ALGO=Ring", "--channels", "65"],
        "--channels: 65 is more than NCCL's most, 64",
    ),
    "channels 129 on rccl": (
        ["--knob", "NCCL_ALGO=Ring", "--channels", "129", "--backend", "rccl"],
        "--channels: 129 is more than any backend's most, 128",
    ),
    "max settings 1e20": (["--knob", "NCCL_ALGO=Ring", "--max-settings", "1e20"], "max-settings"),
    "max settings 10**20": (
        ["--knob", "NCCL_ALGO=Ring", "--max-settings", str(10**20)],
        "--max-settings",
    ),
}


@pytest.mark.parametrize("case", TUNE_CASES, ids=list(TUNE_CASES))
def test_tune_refuses_values_that_cannot_be_tuned(tmp_path, case):
    args, words = TUNE_CASES[case]
    out = tmp_path / "tuned"
    _refused(collbench("tune", "run", *args, "--out", str(out)), words)
    assert not out.exists()


def _from_run(path: Path, time_us: float = 100.0, **env: str) -> str:
    """A 2-size all_reduce run on nccl under `env`, 20 samples spread 2% around `time_us`."""
    samples = [time_us * (1 + 0.01 * (i % 5 - 2)) for i in range(20)]
    rows = [
        make_row(
            run_id=path.name,
            backend="nccl",
            size_bytes=size,
            time_us=time_us,
            time_us_samples=samples,
            knobs={"env": env},
        )
        for size in (1 << 10, 1 << 20)
    ]
    return str(write_run(path, rows, {"run_id": path.name, "knobs": {"env": env}}))


def test_tune_from_refuses_runs_with_nothing_to_choose(tmp_path):
    base = _from_run(tmp_path / "base")
    ring = _from_run(tmp_path / "ring", NCCL_ALGO="Ring")
    ring2 = _from_run(tmp_path / "ring2", NCCL_ALGO="Ring")
    out = tmp_path / "tuned"
    for runs, words in (
        ([ring], "is the only run"),
        ([base, base], "is given twice"),
        ([ring, str(Path(ring) / ".." / "ring")], "is given twice"),
        ([ring, ring2], "differ in no knob (every run set the same: NCCL_ALGO=Ring)"),
    ):
        _refused(collbench("tune", "from", *runs, "--out", str(out)), words)
        assert not out.exists()
    channels = ("--channels", "65")
    _refused(collbench("tune", "from", base, ring, *channels, "--out", str(out)), "NCCL's")
    assert not out.exists()
    done = collbench("tune", "from", base, ring, ring2, "--out", str(out))
    assert done.returncode == 0, done.stderr  # two settings, one of them measured twice


@pytest.fixture
def tuned(tmp_path) -> Path:
    """A tune from result that exports NCCL_ALGO=Ring (twice as fast as the default), for
    the all-reduce it measured."""
    base = _from_run(tmp_path / "base")
    ring = _from_run(tmp_path / "ring", 50.0, NCCL_ALGO="Ring")
    out = tmp_path / "tuned"
    assert collbench("tune", "from", base, ring, "--out", str(out)).returncode == 0
    assert "export NCCL_ALGO=allreduce:ring" in (out / "best.env").read_text()
    return out


VERIFY_CASES = {
    "missing best.env": (None, "has no best.env"),
    "garbage best.env": ("touch PWNED\n", "best.env line 1"),
    "binary best.env": ("\x7fELF\x00\x01\n", "best.env line 1"),
    "best.env other than tune.json": ("export NCCL_ALGO=Tree\n", "exports NCCL_ALGO=Tree"),
    "best.env that exports nothing": ("# edited\n", "exports nothing but its tune.json"),
}


@pytest.mark.parametrize("case", VERIFY_CASES, ids=list(VERIFY_CASES))
def test_tune_verify_refuses_a_best_env_it_cannot_trust(tuned, case):
    text, words = VERIFY_CASES[case]
    best = tuned / "best.env"
    best.unlink()
    if text is not None:
        best.write_text(text)
    before = sorted(path.name for path in tuned.iterdir())
    _refused(collbench("tune", "verify", str(tuned)), "DIR", words)
    assert sorted(path.name for path in tuned.iterdir()) == before  # no verify-* directory


def test_tune_verify_refuses_a_tuner_conf_that_is_not_the_plugins_csv(tuned):
    """A hand-edited nccl_tuner.conf the plugin would skip or misread is refused before any
    setting runs, not measured as if it were the tune's (issue 41 item 8)."""
    (tuned / "nccl_tuner.conf").write_text("allreduce,0,65536,ring\n")
    done = collbench("tune", "verify", str(tuned), env={"NCCL_TUNER_PLUGIN": "libnccl-tuner.so"})
    assert "nccl_tuner.conf line 1" in _refused(done)
    assert not list(tuned.glob("verify-*"))


@pytest.mark.parametrize("run_dir", ["../../etc", "/etc"])
def test_a_tune_json_pointing_outside_is_refused_by_report_and_verify(tuned, run_dir):
    data = json.loads((tuned / "tune.json").read_text())
    data["settings"][0]["run_dirs"] = [run_dir]
    (tuned / "tune.json").write_text(json.dumps(data))
    for args in (("report", str(tuned)), ("tune", "verify", str(tuned))):
        _refused(collbench(*args), "outside the tune directory", repr(run_dir))


@pytest.mark.slow  # real processes
def test_tune_refusals_in_real_processes(tuned, tmp_path):
    knob = ("--knob", "NCCL_PROTO=^LL\\,LL128\\,Simple")
    _refused(collbench_process("tune", "run", *knob, "--out", str(tmp_path / "t")), "excludes")
    assert not (tmp_path / "t").exists()
    (tuned / "best.env").write_text("touch PWNED\n")
    _refused(collbench_process("tune", "verify", str(tuned)), "best.env line 1")
