"""The training job a workload option describes (`collbench mfu`, `gemm`, and the file
`tune run|from --workload FILE`): the model, its training and parallelism, and what the
estimator assumes. One owner for these options, so each command that takes a job reads
the same flags (or config keys) the same way.

The method, in full: docs/architecture.md#collbench-cli-workload-py.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from collbench.analysis.mfu.estimate import EstimateOptions, parse_efficiencies
from collbench.analysis.mfu.inputs import DEFAULT_COMM_EFFICIENCY
from collbench.analysis.mfu.presets import PRESETS, preset
from collbench.analysis.mfu.workload import (
    ATTENTION_KERNELS,
    COMPUTE_DTYPES,
    CP_COMMS,
    EP_OVERLAPS,
    FRAMEWORKS,
    RECOMPUTE,
    Model,
    Parallelism,
    Training,
    pipeline_layout,
)
from collbench.cli.options import (
    Option,
    command,
    field_option,
    format_value,
    given_fields,
    listing,
    request,
)
from collbench.core.errors import SpecError
from collbench.run.mfu import MfuRequest, tp_overlap_value

SHAPE_PANEL = "Model shape (instead of --model)"
_PAR = "Parallelism"
EST_PANEL = "Estimator"
MOE_CP_PANEL = "Experts and context parallelism"
# The rarer panels: -h folds them (--help-all shows them).
FOLDED_PANELS = (SHAPE_PANEL, EST_PANEL, MOE_CP_PANEL)
# The shape fields a model without a preset needs, and their help.
_SHAPE_HELP = {
    "layers": "Transformer layers.",
    "hidden": "Hidden size: the model width (d_model).",
    "heads": "Attention heads (they divide --hidden).",
    "vocab": "Vocabulary size, in tokens.",
}


def dp_dtype_bytes(text: str | None) -> dict[str, int]:
    """--dp-dtypes REDUCE[,GATHER] as Training's grad_bytes and gather_bytes."""
    if text is None:
        return {}
    sizes = {"fp32": 4, "bf16": 2, "fp8": 1}
    reduce, _, gather = text.partition(",")
    if reduce not in ("fp32", "bf16") or gather not in ("", "fp32", "bf16", "fp8"):
        raise SpecError("--dp-dtypes", text, "is not A[,B]: A fp32 or bf16, B bf16, fp32 or fp8")
    return {"grad_bytes": sizes[reduce], **({"gather_bytes": sizes[gather]} if gather else {})}


# The options of one owner (and one help panel, where named here).
_parallel = partial(field_option, Parallelism, panel=_PAR)
_parallel_moe_cp = partial(field_option, Parallelism, panel=MOE_CP_PANEL)
_parallel_estimate = partial(field_option, Parallelism, panel=EST_PANEL)
_estimate = partial(field_option, EstimateOptions, panel=EST_PANEL)
_training = partial(field_option, Training)

WORKLOAD_OPTIONS = (
    Option(("--model", "-m"), f"Preset: {listing(PRESETS)}.", MfuRequest, metavar="NAME"),
    *(
        field_option(Model, f"--{name}", text, SHAPE_PANEL, default=None)
        for name, text in _SHAPE_HELP.items()
    ),
    field_option(Model, "--ffn-hidden", "MLP width (0: 4 x hidden).", SHAPE_PANEL),
    field_option(Model, "--kv-heads", "Grouped-query attention heads (0: --heads).", SHAPE_PANEL),
    field_option(
        Model, "--gated-mlp", "SwiGLU MLP: three matrices of --ffn-hidden (Llama).", SHAPE_PANEL
    ),
    # The flag says the opposite of Model.tied_embeddings (GPT's way is the default).
    field_option(
        MfuRequest,
        "--untied-embeddings",
        "Separate input and output embeddings (Llama 3; GPT ties them).",
        SHAPE_PANEL,
    ),
    *(
        field_option(Model, f"--{name.replace('_', '-')}", text, SHAPE_PANEL)
        for name, text in (
            ("experts", "Routed experts per MoE layer (0: a dense model)."),
            ("top_k", "Routed experts each token goes through."),
            ("moe_ffn_hidden", "Each expert's MLP width (0: --ffn-hidden)."),
            ("shared_experts", "Experts every token goes through besides (DeepSeek: 1)."),
            ("dense_layers", "First layers that keep a dense MLP (DeepSeek-V3: 3)."),
            ("mtp_layers", "Multi-token prediction modules on the last stage (DeepSeek-V3: 1)."),
        )
    ),
    field_option(
        Model,
        "--params",
        "Parameter count, e.g. 175e9 (default: from the shape; also overrides a preset's).",
        default=None,
        default_text="",
    ),
    # Training.seq has no default of its own: MfuRequest's is the command's.
    field_option(MfuRequest, "--seq", "Sequence length in tokens."),
    _training("--global-batch", "Sequences per optimizer step.", default=None),
    _training("--micro-batch", "Sequences per micro-batch."),
    _parallel("--tp", "Tensor parallel size."),
    _parallel(
        "--pp",
        "Pipeline stages, or a layout: Et|(tt|)*30mL.",
        default=None,
        default_text="",
        parse=lambda text, _: int(text) if text.strip().isdigit() else pipeline_layout(text),
        metavar="N",
    ),
    _parallel(
        "--dp",
        "Data parallel size (default: fill --nodes of the first topology).",
        default=None,
        default_text="",
    ),
    field_option(
        MfuRequest,
        "--nodes",
        "Nodes of the first topology, to derive --dp (default: its file's node count); "
        "with --dp, the two must agree.",
        _PAR,
        default=None,
    ),
    # None: not given (Parallelism's 0), so --fsdp alone is ZeRO 3, not a conflict
    _parallel("--zero", "ZeRO stage 0-3.", default=None, default_text="0"),
    field_option(MfuRequest, "--fsdp", "Fully sharded data parallel (= --zero 3).", _PAR),
    _parallel(
        "--sequence-parallel",
        "Megatron sequence parallelism: TP all-reduces become reduce-scatter + all-gather.",
    ),
    _parallel("--cp", "Context parallel size (ring attention over seq / cp per rank)."),
    _parallel_moe_cp(
        "--cp-comm", f"How --cp exchanges K/V: {listing(CP_COMMS, last=' or ')}.", metavar="NAME"
    ),
    _parallel("--ep", "Expert parallel size (of the dp x cp ranks)."),
    _parallel_moe_cp(
        "--ep-overlap",
        f"What hides the EP all-to-alls: {listing(EP_OVERLAPS)} (dualpipe: another "
        "micro-batch's compute, DeepSeek-V3's DualPipe; 1f1b: Megatron-Core's EP overlap, "
        "phase by phase).",
        metavar="NAME",
    ),
    _parallel_moe_cp(
        "--ep-route-nodes",
        "Node-limited routing: a token crosses the scale-out to at most N nodes, once each "
        "(DeepSeek-V3: 4; 0: every routed copy is sent).",
    ),
    _parallel_moe_cp(
        "--etp",
        "Expert tensor parallelism: the experts split over N of the tp ranks (Megatron's "
        "expert tensor parallel size; 0: = --tp).",
    ),
    _parallel_moe_cp(
        "--ep-sms",
        "SMs the dispatch/combine kernels hold beside compute (DeepEP: 20; 0: NCCL's, "
        "priced as beside any collective).",
    ),
    _training(
        "--capacity-factor",
        "MoE: each expert computes and exchanges X times its balanced share (0: dropless).",
        MOE_CP_PANEL,
        metavar="X",
    ),
    _training(
        "--dispatch-bytes",
        "Bytes per element the MoE dispatch moves (0: the activations'; 1: fp8).",
        MOE_CP_PANEL,
    ),
    _parallel("--virtual-stages", "Interleaved pipeline: model chunks per stage."),
    _training("--recompute", f"Recompute: {listing(RECOMPUTE)}.", metavar="NAME"),
    _training(
        "--recompute-layers",
        "Fully recompute N layers of each model chunk, the rest as --recompute says "
        "(Megatron's recompute_num_layers, method block).",
    ),
    _training(
        "--dtype",
        f"Compute dtype: {listing(COMPUTE_DTYPES, last=' or ')}.",
        metavar="NAME",
    ),
    _training(
        "--framework",
        f"The kernels around the GEMMs: {listing(FRAMEWORKS)} (PyTorch without torch.compile: "
        "each operator its own kernel, a Llama block's RMSNorm, RoPE and SwiGLU unfused).",
        EST_PANEL,
        metavar="NAME",
    ),
    _training(
        "--attention", f"Attention core: {listing(ATTENTION_KERNELS, last=' or ')}.", metavar="NAME"
    ),
    field_option(
        MfuRequest,
        "--dp-dtypes",
        "Dtypes of the data-parallel traffic: A, the gradient reduction's (fp32: Megatron's and "
        "FSDP's default for bf16; bf16: NeMo's grad_sync_dtype); B, ZeRO / "
        "FSDP's weight all-gather's (bf16; fp32: no mixed precision; fp8: torchtitan's "
        "float8 all-gather), e.g. bf16,fp8.",
        EST_PANEL,
        default=None,
        default_text="fp32,bf16",
        metavar="A[,B]",
    ),
    _parallel_estimate(
        "--dp-overlap/--no-dp-overlap",
        "Gradient reduction overlaps the backward (off: Megatron before 2023).",
    ),
    _parallel_estimate(
        "--tp-async/--no-tp-async",
        "Without --tp-overlap: each column-parallel layer's input-gradient reduction runs "
        "beside its weight gradient, its re-gather beside its input gradient (Megatron since "
        "late 2021; off: every TP collective on the critical path).",
        field="tp_async_backward",
    ),
    _parallel_estimate(
        "--dp-bucket-mb",
        "DP collectives issued in buckets of this many MiB (PyTorch DDP's default); 0: one "
        "collective over all gradients, which cannot overlap.",
    ),
    _estimate(
        "--tp-overlap",
        "TP communication overlap: 0 none (Megatron's default); 1 Transformer Engine's "
        "userbuffer overlap (--tp-comm-overlap, needs --sequence-parallel), priced chunk by "
        "chunk: what stays exposed and what the GEMMs lose to chunking and to the SMs the "
        "communication takes; FILE: 1 as a recipe configures it, TE's ub_cfg as NeMo and "
        "Megatron-Bridge write it (YAML: pair -> method, num_sm, num_splits, aggregate; "
        "pairs it leaves out keep TE's defaults).",
        default=None,
        default_text="0",
        parse=tp_overlap_value,
        metavar="0|1|FILE",
    ),
    _estimate(
        "--matmul-efficiency",
        "Every GEMM at this share of the peak; NAME=X on one fabric only (NAME a --topology "
        "or accelerator: mi300x=0.51), comma-separated (default: from its shape and the "
        "accelerator: tile and wave quantization, roofline, the catalog's matmul_fraction).",
        default=None,
        parse=parse_efficiencies,
        metavar="[NAME=]X",
    ),
    # None: Inputs' own default (DEFAULT_COMM_EFFICIENCY).
    field_option(
        MfuRequest,
        "--comm-efficiency",
        "Share of the fabric's bound predicted collectives reach.",
        EST_PANEL,
        default=None,
        default_text=format_value(DEFAULT_COMM_EFFICIENCY),
    ),
)


def workload_parts(
    values: dict[str, Any], options: tuple[Option, ...] = WORKLOAD_OPTIONS
) -> tuple[MfuRequest, Model, Training, dict[str, Any], EstimateOptions]:
    """The workload's parts from the command line's `values`, read through `options` (mfu's
    own, or a subset another command offers, e.g. `gemm`): the request, the
    model, the training, the Parallelism fields given and the estimator's options."""
    wanted: MfuRequest = request(MfuRequest, options, values)
    model = model_from_options(values)
    parallelism = given_fields(Parallelism, options, values)
    if isinstance(layout := parallelism.get("pp"), tuple):  # --pp LAYOUT
        chunks, per_rank = len(layout), parallelism.get("virtual_stages", 1)
        parallelism.update(pp=max(1, chunks // per_rank), pp_layout=layout)
    if values["global_batch"] is None:
        raise SpecError.from_message("--global-batch is required (sequences per optimizer step)")
    given = given_fields(Training, options, values)
    training = Training(seq=wanted.seq, **given, **dp_dtype_bytes(wanted.dp_dtypes))
    estimate = given_fields(EstimateOptions, options, values)
    if isinstance(pairs := estimate.get("tp_overlap"), tuple):  # --tp-overlap FILE
        estimate.update(tp_overlap=1.0, tp_overlap_pairs=pairs)
    estimate = EstimateOptions(**estimate)
    return wanted, model, training, parallelism, estimate


def model_from_options(values: dict[str, Any]) -> Model:
    """A preset (--model), or the shape given flag by flag; --params overrides either."""
    name = values["model"]
    shape = [option for option in WORKLOAD_OPTIONS if option.panel == SHAPE_PANEL]
    # (a command offering a subset of the shape, e.g. `gemm`, leaves the rest out of values)
    given = [
        option
        for option in shape
        if values.get(option.parameter_name, option.default_value) != option.default_value
    ]
    if name is not None:
        if given:
            value = values[given[0].parameter_name]
            raise SpecError(
                given[0].flag, value, "conflicts with --model (a preset has its own shape)"
            )
        chosen = preset(name)
    elif missing := [f"--{key}" for key in _SHAPE_HELP if values[key] is None]:
        raise SpecError.from_message(
            f"--model (a preset) or the shape is required: missing {', '.join(missing)}"
        )
    else:
        fields = given_fields(Model, WORKLOAD_OPTIONS, values)
        tied = not values["untied_embeddings"]
        chosen = Model("custom", **fields, tied_embeddings=tied)
    return chosen if values["params"] is None else replace(chosen, params=values["params"])


def read_workload(path: Path) -> dict[str, Any]:
    """The values of a workload file (`tune --workload FILE`): the options above as a
    config file holds them (cli/config.py), read as `collbench mfu --config FILE` reads
    them, its `topology` list included; a one-line error (exit 2) for a key or value they
    do not take."""
    import typer

    # mfu's --topology too, so the file `collbench mfu ... --print-config` writes is one
    topology = Option(("--topology",), "The job's fabric.", MfuRequest, "topology", kind=list[str])
    values: dict[str, Any] = {}
    app = typer.Typer(add_completion=False)
    app.command()(
        command("workload", "", (topology, *WORKLOAD_OPTIONS), values.update, config=True)
    )
    typer.main.get_command(app).main(
        ["--config", str(path)], prog_name="--workload", standalone_mode=False
    )
    return values
