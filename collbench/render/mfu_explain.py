"""`collbench mfu --explain`: where a step's time goes, operator by operator.

The method, in full: docs/architecture.md#collbench-render-mfu-explain-py.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from collbench.analysis.mfu.compute import ATTENTION, GEMM, IN_STEP_SHARE, MEMORY, OperatorTime
from collbench.analysis.mfu.estimate import Estimate
from collbench.analysis.mfu.workload import Workload
from collbench.render.mfu import to_json
from collbench.render.table import text_columns


def explain_rows(result: Estimate) -> list[dict[str, Any]]:
    """One mapping per line of the explanation: what, category, per-layer ms, per-step s."""
    micro, m = result.micro, result.microbatches
    assert micro is not None  # every estimate carries its compute
    rows = [_operator(op, micro.layers * m, "layer") for op in micro.layer]
    rows += [_operator(op, micro.recomputed_layers * m, "layer") for op in micro.recomputed]
    rows += [_operator(op, m, "stage") for op in micro.stage]
    rows.append(_part("optimizer step", MEMORY, micro.optimizer_s))
    rows.append(_part("pipeline bubble", "bubble", result.bubble_s))
    for kind in result.comm:  # each communicator's exposed seconds, and how much is hidden
        if kind.total_s > 0:
            rows.append(_part(f"exposed {kind.kind}", "exposed comm", kind.exposed_s))
            if (hidden_s := kind.total_s - kind.exposed_s) > 1e-12:
                rows[-1]["detail"] = f"{hidden_s:.3f} s of {kind.total_s:.3f} s hidden"
    for kind in result.comm:
        if kind.slowdown_s:
            slowed = _part(f"GEMMs slowed by {kind.kind} overlap", "exposed comm", kind.slowdown_s)
            taken = "smaller GEMM chunks, SMs" if kind.kind == "tp" else "SMs and HBM"
            slowed["detail"] = f"{taken} taken by the communication kernels"
            rows.append(slowed)
    dp_slowdown_s = result.slowdown_s - sum(kind.slowdown_s for kind in result.comm)
    if dp_slowdown_s > 1e-12:
        rows.append(_part("compute slowed by DP", "exposed comm", dp_slowdown_s))
    if result.straggler_s:
        rows.append(_part("waits for the slowest accelerator", "straggler", result.straggler_s))
    for row in rows:
        row["share"] = row["step_s"] / result.step_time_s
    return rows


def explain_json(workload: Workload, estimates: Sequence[Estimate]) -> str:
    """The `--json` output with an `explain` list and the priced GEMMs per fabric."""
    data = to_json(workload, estimates)
    for fabric, result in zip(data["fabrics"], estimates, strict=True):
        fabric["explain"] = explain_rows(result)
        fabric["gemms"] = _gemm_rows(result)
    return json.dumps(data, indent=2)


def render_explain(estimates: Sequence[Estimate]) -> str:
    """The explanation of every fabric, one block each."""
    return "\n\n".join(_block(result) for result in estimates)


def _block(result: Estimate) -> str:
    micro = result.micro
    assert micro is not None
    rows = explain_rows(result)
    header = ["", "kind", "fwd ms", "bwd ms", "recomp ms", "per step s", "share", ""]
    body = [
        [
            row["name"],
            row["category"],
            _ms(row.get("forward_s")),
            _ms(row.get("backward_s")),
            _ms(row.get("recompute_s")),
            f"{row['step_s']:.3f}",
            f"{row['share']:.1%}",
            row.get("detail", ""),
        ]
        for row in rows
    ]
    body.append(["step", "", "", "", "", f"{result.step_time_s:.3f}", "100.0%", ""])
    totals = {
        category: sum(row["step_s"] for row in rows if row["category"] == category)
        for category in (GEMM, ATTENTION, MEMORY, "bubble", "exposed comm")
        + ("straggler",) * bool(result.straggler_s)
    }
    summary = ", ".join(
        f"{name} {seconds / result.step_time_s:.0%}" for name, seconds in totals.items()
    )
    title = (
        f"# where the step goes on {result.topology}: one accelerator of the busiest "
        f"pipeline stage, {micro.layers} layer{'s' if micro.layers != 1 else ''} x "
        f"{result.microbatches} micro-batch{'es' if result.microbatches != 1 else ''} "
        f"(ms per layer and micro-batch; stage rows per micro-batch)"
    )
    return "\n".join(
        [
            title,
            *_table(header, body),
            f"by kind: {summary}",
            f"GEMMs (alone; in the step at {IN_STEP_SHARE:.0%} of that rate):",
            *_gemm_lines(result),
        ]
    )


def _operator(op: OperatorTime, repeats: int, scope: str) -> dict[str, Any]:
    return {
        "name": op.op if scope == "layer" else f"{op.op} (stage)",
        "category": op.category,
        "scope": scope,
        "forward_s": op.forward_s,
        "backward_s": op.backward_s,
        "recompute_s": op.recompute_s,
        "step_s": op.total_s * repeats,
        "flops": op.flops,
        "detail": op.detail,
    }


def _part(name: str, category: str, seconds: float) -> dict[str, Any]:
    return {"name": name, "category": category, "scope": "step", "step_s": seconds}


def _gemm_rows(result: Estimate) -> list[dict[str, Any]]:
    assert result.micro is not None
    return [
        {
            "op": gemm.op,
            "pass": gemm.pass_name,
            "shape": gemm.shape,
            "time_us": price.time_s * 1e6,
            "efficiency": price.efficiency,
            "bound": price.bound,
            "tile": price.tile,
            "waves": price.waves,
        }
        for gemm, price in result.micro.gemms
    ]


def _gemm_lines(result: Estimate) -> list[str]:
    header = ["", "pass", "shape", "us", "of peak", "bound", "tile x waves"]
    body = [
        [
            row["op"],
            row["pass"],
            row["shape"],
            f"{row['time_us']:,.1f}",
            f"{row['efficiency']:.0%}",
            row["bound"],
            "-" if row["tile"] == "-" else f"{row['tile']} x {row['waves']}",
        ]
        for row in _gemm_rows(result)
    ]
    return _table(header, body)


def _ms(seconds: float | None) -> str:
    return "" if seconds is None else f"{seconds * 1e3:.3f}"


def _table(header: list[str], body: list[list[str]]) -> list[str]:
    """Names and details left-justified, figures right-justified."""
    return text_columns([header, *body], left=(0, 1, len(header) - 1))
