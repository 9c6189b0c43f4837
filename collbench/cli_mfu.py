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
    topology: Annotated[list[str], typer.Option("--topology", "-T", help="Catalog name or topology file; repeat to compare fabrics side by side.", show_default=False)],  # noqa: E501
    model: Annotated[Optional[str], typer.Option("--model", "-m", help="Preset: gpt3-175b, gpt-22b, gpt-145b, gpt-530b, gpt-1t, llama3-8b, llama3-70b, llama3-405b.", show_default=False)] = None,  # noqa: E501
    layers: Annotated[Optional[int], typer.Option("--layers", rich_help_panel=_SHAPE, show_default=False)] = None,  # noqa: E501
    hidden: Annotated[Optional[int], typer.Option("--hidden", rich_help_panel=_SHAPE, show_default=False)] = None,  # noqa: E501
    heads: Annotated[Optional[int], typer.Option("--heads", rich_help_panel=_SHAPE, show_default=False)] = None,  # noqa: E501
    vocab: Annotated[Optional[int], typer.Option("--vocab", rich_help_panel=_SHAPE, show_default=False)] = None,  # noqa: E501
    ffn_hidden: Annotated[int, typer.Option("--ffn-hidden", help="MLP width (0: 4 x hidden).", rich_help_panel=_SHAPE)] = 0,  # noqa: E501
    kv_heads: Annotated[int, typer.Option("--kv-heads", help="Grouped-query attention heads (0: --heads).", rich_help_panel=_SHAPE)] = 0,  # noqa: E501
    params: Annotated[Optional[float], typer.Option("--params", help="Parameter count, e.g. 175e9 (default: from the shape; also overrides a preset's).", show_default=False)] = None,  # noqa: E501
    seq: Annotated[int, typer.Option("--seq", help="Sequence length in tokens.")] = 2048,
    global_batch: Annotated[Optional[int], typer.Option("--global-batch", help="Sequences per optimizer step.", show_default=False)] = None,  # noqa: E501
    micro_batch: Annotated[int, typer.Option("--micro-batch", help="Sequences per micro-batch.")] = 1,  # noqa: E501
    tp: Annotated[int, typer.Option("--tp", rich_help_panel=_PAR, help="Tensor parallel size.")] = 1,  # noqa: E501
    pp: Annotated[int, typer.Option("--pp", rich_help_panel=_PAR, help="Pipeline stages.")] = 1,  # noqa: E501
    dp: Annotated[Optional[int], typer.Option("--dp", rich_help_panel=_PAR, help="Data parallel size (default: fill --nodes of the first topology).", show_default=False)] = None,  # noqa: E501
    nodes: Annotated[Optional[int], typer.Option("--nodes", rich_help_panel=_PAR, help="Nodes of the first topology, to derive --dp (default: its file's node count).", show_default=False)] = None,  # noqa: E501
    zero: Annotated[int, typer.Option("--zero", rich_help_panel=_PAR, help="ZeRO stage 0-3.")] = 0,  # noqa: E501
    fsdp: Annotated[bool, typer.Option("--fsdp", rich_help_panel=_PAR, help="Fully sharded data parallel (= --zero 3).")] = False,  # noqa: E501
    sequence_parallel: Annotated[bool, typer.Option("--sequence-parallel", rich_help_panel=_PAR, help="Megatron sequence parallelism: TP all-reduces become reduce-scatter + all-gather.")] = False,  # noqa: E501
    virtual_stages: Annotated[int, typer.Option("--virtual-stages", rich_help_panel=_PAR, help="Interleaved pipeline: model chunks per stage.")] = 1,  # noqa: E501
    recompute: Annotated[str, typer.Option("--recompute", help="Activation recompute: none, selective, full.")] = "none",  # noqa: E501
    dtype: Annotated[str, typer.Option("--dtype", help="Compute dtype for the peak: bf16 or fp8.")] = "bf16",  # noqa: E501
    dp_overlap: Annotated[bool, typer.Option("--dp-overlap/--no-dp-overlap", rich_help_panel=_EST, help="Gradient reduction overlaps the backward (off: Megatron before 2023).")] = True,  # noqa: E501
    dp_bucket_mb: Annotated[float, typer.Option("--dp-bucket-mb", rich_help_panel=_EST, help="DP collectives issued in buckets of this many MiB (PyTorch DDP's default); 0: one collective over all gradients, which cannot overlap.")] = 25.0,  # noqa: E501
    tp_overlap: Annotated[float, typer.Option("--tp-overlap", rich_help_panel=_EST, help="Share of TP collectives hidden (0: Megatron's default; ~1: userbuffer overlap).")] = 0.0,  # noqa: E501
    matmul_efficiency: Annotated[Optional[float], typer.Option("--matmul-efficiency", rich_help_panel=_EST, help="Achieved share of the peak over a whole step's compute. (default: 0.65)", show_default=False)] = None,  # noqa: E501
    comm_efficiency: Annotated[Optional[float], typer.Option("--comm-efficiency", rich_help_panel=_EST, help="Share of the fabric's bound predicted collectives reach. (default: 0.8)", show_default=False)] = None,  # noqa: E501
    curves: Annotated[Optional[list[str]], typer.Option("--curves", rich_help_panel=_EST, help="Run directory of measured sweeps for the first topology, or NAME=RUN; repeatable.", show_default=False)] = None,  # noqa: E501
    overlap: Annotated[Optional[Path], typer.Option("--overlap", rich_help_panel=_EST, help="Run directory with overlap probes: its overlap efficiency and compute slowdown.", show_default=False)] = None,  # noqa: E501
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON instead of the table.")] = False,  # noqa: E501
) -> None:
    """Estimate training MFU on fabrics: step time breakdown, MFU lost to exposed
    collectives, and what-ifs (perfect overlap, 2x scale-out bandwidth)."""
    from collbench.analysis import mfu_report
    from collbench.analysis.mfu_inputs import DEFAULT_COMM_EFFICIENCY
    from collbench.analysis.workload import Parallelism, Training, Workload

    options = locals()
    shape = _model(model, options)
    topologies = _topologies(topology)
    if dp is None:
        dp = _derive_dp(topologies[0], nodes, tp * pp)
    if global_batch is None:
        from collbench.errors import SpecError
        raise SpecError.from_message("--global-batch is required (sequences per optimizer "
                                     "step)")
    workload = Workload(shape, Training(seq=seq, global_batch=global_batch,
                                        micro_batch=micro_batch, recompute=recompute,
                                        dtype=dtype),
                        Parallelism(tp=tp, pp=pp, dp=dp, zero=3 if fsdp else zero,
                                    sequence_parallel=sequence_parallel,
                                    virtual_stages=virtual_stages, dp_overlap=dp_overlap,
                                    dp_bucket_mb=dp_bucket_mb))
    estimate_options = _estimate_options(matmul_efficiency, tp_overlap, overlap)
    fabrics = _fabrics(workload, topologies, curves or [])
    estimates = mfu_report.estimate_fabrics(workload, fabrics, estimate_options,
                                            comm_efficiency or DEFAULT_COMM_EFFICIENCY)
    if json_out:
        print(json.dumps(mfu_report.to_json(workload, estimates), indent=2))
    else:
        print(mfu_report.render_table(workload, estimates))


def _model(name: str | None, options: dict[str, Any]) -> Model:
    from dataclasses import replace

    from collbench.analysis.workload import Model, preset
    from collbench.errors import SpecError

    shape = ("layers", "hidden", "heads", "vocab")
    given = [key for key in shape if options[key] is not None]
    if name is not None:
        if given:
            raise SpecError(f"--{given[0]}", options[given[0]], "conflicts with --model")
        chosen = preset(name)
    elif len(given) < len(shape):
        missing = [f"--{key}" for key in shape if options[key] is None]
        raise SpecError.from_message(f"--model (a preset) or the shape is required: missing "
                                     f"{', '.join(missing)}")
    else:
        chosen = Model("custom", **{key: options[key] for key in shape},
                       ffn_hidden=options["ffn_hidden"], kv_heads=options["kv_heads"])
    return replace(chosen, params=options["params"]) if options["params"] else chosen


def _topologies(names: list[str]) -> list[Any]:
    from collbench.topologies.loader import load_topology

    return [load_topology(name) for name in dict.fromkeys(names)]


def _derive_dp(topology: Any, nodes: int | None, model_parallel: int) -> int:
    from collbench.errors import SpecError

    accelerators = (nodes or topology.nodes) * topology.accelerators_per_node
    if accelerators % model_parallel:
        raise SpecError("--nodes", nodes or topology.nodes, f"x {topology.accelerators_per_node}"
                        f" accelerators is not a multiple of tp x pp = {model_parallel}; "
                        "give --dp")
    return accelerators // model_parallel


def _estimate_options(matmul_efficiency: float | None, tp_overlap: float,
                      overlap: Path | None) -> Any:
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
    from collbench.errors import SpecError

    runs: dict[str, list[str]] = {}
    for text in curves:
        name, _, run = text.rpartition("=")
        runs.setdefault(name or topologies[0].name, []).append(run)
    known = {topology.name for topology in topologies}
    for name in runs:
        if name not in known:
            raise SpecError("--curves", name, f"names no --topology given ({', '.join(known)})")
    fabrics = []
    for topology in topologies:
        own = [*runs.get(topology.name, []), *_file_curves(topology)]
        measured = [curve for run in own
                    for curve in fit_measured_curves(_rows(Path(run), "--curves"), run)]
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
    from collbench.errors import SpecError
    from collbench.results import load_rows

    rows = load_rows(run) if run.is_dir() else []
    if not rows:
        raise SpecError(option, str(run), "holds no result rows (no rows.jsonl)")
    return rows
