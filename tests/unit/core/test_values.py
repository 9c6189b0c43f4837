"""Values that pass a type check and are still not data (issue 29, "Values that pass
validation and should not"): each class refused by the value that owns it, in one
SpecError naming the field, the value and (for a file) where it is. In-process tables; the
command-line side is tests/cli/test_values_cli.py."""

from __future__ import annotations

import json
import math
import os

import pytest

from collbench.analysis.mfu.inputs import cost_model_pricer
from collbench.analysis.mfu.presets import preset
from collbench.analysis.mfu.workload import Parallelism, Training, Workload
from collbench.analysis.tune.from_runs import check_tunable
from collbench.analysis.tune.outputs import render_best_env
from collbench.bench.capacity import check_memory, probe_operand_bytes
from collbench.core.errors import SpecError
from collbench.core.overlap import MAX_SQUARE, OverlapSpec
from collbench.core.spec import MAX_TIMEOUT_S, SweepSpec
from collbench.core.tune_catalog import CATALOG, max_channels
from collbench.core.units import NUMBER_BOUNDS
from collbench.run.tune.from_runs import check_channels
from collbench.run.tune.plan import MAX_SETTINGS, TunePlan
from collbench.store.load import load_run
from collbench.store.rows import row_from_dict
from collbench.store.tune_result import EnvExport, load_tune_result, read_best_env
from collbench.topologies.loader import load_topology
from tests.rows import make_row, make_run

# --- rows: ranges on read, naming the file and line ------------------------------------

BIG = 10**400  # a JSON integer beyond any float

BAD_ROWS = {
    "world size 0": ("world_size", 0, "must be 1 to 2^63-1"),
    "negative world size": ("world_size", -2, "must be 1 to 2^63-1"),
    "no nodes": ("nodes", 0, "must be 1 to 2^63-1"),
    "negative size": ("size_bytes", -1, "must be 0 to 2^63-1"),
    "negative count": ("count", -4, "must be 0 to 2^63-1"),
    "negative n_wrong": ("n_wrong", -1, "must be 0 to 2^63-1"),
    "negative repeat": ("repeat", -1, "must be 0 to 2^63-1"),
    "size past int64": ("size_bytes", 10**40, "must be 0 to 2^63-1"),  # once a pyarrow traceback
    "world past int64": ("world_size", 2**63, "must be 1 to 2^63-1"),
    "zero time": ("time_us", 0.0, "must be more than 0"),
    "negative time": ("time_us", -3.5, "must be more than 0"),
    "NaN time": ("time_us", math.nan, "not finite"),
    "infinite time": ("time_us", math.inf, "not finite"),
    "time beyond a float": ("time_us", BIG, "not finite"),
    "NaN busbw": ("busbw_gbps", math.nan, "not finite"),
    "infinite algbw": ("algbw_gbps", math.inf, "not finite"),
    "negative busbw": ("busbw_gbps", -1.0, "must not be negative"),
    "negative p50": ("time_us_p50", -1.0, "must not be negative"),
    "NaN cv": ("time_cv", math.nan, "not finite"),
    "a NaN sample": ("time_us_samples", [1.0, math.nan], "not finite"),
    "a negative sample": ("time_us_samples", [1.0, -1.0], "must not be negative"),
}


def _good() -> dict:
    return make_row().to_dict()


@pytest.mark.parametrize("case", BAD_ROWS, ids=list(BAD_ROWS))
def test_a_row_out_of_range_is_refused_naming_file_and_line(tmp_path, case):
    column, value, words = BAD_ROWS[case]
    run = tmp_path / "run"
    run.mkdir()
    lines = [_good(), {**_good(), column: value}, _good()]
    (run / "rows.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(SpecError) as error:
        load_run(run)
    assert error.value.field == column
    assert f"{run / 'rows.jsonl'} line 2" in str(error.value) and words in str(error.value)
    assert "\n" not in str(error.value)


def test_rows_at_the_edges_of_their_ranges_are_read():
    edge = {**_good(), "world_size": 1, "nodes": 1, "size_bytes": 0, "count": 0}
    edge |= {"n_wrong": 0, "time_us": 1e-9, "busbw_gbps": 0.0, "algbw_gbps": 0.0}
    row = row_from_dict(edge, "edge")
    assert row.world_size == 1 and row.size_bytes == 0 and row.time_us == 1e-9
    # columns an older row lacks are still None, not out of range
    old = {key: value for key, value in _good().items() if key not in ("nodes", "time_cv")}
    assert row_from_dict(old, "old").nodes is None


def test_a_doctor_row_with_a_nan_rank_time_is_refused():
    data = {**_good(), "kind": "doctor", "rank_time_us": [1.0, math.nan]}
    with pytest.raises(SpecError, match="rank_time_us.*not finite"):
        row_from_dict(data, "doc line 1")


# --- sweep --timeout --------------------------------------------------------------------


@pytest.mark.parametrize("timeout", [math.inf, -math.inf, math.nan, 1e300, 0, -1, 604801])
def test_a_timeout_outside_its_bound_is_refused(timeout):
    with pytest.raises(SpecError) as error:
        SweepSpec(timeout_s=timeout)
    assert error.value.field == "--timeout" and f"{MAX_TIMEOUT_S:,.0f}" in str(error.value)


@pytest.mark.parametrize("timeout", [0.5, 300.0, MAX_TIMEOUT_S])
def test_a_timeout_within_its_bound_is_kept(timeout):
    assert SweepSpec(timeout_s=timeout).timeout_s == timeout


# --- overlap: the probe's matmul operands in the capacity check -------------------------


def _probe(shape=None, streams=1, dtype="float32") -> SweepSpec:
    overlap = OverlapSpec(matmul_shape=shape, compute_streams=streams, compute_dtype=dtype)
    return SweepSpec(collectives=("all_reduce",), max_bytes=1024, overlap=overlap)


@pytest.mark.parametrize(
    ("spec", "device", "expected"),
    [
        (SweepSpec(max_bytes=1024), "cpu", 0),
        (_probe((100, 200, 300)), "cpu", (100 * 300 + 300 * 200 + 100 * 200) * 4),
        (
            _probe((100, 200, 300), streams=3, dtype="bfloat16"),
            "cuda",
            (100 * 300 + 300 * 200 + 3 * 100 * 200) * 2,
        ),
        (_probe(dtype="auto"), "cpu", 3 * MAX_SQUARE["cpu"] ** 2 * 4),  # float32 on CPU
        (_probe(dtype="auto"), "cuda", 3 * MAX_SQUARE["cuda"] ** 2 * 2),  # bfloat16 on GPUs
    ],
)
def test_probe_operands_are_a_b_and_one_c_per_stream(spec, device, expected):
    assert probe_operand_bytes(spec, device) == expected


def test_a_matmul_that_cannot_fit_is_refused_naming_matmul_shape():
    spec = _probe((99999, 99999, 99999))
    with pytest.raises(SpecError) as error:
        check_memory(spec, 2, 1, 80 << 30, "GPU")
    text = str(error.value)
    assert error.value.field == "--matmul-shape" and "99999x99999x99999" in text
    assert "matmul operands" in text and "lower --matmul-shape" in text
    check_memory(_probe((256, 256, 256)), 2, 2, 8 << 30, "host")  # a small one fits


# --- gemm / mfu workloads ---------------------------------------------------------------

LLAMA = preset("llama3-8b")  # 32 layers


def _workload(pp=1, virtual_stages=1, micro_batch=1, tp=1) -> Workload:
    return Workload(
        LLAMA,
        Training(seq=2048, global_batch=64, micro_batch=micro_batch),
        Parallelism(tp=tp, pp=pp, dp=1, virtual_stages=virtual_stages),
    )


WORKLOAD_REFUSALS = {
    "tp 0": (dict(tp=0), "--tp", "integer >= 1"),
    "micro-batch 0": (dict(micro_batch=0), "--micro-batch", "integer >= 1"),
    "virtual stages without a pipeline": (
        dict(virtual_stages=3),
        "--virtual-stages",
        "needs --pp > 1",
    ),
    "virtual stages not dividing the layers": (
        dict(pp=2, virtual_stages=3),
        "--virtual-stages",
        "6 model chunks do not divide the 32 layers (32 = 5 x 6 + 2)",
    ),
}


@pytest.mark.parametrize("case", WORKLOAD_REFUSALS, ids=list(WORKLOAD_REFUSALS))
def test_workloads_that_cannot_run_are_refused_with_the_arithmetic(case):
    kwargs, field, words = WORKLOAD_REFUSALS[case]
    with pytest.raises(SpecError) as error:
        _workload(**kwargs)
    assert error.value.field == field and words in str(error.value)


def test_uneven_pipeline_stages_are_priced_at_the_busiest_and_said_so():
    uneven = _workload(pp=5)
    assert uneven.layers_per_stage == 7  # ceil(32 / 5)
    assert "32 layers do not split evenly over 5 stages" in uneven.uneven_stages
    assert "(2 of 7 layers, 3 of 6)" in uneven.uneven_stages
    assert "priced at the pace of the busiest stage (7 layers)" in uneven.uneven_stages
    assert _workload(pp=4).uneven_stages is None
    assert _workload(pp=2, virtual_stages=4).uneven_stages is None  # 32 = 8 chunks of 4


@pytest.mark.parametrize("efficiency", [1e-300, 0.0, -0.5, 0.0099, 1.01, math.nan, math.inf])
def test_a_comm_efficiency_outside_its_range_is_refused(efficiency):
    with pytest.raises(SpecError) as error:
        cost_model_pricer(load_topology("dgx-h100"), efficiency)
    assert error.value.field == "efficiency.scale_up" and "from 0.01 to 1" in str(error.value)


def test_the_lowest_comm_efficiency_still_prices():
    price = cost_model_pricer(load_topology("dgx-h100"), NUMBER_BOUNDS["share"][0])
    assert math.isfinite(price("all_reduce", 1 << 20, 8, 1).time_s)


# --- tune: knob lists, channels, max settings, --from, best.env, run_dir ----------------

EXCLUDE_ALL = {
    "NCCL_PROTO": ["^LL,LL128,Simple", "^simple,ll128,ll", "allreduce:^LL,LL128,Simple"],
    "NCCL_ALGO": ["^Tree,Ring,CollNetDirect,CollNetChain,NVLS,NVLSTree,PAT"],
}


@pytest.mark.parametrize(
    ("knob", "value"), [(knob, value) for knob, values in EXCLUDE_ALL.items() for value in values]
)
def test_an_exclusion_list_that_leaves_nothing_is_refused(knob, value):
    with pytest.raises(ValueError, match="excludes every one of"):
        CATALOG[knob].check(value)


@pytest.mark.parametrize(
    ("knob", "value"),
    [("NCCL_PROTO", "^LL,LL128"), ("NCCL_PROTO", "^LL"), ("NCCL_ALGO", "^Tree,Ring")],
)
def test_an_exclusion_list_that_leaves_something_is_kept(knob, value):
    assert CATALOG[knob].check(value) == value


@pytest.mark.parametrize(
    ("channels", "backend", "refused"),
    [
        (64, "nccl", False),
        (65, "nccl", True),
        (65, "auto", True),
        (65, "gloo", True),
        (100000, "nccl", True),
        (128, "rccl", False),
        (129, "rccl", True),
        (128, None, False),  # not known yet: the most any backend has
        (100000, None, True),
        (-1, None, True),
        (0, "nccl", False),  # NCCL's own
    ],
)
def test_channels_are_bounded_by_the_backend(channels, backend, refused):
    if refused:
        with pytest.raises(SpecError) as error:
            check_channels(channels, backend)
        assert error.value.field == "--channels"
        if channels > 0:
            assert f"{max_channels(backend)[0]}" in str(error.value)
    else:
        check_channels(channels, backend)


@pytest.mark.parametrize(
    "knob,backend,refused",
    [
        ("NCCL_MAX_NCHANNELS=96,128", "rccl", None),  # MI300: RCCL's 128
        ("NCCL_MAX_NCHANNELS=96,128", "nccl", "outside 1..64"),
        ("NCCL_MIN_NCHANNELS=128", "rccl", None),
        ("NCCL_NTHREADS=128,256", "nccl", None),
        ("NCCL_NTHREADS=128,256", "rccl", "RCCL runs 256 threads"),  # 128 would measure 256
        ("NCCL_NTHREADS=256", "rccl", None),
    ],
)
def test_rccl_knob_ranges_are_rccls(knob, backend, refused):
    """RCCL's ranges, not NCCL's, for --backend rccl (issue 40 item 5)."""
    from collbench.core.tune_grid import parse_knobs

    if refused is None:
        assert parse_knobs([knob], backend)[0]
        return
    with pytest.raises(SpecError, match=refused) as error:
        parse_knobs([knob], backend)
    assert error.value.field == "--knob"


@pytest.mark.parametrize("count", [0, -1, MAX_SETTINGS + 1, 10**20, True])
def test_max_settings_outside_its_bound_is_refused(tmp_path, count):
    from collbench.core.tune_grid import parse_knobs

    with pytest.raises(SpecError) as error:
        TunePlan(parse_knobs(["NCCL_ALGO=Ring"]), tmp_path, max_settings=count)
    assert error.value.field == "--max-settings"


def _run(path: str, **env: str):
    return make_run(path, [make_row(backend="nccl", knobs={"env": env})], knobs={"env": env})


FROM_REFUSALS = {
    "one run": ([_run("a", NCCL_ALGO="Ring")], "is the only run"),
    "no knob differs": (
        [_run("a", NCCL_ALGO="Ring"), _run("b", NCCL_ALGO="Ring")],
        "differ in no knob (every run set the same: NCCL_ALGO=Ring)",
    ),
    "no knob at all": ([_run("a"), _run("b")], "differ in no knob (every run set the same: none)"),
}


@pytest.mark.parametrize("case", FROM_REFUSALS, ids=list(FROM_REFUSALS))
def test_tune_from_needs_settings_to_choose_between(case):
    runs, words = FROM_REFUSALS[case]
    with pytest.raises(SpecError) as error:
        check_tunable(runs)
    assert error.value.field == "RUN" and words in str(error.value)


def test_tune_from_two_settings_and_a_repeat_is_tunable():
    runs = [_run("a"), _run("b", NCCL_ALGO="Ring"), _run("c", NCCL_ALGO="Ring")]
    assert check_tunable(runs) == []


@pytest.mark.parametrize(
    "knobs",
    [{}, {"NCCL_ALGO": "Ring"}, {"NCCL_ALGO": "Ring", "X_PATH": "/a b/$(c);`d` 'e'"}],
)
def test_best_env_reads_back_what_it_exports(tmp_path, knobs):
    text = render_best_env(EnvExport(knobs, "s1" if knobs else "baseline", "fastest"))
    (tmp_path / "best.env").write_text(text)
    assert read_best_env(tmp_path, "--verify") == knobs


BAD_BEST_ENV = {
    "a command": "# ok\nrm -rf /\n",
    "an unquoted value with spaces": "export A=b c\n",
    "an unterminated quote": "export A='b\n",
    "no value": "export A\n",
    "not a name": "export 1A=b\n",
    "binary": "\x00\x01\x02\n",
}


@pytest.mark.parametrize("case", BAD_BEST_ENV, ids=list(BAD_BEST_ENV))
def test_a_garbage_best_env_is_refused_naming_its_line(tmp_path, case):
    (tmp_path / "best.env").write_text(BAD_BEST_ENV[case])
    with pytest.raises(SpecError) as error:
        read_best_env(tmp_path, "--verify")
    assert error.value.field == "--verify" and "best.env line" in str(error.value)


def test_a_missing_or_huge_best_env_is_refused(tmp_path):
    with pytest.raises(SpecError, match="has no best.env"):
        read_best_env(tmp_path, "--verify")
    os.mkfifo(tmp_path / "best.env")  # not a regular file: never opened (it would block)
    with pytest.raises(SpecError, match="has no best.env"):
        read_best_env(tmp_path, "--verify")
    (tmp_path / "best.env").unlink()
    (tmp_path / "best.env").write_text("#" * (2 << 20))
    with pytest.raises(SpecError, match="is over"):
        read_best_env(tmp_path, "--verify")


def _tune_json(tmp_path, *run_dirs: str):
    settings = [
        {"knobs": {}, "label": "baseline", "baseline": True, "run_dirs": list(run_dirs)},
    ]
    (tmp_path / "tune.json").write_text(json.dumps({"settings": settings, "best": []}))


@pytest.mark.parametrize("run_dir", ["../../etc", "/etc", "s1/../../x", "link"])
def test_a_tune_json_pointing_outside_its_directory_is_refused(tmp_path, run_dir):
    (tmp_path / "link").symlink_to("/etc")
    _tune_json(tmp_path, "s1", run_dir)
    with pytest.raises(SpecError) as error:
        load_tune_result(tmp_path, "RUN")
    assert error.value.field == "RUN" and "outside the tune directory" in str(error.value)
    assert repr(run_dir) in str(error.value)


def test_a_tune_json_with_its_own_run_dirs_loads(tmp_path):
    _tune_json(tmp_path, "s1", "s1-r2", "sub/dir")
    assert load_tune_result(tmp_path, "RUN").settings[0].run_dirs == ("s1", "s1-r2", "sub/dir")


@pytest.mark.parametrize(
    "knob, backend, version, refused",
    [
        ("NCCL_MAX_NCHANNELS=64", "nccl", "2.21.5", "outside 1..32: NCCL 2.21.5's most"),
        ("NCCL_MAX_CTAS=64", "nccl", "2.25.1", None),
        ("NCCL_MAX_NCHANNELS=64", "nccl", None, None),  # none recorded: the newest's
        ("NCCL_MIN_NCHANNELS=64", "rccl", "2.18.3", "outside 1..32: RCCL 2.18.3's most"),
        ("NCCL_MAX_NCHANNELS=64", "rccl", "2.18.6", None),
        ("NCCL_MAX_NCHANNELS=128", "rccl", "2.18.6", "outside 1..64: RCCL 2.18.6's most"),
        ("NCCL_MAX_NCHANNELS=128", "rccl", "2.20.5", None),
        ("NCCL_MAX_NCHANNELS=128", "auto", None, "give --backend rccl"),
        ("NCCL_NTHREADS=512", "rccl", "2.18.3", "RCCL runs 256 threads"),
    ],
)
def test_channel_ranges_are_the_recorded_releases(knob, backend, version, refused):
    """MAXCHANNELS changed between releases (NCCL 32 -> 64 at 2.25.1; RCCL 32 -> 64 at
    2.18.6 -> 128 at 2.20.5): a larger count is cut to it in silence, so tune would measure
    the cap again (issue 40 item 5). tune's axes and sweep's --knob take the same ranges."""
    from collbench.core.knobs import parse_knob_settings
    from collbench.core.tune_grid import parse_knobs

    for parse in (parse_knobs, parse_knob_settings):
        if refused is None:
            assert parse([knob], backend, version)[0]
            continue
        with pytest.raises(SpecError, match=refused) as error:
            parse([knob], backend, version)
        assert error.value.field == "--knob"


@pytest.mark.parametrize(
    "backend, version, refused",
    [
        ("rccl", "2.20.5", None),
        ("rccl", "2.18.6", "outside 1..64: RCCL 2.18.6's most, 64"),
        ("nccl", None, "outside 1..64: NCCL's most, 64"),
    ],
)
def test_sweep_checks_knobs_against_its_backend_where_it_parses_them(
    monkeypatch, backend, version, refused
):
    """sweep --backend rccl --knob NCCL_MAX_NCHANNELS=128 was refused by NCCL's range,
    though tune took it (issue 40 item 5): sweep's options check --knob against --backend
    at the release this torch runs (stood in for: no GPU here)."""
    from collbench.cli import measure

    monkeypatch.setattr(measure, "library_version", lambda name: version)
    values = {option.parameter_name: None for option in measure.SWEEP_OPTIONS}
    values.update(backend=backend, knob=["NCCL_MAX_NCHANNELS=128"])
    if refused is None:
        spec = measure.measure_spec("sweep", values)
        assert spec.knobs == (("NCCL_MAX_NCHANNELS", "128"),) and spec.backend == backend
        return
    with pytest.raises(SpecError, match=refused):
        measure.measure_spec("sweep", values)
