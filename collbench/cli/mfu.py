"""`collbench mfu`: the training MFU a workload reaches on one or more fabrics, and what
its exposed collectives cost.

cli.py registers the command with `app.command("mfu")(mfu)`. Imports stay light (typer,
pathlib): numpy and scipy load only when the command runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

if TYPE_CHECKING:
    from collbench.analysis.mfu_report import Fabric
    from collbench.analysis.workload import Model, Workload

_SHAPE = "Model shape (instead of --model)"
_PAR = "Parallelism"
_EST = "Estimator"


def mfu(
    topology: Annotated[
        list[str],
        typer.Option(
            "--topology",
            "-T",
            help="Catalog name or topology file; repeat to compare fabrics side by side.",
            show_default=False,
        ),
    ],
    model: Annotated[
        Optional[str],
        typer.Option(
            "--model",
            "-m",
            help="Preset: gpt3-175b, gpt-22b, gpt-145b, gpt-530b, gpt-1t, llama3-8b, llama3-70b, llama3-405b.",
            show_default=False,
        ),
    ] = None,
    layers: Annotated[
        Optional[int], typer.Option("--layers", rich_help_panel=_SHAPE, show_default=False)
    ] = None,
    hidden: Annotated[
        Optional[int], typer.Option("--hidden", rich_help_panel=_SHAPE, show_default=False)
    ] = None,
    heads: Annotated[
        Optional[int], typer.Option("--heads", rich_help_panel=_SHAPE, show_default=False)
    ] = None,
    vocab: Annotated[
        Optional[int], typer.Option("--vocab", rich_help_panel=_SHAPE, show_default=False)
    ] = None,
    ffn_hidden: Annotated[
        int, typer.Option("--ffn-hidden", help="MLP width (0: 4 x hidden).", rich_help_panel=_SHAPE)
    ] = 0,
    kv_heads: Annotated[
        int,
        typer.Option(
            "--kv-heads", help="Grouped-query attention heads (0: --heads).", rich_help_panel=_SHAPE
        ),
    ] = 0,
    gated_mlp: Annotated[
        bool,
        typer.Option(
            "--gated-mlp",
            help="SwiGLU MLP: three matrices of --ffn-hidden (Llama).",
            rich_help_panel=_SHAPE,
        ),
    ] = False,
    untied_embeddings: Annotated[
        bool,
        typer.Option(
            "--untied-embeddings",
            help="Separate input and output embeddings (Llama 3; GPT ties them).",
            rich_help_panel=_SHAPE,
        ),
    ] = False,
    params: Annotated[
        Optional[float],
        typer.Option(
            "--params",
            help="Parameter count, e.g. 175e9 (default: from the shape; also overrides a preset's).",
            show_default=False,
        ),
    ] = None,
    seq: Annotated[int, typer.Option("--seq", help="Sequence length in tokens.")] = 2048,
    global_batch: Annotated[
        Optional[int],
        typer.Option("--global-batch", help="Sequences per optimizer step.", show_default=False),
    ] = None,
    micro_batch: Annotated[
        int, typer.Option("--micro-batch", help="Sequences per micro-batch.")
    ] = 1,
    tp: Annotated[
        int, typer.Option("--tp", rich_help_panel=_PAR, help="Tensor parallel size.")
    ] = 1,
    pp: Annotated[int, typer.Option("--pp", rich_help_panel=_PAR, help="Pipeline stages.")] = 1,
    dp: Annotated[
        Optional[int],
        typer.Option(
            "--dp",
            rich_help_panel=_PAR,
            help="Data parallel size (default: fill --nodes of the first topology).",
            show_default=False,
        ),
    ] = None,
    nodes: Annotated[
        Optional[int],
        typer.Option(
            "--nodes",
            rich_help_panel=_PAR,
            help="Nodes of the first topology, to derive --dp (default: its file's node count).",
            show_default=False,
        ),
    ] = None,
    zero: Annotated[int, typer.Option("--zero", rich_help_panel=_PAR, help="ZeRO stage 0-3.")] = 0,
    fsdp: Annotated[
        bool,
        typer.Option(
            "--fsdp", rich_help_panel=_PAR, help="Fully sharded data parallel (= --zero 3)."
        ),
    ] = False,
    sequence_parallel: Annotated[
        bool,
        typer.Option(
            "--sequence-parallel",
            rich_help_panel=_PAR,
            help="Megatron sequence parallelism: TP all-reduces become reduce-scatter + all-gather.",
        ),
    ] = False,
    virtual_stages: Annotated[
        int,
        typer.Option(
            "--virtual-stages",
            rich_help_panel=_PAR,
            help="Interleaved pipeline: model chunks per stage.",
        ),
    ] = 1,
    recompute: Annotated[
        str, typer.Option("--recompute", help="Activation recompute: none, selective, full.")
    ] = "none",
    dtype: Annotated[
        str, typer.Option("--dtype", help="Compute dtype for the peak: bf16 or fp8.")
    ] = "bf16",
    dp_overlap: Annotated[
        bool,
        typer.Option(
            "--dp-overlap/--no-dp-overlap",
            rich_help_panel=_EST,
            help="Gradient reduction overlaps the backward (off: Megatron before 2023).",
        ),
    ] = True,
    dp_bucket_mb: Annotated[
        float,
        typer.Option(
            "--dp-bucket-mb",
            rich_help_panel=_EST,
            help="DP collectives issued in buckets of this many MiB (PyTorch DDP's default); 0: one collective over all gradients, which cannot overlap.",
        ),
    ] = 25.0,
    tp_overlap: Annotated[
        float,
        typer.Option(
            "--tp-overlap",
            rich_help_panel=_EST,
            help="Share of TP collectives hidden (0: Megatron's default; ~1: userbuffer overlap).",
        ),
    ] = 0.0,
    matmul_efficiency: Annotated[
        Optional[float],
        typer.Option(
            "--matmul-efficiency",
            rich_help_panel=_EST,
            help="Achieved share of the peak over a whole step's compute. (default: 0.65)",
            show_default=False,
        ),
    ] = None,
    comm_efficiency: Annotated[
        Optional[float],
        typer.Option(
            "--comm-efficiency",
            rich_help_panel=_EST,
            help="Share of the fabric's bound predicted collectives reach. (default: 0.8)",
            show_default=False,
        ),
    ] = None,
    curves: Annotated[
        Optional[list[str]],
        typer.Option(
            "--curves",
            rich_help_panel=_EST,
            help="Run directory of measured sweeps for the first topology, or NAME=RUN; repeatable.",
            show_default=False,
        ),
    ] = None,
    overlap: Annotated[
        Optional[Path],
        typer.Option(
            "--overlap",
            rich_help_panel=_EST,
            help="Run directory with overlap probes: its overlap efficiency and compute slowdown.",
            show_default=False,
        ),
    ] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print JSON instead of the table.")
    ] = False,
) -> None:
    """Estimate training MFU on fabrics: step time breakdown, MFU lost to exposed
    collectives, and what-ifs (perfect overlap, 2x scale-out bandwidth)."""
    from collbench.analysis import mfu_report
    from collbench.analysis.mfu_inputs import DEFAULT_COMM_EFFICIENCY

    options = locals()
    topologies = _topologies(topology)
    workload = _workload(options, topologies[0])
    estimate_options = _estimate_options(matmul_efficiency, tp_overlap, overlap)
    fabrics = _fabrics(workload, topologies, curves or [])
    efficiency = DEFAULT_COMM_EFFICIENCY if comm_efficiency is None else comm_efficiency
    estimates = mfu_report.estimate_fabrics(workload, fabrics, estimate_options, efficiency)
    if json_out:
        print(json.dumps(mfu_report.to_json(workload, estimates), indent=2))
    else:
        print(mfu_report.render_table(workload, estimates))


def _workload(options: dict[str, Any], first: Any) -> Workload:
    """The workload the options describe; --dp derived from --nodes of the first fabric."""
    from collbench.analysis.workload import Parallelism, Training, Workload
    from collbench.core.errors import SpecError

    shape = _model(options["model"], options)
    for name in ("tp", "pp"):
        if options[name] < 1:
            raise SpecError(f"--{name}", options[name], "must be an integer >= 1")
    dp, nodes = options["dp"], options["nodes"]
    if dp is not None and nodes is not None:
        raise SpecError("--nodes", nodes, "conflicts with --dp: --nodes only derives --dp")
    if nodes is not None and nodes < 1:
        raise SpecError("--nodes", nodes, "must be an integer >= 1")
    if dp is None:
        dp = _derive_dp(first, nodes, options["tp"] * options["pp"])
    if options["global_batch"] is None:
        raise SpecError.from_message("--global-batch is required (sequences per optimizer step)")
    training = Training(
        **{
            key: options[key]
            for key in ("seq", "global_batch", "micro_batch", "recompute", "dtype")
        }
    )
    parallelism = Parallelism(
        dp=dp,
        zero=3 if options["fsdp"] else options["zero"],
        **{
            key: options[key]
            for key in (
                "tp",
                "pp",
                "sequence_parallel",
                "virtual_stages",
                "dp_overlap",
                "dp_bucket_mb",
            )
        },
    )
    return Workload(shape, training, parallelism)


def _model(name: str | None, options: dict[str, Any]) -> Model:
    from dataclasses import replace

    from collbench.analysis.workload import Model, preset
    from collbench.core.errors import SpecError

    shape = ("layers", "hidden", "heads", "vocab")
    given = [key for key in shape if options[key] is not None]
    extras = {"ffn_hidden": 0, "kv_heads": 0, "gated_mlp": False, "untied_embeddings": False}
    changed = [key for key, default in extras.items() if options[key] != default]
    if name is not None:
        if given or changed:
            flag = (given or changed)[0]
            raise SpecError(
                f"--{flag.replace('_', '-')}",
                options[flag],
                "conflicts with --model (a preset has its own shape)",
            )
        chosen = preset(name)
    elif len(given) < len(shape):
        missing = [f"--{key}" for key in shape if options[key] is None]
        raise SpecError.from_message(
            f"--model (a preset) or the shape is required: missing {', '.join(missing)}"
        )
    else:
        chosen = Model(
            "custom",
            **{key: options[key] for key in shape},
            ffn_hidden=options["ffn_hidden"],
            kv_heads=options["kv_heads"],
            gated_mlp=options["gated_mlp"],
            tied_embeddings=not options["untied_embeddings"],
        )
    return chosen if options["params"] is None else replace(chosen, params=options["params"])


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


def _estimate_options(
    matmul_efficiency: float | None, tp_overlap: float, overlap: Path | None
) -> Any:
    from collbench.analysis.mfu import EstimateOptions
    from collbench.analysis.mfu_inputs import probe_overlap

    options = EstimateOptions(tp_overlap=tp_overlap)
    if matmul_efficiency is not None:
        options = EstimateOptions(matmul_efficiency=matmul_efficiency, tp_overlap=tp_overlap)
    if overlap is not None:
        options = probe_overlap(_rows(overlap, "--overlap"), str(overlap), options)
    return options


def _fabrics(workload: Workload, topologies: list[Any], curves: list[str]) -> list[Fabric]:
    from collbench.analysis.mfu_inputs import fit_measured_curves
    from collbench.analysis.mfu_report import Fabric, sized_for
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
        own = [*runs.get(topology.name, []), *_file_curves(topology)]
        measured = [
            curve for run in own for curve in fit_measured_curves(_rows(Path(run), "--curves"), run)
        ]
        fabrics.append(Fabric(sized_for(workload, topology), tuple(measured)))
    return fabrics


def _file_curves(topology: Any) -> list[str]:
    """The topology file's own `curves` run directory, relative to the file."""
    if not topology.curves:
        return []
    origin = Path(topology.origin)
    base = origin.parent if origin.is_file() else Path.cwd()
    return [str(base / topology.curves)]


def _rows(run: Path, option: str) -> list[dict[str, Any]]:
    from collbench.core.errors import SpecError
    from collbench.store.rundir import load_rows

    rows = load_rows(run) if run.is_dir() else []
    if not rows:
        raise SpecError(option, str(run), "holds no result rows (no rows.jsonl)")
    return rows
