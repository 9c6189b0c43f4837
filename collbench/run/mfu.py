"""`collbench mfu`'s use-case: the fabrics (topologies, with the curves and probes
measured on them), the workload's data-parallel size on the first, and each fabric's
estimate (analysis/mfu/fabrics.py), with what does not fit or apply as warnings.

The method, in full: docs/architecture.md#collbench-run-mfu-py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collbench.analysis.mfu.estimate import (
    Estimate,
    EstimateOptions,
    Skew,
    TrainingCost,
    parse_prices,
    training_cost,
)
from collbench.analysis.mfu.workload import Parallelism, Training, Workload
from collbench.core.errors import SpecError
from collbench.store.load import Run, load_run

if TYPE_CHECKING:
    from collbench.analysis.mfu.fabrics import Fabric, Inputs
    from collbench.analysis.mfu.search import Ranked
    from collbench.analysis.mfu.workload import Model


@dataclass(frozen=True)
class MfuRequest:
    """What `collbench mfu` was asked for besides the workload's own fields (Model,
    Training, Parallelism and EstimateOptions own those)."""

    topology: tuple[str, ...] = ()  # catalog names or files, compared side by side
    model: str | None = None  # a preset (instead of the shape)
    untied_embeddings: bool = False  # the opposite of Model.tied_embeddings
    seq: int = 2048  # sequence length in tokens (Training.seq has no default of its own)
    nodes: int | None = None  # of the first topology, to derive dp (None: its file's)
    fsdp: bool = False  # = ZeRO stage 3
    comm_efficiency: float | None = None  # None: Inputs' own
    curves: tuple[str, ...] = ()  # run directories (or NAME=RUN) of measured sweeps
    overlap: Path | None = None  # a run directory of overlap probes
    gemm: Path | None = None  # a run directory of `collbench gemm` rows
    skew_from: tuple[str, ...] = ()  # doctor runs: their gemm burn-ins (stragglers)
    explain: bool = False  # also say where a step's time goes
    allow_oversubscribed_memory: bool = False  # warn instead of refuse
    price: tuple[str, ...] = ()  # NAME=USD per GPU-hour of a --topology given
    dp_dtypes: str | None = None  # REDUCE[,GATHER]: Training's grad_bytes, gather_bytes
    search: bool = False  # also rank the layouts that fit each fabric (analysis/mfu/search.py)


@dataclass(frozen=True)
class MfuEstimate:
    workload: Workload
    estimates: list[Estimate]
    warnings: list[str]
    # per estimate (in its order) its cost at the --price of its topology; None: not priced
    costs: list[TrainingCost | None] = field(default_factory=list)
    searches: list[Ranked] = field(default_factory=list)  # per estimate, with --search
    prices: dict[str, float] = field(default_factory=dict)  # --price: topology -> USD/GPU-hour


def estimate_mfu(
    request: MfuRequest,
    model: Model,
    training: Training,
    parallelism: dict[str, Any],
    options: EstimateOptions,
) -> MfuEstimate:
    """Load the fabrics, size the workload on the first, estimate each, check its memory."""
    from collbench.analysis.mfu.fabrics import check_memory, estimate_fabric
    from collbench.analysis.mfu.search import search

    topologies = load_topologies(list(request.topology))
    _check_efficiency_names(options.matmul_efficiency, topologies)
    prices = parse_prices(request.price, [topology.name for topology in topologies])
    workload = size_workload(request, model, training, parallelism, *topologies)
    inputs = _inputs(request, options)
    fabrics, notes = _fabrics(workload, topologies, list(request.curves))
    estimates = [estimate_fabric(workload, fabric, inputs) for fabric in fabrics]
    refuse = not request.search  # the search finds the layouts that fit
    estimates, warnings = check_memory(estimates, request.allow_oversubscribed_memory, refuse)
    warnings = [*notes, *warnings, *(text for result in estimates for text in result.warnings)]
    costs = [
        training_cost(result, workload.tokens_per_step, prices[result.topology])
        if result.topology in prices and not result.does_not_fit
        else None
        for result in estimates
    ]
    searches = search(workload, fabrics, inputs) if request.search else []
    return MfuEstimate(workload, estimates, warnings, costs, searches, prices)


def _check_efficiency_names(given: Any, topologies: list[Any]) -> None:
    """Each --matmul-efficiency NAME=X names a --topology given or its accelerator."""
    from collbench.analysis.mfu.accuracy import family

    known = [(t.name, family(t.accelerator.name) or t.name) for t in topologies]
    names = {name.lower() for pair in known for name in pair}
    for name, _ in given if isinstance(given, tuple) else ():
        if name and name not in names:
            listed = ", ".join(f"{topology} ({accelerator})" for topology, accelerator in known)
            raise SpecError("--matmul-efficiency", name, f"names no fabric given: {listed}")


def size_workload(
    request: MfuRequest,
    model: Model,
    training: Training,
    parallelism: dict[str, Any],
    first: Any,
    *others: Any,
) -> Workload:
    """The workload (`parallelism`: the Parallelism fields given; --fsdp is ZeRO 3). One dp
    for every fabric: as given; else from --nodes of the `first` topology; else the most
    that each fabric's own node count holds and that divides a step's micro-batches (so
    fabrics of other sizes compare one job)."""
    if request.fsdp and parallelism.get("zero", 3) != 3:
        raise SpecError(
            "--zero", parallelism["zero"], "conflicts with --fsdp (= --zero 3): give one of them"
        )
    given = {**parallelism, **({"zero": 3} if request.fsdp else {})}
    nodes, per_node = request.nodes, first.accelerators_per_node
    # without --dp, expert parallelism is checked once dp is chosen (below), not at dp 1
    par = Parallelism(**(given if "dp" in given else {**given, "ep": 1}))
    if "dp" in given:
        # --nodes with --dp: the same job, the nodes its accelerators fill on the first fabric
        needed = -(-par.world_size // per_node)
        if nodes is not None and needed != nodes:
            raise SpecError(
                "--nodes",
                nodes,
                f"conflicts with --dp {par.dp}: tp {par.tp} x pp {par.pp} x dp {par.dp} = "
                f"{par.world_size:,} accelerators fill {needed:,} node"
                f"{'' if needed == 1 else 's'} of {per_node} on {first.name}, not {nodes:,} "
                f"({nodes * per_node:,} accelerators); give one of them or make them agree",
            )
        return Workload(model, training, par)
    if nodes is not None:
        model_parallel = par.tp * par.cp * par.pp
        if nodes * per_node % model_parallel:
            raise SpecError(
                "--nodes",
                nodes,
                f"x {per_node} accelerators is not a multiple of tp x pp = {model_parallel}; "
                "give --dp",
            )
        dp = nodes * per_node // model_parallel
        origin = f"from --nodes {nodes} x {per_node} on {first.name}"
    else:
        dp, origin = _dp_every_fabric_holds((first, *others), par, training)
    par = replace(par, dp=dp, ep=given.get("ep", Parallelism.ep))
    return Workload(model, training, par, dp_origin=origin)


def _dp_every_fabric_holds(
    fabrics: Sequence[Any], par: Parallelism, training: Training
) -> tuple[int, str]:
    """(dp, how it was chosen) without --dp or --nodes (size_workload says the rule)."""
    model_parallel = par.tp * par.cp * par.pp
    smallest = min(fabrics, key=lambda topology: topology.world_size // model_parallel)
    most = smallest.world_size // model_parallel
    if most < 1:
        raise SpecError(
            "--topology",
            smallest.name,
            f"has {smallest.world_size:,} accelerators, fewer than tp {par.tp} x cp {par.cp} "
            f"x pp {par.pp} = {model_parallel:,}: give --nodes or --dp",
        )
    steps = max(1, training.global_batch // training.micro_batch)
    dp = max(d for d in range(1, most + 1) if steps % d == 0)
    which = f"{smallest.name}'s {most}" if len(fabrics) > 1 else str(most)
    origin = (
        f"not given: the most that divides the {steps:,} micro-batches of a step, up to "
        f"{which} (its nodes' accelerators / tp x cp x pp); --dp or --nodes sets it"
    )
    return dp, origin


def load_topologies(names: list[str]) -> list[Any]:
    """The topologies named (catalog names or files), each once; two of one name refused."""
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
    if request.skew_from:
        options = replace(options, skew=burn_in_skew(request.skew_from))
    if request.overlap is None:
        return Inputs(options, **given)
    run = load_run(request.overlap, "--overlap")
    options = probe_overlap(run.rows, str(request.overlap), options)
    return Inputs(options, overlap_run=run, **given)


def burn_in_skew(paths: Sequence[str]) -> Skew:
    """--skew-from: the gemm burn-ins of one-node doctor runs, pooled rate by rate (a
    `doctor --per-node` run: those of its nodes/* that hold one)."""
    from collbench.analysis.mfu.accuracy import family
    from collbench.core.doctor_spec import DOCTOR, GEMM
    from collbench.store.rundir import read_meta

    rates: list[float] = []
    devices: set[str] = set()
    for given in paths:
        nodes = sorted(Path(given).glob("nodes/*/"))
        for run_dir in nodes or [Path(given)]:
            meta = read_meta(run_dir, "--skew-from")
            try:  # anything but the shapes a doctor writes is a damaged meta.json
                doctor = meta.extra.get(DOCTOR, {}) if meta is not None else {}
                burned = doctor.get(GEMM, {}).get("tflops", [])
                why = doctor.get("skipped", {}).get(GEMM) or "not a one-node doctor run"
                names = {rank["device_name"] for rank in meta.ranks} if burned else set()
                rated = isinstance(burned, list) and all(isinstance(n, str) for n in names)
                rated &= bool(names) == bool(burned)
                if not rated or not all(type(r) in (int, float) and 0 < r < 1e6 for r in burned):
                    raise ValueError
            except (AttributeError, KeyError, TypeError, ValueError):
                raise SpecError("--skew-from", str(run_dir), "has a damaged burn-in") from None
            if not burned and not nodes:
                why = why if meta is not None else "no meta.json there"
                raise SpecError("--skew-from", given, f"holds no gemm burn-in: {why}")
            rates, devices = rates + [float(rate) for rate in burned], devices | names
    if len(rates) < 2 or len({family(device) for device in devices}) > 1:
        why = f"{len(rates)} burn-in rate(s)" if len(rates) < 2 else f"mixed {sorted(devices)}"
        raise SpecError("--skew-from", ",".join(paths), f"needs 2+ of one accelerator: {why}")
    return Skew(tuple(rates), devices.pop(), ", ".join(paths))


def _fabrics(
    workload: Workload, topologies: list[Any], curves: list[str]
) -> tuple[list[Fabric], list[str]]:
    """One Fabric per topology, or per (topology, label) where labelled curves were given
    (`--curves LABEL=RUN`, or a tune directory: its baseline and best.env's setting), and
    which of a run's dtype/op sets was priced where it holds several."""
    from collbench.analysis.mfu.fabrics import Fabric, sized_for
    from collbench.analysis.mfu.inputs import fit_measured_curves

    sets, defaults = _curve_sets(topologies, curves)
    fabrics, notes = [], []
    for topology in topologies:
        labels = [label for name, label in sets if name == topology.name] or [""]
        if "" not in labels and not any((topology.name, label) in defaults for label in labels):
            # labels given by hand: "default" or "baseline" is the default, else the first
            usual = [label for label in labels if label in ("default", "baseline")]
            defaults.add((topology.name, (usual or labels)[0]))
        file_runs = [load_run(Path(run), "--curves") for run in file_curves(topology)]
        for label in labels:
            own = [*sets.get((topology.name, label), []), *file_runs]
            measured = []
            for run in own:
                curves, chose = fit_measured_curves(run.sweep_rows, run.path)
                measured += curves
                notes += [note for note in chose if note not in notes]
            default = (topology.name, label) in defaults
            sized = sized_for(workload, topology)
            fabrics.append(Fabric(sized, tuple(measured), tuple(own), label, default))
    return fabrics, notes


def _curve_sets(
    topologies: list[Any], curves: list[str]
) -> tuple[dict[tuple[str, str], list[Run]], set[tuple[str, str]]]:
    """The runs of each (topology, label) --curves gives ("": unlabelled; curve_source
    reads the grammar) and the labels that are a tune's baseline."""
    from collbench.store.tune_result import is_tune_dir

    known = [topology.name for topology in topologies]
    sets: dict[tuple[str, str], list[Run]] = {}
    defaults: set[tuple[str, str]] = set()
    for text in curves:
        name, label, source = curve_source(text, known, labels=True)
        if is_tune_dir(Path(source)):
            for setting, runs, baseline in _tune_curves(Path(source)):
                sets.setdefault((name, setting), []).extend(runs)
                if baseline:
                    defaults.add((name, setting))
        else:
            sets.setdefault((name, label), []).append(load_run(Path(source), "--curves"))
    return sets, defaults


def curve_source(text: str, known: list[str], labels: bool) -> tuple[str, str, str]:
    """One `--curves [NAME=]RUN` (mfu and predict): (topology, label, RUN). NAME is a
    --topology given; a plain RUN (its path may hold '=') is the first one's. With `labels`
    (mfu), a NAME that is no catalog topology labels RUN for the first topology."""
    from collbench.topologies.loader import catalog_names

    name, sep, source = text.partition("=")
    if text and (not sep or (Path(text).exists() and name not in known)):
        return known[0], "", text
    if not source:
        raise SpecError("--curves", text, "is not [NAME=]RUN: it names no run directory")
    if name in known:
        return name, "", source
    if labels and name not in catalog_names():
        return known[0], name, source
    raise SpecError("--curves", text, f"names no --topology given ({', '.join(known)})")


def _tune_curves(tune_dir: Path) -> list[tuple[str, list[Run], bool]]:
    """A tune directory's baseline and best.env's setting: (label, runs, is baseline). A
    launched tune names each setting's run directories; a `tune from` result, its RUNs."""
    from collbench.store.tune_result import load_tune_result

    result = load_tune_result(tune_dir, "--curves")
    chosen = next((item for item in result.settings if item.label == result.env.setting), None)
    if chosen is None:
        raise SpecError(
            "--curves",
            str(tune_dir),
            f"exports {result.env.setting!r} in best.env, which is none of its settings",
        )
    picked = [result.baseline] if chosen.baseline else [result.baseline, chosen]
    out = []
    for item in (item for item in picked if item is not None):
        runs = [load_run(tune_dir / path, "--curves") for path in item.run_dirs]
        if not runs and result.sources:
            runs = _from_runs(result.sources, item.id, tune_dir)
        if not runs:
            raise SpecError(
                "--curves", str(tune_dir), f"holds no run of its setting {item.label!r}"
            )
        out.append((item.label, runs, item.baseline))
    return out


def _from_runs(sources: tuple[str, ...], setting_id: str, tune_dir: Path) -> list[Run]:
    """The RUNs of a `tune from` result that measured the setting `setting_id`, pooled."""
    from collbench.analysis.tune.from_runs import outcomes_from_runs
    from collbench.store.meta import RunMeta

    runs = [load_run(Path(path), f"--curves {tune_dir}: its RUN") for path in sources]
    for outcome in outcomes_from_runs(runs):
        if outcome.setting.id == setting_id or (not setting_id and outcome.is_baseline):
            return [Run(f"{tune_dir} ({outcome.setting.label})", RunMeta(), list(outcome.rows))]
    return []


def file_curves(topology: Any) -> list[str]:
    """The topology file's own `curves` run directory, relative to the file."""
    if not topology.curves:
        return []
    origin = Path(topology.origin)
    base = origin.parent if origin.is_file() else Path.cwd()
    return [str(base / topology.curves)]


def tp_overlap_value(text: str, flag: str = "--tp-overlap") -> float | tuple:
    """--tp-overlap 0|1|FILE: 0 or 1, or a recipe's userbuffer configuration read from YAML
    (TE's ub_cfg as NeMo and Megatron-Bridge write it) as EstimateOptions.tp_overlap_pairs."""
    import yaml

    from collbench.analysis.mfu.tp_overlap import pairs_from_config

    try:
        return float(text)
    except ValueError:
        pass
    try:
        data = yaml.safe_load(Path(text).read_text(encoding="utf-8"))
    except OSError as error:
        raise SpecError(flag, text, f"cannot be read ({error.strerror})") from None
    except yaml.YAMLError as error:
        where = getattr(error, "problem_mark", None)
        line = f" at line {where.line + 1}" if where else ""
        raise SpecError(flag, text, f"is not YAML{line}") from None
    return pairs_from_config(data, text)
