"""The printed table must line up with nccl-tests' so existing parsers keep working."""

import re
from dataclasses import replace

import pytest

from collbench.render.table import HEADER, format_line, format_time_us, summary_lines
from tests.helpers import SHARED_DATA, require_shared_data
from tests.rows import make_row

# Hand-written lines in nccl-tests' current format (8 ranks, float sum all_reduce).
FIXTURE = """\
#                                                              out-of-place                       in-place          
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       
           8             2     float     sum      -1    21.37    0.00    0.00      0    20.91    0.00    0.00      0
     1048576        262144     float     sum      -1    412.5    2.54    4.45      0    409.8    2.56    4.48      0
  1073741824     268435456     float     sum      -1    12345   86.98  152.22      0    12290   87.37  152.89      0
"""  # noqa: W291


def _row(size, count, placement, time_us, algbw, busbw, wrong=0):
    return make_row(
        size_bytes=size,
        count=count,
        dtype="float32",
        op="sum",
        root=-1,
        placement=placement,
        time_us=time_us,
        algbw_gbps=algbw,
        busbw_gbps=busbw,
        n_wrong=wrong,
    )


def test_header_is_nccl_tests_header():
    assert [line.rstrip() for line in HEADER] == [
        line.rstrip() for line in FIXTURE.splitlines()[:3]
    ]


@pytest.mark.parametrize(
    "time_us, text",
    [
        (21.374, "  21.37"),
        (99.994, "  99.99"),
        (100.0, "  100.0"),
        (412.46, "  412.5"),
        (9999.94, " 9999.9"),
        (10000.0, "  10000"),
        (47617.2, "  47617"),
    ],
)
def test_time_precision_rule(time_us, text):
    assert format_time_us(time_us) == text


def test_lines_match_fixture_character_for_character():
    expected = FIXTURE.splitlines()[3:]
    values = [
        (8, 2, 21.37, 0.0, 0.0, 20.91, 0.0, 0.0),
        (1048576, 262144, 412.5, 2.54, 4.45, 409.8, 2.56, 4.48),
        (1073741824, 268435456, 12345, 86.98, 152.22, 12290, 87.37, 152.89),
    ]
    for line, (size, count, t1, a1, b1, t2, a2, b2) in zip(expected, values, strict=True):
        rows = {
            "out_of_place": _row(size, count, "out_of_place", t1, a1, b1),
            "in_place": _row(size, count, "in_place", t2, a2, b2),
        }
        assert format_line(rows) == line


def test_missing_placement_and_unchecked_rows_keep_column_count():
    row = _row(64, 16, "in_place", 30.0, 0.0, 0.0, wrong=None)
    line = format_line({"in_place": row})
    fields = line.split()
    assert len(fields) == 13
    assert fields[5:9] == ["n/a"] * 4 and fields[-1] == "N/A"
    assert len(line) == len(FIXTURE.splitlines()[3])


def test_summary_reports_nccl_average_and_peak():
    rows = [
        _row(8, 2, "in_place", 20, 0.0, 0.0),
        _row(1 << 20, 1 << 18, "in_place", 100, 9, 10),
        _row(1 << 20, 1 << 18, "out_of_place", 100, 8, 8, wrong=2),
    ]
    lines = summary_lines(rows)
    assert lines[0] == "# Out of bounds values : 2 FAILED"
    assert lines[1] == "# Avg bus bandwidth    : 6"
    assert lines[2].startswith("# Peak bus bandwidth   : 10.00 GB/s at 1048576 B (1 MiB, in_place)")
    unchecked = [replace(row, n_wrong=None) for row in rows]
    assert "N/A" in summary_lines(unchecked)[0]


def test_renders_real_nccl_tests_lines_identically():
    """Every data line of a real nccl-tests log is reproduced from its parsed values."""
    log = require_shared_data(
        SHARED_DATA / "nccl-tests" / "nccl_h100_a3mega_2node_tcpxo_allreduce.txt"
    )
    lines = [line for line in log.read_text().splitlines() if re.match(r"^\s+\d+\s+\d+\s", line)]
    assert lines
    for line in lines:
        f = line.split()
        rows = {}
        for placement, base in (("out_of_place", 5), ("in_place", 9)):
            rows[placement] = make_row(
                size_bytes=int(f[0]),
                count=int(f[1]),
                dtype="float32",
                op=f[3],
                root=int(f[4]),
                placement=placement,
                time_us=float(f[base]),
                algbw_gbps=float(f[base + 1]),
                busbw_gbps=float(f[base + 2]),
                n_wrong=int(f[base + 3]),
            )
        assert format_line(rows) == line


def test_one_rank_says_busbw_is_zero_by_definition_instead_of_a_peak():
    # nccl-tests' -g 1 typed here runs one rank: all-reduce's 2(n-1)/n is 0 there.
    rows = [
        make_row(collective="all_reduce", world_size=1, nodes=1, size_bytes=s) for s in (8, 1024)
    ]
    lines = summary_lines(rows)
    assert not any("GB/s at" in line for line in lines)
    assert any("none: with one rank busbw is 0 by definition" in line for line in lines)
    # broadcast's bus factor is 1 at any size: its one-rank peak is a measured figure
    rows = [make_row(collective="broadcast", world_size=1, nodes=1, root=0)]
    assert any("GB/s at" in line for line in summary_lines(rows))
    two = [make_row(collective="all_reduce", world_size=2, nodes=1)]
    assert any("GB/s at" in line for line in summary_lines(two))
