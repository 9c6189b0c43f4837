"""`collbench mfu` as text and JSON: fabrics side by side (the step, its breakdown, MFU and
the what-ifs), and the same figures as a mapping; with `--price`, each priced fabric's cost
per step and per million tokens, under the table and in its JSON, and each against the first
priced fabric (a cheaper GPU-hour held against the tokens per second it realises).

The method, in full: docs/architecture.md#collbench-render-mfu-py.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from collbench.analysis.mfu.accuracy import accuracy_line, band, demonstrated, regime
from collbench.analysis.mfu.estimate import (
    MEASURED,
    MIXED,
    NOTHING_PRICED,
    PREDICTED,
    Estimate,
    TrainingCost,
    combined_origin,
)
from collbench.analysis.mfu.memory import GIB, breakdown_text
from collbench.analysis.mfu.workload import Workload
from collbench.core.units import round_sig
from collbench.render.table import text_columns

# The tag a number gets after it, saying where the collective times under it came from.
ORIGIN_TAGS = {PREDICTED: "p", MEASURED: "m", MIXED: "m+p", NOTHING_PRICED: ""}


def render_mfu(
    workload: Workload,
    estimates: Sequence[Estimate],
    as_json: bool = False,
    costs: Sequence[TrainingCost | None] = (),
) -> str:
    """The side-by-side table, or its figures as indented JSON (`costs`: per estimate its
    cost at `--price`, None where not priced)."""
    if as_json:
        return json.dumps(to_json(workload, estimates, costs), indent=2)
    return render_table(workload, estimates, costs)


def to_json(
    workload: Workload, estimates: Sequence[Estimate], costs: Sequence[TrainingCost | None] = ()
) -> dict[str, Any]:
    """`mfu`, `mfu_loss_comm`, `step_time_s` and the breakdown (and cost), per fabric."""
    model = workload.model
    costs = list(costs) or [None] * len(estimates)
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
                for name in "seq global_batch micro_batch recompute".split()
            },
            "dtype": workload.training.dtype_name,
            "attention": workload.training.attention,
            **{
                name: getattr(workload.parallelism, name)
                for name in (
                    "tp pp dp zero sequence_parallel virtual_stages dp_overlap dp_bucket_mb".split()
                )
            },
            "dp_origin": workload.dp_origin or "given",
            "microbatches": workload.microbatches,
            "model_flops_per_token": workload.model_flops_per_token,
        },
        "fabrics": [
            {**_estimate_json(result, regime(workload)), **cost_json(cost)}
            for result, cost in zip(estimates, costs, strict=True)
        ],
    }


# The figures a script would rank fabrics by: null for a fabric the workload does not fit.
_RANKED = "mfu hfu mfu_loss_comm step_time_s tokens_per_s model_tflops_per_accelerator".split()


def _estimate_json(result: Estimate, regime_name: str) -> dict[str, Any]:
    known = demonstrated(result.accelerator, regime_name)
    fabric = {
        "topology": result.topology,
        # only for a column priced with labelled curves (`--curves LABEL=RUN`, a tune)
        **(
            {"curves_label": result.curves_label, "curves_default": result.curves_default}
            if result.curves_label
            else {}
        ),
        "does_not_fit": result.does_not_fit,
        "nodes": result.nodes,
        "accelerators": result.accelerators,
        "peak_tflops": result.peak_tflops,
        "priced_by": result.origin,
        # above 1 the peak is wrong for the device (a warning says so): null, never printed
        "mfu": _at_most_one(result.mfu),
        "hfu": _at_most_one(result.hfu),
        "above_peak": result.mfu > 1 or result.hfu > 1,
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
            "straggler_s": result.straggler_s,
        },
        "collectives": {
            kind.kind: {"what": kind.collectives, "priced": kind.source, "priced_by": kind.origin}
            for kind in result.comm
        },
        "memory_per_accelerator": None if result.memory is None else result.memory.to_dict(),
        "what_if_mfu": {name: _at_most_one(value) for name, value in result.what_if.items()},
        "what_if_priced_by": result.what_if_origin,
        "assumptions": list(result.assumptions),
        "warnings": list(result.warnings),
        # the estimator's MFU error on published runs of this accelerator (null: none)
        "validated": None if known is None else known.to_dict(),
    }
    if result.does_not_fit:
        fabric.update(
            dict.fromkeys([*_RANKED, "breakdown", "what_if_mfu", "cost"]), above_peak=False
        )
    return fabric


def render_table(
    workload: Workload, estimates: Sequence[Estimate], costs: Sequence[TrainingCost | None] = ()
) -> str:
    """Fabrics side by side, one column each: the step, its breakdown, MFU and what-ifs
    (and under it, with `costs`, each fabric's cost)."""
    kind = regime(workload)
    rows: list[tuple[str, Any]] = [
        ("collectives priced by", lambda e: e.origin.replace(NOTHING_PRICED, "nothing")),
        ("accelerators (nodes)", lambda e: f"{e.accelerators} ({e.nodes})"),
        ("peak TFLOP/s", lambda e: _tflops(e.peak_tflops)),
        ("memory per acc. (GiB)", _memory),
        ("step time (s)", _tagged(lambda e: f"{e.step_time_s:.3f}")),
        ("  compute", lambda e: _share(e.compute_s, e)),
        # The bubble idles for the stages' exposed TP and PP; the slowdown is DP's.
        ("  pipeline bubble", _tagged(lambda e: _share(e.bubble_s, e), "tp", "pp")),
        # cp and ep rows only where a fabric's step has them (analysis.mfu.moe)
        *[
            (f"  exposed {kind}", _exposed(kind))
            for kind in ("tp", "cp", "ep", "pp", "dp")
            if kind in ("tp", "pp", "dp") or any(c.kind == kind for e in estimates for c in e.comm)
        ],
        ("  compute slowdown", _tagged(lambda e: _share(e.slowdown_s, e), "dp")),
        # --skew-from: only where a fabric's step waits for its slowest accelerator
        *[("  slowest accelerator", lambda e: _share(e.straggler_s, e))]
        * any(e.straggler_s is not None for e in estimates),
        # the headline: with how far the published runs of its accelerator erred, or not
        (
            "MFU",
            lambda e: f"{_tagged(lambda e: _fraction(e.mfu))(e)} [{band(e.accelerator, kind)}]",
        ),
        ("HFU (with recompute)", _tagged(lambda e: _fraction(e.hfu))),
        ("MFU lost to exposed comm", _tagged(lambda e: f"{e.mfu_loss_comm:.1%}")),
        ("model TFLOP/s per acc.", _tagged(lambda e: _tflops(e.model_tflops_per_accelerator))),
        ("tokens/s", _tagged(lambda e: f"{e.tokens_per_s:,.0f}")),
        ("what if: perfect overlap", lambda e: _fraction(e.what_if["perfect_overlap"])),
        ("what if: 2x scale-out", _what_if("scale_out_2x")),
        *[
            (label, _what_if(name))
            for name, label in UNHIDDEN_ROWS.items()
            if any(name in result.what_if for result in estimates)
        ],
    ]
    header = ["", *(column_name(result) for result in estimates)]
    body = [[label, *(_cell(label, cell, result) for result in estimates)] for label, cell in rows]
    lines = text_columns([[str(text) for text in line] for line in [header, *body]], {0})
    legend = (
        "p: from predicted collective times (topology cost model); m: from measured curves "
        "(--curves); m+p: both; untagged: no collective time in it; MFU [a to b]: how far "
        "the estimate erred on published runs of the accelerator in the workload's regime "
        "(validated: below)"
    )
    recovered = recovery_lines(estimates)
    if costs:
        recovered += price_lines(estimates, costs, header[1:], kind)
    return "\n".join(
        [_headline(workload), "", *lines, legend, *recovered, "", *_notes(estimates, kind)]
    )


# A column of a fabric the workload does not fit (Estimate.does_not_fit): these rows still
# show their figures, the MFU row says so, the others are blank.
_SHOWN_WHEN_UNFIT = ("accelerators (nodes)", "peak TFLOP/s", "memory per acc. (GiB)")


def _at_most_one(value: float) -> float | None:
    return value if value <= 1 else None


def _tflops(value: float) -> str:
    """A rate: whole TFLOP/s from 100 up, three significant digits below (a CPU's 0.08 is
    not 0)."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _fraction(value: float) -> str:
    """MFU or HFU; above 100% the peak it is held against is wrong (a warning says which),
    and no such figure is printed."""
    return f"{value:.1%}" if value <= 1 else "over 100%: peak too low"


def _cell(label: str, cell: Any, result: Estimate) -> Any:
    if not result.does_not_fit or label in _SHOWN_WHEN_UNFIT:
        return cell(result)
    return "does not fit" if label == "MFU" else "-"


def column_name(result: Estimate) -> str:
    """A column's name: the topology, and the label of the curves it was priced with."""
    return f"{result.topology} [{result.curves_label}]" if result.curves_label else result.topology


def recovery_lines(estimates: Sequence[Estimate]) -> list[str]:
    """Per topology priced with labelled curves (settings of a tune): the MFU points the
    best labelled setting recovers over the default's ("tuning recovers X MFU points")."""
    lines = []
    for topology in dict.fromkeys(result.topology for result in estimates):
        columns = [r for r in estimates if r.topology == topology and r.curves_label]
        default = next((r for r in columns if r.curves_default), None)
        others = [r for r in columns if r is not default]
        if default is None or not others:
            continue
        best = max(others, key=lambda r: r.mfu)
        if not {MEASURED, MIXED} & {best.origin, default.origin}:
            lines.append(
                f"{topology}: the curves price none of the workload's collectives (no group "
                "of its matches their collective, rank and node count; see the warnings): no "
                "MFU recovered to show"
            )
            continue
        points = (best.mfu - default.mfu) * 100
        lines.append(
            f"tuning recovers {points:+.2f} MFU points on this fabric ({topology}): "
            f"{best.curves_label} {best.mfu:.1%} against {default.curves_label} {default.mfu:.1%}"
        )
    return lines


def _tag(text: str, origin: str) -> str:
    tag = ORIGIN_TAGS.get(origin, origin)
    return f"{text} {tag}" if tag else text


def _tagged(cell: Any, *kinds: str) -> Any:
    """A cell whose figure depends on the collective times of `kinds` (default: all of
    the step's), tagged with their origin."""

    def tagged(result: Estimate) -> str:
        mine = [c.origin for c in result.comm if c.kind in kinds]
        return _tag(cell(result), combined_origin(mine) if kinds else result.origin)

    return tagged


def _exposed(kind: str) -> Any:
    def cell(result: Estimate) -> str:
        comm = next((c for c in result.comm if c.kind == kind), None)
        return "-" if comm is None else _tag(_share(comm.exposed_s, result), comm.origin)

    return cell


# What-ifs that take a modelled overlap away (analysis.mfu.fabrics.without_overlap).
UNHIDDEN_ROWS = {"no_ep_overlap": "what if: no EP overlap"}
UNHIDDEN_NOTE = (
    "what if: no EP overlap: the MFU if the all-to-alls hide behind nothing. The published "
    "per-step MoE run with an EP overlap (DeepSeek-V3 with Megatron-Core's 1F1B overlap, on "
    "H100) ran nearer it than the overlapped estimate (docs/mfu/moe-cp.md)"
)


def _what_if(name: str) -> Any:
    def cell(result: Estimate) -> str:
        if name not in result.what_if:
            return "-"
        return _tag(_fraction(result.what_if[name]), result.what_if_origin.get(name, ""))

    return cell


def _memory(result: Estimate) -> str:
    memory = result.memory
    if memory is None:
        return "-"
    total = f"{memory.total_bytes / GIB:,.1f}"
    if memory.capacity_bytes is None:
        return f"{total} of ?"
    capacity = f"{total} of {memory.capacity_bytes / GIB:,.4g}"
    if memory.fits:
        return capacity
    return f"{capacity} may fit" if memory.may_fit else f"{capacity} OVER"


def _share(seconds: float | None, result: Estimate) -> str:
    return "-" if seconds is None else f"{seconds:.3f} ({seconds / result.step_time_s:.0%})"


def _headline(workload: Workload) -> str:
    model, run, par = workload.model, workload.training, workload.parallelism
    flags = [
        f"tp {par.tp} pp {par.pp} dp {par.dp}",
        f"cp {par.cp}" if par.cp > 1 else "",
        f"ep {par.ep}" if par.ep > 1 else "",
        f"zero {par.zero}" if par.zero else "",
        "sp" if par.sequence_parallel else "",
        f"v {par.virtual_stages}" if par.virtual_stages > 1 else "",
    ]
    headline = (
        f"# {model.name}: {model.n_params / 1e9:.1f}B params, {model.layers} layers, "
        f"hidden {model.hidden}, seq {run.seq}, global batch {run.global_batch} "
        f"(micro {run.micro_batch}, {workload.microbatches} per pipeline), "
        f"{' '.join(flag for flag in flags if flag)}, "
        f"recompute {run.recompute}"
        + (f" + {run.recompute_layers} layers/chunk in full" if run.recompute_layers else "")
        + f", {run.dtype_name}"
    )
    if workload.dp_origin:
        headline += f"\n# dp {par.dp} on every fabric: {workload.dp_origin}"
    return headline


def _notes(estimates: Sequence[Estimate], regime_name: str) -> list[str]:
    """What each kind of collective is, where each fabric's price came from, and what was
    assumed (what every fabric assumed said once, the rest fabric by fabric)."""
    first = estimates[0]
    kinds = [kind for kind in first.comm if kind.total_s > 0]
    notes = ["collectives per step:"] + [f"  {kind.kind}: {kind.collectives}" for kind in kinds]
    notes.append("priced:")
    for result in estimates:
        sources = "; ".join(
            f"{kind.kind} {kind.source}" for kind in result.comm if kind.total_s > 0
        )
        notes.append(f"  {column_name(result)}: {sources or 'nothing to price'}")
    notes += _memory_notes(estimates)
    notes += [
        accuracy_line(column_name(result), result.accelerator, regime_name) for result in estimates
    ]
    if any(name in first.what_if for name in UNHIDDEN_ROWS):
        notes.append(UNHIDDEN_NOTE)
    shared = [text for text in first.assumptions if all(text in r.assumptions for r in estimates)]
    own = [f"{column_name(r)}: {t}" for r in estimates for t in r.assumptions if t not in shared]
    return notes + [f"assumed: {text}" for text in shared + own]


def _memory_notes(estimates: Sequence[Estimate]) -> list[str]:
    """The per-accelerator memory estimate (the same on every fabric), and the fabrics
    that do not say their accelerators' memory."""
    memory = estimates[0].memory
    if memory is None:
        return []
    stage = (
        f"pipeline stage {memory.stage}, the busiest" if memory.stage else "first pipeline stage"
    )
    notes = [
        f"memory per accelerator ({stage}, {memory.in_flight:g} micro-batch"
        f"{'' if memory.in_flight == 1 else 'es'} of activations): {breakdown_text(memory)}; "
        "a lower bound (CUDA context, fragmentation and buffers come on top)"
    ]
    unknown = [e.topology for e in estimates if e.memory and e.memory.capacity_bytes is None]
    if unknown:
        names = ", ".join(dict.fromkeys(unknown))
        notes.append(f"  not checked against {names}: no accelerator.memory_gib given")
    return notes


def price_lines(
    estimates: Sequence[Estimate],
    costs: Sequence[TrainingCost | None],
    names: Sequence[str],
    regime_name: str,
) -> list[str]:
    """The cost table (one column per fabric, tagged m/p as the MFU table's column, with
    how far its MFU can err) and one line per further priced fabric against the first;
    none without prices."""
    if not any(cost is not None for cost in costs):
        return []
    rows = [
        ("USD per GPU-hour", lambda c: f"{c.usd_per_gpu_hour:,.2f}", False),
        ("USD per step", lambda c: f"{c.step_usd:,.4g}", True),
        ("USD per million tokens", lambda c: f"{c.usd_per_million_tokens:,.4g}", True),
    ]
    header = ["cost (--price)", *names]
    body = [
        [
            label,
            *(
                "-" if cost is None else _tag(text(cost), result.origin if tagged else "")
                for cost, result in zip(costs, estimates, strict=True)
            ),
        ]
        for label, text, tagged in rows
    ]
    body.append(["MFU validated", *(band(e.accelerator, regime_name) for e in estimates)])
    return ["", *text_columns([header, *body], {0}), *_against_first(estimates, costs, names)]


def _against_first(
    estimates: Sequence[Estimate], costs: Sequence[TrainingCost | None], names: Sequence[str]
) -> list[str]:
    """'B vs A: GPU-hour -15.0%, tokens/s -22.1%, cost per million tokens +9.1%'."""
    priced = [(index, cost) for index, cost in enumerate(costs) if cost is not None]
    if len(priced) < 2:
        return []
    first, base = priced[0]
    base_run = estimates[first]
    lines = []
    for index, cost in priced[1:]:
        run = estimates[index]
        lines.append(
            f"{names[index]} vs {names[first]}: GPU-hour "
            f"{_change(cost.usd_per_gpu_hour, base.usd_per_gpu_hour)}, tokens/s "
            f"{_change(run.tokens_per_s, base_run.tokens_per_s)}, MFU {run.mfu:.1%} vs "
            f"{base_run.mfu:.1%}: cost per million tokens "
            f"{_change(cost.usd_per_million_tokens, base.usd_per_million_tokens)}"
        )
    return lines


def _change(value: float, base: float) -> str:
    return f"{(value / base - 1):+.1%}" if base > 0 else "-"


def cost_json(cost: TrainingCost | None) -> dict[str, Any]:
    """A fabric's `cost` entry in `mfu --json` (empty when it was not priced)."""
    if cost is None:
        return {}
    return {
        "cost": {
            "usd_per_gpu_hour": cost.usd_per_gpu_hour,
            "accelerators": cost.accelerators,
            "usd_per_step": round_sig(cost.step_usd),
            "usd_per_million_tokens": round_sig(cost.usd_per_million_tokens),
        }
    }
