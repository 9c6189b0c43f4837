"""`collbench mfu`: the training MFU a workload reaches on fabrics, and what its exposed
collectives cost. Workload options are cli/workload.py's. Imports stay light: numpy and
scipy load only when the command runs."""

from __future__ import annotations

from functools import partial
from typing import Any

from collbench.cli.options import REQUIRED, Option, command, field_option, json_option, warn
from collbench.cli.workload import EST_PANEL, FOLDED_PANELS, WORKLOAD_OPTIONS, workload_parts
from collbench.run.mfu import MfuRequest, estimate_mfu

_request = partial(field_option, MfuRequest)
MFU_OPTIONS = (
    Option(
        ("--topology", "-T"),
        "Catalog name or topology file; repeat to compare fabrics side by side.",
        MfuRequest,
        kind=list[str],
        default=REQUIRED,
        metavar="NAME|FILE",
    ),
    *WORKLOAD_OPTIONS,
    _request(
        "--curves",
        "Run directory of measured sweeps for the first topology, or NAME=RUN; repeatable.",
        EST_PANEL,
        kind=list[str],
        default=None,
        metavar="[NAME=]RUN",
    ),
    _request(
        "--overlap",
        "Run directory with overlap probes: its overlap efficiency and compute slowdown "
        "(else compute 18.9% slower beside a collective: Lee et al. 2025).",
        EST_PANEL,
        default=None,
        metavar="RUN",
    ),
    _request(
        "--gemm",
        "Run directory of `collbench gemm` rows: their measured rate for the shapes they "
        "hold, on fabrics with the same accelerator.",
        EST_PANEL,
        default=None,
        metavar="RUN",
    ),
    _request(
        "--skew-from",
        "One-node doctor run (or a `doctor --per-node` run) on GPUs: its accelerators' gemm "
        "burn-ins; the step waits for the slowest of the job's accelerators. Repeatable.",
        EST_PANEL,
        kind=list[str],
        default=None,
        metavar="RUN",
    ),
    _request(
        "--explain",
        "Also print where a step's time goes, operator by operator (GEMMs, attention, "
        "memory-bound, exposed communication, bubble).",
    ),
    _request(
        "--price",
        "NAME=USD: the price per GPU-hour of fabric NAME (a --topology given), to print the "
        "cost per step and per million tokens; repeatable.",
        kind=list[str],
        default=None,
        metavar="NAME=USD",
    ),
    _request(
        "--search",
        "Also rank, per fabric, the layouts of the job (TP, PP, virtual stages, CP, DP, ZeRO, "
        "recompute, micro-batch) that fit its memory: the best first, with yours placed.",
    ),
    _request(
        "--allow-oversubscribed-memory",
        "Estimate a workload even when its memory per accelerator exceeds the fabric's "
        "(warned, not refused).",
        "Memory check",
    ),
    json_option("Print JSON instead of the table."),
)


def run_mfu(values: dict[str, Any]) -> None:
    """Parse the workload, estimate it on each fabric (run/mfu.py), warn about inputs that
    do not apply, print the table (or JSON)."""
    from collbench.render.mfu import render_mfu
    from collbench.render.mfu_explain import explain_json, render_explain
    from collbench.render.mfu_search import with_search

    wanted, model, training, parallelism, options = workload_parts(values, MFU_OPTIONS)
    result = estimate_mfu(wanted, model, training, parallelism, options)
    warn(result.warnings)
    if values["json_out"] and wanted.explain:
        print(with_search(explain_json(result.workload, result.estimates), result, True))
        return
    text = render_mfu(result.workload, result.estimates, values["json_out"], result.costs)
    print(with_search(text, result, values["json_out"]))
    if wanted.explain:
        print(render_explain(result.estimates))


mfu = command(
    "mfu",
    "Estimate training MFU on fabrics: step time breakdown, MFU lost to exposed "
    "collectives, and what-ifs (perfect overlap, 2x scale-out bandwidth).",
    MFU_OPTIONS,
    run_mfu,
    (*FOLDED_PANELS, "Memory check"),
    config=True,
    # a config without --global-batch is partial (a command line gives the rest): unchecked
    check=lambda values: (
        values["global_batch"] is None or estimate_mfu(*workload_parts(values, MFU_OPTIONS))
    ),
)
