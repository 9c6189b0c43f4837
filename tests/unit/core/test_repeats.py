"""--repeats: the spec plans every step once per repeat, interleaved; rows record their repeat;
the table prints one table per (collective, repeat); the fit and exports read repeats right."""

import io
import json

import pytest

from collbench.core.errors import SpecError
from collbench.core.overlap import OverlapSpec
from collbench.core.spec import MAX_REPEATS, Step, SweepSpec
from collbench.render.console import ConsoleSink
from collbench.render.export import export_run
from collbench.store.rows import ROW_COLUMNS, RowBuilder, median_over_repeats, row_from_dict
from tests.rows import make_row

SPEC = SweepSpec(
    collectives=("all_reduce", "all_gather"), min_bytes=1024, max_bytes=2048, repeats=1
)


@pytest.mark.parametrize("repeats", [0, -1, MAX_REPEATS + 1, 2.5, "3"])
def test_repeats_out_of_range_names_the_flag(repeats):
    with pytest.raises(SpecError) as error:
        SweepSpec(repeats=repeats)
    assert error.value.field == "--repeats"
    assert f"1 to {MAX_REPEATS:,}" in str(error.value)


def test_steps_run_every_step_once_per_repeat_in_the_same_order():
    once = SPEC.with_backend("gloo").steps()
    assert {step.repeat for step in once} == {0}
    spec = SweepSpec(**{**SPEC.to_dict(), "repeats": 3}).with_backend("gloo")
    steps = spec.steps()
    assert len(steps) == 3 * len(once)
    for repeat in range(3):
        chunk = steps[repeat * len(once) : (repeat + 1) * len(once)]
        assert chunk == [step._replace(repeat=repeat) for step in once]
    assert steps[0] == Step(
        "sweep", "all_reduce", 1024, "in_place", dtype="float32", op="sum"
    )  # repeat 0: the default
    assert Step._field_defaults["repeat"] == 0


def test_probe_steps_repeat_after_the_sweep_steps_of_each_repeat():
    spec = SweepSpec(
        collectives=("all_reduce",),
        max_bytes=16,
        overlap=OverlapSpec(ratios=(1, 2)),
        repeats=2,
    ).with_backend("gloo")
    steps = spec.steps()
    half = len(steps) // 2
    assert [step.repeat for step in steps] == [0] * half + [1] * half
    assert [step._replace(repeat=1) for step in steps[:half]] == steps[half:]
    kinds = [step.kind for step in steps[:half]]
    assert kinds == sorted(kinds, reverse=True) and set(kinds) == {"sweep", "overlap"}


@pytest.mark.parametrize(
    "spec",
    [
        SPEC,
        SweepSpec(**{**SPEC.to_dict(), "repeats": 5}),
        SweepSpec(overlap=OverlapSpec(ratios=(0.5, 2)), sweep_rows=False, repeats=2),
        SweepSpec(overlap=OverlapSpec(compute_tflop=0.25), max_bytes=8, repeats=7),
    ],
)
def test_repeats_round_trip_through_dict_and_arguments(spec, monkeypatch):
    """What a printed command or sbatch script passes is exactly the spec planned."""
    from typer.testing import CliRunner

    import collbench.run.sweep
    from collbench.cli import app
    from collbench.launchers.base import LaunchResult

    args = spec.to_args()
    assert args[args.index("--repeats") + 1] == str(spec.repeats)
    assert SweepSpec.from_dict(spec.to_dict()) == spec
    seen = []
    monkeypatch.setattr(
        collbench.run.sweep,
        "run_sweep",
        lambda spec, options, line, make_sink: (seen.append(spec), (LaunchResult(0), "run"))[1],
    )
    result = CliRunner().invoke(app, [spec.command, *args, "--quiet"])
    assert result.exit_code == 0, result.output
    assert seen == [spec]


def test_a_spec_recorded_before_repeats_reads_as_one_repeat():
    data = SPEC.to_dict()
    del data["repeats"]
    assert SweepSpec.from_dict(data).repeats == 1


class _Stats:
    time_us = time_us_p50 = time_us_p95 = time_us_min = time_us_max = 10.0
    time_cv = 0.0
    samples_us = (10.0,)


class _Geometry:
    size_bytes, count = 1024, 256


class _Measured:
    geometry, stats, n_wrong = _Geometry(), _Stats(), 0


def test_rows_record_their_repeat_right_after_iters():
    builder = RowBuilder("run-1", SPEC.with_backend("gloo"), 2, 1, {"env": {}, "settings": {}})
    row = builder.build("all_reduce", "in_place", _Measured(), 2)
    assert (row.repeat, row.repeat_index) == (2, 2)
    assert builder.build("all_reduce", "in_place", _Measured()).repeat == 0
    assert ROW_COLUMNS[ROW_COLUMNS.index("iters") + 1] == "repeat"
    assert list(row.to_dict())[ROW_COLUMNS.index("repeat")] == "repeat"
    assert row_from_dict(row.to_dict()) == row


def test_a_row_without_a_repeat_is_repeat_zero():
    data = make_row().to_dict()
    del data["repeat"]
    row = row_from_dict(data)
    assert (row.repeat, row.repeat_index) == (None, 0)
    with pytest.raises(SpecError, match="repeat"):
        row_from_dict({**data, "repeat": "1"})


def _repeated(times_by_size, run_id="run-a", collective="all_reduce"):
    """Rows as a run with repeats writes them: repeat by repeat, every size in each."""
    repeats = len(next(iter(times_by_size.values())))
    return [
        make_row(
            run_id=run_id,
            collective=collective,
            size_bytes=size,
            count=size // 4,
            time_us=times[repeat],
            repeat=repeat,
            placement="in_place",
        )
        for repeat in range(repeats)
        for size, times in times_by_size.items()
    ]


def test_median_over_repeats_gives_one_row_per_size_at_the_median_time():
    rows = _repeated({1024: [30.0, 10.0, 20.0], 2048: [40.0, 40.0, 80.0]})
    merged = median_over_repeats(rows)
    assert [(row.size_bytes, row.time_us) for row in merged] == [(1024, 20.0), (2048, 40.0)]
    assert merged[0] is rows[4]  # an odd count: the median repeat's own row
    even = median_over_repeats(_repeated({1024: [10.0, 30.0]}))
    assert [row.time_us for row in even] == [20.0]
    assert even[0].busbw_gbps == pytest.approx(1024 / 20.0 / 1e3)  # all-reduce on 2: factor 1
    one = _repeated({1024: [10.0], 2048: [20.0]})
    assert median_over_repeats(one) == one
    # rows without a repeat (imports, older runs) are never merged
    legacy = [make_row(size_bytes=1024, time_us=t) for t in (10.0, 20.0)]
    assert median_over_repeats(legacy) == legacy
    # nor rows of two runs
    two_runs = _repeated({1024: [10.0]}) + _repeated({1024: [30.0]}, run_id="run-b")
    assert len(median_over_repeats(two_runs)) == 2


def test_the_fit_takes_one_point_per_size_from_repeats():
    from collbench.analysis.fit.hockney import fit_rows

    sizes = [2**k for k in range(10, 20)]
    clean = {size: 5.0 + size / 1e4 for size in sizes}
    noisy = {size: [t * 1.5, t, t * 0.9] for size, t in clean.items()}
    (group,) = fit_rows(_repeated(noisy))
    (reference,) = fit_rows(_repeated({size: [t] for size, t in clean.items()}))
    assert group.n_points == len(sizes)
    assert group.curve.alpha_us == pytest.approx(reference.curve.alpha_us)
    assert group.curve.busbw_peak_gbps == pytest.approx(reference.curve.busbw_peak_gbps)


def _table(spec, rows, per_repeat=True):
    stream = io.StringIO()
    sink = ConsoleSink(spec, "table", stream=stream, per_repeat=per_repeat)
    for row in rows:
        sink.row(row)
    sink.finish()
    return stream.getvalue().splitlines()


def test_per_repeat_prints_one_table_per_collective_and_repeat():
    spec = SweepSpec(collectives=("all_reduce",), min_bytes=1024, max_bytes=2048, repeats=3)
    rows = _repeated({1024: [10.0, 11.0, 12.0], 2048: [20.0, 21.0, 22.0]})
    lines = _table(spec, rows)
    headings = [line for line in lines if line.startswith(("# Repeat", "# Collective"))]
    assert headings == [
        "# Repeat 1 of 3",
        "# Collective: all_reduce",
        "# Repeat 2 of 3",
        "# Collective: all_reduce",
        "# Repeat 3 of 3",
        "# Collective: all_reduce",
    ]
    assert sum(line.startswith("# Avg bus bandwidth") for line in lines) == 3
    assert sum(line.startswith("        1024") for line in lines) == 3


def test_by_default_repeats_make_one_table_and_one_peak_per_collective():
    """Each size's median repeat (as report and fit read them) and the repeats' spread; the
    Peak line is the best median size, the figure `report` shows."""
    spec = SweepSpec(collectives=("all_reduce",), min_bytes=1024, max_bytes=2048, repeats=3)
    rows = _repeated({1024: [12.0, 10.0, 11.0], 2048: [20.0, 25.0, 21.0]})
    lines = _table(spec, rows, per_repeat=False)
    headings = [line for line in lines if line.startswith(("# Repeat", "# Collective"))]
    assert headings[:3] == ["# Repeat 1 of 3", "# Repeat 2 of 3", "# Repeat 3 of 3"]
    assert headings[3].startswith("# Collective: all_reduce (median of the repeats")
    assert len(headings) == 4 and sum(line.startswith("# Peak bus") for line in lines) == 1
    data = [line.split() for line in lines if not line.startswith("#")]
    assert [(fields[0], fields[9], fields[-1]) for fields in data] == [
        ("1024", "11.00", "20.0%"),  # median 11 us; 12 / 10 - 1
        ("2048", "21.00", "25.0%"),
    ]
    median = median_over_repeats(rows)
    peak = max(median, key=lambda row: row.busbw_gbps)
    (line,) = [line for line in lines if line.startswith("# Peak bus")]
    assert line.startswith(f"# Peak bus bandwidth   : {peak.busbw_gbps:.2f} GB/s at 2048 B")


def test_a_run_cut_short_still_prints_its_pooled_table():
    spec = SweepSpec(collectives=("all_reduce",), min_bytes=1024, max_bytes=2048, repeats=2)
    rows = _repeated({1024: [10.0, 11.0], 2048: [20.0, 21.0]})[:3]
    stream = io.StringIO()
    sink = ConsoleSink(spec, "table", stream=stream)
    for row in rows:
        sink.row(row)
    sink.finish("cancelled")
    lines = stream.getvalue().splitlines()
    assert sum(not line.startswith("#") for line in lines) == 2
    (check,) = [line for line in lines if line.startswith("# Out of bounds")]
    assert "INCOMPLETE" in check and lines[-1] == "# Run cancelled: 3 of 4 rows measured"


def test_one_repeat_prints_no_repeat_line():
    spec = SweepSpec(collectives=("all_reduce",), min_bytes=1024, max_bytes=2048, repeats=1)
    rows = _repeated({1024: [10.0], 2048: [20.0]})
    lines = _table(spec, rows)
    assert not any(line.startswith("# Repeat") for line in lines)
    legacy = [
        make_row(size_bytes=size, count=size // 4, time_us=time_us, placement="in_place")
        for size, time_us in ((1024, 10.0), (2048, 20.0))
    ]
    assert legacy[0].repeat is None and _table(spec, legacy) == lines


def test_a_cut_short_repeat_counts_the_rows_of_its_own_table():
    spec = SweepSpec(collectives=("all_reduce",), min_bytes=1024, max_bytes=2048, repeats=2)
    rows = _repeated({1024: [10.0, 11.0], 2048: [20.0, 21.0]})[:3]
    stream = io.StringIO()
    sink = ConsoleSink(spec, "table", stream=stream, per_repeat=True)
    for row in rows:
        sink.row(row)
    sink.finish("cancelled")
    lines = stream.getvalue().splitlines()
    checks = [line for line in lines if line.startswith("# Out of bounds")]
    assert checks[0] == "# Out of bounds values : 0 OK"
    assert checks[1].endswith("(the run was cancelled after 1 of 2 rows)")
    assert lines[-1] == "# Run cancelled: 3 of 4 rows measured"


def test_nccl_json_lines_never_join_two_repeats():
    rows = [
        make_row(size_bytes=1024, placement=placement, repeat=repeat)
        for repeat in range(2)
        for placement in ("out_of_place", "in_place")
    ]
    state = export_run(rows, None, "x.json").collectives[rows[0].collective]
    state.commit()
    entries = [json.loads(text) for text in state.entries]
    assert len(entries) == 2  # one line per repeat, each with both placements
    assert all(entry["out_of_place"] and entry["in_place"] for entry in entries)
