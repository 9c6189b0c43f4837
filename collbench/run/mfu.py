"""`collbench mfu`'s use-case: the fabrics (topologies, with the curves and probes
measured on them), the workload's data-parallel size on the first, and each fabric's
estimate (analysis/mfu/fabrics.py), with what does not fit or apply as warnings.

Imports stay light (the CLI imports MfuRequest for its defaults): numpy and scipy load only
when the estimate runs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collbench.analysis.mfu.estimate import EstimateOptions
from collbench.analysis.mfu.workload import Parallelism, Training, Workload
from collbench.core.errors import SpecError

if TYPE_CHECKING:
    from collbench.analysis.mfu.fabrics import Fabric, FabricEstimate, Inputs
    from collbench.analysis.mfu.workload import Model
    from collbench.store.load import Run

DEFAULT_SEQ = 2048  # Training.seq has no default of its own: this is the command's


@dataclass(frozen=True)
class MfuRequest:
    """What `collbench mfu` was asked for besides the workload's own fields (Model,
    Training, Parallelism and EstimateOptions own those)."""

    topology: tuple[str, ...] = ()  # catalog names or files, compared side by side
    model: str | None = None  # a preset (instead of the shape)
    untied_embeddings: bool = False  # the opposite of Model.tied_embeddings
    seq: int = DEFAULT_SEQ  # sequence length in tokens
    nodes: int | None = None  # of the first topology, to derive dp (None: its file's)
    fsdp: bool = False  # = ZeRO stage 3
    comm_efficiency: float | None = None  # None: Inputs' own
    curves: tuple[str, ...] = ()  # run directories (or NAME=RUN) of measured sweeps
    overlap: Path | None = None  # a run directory of overlap probes
    gemm: Path | None = None  # a run directory of `collbench gemm` rows
    explain: bool = False  # also say where a step's time goes
    allow_oversubscribed_memory: bool = False  # warn instead of refuse


@dataclass(frozen=True)
class MfuEstimate:
    workload: Workload
    estimates: list[FabricEstimate]
    warnings: list[str]


def estimate_mfu(
    request: MfuRequest,
    model: Model,
    training: Training,
    parallelism: dict[str, Any],
    options: EstimateOptions,
) -> MfuEstimate:
    """Load the fabrics, size the workload on the first (`parallelism`: the Parallelism
    fields given; dp from --nodes unless given), estimate each, and check that the workload
    fits their memory."""
    from collbench.analysis.mfu.fabrics import check_memory, estimate_fabrics

    topologies = _topologies(list(request.topology))
    if request.fsdp and parallelism.get("zero", 3) != 3:
        raise SpecError(
            "--zero",
            parallelism["zero"],
            "conflicts with --fsdp (= --zero 3): give one of them",
        )
    given = {**parallelism, **({"zero": 3} if request.fsdp else {})}
    sized = _sized(Parallelism(**given), "dp" in given, request.nodes, topologies[0])
    workload = Workload(model, training, sized)
    inputs = _inputs(request, options)
    fabrics = _fabrics(workload, topologies, list(request.curves))
    estimates = estimate_fabrics(workload, fabrics, inputs)
    warnings = check_memory(estimates, request.allow_oversubscribed_memory)
    warnings = [*warnings, *(text for result in estimates for text in result.warnings)]
    return MfuEstimate(workload, estimates, warnings)


def _sized(parallelism: Parallelism, dp_given: bool, nodes: int | None, first: Any) -> Parallelism:
    """The parallelism as given; without dp, what fills --nodes of the first fabric."""
    if nodes is not None and nodes < 1:
        raise SpecError("--nodes", nodes, "must be an integer >= 1")
    if dp_given:
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


def _topologies(names: list[str]) -> list[Any]:
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


def _inputs(request: MfuRequest, options: EstimateOptions) -> Inputs:
    """What the estimator assumes, with the overlap an --overlap run measured."""
    from collbench.analysis.mfu.fabrics import Inputs
    from collbench.analysis.mfu.inputs import probe_overlap

    efficiency = request.comm_efficiency
    given: dict[str, Any] = {} if efficiency is None else {"comm_efficiency": efficiency}
    if request.gemm is not None:
        from collbench.analysis.mfu.gemm_prices import measured_gemms
        from collbench.store.gemm_rows import load_gemm_rows

        given["gemms"] = measured_gemms(load_gemm_rows(request.gemm), str(request.gemm))
    overlap = request.overlap
    if overlap is None:
        return Inputs(options, **given)
    run = _run(overlap, "--overlap")
    options = probe_overlap(run.rows, str(overlap), options)
    return Inputs(options, overlap_run=run, **given)


def _fabrics(workload: Workload, topologies: list[Any], curves: list[str]) -> list[Fabric]:
    from collbench.analysis.mfu.fabrics import Fabric, sized_for
    from collbench.analysis.mfu.inputs import fit_measured_curves

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
