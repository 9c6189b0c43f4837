"""`collbench gemm`: matmul throughput of this accelerator, into a run `mfu --gemm RUN` reads.

The method, in full: docs/architecture.md#collbench-cli-gemm-py.
"""

from __future__ import annotations

from typing import Any

from collbench.analysis.mfu.workload import Parallelism, Training, Workload
from collbench.analysis.model.gemm_model import Gemm
from collbench.cli.options import (
    Option,
    command,
    given_fields,
    json_option,
    listing,
    request,
    run_dir_option,
    say,
)
from collbench.cli.workload import WORKLOAD_OPTIONS, model_from_options
from collbench.core.errors import SpecError
from collbench.run.gemm import DTYPE_BYTES, WARMUP_SECONDS, GemmJob, GemmSweep

_WORKLOAD_FLAGS = (
    "--model",
    "--layers",
    "--hidden",
    "--heads",
    "--vocab",
    "--ffn-hidden",
    "--kv-heads",
    "--gated-mlp",
    "--untied-embeddings",
    "--params",
    "--seq",
    "--micro-batch",
    "--tp",
    "--attention",
)
_SWEEP = "Shape sweep (instead of a workload)"

GEMM_OPTIONS = (
    *(option for option in WORKLOAD_OPTIONS if option.flag in _WORKLOAD_FLAGS),
    Option(
        ("--shape",),
        "A shape to measure, MxNxK (BxMxNxK: B batched matmuls); repeatable.",
        GemmSweep,
        "shapes",
        kind=list[str],
        name="shape",
        panel=_SWEEP,
        metavar="MxNxK",
    ),
    Option(
        ("--square",),
        "Square shapes MIN:MAX, M = N = K doubling from MIN to MAX (e.g. 256:8192).",
        GemmSweep,
        panel=_SWEEP,
        metavar="MIN:MAX",
    ),
    Option(
        ("--dtype",),
        f"Operand dtype: {listing(DTYPE_BYTES, last=' or ')}.",
        GemmJob,
        name="gemm_dtype",
        metavar="NAME",
    ),
    Option(
        ("--device",), "cuda or cpu (default: cuda when there is one).", GemmJob, metavar="NAME"
    ),
    Option(("--warmup", "-w"), "Untimed matmuls per shape.", GemmJob),
    Option(("--iters", "-n"), "Timed matmuls per shape.", GemmJob),
    Option(
        ("--warmup-seconds",),
        "Warm each shape up for at least this long (GPU clocks settle under load).",
        GemmJob,
        "warmup_s",
        metavar="S",
        default_text=", ".join(f"{device} {s:g}" for device, s in WARMUP_SECONDS.items()),
    ),
    Option(
        ("--max-seconds",),
        "Refuse a job that would take longer (sized from one matmul of its largest shape).",
        GemmJob,
        metavar="S",
    ),
    Option(
        ("--topology", "-T"),
        "Catalog name or file: show each shape's share of its accelerator's peak and what "
        "the shape model predicts.",
        GemmSweep,
        name="gemm_topology",
        metavar="NAME|FILE",
    ),
    json_option(
        "Print the rows as JSON instead of the table (time_us: the median, time_stat says)."
    ),
    run_dir_option(GemmJob, "Run directory."),
)


def run_gemm_command(values: dict[str, Any]) -> None:
    from collbench.render.gemm import render_gemm_json, render_gemm_line, render_gemm_table
    from collbench.run.gemm import run_gemm, tf32_matmuls
    from collbench.topologies.loader import load_topology

    gemms, what = _gemms(values)
    job = GemmJob(gemms, workload=what, **given_fields(GemmJob, GEMM_OPTIONS, values))
    named = values["gemm_topology"]
    topology = None if named is None else load_topology(named)
    run_dir, rows = run_gemm(
        job, lambda row: say(render_gemm_line(row)), lambda text: say(f"collbench: {text}")
    )
    if values["json_out"]:
        print(render_gemm_json(rows, run_dir))
        return
    print(render_gemm_table(rows, topology, what, tf32_matmuls(run_dir)))
    print(f"results: {run_dir} (collbench mfu --gemm {run_dir} ...)")


gemm = command(
    "gemm",
    "Measure matmul throughput on this machine's accelerator for a workload's GEMM\n"
    "shapes or a shape sweep (rows for mfu --gemm).",
    GEMM_OPTIONS,
    run_gemm_command,
)


def _gemms(values: dict[str, Any]) -> tuple[tuple[Gemm, ...], str]:
    """The shapes to measure: a workload's (its model options) or a sweep's, not both."""
    sweep: GemmSweep = request(GemmSweep, GEMM_OPTIONS, values)
    workload_given = values["model"] is not None or values["layers"] is not None
    if sweep.shapes or sweep.square:
        if workload_given:
            raise SpecError.from_message(
                "give a workload (--model or the shape flags) or a shape sweep (--shape, "
                "--square), not both"
            )
        return sweep.gemms(), "shape sweep"
    if not workload_given:
        raise SpecError.from_message(
            "give a workload (--model or --layers --hidden --heads --vocab) or shapes "
            "(--shape MxNxK, --square MIN:MAX)"
        )
    from collbench.analysis.mfu.compute import workload_gemms

    micro = Training.micro_batch if values["micro_batch"] is None else values["micro_batch"]
    training = {"seq": values["seq"], "global_batch": micro, "micro_batch": micro}
    if values["attention"]:
        training["attention"] = values["attention"]
    workload = Workload(
        model_from_options(values),
        Training(**training),
        Parallelism(tp=1 if values["tp"] is None else values["tp"]),
    )
    what = (
        f"{workload.model.name}, seq {workload.training.seq}, micro-batch {micro}, "
        f"tp {workload.parallelism.tp}, {workload.training.attention} attention"
    )
    return workload_gemms(workload), what
