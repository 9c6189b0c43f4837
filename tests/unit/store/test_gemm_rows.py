"""gemm.jsonl rows: typed on read, a row cut short by a kill skipped, a bad one named."""

from __future__ import annotations

import json

import pytest

from collbench.core.errors import SpecError
from collbench.store.gemm_rows import (
    GEMM_FILE,
    GemmRow,
    append_gemm_row,
    count_gemm_rows,
    load_gemm_rows,
)


def row(**changes) -> GemmRow:
    values = dict(
        run_id="r",
        timestamp_utc="t",
        op="qkv",
        pass_name="fwd",
        m=2048,
        n=2304,
        k=6144,
        shape="2048x2304x6144",
        dtype="bf16",
        device="cuda",
        accelerator="NVIDIA A100-SXM4-80GB",
        time_us=300.0,
        tflops=2 * 2048 * 2304 * 6144 / 300e-6 / 1e12,
        timing="cuda_events",
        warmup=5,
        iters=20,
    )
    return GemmRow(**{**values, **changes})


def test_rows_round_trip(tmp_path):
    first, second = row(), row(op="attn_scores", batch=8, shape="8x2048x2048x96")
    append_gemm_row(tmp_path, first)
    append_gemm_row(tmp_path, second)
    assert load_gemm_rows(tmp_path) == [first, second]
    assert second.flops == 2 * 8 * 2048 * 2304 * 6144


def test_no_file_no_rows(tmp_path):
    assert load_gemm_rows(tmp_path) == []


def test_a_truncated_last_line_is_skipped(tmp_path, capsys):
    append_gemm_row(tmp_path, row())
    with (tmp_path / GEMM_FILE).open("a") as handle:
        handle.write('{"kind": "gemm", "op": "ml')
    assert len(load_gemm_rows(tmp_path)) == 1
    assert "skipped a truncated row" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"tflops": -1}, "tflops: -1 in .* is not a positive finite number"),
        ({"tflops": float("nan")}, "tflops: nan in .* is not a positive finite number"),
        ({"time_us": float("inf")}, "time_us: inf in .* is not a positive finite number"),
        ({"tflops": True}, "tflops: True in .* is not a positive finite number"),
        ({"m": "big"}, "m: 'big' in .* is not a count"),
        ({"kind": "sweep"}, "is not a gemm row"),
    ],
)
def test_a_bad_row_is_named(tmp_path, change, message):
    data = {**row().to_dict(), **change}
    (tmp_path / GEMM_FILE).write_text(json.dumps(data) + "\n" + json.dumps(row().to_dict()) + "\n")
    with pytest.raises(SpecError, match=message):
        load_gemm_rows(tmp_path)


def test_status_counts_only_the_lines_that_are_gemm_rows(tmp_path):
    append_gemm_row(tmp_path, row())
    with (tmp_path / GEMM_FILE).open("a") as handle:  # not '4 of 1 shapes'
        handle.write('junk\n\n{"a": 1}\nnull\n{"kind": "gemm"}\n[[[[1]]]]\n\xff\n')
    assert count_gemm_rows(tmp_path) == 1
