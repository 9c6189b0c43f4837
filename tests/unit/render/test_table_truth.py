"""The table tells the truth about a run: a cut-short run's footer never says OK, and the
header says what the ranks run on (CPU processes are not GPUs)."""

import io
from dataclasses import replace

from collbench.core.overlap import OverlapSpec
from collbench.core.spec import SweepSpec
from collbench.render.console import ConsoleSink
from collbench.render.table import overlap_plan_lines, preface_lines, summary_lines
from tests.rows import make_row

SPEC = SweepSpec(
    collectives=("all_reduce", "all_gather"), min_bytes=1024, max_bytes=8192, repeats=1
)


def _rows(collective, sizes, wrong=0):
    return [
        make_row(
            collective=collective,
            size_bytes=size,
            count=size // 4,
            root=-1,
            placement=placement,
            n_wrong=wrong,
        )
        for size in sizes
        for placement in SPEC.placements_for(collective)
    ]


def test_an_unfinished_collective_says_incomplete_never_ok():
    rows = _rows("all_reduce", [1024, 2048])
    assert summary_lines(rows)[0] == "# Out of bounds values : 0 OK"
    line = summary_lines(rows, "cancelled after 2 of 4 rows")[0]
    assert line == (
        "# Out of bounds values : 0 INCOMPLETE (the run was cancelled after 2 of 4 rows)"
    )
    wrong = summary_lines(_rows("all_reduce", [1024], wrong=3), "failed")[0]
    assert "FAILED INCOMPLETE" in wrong and "OK" not in wrong


def _sink_output(rows, unfinished):
    stream = io.StringIO()
    sink = ConsoleSink(SPEC, "table", stream=stream)
    for row in rows:
        sink.row(row)
    sink.finish(unfinished)
    return stream.getvalue().splitlines()


def test_a_cancelled_run_ends_its_table_with_the_rows_measured():
    planned_all_reduce = sum(1 for step in SPEC.steps() if step.collective == "all_reduce")
    rows = _rows("all_reduce", [1024, 2048])
    lines = _sink_output(rows, "cancelled")
    checks = [line for line in lines if line.startswith("# Out of bounds values")]
    assert checks == [
        f"# Out of bounds values : 0 INCOMPLETE (the run was cancelled after {len(rows)} "
        f"of {planned_all_reduce} rows)"
    ]
    assert lines[-1] == f"# Run cancelled: {len(rows)} of {len(SPEC.steps())} rows measured"
    assert not any(line.endswith(" OK") for line in lines)


def test_collectives_finished_before_the_end_keep_their_ok():
    rows = _rows("all_reduce", [1024, 2048, 4096, 8192]) + _rows("all_gather", [1024])
    checks = [line for line in _sink_output(rows, "failed") if "Out of bounds" in line]
    assert checks[0] == "# Out of bounds values : 0 OK"
    assert "INCOMPLETE (the run was failed after" in checks[1]


def test_a_completed_run_prints_no_unfinished_line():
    rows = _rows("all_reduce", [1024, 2048, 4096, 8192])
    rows += _rows("all_gather", [1024, 2048, 4096, 8192])
    lines = _sink_output(rows, None)
    assert lines.count("# Out of bounds values : 0 OK") == 2
    assert not any(line.startswith("# Run ") for line in lines)


def _meta(device):
    ranks = [
        {"rank": r, "pid": 100 + r, "host": "box", "device": device, "device_name": "x"}
        for r in range(2)
    ]
    return {"backend": "gloo", "world_size": 2, "nodes": 1, "ranks": ranks}


def test_cpu_header_says_cpu_ranks_and_no_gpus():
    lines = preface_lines(_meta("cpu"), SPEC.to_dict())
    assert "2 CPU ranks (no GPU) on 1 node(s)" in lines[0]
    assert lines[1].startswith("# nThread 1 nGpus 0 minBytes 1024 maxBytes 8192 step: ")


def test_gpu_header_keeps_one_gpu_per_rank():
    lines = preface_lines({**_meta("cuda:0"), "backend": "nccl"}, SPEC.to_dict())
    assert "2 ranks, one GPU each, on 1 node(s)" in lines[0]
    assert lines[1].startswith("# nThread 1 nGpus 1 minBytes 1024")


def test_overlap_on_cpu_says_up_front_about_how_long_and_what_the_figure_is_worth():
    # `collbench overlap`'s default plan: 3 collectives x 22 sizes x 3 ratios x 3 repeats ran
    # 133 s on a quiet 2-core VM (issue 38 item 7)
    collectives = ("all_reduce", "all_gather", "reduce_scatter")
    spec = SweepSpec(
        collectives=collectives, min_bytes=8, max_bytes=16 << 20, overlap=OverlapSpec()
    )
    spec = replace(spec, sweep_rows=False, repeats=3)
    cpu = overlap_plan_lines(spec, _meta("cpu"))
    assert cpu[0].startswith("# Overlap: 594 probe(s) of 25 rounds (the collective alone")
    assert cpu[0].endswith(": about 2 min on CPU ranks, longer beside other jobs")
    assert len(cpu) == 2 and "the overlap figure means little" in cpu[1]
    assert overlap_plan_lines(spec, _meta("cuda:0")) == []  # a GPU: no CPU model, no CPU line
    assert overlap_plan_lines(SPEC, _meta("cpu")) == []  # a sweep without probes


def test_the_probe_footer_says_when_holds_came_out_short():
    """Short holds are said under the probes' table, and only when there were some."""
    from collbench.render.table import probe_summary_lines

    probe = {"kind": "overlap", "compute_ratio": 1.0, "overlap_pct": 50.0}
    rows = [make_row(**probe, compute_slowdown=0.1, short_holds=held) for held in (0, 2, None)]
    assert "# Short holds: 2 timed span(s) include the launch cost" in probe_summary_lines(rows)[1]
    assert not [line for line in probe_summary_lines(rows[::2]) if "Short" in line]
