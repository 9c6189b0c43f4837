"""`collbench mfu`: the training MFU a workload reaches on one or more fabrics, and what
its exposed collectives cost.

Its options are declared once by the dataclass each fills (Model, Training, Parallelism,
EstimateOptions), and their help texts quote those defaults. cli.py registers the command
with `app.command("mfu")(mfu)`. Imports stay light: numpy and scipy load only when the
command runs.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collbench.analysis.mfu.estimate import EstimateOptions
from collbench.analysis.mfu.inputs import DEFAULT_COMM_EFFICIENCY
from collbench.analysis.mfu.workload import (
    ATTENTION_KERNELS,
    COMPUTE_DTYPES,
    PRESETS,
    RECOMPUTE,
    Model,
    Parallelism,
    Training,
    Workload,
    preset,
)
from collbench.cli.options import (
    FROM_OWNER,
    REQUIRED,
    Option,
    command,
    format_value,
    given_fields,
    listing,
)
from collbench.core.errors import SpecError

if TYPE_CHECKING:
    from collbench.analysis.mfu.fabrics import Fabric, Inputs
    from collbench.store.load import Run

_SHAPE = "Model shape (instead of --model)"
_PAR = "Parallelism"
_EST = "Estimator"
_SHAPE_FIELDS = ("layers", "hidden", "heads", "vocab")

MFU_OPTIONS = (
    Option(
        ("--topology", "-T"),
        "Catalog name or topology file; repeat to compare fabrics side by side.",
        kind=list[str],
        default=REQUIRED,
    ),
    Option(("--model", "-m"), f"Preset: {listing(PRESETS)}."),
    *(Option((f"--{name}",), "", Model, name, kind=int, panel=_SHAPE) for name in _SHAPE_FIELDS),
    Option(
        ("--ffn-hidden",),
        "MLP width (0: 4 x hidden).",
        Model,
        "ffn_hidden",
        kind=int,
        default=FROM_OWNER,
        panel=_SHAPE,
    ),
    Option(
        ("--kv-heads",),
        "Grouped-query attention heads (0: --heads).",
        Model,
        "kv_heads",
        kind=int,
        default=FROM_OWNER,
        panel=_SHAPE,
    ),
    Option(
        ("--gated-mlp",),
        "SwiGLU MLP: three matrices of --ffn-hidden (Llama).",
        Model,
        "gated_mlp",
        kind=bool,
        default=FROM_OWNER,
        panel=_SHAPE,
    ),
    # The flag says the opposite of Model.tied_embeddings (GPT's way is the default).
    Option(
        ("--untied-embeddings",),
        "Separate input and output embeddings (Llama 3; GPT ties them).",
        kind=bool,
        default=not Model.tied_embeddings,
        panel=_SHAPE,
    ),
    Option(
        ("--params",),
        "Parameter count, e.g. 175e9 (default: from the shape; also overrides a preset's).",
        Model,
        "params",
        kind=float,
        default_text="",
    ),
    # Training.seq has no default of its own: this is the command line's.
    Option(("--seq",), "Sequence length in tokens.", Training, "seq", kind=int, default=2048),
    Option(
        ("--global-batch",), "Sequences per optimizer step.", Training, "global_batch", kind=int
    ),
    Option(
        ("--micro-batch",),
        "Sequences per micro-batch.",
        Training,
        "micro_batch",
        kind=int,
        default=FROM_OWNER,
    ),
    Option(
        ("--tp",),
        "Tensor parallel size.",
        Parallelism,
        "tp",
        kind=int,
        default=FROM_OWNER,
        panel=_PAR,
    ),
    Option(
        ("--pp",), "Pipeline stages.", Parallelism, "pp", kind=int, default=FROM_OWNER, panel=_PAR
    ),
    Option(
        ("--dp",),
        "Data parallel size (default: fill --nodes of the first topology).",
        Parallelism,
        "dp",
        kind=int,
        default_text="",
        panel=_PAR,
    ),
    Option(
        ("--nodes",),
        "Nodes of the first topology, to derive --dp (default: its file's node count); "
        "with --dp, the two must agree.",
        kind=int,
        panel=_PAR,
    ),
    Option(
        ("--zero",),
        "ZeRO stage 0-3.",
        Parallelism,
        "zero",
        kind=int,
        default=FROM_OWNER,
        panel=_PAR,
    ),
    Option(
        ("--fsdp",),
        "Fully sharded data parallel (= --zero 3).",
        kind=bool,
        default=False,
        panel=_PAR,
    ),
    Option(
        ("--sequence-parallel",),
        "Megatron sequence parallelism: TP all-reduces become reduce-scatter + all-gather.",
        Parallelism,
        "sequence_parallel",
        kind=bool,
        default=FROM_OWNER,
        panel=_PAR,
    ),
    Option(
        ("--virtual-stages",),
        "Interleaved pipeline: model chunks per stage.",
        Parallelism,
        "virtual_stages",
        kind=int,
        default=FROM_OWNER,
        panel=_PAR,
    ),
    Option(
        ("--recompute",),
        f"Activation recompute: {listing(RECOMPUTE)}.",
        Training,
        "recompute",
        default=FROM_OWNER,
    ),
    Option(
        ("--dtype",),
        f"Compute dtype for the peak: {listing(COMPUTE_DTYPES, last=' or ')}.",
        Training,
        "dtype",
        default=FROM_OWNER,
    ),
    Option(
        ("--attention",),
        f"Attention core: {listing(ATTENTION_KERNELS, last=' or ')} (Megatron's batched "
        "GEMMs and softmax before FlashAttention).",
        Training,
        "attention",
        default=FROM_OWNER,
    ),
    Option(
        ("--dp-overlap/--no-dp-overlap",),
        "Gradient reduction overlaps the backward (off: Megatron before 2023).",
        Parallelism,
        "dp_overlap",
        kind=bool,
        default=FROM_OWNER,
        panel=_EST,
    ),
    Option(
        ("--dp-bucket-mb",),
        "DP collectives issued in buckets of this many MiB (PyTorch DDP's default); 0: one "
        "collective over all gradients, which cannot overlap.",
        Parallelism,
        "dp_bucket_mb",
        kind=float,
        default=FROM_OWNER,
        panel=_EST,
    ),
    Option(
        ("--tp-overlap",),
        "Share of TP collectives hidden (0: Megatron's default; ~1: userbuffer overlap).",
        EstimateOptions,
        "tp_overlap",
        kind=float,
        default=FROM_OWNER,
        panel=_EST,
    ),
    Option(
        ("--matmul-efficiency",),
        "Every GEMM at this share of the peak (default: from its shape and the "
        "accelerator: tile and wave quantization, roofline, the catalog's matmul_fraction).",
        EstimateOptions,
        "matmul_efficiency",
        kind=float,
        panel=_EST,
    ),
    # Not a field: estimate_fabrics takes it (DEFAULT_COMM_EFFICIENCY when not given).
    Option(
        ("--comm-efficiency",),
        "Share of the fabric's bound predicted collectives reach.",
        kind=float,
        default_text=format_value(DEFAULT_COMM_EFFICIENCY),
        panel=_EST,
    ),
    Option(
        ("--curves",),
        "Run directory of measured sweeps for the first topology, or NAME=RUN; repeatable.",
        kind=list[str],
        panel=_EST,
    ),
    Option(
        ("--overlap",),
        "Run directory with overlap probes: its overlap efficiency and compute slowdown.",
        kind=Path,
        panel=_EST,
    ),
    Option(
        ("--gemm",),
        "Run directory of `collbench gemm` rows: their measured rate for the shapes they "
        "hold, on fabrics with the same accelerator.",
        kind=Path,
        panel=_EST,
    ),
    Option(
        ("--explain",),
        "Also print where a step's time goes, operator by operator (GEMMs, attention, "
        "memory-bound, exposed communication, bubble).",
        kind=bool,
        default=False,
    ),
    Option(
        ("--allow-oversubscribed-memory",),
        "Estimate a workload even when its memory per accelerator exceeds the fabric's "
        "(warned, not refused).",
        kind=bool,
        default=False,
        panel="Memory check",
    ),
    Option(
        ("--json",), "Print JSON instead of the table.", kind=bool, default=False, name="json_out"
    ),
)


def run_mfu(values: dict[str, Any]) -> None:
    """Parse the workload and the fabrics, estimate each, check that the workload fits
    their memory, warn about inputs that do not apply, print the table (or JSON)."""
    from collbench.analysis.mfu.fabrics import check_memory, estimate_fabrics
    from collbench.render.mfu import render_mfu
    from collbench.render.mfu_explain import explain_json, render_explain

    topologies = _topologies(values["topology"])
    workload = _workload(values, topologies[0])
    inputs = _inputs(values)
    fabrics = _fabrics(workload, topologies, values["curves"] or [])
    estimates = estimate_fabrics(workload, fabrics, inputs)
    warnings = check_memory(estimates, values["allow_oversubscribed_memory"])
    for text in [*warnings, *(text for result in estimates for text in result.warnings)]:
        print(f"collbench: warning: {text}", file=sys.stderr)
    if values["json_out"] and values["explain"]:
        print(explain_json(workload, estimates))
        return
    print(render_mfu(workload, estimates, as_json=values["json_out"]))
    if values["explain"]:
        print(render_explain(workload, estimates))


mfu = command(
    "mfu",
    # The line break of the docstring this was: `collbench --help` lists both lines.
    "Estimate training MFU on fabrics: step time breakdown, MFU lost to exposed\n"
    "collectives, and what-ifs (perfect overlap, 2x scale-out bandwidth).",
    MFU_OPTIONS,
    run_mfu,
)


def _workload(values: dict[str, Any], first: Any) -> Workload:
    """The workload the options describe; --dp derived from --nodes of the first fabric.
    Each dataclass checks its own fields (SpecError naming the option)."""
    model = model_from_options(values)
    parallelism = _parallelism(values, first)
    if values["global_batch"] is None:
        raise SpecError.from_message("--global-batch is required (sequences per optimizer step)")
    training = Training(**given_fields(Training, MFU_OPTIONS, values))
    return Workload(model, training, parallelism)


def _parallelism(values: dict[str, Any], first: Any) -> Parallelism:
    """The parallelism as given; without --dp, what fills --nodes of the first fabric."""
    given = given_fields(Parallelism, MFU_OPTIONS, values)
    if values["fsdp"]:
        given["zero"] = 3
    parallelism = Parallelism(**given)  # checks tp and pp before they size anything
    dp, nodes = values["dp"], values["nodes"]
    if nodes is not None and nodes < 1:
        raise SpecError("--nodes", nodes, "must be an integer >= 1")
    if dp is not None:
        if nodes is not None:
            _check_nodes_agree(first, nodes, parallelism)
        return parallelism
    return replace(parallelism, dp=_derive_dp(first, nodes, parallelism.tp * parallelism.pp))


def _check_nodes_agree(topology: Any, nodes: int, parallelism: Parallelism) -> None:
    """--nodes with --dp: they must describe the same job (the nodes its tp x pp x dp
    accelerators fill on the first fabric)."""
    per_node = topology.accelerators_per_node
    world = parallelism.world_size
    needed = -(-world // per_node)
    if needed != nodes:
        raise SpecError(
            "--nodes",
            nodes,
            f"conflicts with --dp {parallelism.dp}: tp {parallelism.tp} x pp {parallelism.pp} "
            f"x dp {parallelism.dp} = {world:,} accelerators fill {needed:,} node"
            f"{'' if needed == 1 else 's'} of {per_node} on {topology.name}, not {nodes:,} "
            f"({nodes * per_node:,} accelerators); give one of them or make them agree",
        )


def model_from_options(values: dict[str, Any]) -> Model:
    """A preset (--model), or the shape given flag by flag; --params overrides either."""
    name = values["model"]
    shape = [option for option in MFU_OPTIONS if option.panel == _SHAPE]
    given = [option for option in shape if values[option.parameter_name] != option.default_value]
    if name is not None:
        if given:
            value = values[given[0].parameter_name]
            raise SpecError(
                given[0].flag, value, "conflicts with --model (a preset has its own shape)"
            )
        chosen = preset(name)
    elif missing := [f"--{key}" for key in _SHAPE_FIELDS if values[key] is None]:
        raise SpecError.from_message(
            f"--model (a preset) or the shape is required: missing {', '.join(missing)}"
        )
    else:
        fields = given_fields(Model, MFU_OPTIONS, values)
        tied = not values["untied_embeddings"]
        chosen = Model("custom", **fields, tied_embeddings=tied)
    return chosen if values["params"] is None else replace(chosen, params=values["params"])


def _topologies(names: list[str]) -> list[Any]:
    from collbench.core.errors import SpecError
    from collbench.topologies.loader import load_topology

    topologies = [load_topology(name) for name in dict.fromkeys(names)]
    seen: set[str] = set()
    for topology in topologies:
        if topology.name in seen:
            raise SpecError(
                "--topology",
                topology.name,
                "is given twice (the same name: a file "
                "that reuses a catalog name needs a name of its own)",
            )
        seen.add(topology.name)
    return topologies


def _derive_dp(topology: Any, nodes: int | None, model_parallel: int) -> int:
    from collbench.core.errors import SpecError

    accelerators = (nodes or topology.nodes) * topology.accelerators_per_node
    if accelerators % model_parallel:
        raise SpecError(
            "--nodes",
            nodes or topology.nodes,
            f"x {topology.accelerators_per_node}"
            f" accelerators is not a multiple of tp x pp = {model_parallel}; "
            "give --dp",
        )
    return accelerators // model_parallel


def _inputs(values: dict[str, Any]) -> Inputs:
    """What the estimator assumes, with the overlap an --overlap run measured."""
    from collbench.analysis.mfu.fabrics import Inputs
    from collbench.analysis.mfu.inputs import probe_overlap

    options = EstimateOptions(**given_fields(EstimateOptions, MFU_OPTIONS, values))
    efficiency = values["comm_efficiency"]
    given: dict[str, Any] = {} if efficiency is None else {"comm_efficiency": efficiency}
    if values["gemm"] is not None:
        from collbench.analysis.mfu.gemm_prices import measured_gemms
        from collbench.store.gemm_rows import load_gemm_rows

        given["gemms"] = measured_gemms(load_gemm_rows(values["gemm"]), str(values["gemm"]))
    overlap = values["overlap"]
    if overlap is None:
        return Inputs(options, **given)
    run = _run(overlap, "--overlap")
    options = probe_overlap(run.rows, str(overlap), options)
    return Inputs(options, overlap_run=run, **given)


def _fabrics(workload: Workload, topologies: list[Any], curves: list[str]) -> list[Fabric]:
    from collbench.analysis.mfu.fabrics import Fabric, sized_for
    from collbench.analysis.mfu.inputs import fit_measured_curves
    from collbench.core.errors import SpecError

    known = {topology.name for topology in topologies}
    runs: dict[str, list[str]] = {}
    for text in curves:
        name, sep, run = text.partition("=")
        if sep and name not in known and not Path(text).exists():
            raise SpecError("--curves", name, f"names no --topology given ({', '.join(known)})")
        if not sep or name not in known:  # a plain run directory (its path may hold '=')
            name, run = topologies[0].name, text
        runs.setdefault(name, []).append(run)
    fabrics = []
    for topology in topologies:
        own = [_run(Path(run), "--curves") for run in runs.get(topology.name, [])]
        own += [_run(Path(run), "--curves") for run in _file_curves(topology)]
        measured = [curve for run in own for curve in fit_measured_curves(run.rows, run.path)]
        fabrics.append(Fabric(sized_for(workload, topology), tuple(measured), tuple(own)))
    return fabrics


def _file_curves(topology: Any) -> list[str]:
    """The topology file's own `curves` run directory, relative to the file."""
    if not topology.curves:
        return []
    origin = Path(topology.origin)
    base = origin.parent if origin.is_file() else Path.cwd()
    return [str(base / topology.curves)]


def _run(run: Path, option: str) -> Run:
    """A run's meta and rows; SpecError naming `option` when it holds no rows."""
    from collbench.store.load import load_run

    return load_run(run, option)
