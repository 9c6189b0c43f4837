"""`collbench mfu` as text and JSON: fabrics side by side (the step, its breakdown, MFU and
the what-ifs), and the same figures as a mapping.

Pure: estimates in, strings out.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from collbench.analysis.mfu import Estimate
from collbench.analysis.workload import Workload


def render_mfu(workload: Workload, estimates: Sequence[Estimate], as_json: bool = False) -> str:
    """The side-by-side table, or its figures as indented JSON."""
    if as_json:
        return json.dumps(to_json(workload, estimates), indent=2)
    return render_table(workload, estimates)


def to_json(workload: Workload, estimates: Sequence[Estimate]) -> dict[str, Any]:
    """`mfu`, `mfu_loss_comm`, `step_time_s` and the breakdown, per fabric."""
    model = workload.model
    return {
        "workload": {
            "model": model.name,
            "params": model.n_params,
            "layers": model.layers,
            "hidden": model.hidden,
            "heads": model.heads,
            "vocab": model.vocab,
            **{
                name: getattr(workload.training, name)
                for name in ("seq", "global_batch", "micro_batch", "recompute", "dtype")
            },
            **{
                name: getattr(workload.parallelism, name)
                for name in (
                    "tp",
                    "pp",
                    "dp",
                    "zero",
                    "sequence_parallel",
                    "virtual_stages",
                    "dp_overlap",
                    "dp_bucket_mb",
                )
            },
            "microbatches": workload.microbatches,
            "model_flops_per_token": workload.model_flops_per_token,
        },
        "fabrics": [_estimate_json(result) for result in estimates],
    }


def _estimate_json(result: Estimate) -> dict[str, Any]:
    return {
        "topology": result.topology,
        "nodes": result.nodes,
        "accelerators": result.accelerators,
        "peak_tflops": result.peak_tflops,
        "mfu": result.mfu,
        "hfu": result.hfu,
        "mfu_loss_comm": result.mfu_loss_comm,
        "step_time_s": result.step_time_s,
        "tokens_per_s": result.tokens_per_s,
        "model_tflops_per_accelerator": result.model_tflops_per_accelerator,
        "breakdown": {
            "compute_s": result.compute_s,
            "bubble_s": result.bubble_s,
            "exposed_comm_s": {kind.kind: kind.exposed_s for kind in result.comm},
            "comm_total_s": {kind.kind: kind.total_s for kind in result.comm},
            "compute_slowdown_s": result.slowdown_s,
        },
        "collectives": {
            kind.kind: {"what": kind.collectives, "priced": kind.source} for kind in result.comm
        },
        "what_if_mfu": result.what_if,
        "assumptions": list(result.assumptions),
    }


def render_table(workload: Workload, estimates: Sequence[Estimate]) -> str:
    """Fabrics side by side, one column each: the step, its breakdown, MFU and what-ifs."""
    rows: list[tuple[str, Any]] = [
        ("accelerators (nodes)", lambda e: f"{e.accelerators} ({e.nodes})"),
        ("peak TFLOP/s", lambda e: f"{e.peak_tflops:,.0f}"),
        ("step time (s)", lambda e: f"{e.step_time_s:.3f}"),
        ("  compute", lambda e: _share(e.compute_s, e)),
        ("  pipeline bubble", lambda e: _share(e.bubble_s, e)),
        *[(f"  exposed {kind}", _exposed(kind)) for kind in ("tp", "pp", "dp")],
        ("  compute slowdown", lambda e: _share(e.slowdown_s, e)),
        ("MFU", lambda e: f"{e.mfu:.1%}"),
        ("HFU (with recompute)", lambda e: f"{e.hfu:.1%}"),
        ("MFU lost to exposed comm", lambda e: f"{e.mfu_loss_comm:.1%}"),
        ("model TFLOP/s per acc.", lambda e: f"{e.model_tflops_per_accelerator:.0f}"),
        ("tokens/s", lambda e: f"{e.tokens_per_s:,.0f}"),
        ("what if: perfect overlap", lambda e: f"{e.what_if['perfect_overlap']:.1%}"),
        ("what if: 2x scale-out", lambda e: f"{e.what_if['scale_out_2x']:.1%}"),
    ]
    header = ["", *(result.topology for result in estimates)]
    body = [[label, *(cell(result) for result in estimates)] for label, cell in rows]
    widths = [max(len(str(line[i])) for line in [header, *body]) for i in range(len(header))]
    lines = [
        "  ".join(
            str(text).ljust(widths[0]) if i == 0 else str(text).rjust(widths[i])
            for i, text in enumerate(line)
        )
        for line in [header, *body]
    ]
    return "\n".join([_headline(workload), "", *lines, "", *_notes(estimates)])


def _exposed(kind: str) -> Any:
    def cell(result: Estimate) -> str:
        return _share(next(c.exposed_s for c in result.comm if c.kind == kind), result)

    return cell


def _share(seconds: float, result: Estimate) -> str:
    return f"{seconds:.3f} ({seconds / result.step_time_s:.0%})"


def _headline(workload: Workload) -> str:
    model, run, par = workload.model, workload.training, workload.parallelism
    flags = [
        f"tp {par.tp} pp {par.pp} dp {par.dp}",
        f"zero {par.zero}" if par.zero else "",
        "sp" if par.sequence_parallel else "",
        f"v {par.virtual_stages}" if par.virtual_stages > 1 else "",
    ]
    return (
        f"# {model.name}: {model.n_params / 1e9:.1f}B params, {model.layers} layers, "
        f"hidden {model.hidden}, seq {run.seq}, global batch {run.global_batch} "
        f"(micro {run.micro_batch}, {workload.microbatches} per pipeline), "
        f"{' '.join(flag for flag in flags if flag)}, "
        f"recompute {run.recompute}, {run.dtype}"
    )


def _notes(estimates: Sequence[Estimate]) -> list[str]:
    """What each kind of collective is, where each fabric's price came from, and what was
    assumed (the same on every fabric, so said once)."""
    first = estimates[0]
    kinds = [kind for kind in first.comm if kind.total_s > 0]
    notes = ["collectives per step:"] + [f"  {kind.kind}: {kind.collectives}" for kind in kinds]
    notes.append("priced:")
    for result in estimates:
        sources = "; ".join(
            f"{kind.kind} {kind.source}" for kind in result.comm if kind.total_s > 0
        )
        notes.append(f"  {result.topology}: {sources or 'nothing to price'}")
    return notes + [f"assumed: {text}" for text in first.assumptions]
