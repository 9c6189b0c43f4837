"""`collbench gemm` as text: a progress line per shape, then the table. With a topology,
each shape's share of the dense peak beside the shape model's: their ratio calibrates the
catalog's `matmul_fraction`. A topology without that peak gets a line saying so.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from collbench.analysis.mfu.gemm_prices import same_accelerator
from collbench.analysis.model.gemm_model import Gemm, gemm_time
from collbench.render.table import text_columns
from collbench.store.gemm_rows import GemmRow


@dataclass(frozen=True)
class ModelPeak:
    """The dense peak a run's rows are read against (None: the topology gives none), from
    the accelerator entry's peak_KIND_tflops."""

    flops: float | None
    kind: str  # the peak's dtype: bf16 (bf16 and fp16 rows), fp32 or tf32


def model_peak(topology: Any, dtype: str, tf32: bool = False) -> ModelPeak:
    """bf16 and fp16 rows: the dense bf16 peak (fp16's is the same on every catalog
    accelerator); fp32 rows: the tf32 peak when torch allowed TF32 (`tf32`), else fp32's."""
    kind = ("tf32" if tf32 else "fp32") if dtype == "fp32" else "bf16"
    value = getattr(topology.accelerator, f"peak_{kind}_tflops")
    return ModelPeak(None if value is None else value * 1e12, kind)


def render_gemm_line(row: GemmRow) -> str:
    """One shape's progress line."""
    mean = "" if row.time_us_mean is None else f"; mean {row.time_us_mean:,.1f}"
    return (
        f"  {row.op} {row.pass_name} {row.shape}: {row.time_us:,.1f} us (median{mean}), "
        f"{row.tflops:,.2f} TFLOP/s"
    )


def render_gemm_table(rows: Sequence[GemmRow], topology: Any, what: str, tf32: bool = False) -> str:
    """The table; `tf32`: the run's fp32 matmuls may have run as TF32 (its math settings)."""
    if not rows:
        return "# no shapes measured"
    first = rows[0]
    lines = [
        f"# gemm: {what}; {first.dtype} on {first.accelerator} ({first.device}), "
        f"{first.iters} timed after {first.warmup} warm-up, {first.timing}",
        f"# median us: {first.time_stat or 'the timed batch mean'} (TFLOP/s is from it); "
        "mean us: the whole batch's mean, which one stall inflates",
    ]
    header = ["op", "pass", "shape", "median us", "mean us", "TFLOP/s"]
    peak = None
    if topology is not None:
        found = model_peak(topology, first.dtype, tf32 and first.device == "cuda")
        lines += _model_notes(first, topology, found)
        if found.flops is not None:
            peak = found
            header += ["of peak", "model", "measured/model"]
    body = []
    for row in rows:
        mean = "-" if row.time_us_mean is None else f"{row.time_us_mean:,.1f}"
        cells = [row.op, row.pass_name, row.shape, f"{row.time_us:,.1f}", mean]
        cells.append(f"{row.tflops:,.3f}")
        if peak is not None:
            gemm = Gemm(row.op, row.pass_name, row.m, row.n, row.k, row.batch)
            flops = peak.flops or 1.0
            predicted = gemm_time(gemm, topology.accelerator, flops, peak.kind).efficiency
            share = row.tflops * 1e12 / flops
            cells += [f"{share:.1%}", f"{predicted:.1%}", f"{share / predicted:.2f}"]
        body.append(cells)
    lines += text_columns([header, *body], left=(0, 1, 2))
    return "\n".join(lines)


def render_gemm_json(rows: Sequence[GemmRow], run_dir: Any) -> str:
    """The rows as gemm.jsonl holds them, under what their time_us is."""
    stat = rows[0].time_stat if rows else None
    data = {"run_dir": str(run_dir), "time_us": stat, "rows": [row.to_dict() for row in rows]}
    return json.dumps(data, indent=2)


def _model_notes(first: GemmRow, topology: Any, peak: ModelPeak) -> list[str]:
    """What the model columns read the rows against, or why there are none."""
    name = topology.accelerator.name
    if peak.flops is None:
        tf32 = " (torch allowed TF32 matmuls)" if peak.kind == "tf32" else ""
        return [
            f"# no model columns: {topology.name}'s {name} gives no {peak.kind} peak "
            f"(accelerator.peak_{peak.kind}_tflops){tf32}"
        ]
    notes = [
        f"# of peak: of {topology.name}'s dense {peak.kind} peak, {peak.flops / 1e12:,.4g} "
        f"TFLOP/s (accelerator.peak_{peak.kind}_tflops); model: the shape model's share of it"
        + (" (with the bf16 matmul_fraction, ASSUMED)" if peak.kind != "bf16" else "")
        + (
            f", at the sustained clock ({sustained:.1%} of the burst rate: "
            "accelerator.matmul_sustained; a short run may beat it)"
            if (sustained := topology.accelerator.matmul_sustained)
            else ""
        )
    ]
    if not same_accelerator(first.accelerator, name):
        notes.append(
            f"# note: measured on {first.accelerator}, not on {topology.name}'s {name}: "
            "the shares below compare different accelerators"
        )
    return notes
