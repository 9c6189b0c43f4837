"""`collbench gemm` as text: a progress line per shape, then the table.

With a topology, each shape's share of the accelerator's dense peak and what the shape
model (analysis.gemm_model) predicts for it, side by side: the measured/predicted ratio is
what calibrates the catalog's `matmul_fraction`. Pure: rows in, strings out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from collbench.analysis.mfu.gemm_prices import same_accelerator
from collbench.analysis.model.gemm_model import Gemm, gemm_time
from collbench.render.table import text_columns
from collbench.store.gemm_rows import GemmRow


def render_gemm_line(row: GemmRow, topology: Any = None) -> str:
    share = _share(row, topology)
    return (
        f"  {row.op} {row.pass_name} {row.shape}: {row.time_us:,.1f} us, "
        f"{row.tflops:,.2f} TFLOP/s{f' ({share})' if share else ''}"
    )


def render_gemm_table(rows: Sequence[GemmRow], topology: Any, what: str) -> str:
    if not rows:
        return "# no shapes measured"
    first = rows[0]
    lines = [
        f"# gemm: {what}; {first.dtype} on {first.accelerator} ({first.device}), "
        f"{first.iters} timed after {first.warmup} warm-up, {first.timing}"
    ]
    header = ["op", "pass", "shape", "time us", "p50 us", "TFLOP/s"]
    if first.dtype == "fp32":
        topology = None  # the catalog's peaks and fractions are bf16 / fp8 ones
    if topology is not None:
        header += ["of peak", "model", "measured/model"]
        name = topology.accelerator.name
        if not same_accelerator(first.accelerator, name):
            lines.append(
                f"# note: measured on {first.accelerator}, not on {topology.name}'s {name}: "
                "the shares below compare different accelerators"
            )
    body = []
    for row in rows:
        cells = [
            row.op,
            row.pass_name,
            row.shape,
            f"{row.time_us:,.1f}",
            "-" if row.time_us_p50 is None else f"{row.time_us_p50:,.1f}",
            f"{row.tflops:,.3f}",
        ]
        if topology is not None:
            predicted = _predicted(row, topology)
            cells += [
                _share(row, topology),
                f"{predicted:.1%}",
                f"{row.tflops * 1e12 / _peak(topology) / predicted:.2f}",
            ]
        body.append(cells)
    lines += text_columns([header, *body], left=(0, 1, 2))
    return "\n".join(lines)


def _peak(topology: Any) -> float:
    return topology.accelerator.peak_bf16_tflops * 1e12


def _share(row: GemmRow, topology: Any) -> str:
    if topology is None:
        return ""
    return f"{row.tflops * 1e12 / _peak(topology):.1%}"


def _predicted(row: GemmRow, topology: Any) -> float:
    gemm = Gemm(row.op, row.pass_name, row.m, row.n, row.k, row.batch)
    return gemm_time(gemm, topology.accelerator, _peak(topology)).efficiency
