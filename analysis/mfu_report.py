"""`collbench mfu` glue: estimate one workload on several fabrics (with the what-ifs), and
render the side-by-side table and the JSON.

Pure apart from what it is handed: rows of measured runs come in as lists, nothing is read
here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from collbench.analysis.mfu import Estimate, EstimateOptions, estimate
from collbench.analysis.mfu_inputs import (
    DEFAULT_COMM_EFFICIENCY,
    MeasuredCurve,
    cost_model_pricer,
    curve_pricer,
    scale_out_doubled,
)
from collbench.analysis.workload import Workload
from collbench.topologies.schema import Topology


@dataclass(frozen=True)
class Fabric:
    """One fabric to price on, with the measured curves that override its predictions."""

    topology: Topology
    curves: tuple[MeasuredCurve, ...] = ()


def sized_for(workload: Workload, topology: Topology) -> Topology:
    """The topology with as many nodes as the workload's tp x pp x dp accelerators need."""
    return topology.with_nodes(
        -(-workload.parallelism.world_size // topology.accelerators_per_node)
    )


def estimate_fabric(
    workload: Workload,
    fabric: Fabric,
    options: EstimateOptions,
    comm_efficiency: float = DEFAULT_COMM_EFFICIENCY,
) -> Estimate:
    """One fabric: the estimate plus its what-ifs (perfect overlap; 2x scale-out)."""
    topology = fabric.topology
    predicted = cost_model_pricer(topology, comm_efficiency)
    result = estimate(
        workload, topology, curve_pricer(list(fabric.curves), topology, predicted), options
    )
    doubled = scale_out_doubled(topology)
    # Curves measured on this fabric's scale-out say nothing about a faster one; those
    # that stay inside a scale-up domain still hold.
    local = [curve for curve in fabric.curves if curve.nodes <= topology.nodes_per_domain]
    faster = curve_pricer(local, doubled, cost_model_pricer(doubled, comm_efficiency))
    what_if = {**result.what_if, "scale_out_2x": estimate(workload, doubled, faster, options).mfu}
    return replace(result, what_if=what_if)


def estimate_fabrics(
    workload: Workload,
    fabrics: Sequence[Fabric],
    options: EstimateOptions,
    comm_efficiency: float = DEFAULT_COMM_EFFICIENCY,
) -> list[Estimate]:
    return [estimate_fabric(workload, fabric, options, comm_efficiency) for fabric in fabrics]


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
