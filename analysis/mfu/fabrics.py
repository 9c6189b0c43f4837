"""`collbench mfu` glue: estimate one workload on several fabrics, with the what-ifs and
the warnings about inputs that do not apply: a measured run taken on another backend or
device than the fabric, knobs of another backend (collbench.core.knobs' rule), curves no
group used (collbench.render.mfu renders the side-by-side table and the JSON).

Pure apart from what it is handed: measured runs come in loaded, nothing is read here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from collbench.analysis.mfu.estimate import (
    Estimate,
    EstimateOptions,
    estimate,
    gemm_pricer,
    peak_flops,
)
from collbench.analysis.mfu.gemm_prices import MeasuredGemms, gemm_pricer_for
from collbench.analysis.mfu.inputs import (
    DEFAULT_COMM_EFFICIENCY,
    CurvePricer,
    MeasuredCurve,
    cost_model_pricer,
    scale_out_doubled,
)
from collbench.analysis.mfu.memory import oversubscribed, within_error
from collbench.analysis.mfu.workload import Workload
from collbench.core.errors import SpecError
from collbench.core.knobs import knob_mismatch
from collbench.store.load import Run
from collbench.topologies.schema import Topology


@dataclass(frozen=True)
class Fabric:
    """One fabric to price on, with the measured curves that override its predictions
    and the runs they were fitted from; one topology priced with several labelled sets of
    curves (settings of a tune) is one Fabric per label."""

    topology: Topology
    curves: tuple[MeasuredCurve, ...] = ()
    curve_runs: tuple[Run, ...] = ()
    label: str = ""  # `--curves LABEL=RUN`: the setting these curves were measured under
    default: bool = False  # the label is the default's (baseline) among the fabric's labels

    def pricer(self, comm_efficiency: float) -> CurvePricer:
        """Its collectives priced from its measured curves, the cost model elsewhere."""
        fallback = cost_model_pricer(self.topology, comm_efficiency)
        return CurvePricer(self.curves, self.topology, fallback)


@dataclass(frozen=True)
class Inputs:
    """What every fabric is priced with beyond its own curves."""

    options: EstimateOptions = EstimateOptions()
    comm_efficiency: float = DEFAULT_COMM_EFFICIENCY
    overlap_run: Run | None = None  # the --overlap probe run the options came from
    gemms: MeasuredGemms | None = None  # --gemm: measured GEMM rates by shape


def sized_for(workload: Workload, topology: Topology) -> Topology:
    """The topology with as many nodes as the workload's tp x pp x dp accelerators need;
    SpecError naming it when it cannot have that many (no scale-out fabric)."""
    par = workload.parallelism
    nodes = -(-par.world_size // topology.accelerators_per_node)
    if topology.scale_out is None and nodes > topology.nodes_per_domain:
        accelerators = topology.nodes_per_domain * topology.accelerators_per_node
        raise SpecError(
            "--topology",
            topology.name,
            f"has no scale-out fabric, so at most {accelerators:,} accelerators (one scale-up "
            f"domain); tp {par.tp} x pp {par.pp} x dp {par.dp} = {par.world_size:,} need "
            f"{nodes:,} nodes",
        )
    return topology.with_nodes(nodes)


def without_overlap(workload: Workload) -> dict[str, Workload]:
    """The workload with the EP all-to-alls' overlap taken away (`no_ep_overlap`), where it
    prices one. Its MFU is shown beside the estimate: the published per-step MoE run with an
    EP overlap ran nearer it than the overlapped estimate (docs/mfu/moe-cp.md)."""
    par = workload.parallelism
    if par.ep > 1 and par.ep_overlap != "none":
        return {"no_ep_overlap": replace(workload, parallelism=replace(par, ep_overlap="none"))}
    return {}


def estimate_fabric(workload: Workload, fabric: Fabric, inputs: Inputs = Inputs()) -> Estimate:
    """One fabric: the estimate, its what-ifs (perfect overlap; 2x scale-out) and the
    warnings about the measured inputs that do not apply to it."""
    topology, options = fabric.topology, inputs.options.on(fabric.topology)
    pricer = fabric.pricer(inputs.comm_efficiency)
    measured, gemm_warnings = None, []
    if inputs.gemms is not None:  # the --gemm run's pricer on this fabric (None: it does not apply)
        peak = peak_flops(workload, topology)
        fallback = gemm_pricer(topology, peak, options, None, workload.training.dtype)
        measured, gemm_warnings = gemm_pricer_for(inputs.gemms, workload, topology, fallback)
    if (skew := inputs.options.skew) is not None and options.skew is None:
        gemm_warnings.append(
            f"--skew-from {skew.runs}: measured on {skew.device}, not {topology.name}'s "
            f"{topology.accelerator.name}: no stragglers priced there"
        )
    result = estimate(workload, topology, pricer, options, measured)
    doubled = scale_out_doubled(topology)
    # Curves measured on this fabric's scale-out say nothing about a faster one; those
    # that stay inside a scale-up domain still hold.
    local = [curve for curve in fabric.curves if curve.nodes <= topology.nodes_per_domain]
    faster = CurvePricer(local, doubled, cost_model_pricer(doubled, inputs.comm_efficiency))
    scaled = estimate(workload, doubled, faster, options, measured)
    unhidden = {
        name: estimate(changed, topology, pricer, options, measured).mfu
        for name, changed in without_overlap(workload).items()
    }
    return replace(
        result,
        what_if={**result.what_if, "scale_out_2x": scaled.mfu, **unhidden},
        what_if_origin={"scale_out_2x": scaled.origin},
        warnings=tuple(_input_warnings(fabric, inputs, pricer) + gemm_warnings),
        curves_label=fabric.label,
        curves_default=fabric.default,
    )


def check_memory(
    estimates: Sequence[Estimate], allow_oversubscribed: bool, refuse: bool = True
) -> tuple[list[Estimate], list[str]]:
    """(the estimates, warnings) for the fabrics whose accelerators the workload does not
    fit. Over the capacity by no more than the estimate's demonstrated error (`may_fit`):
    estimated, with a warning that shows the margin. Beyond it: with `allow_oversubscribed`
    (--allow-oversubscribed-memory) each is estimated anyway, with a warning; else each is
    marked `does_not_fit` (its column says so), and when no fabric fits at all, SpecError
    for the first (unless not `refuse`: --search looks for layouts that do fit)."""
    warnings = [
        f"--topology {r.topology} {within_error(r.memory)}"
        for r in estimates
        if r.memory is not None and r.memory.may_fit
    ]
    over = [r for r in estimates if r.memory is not None and r.memory.overflows]
    if over and refuse and not allow_oversubscribed and len(over) == len(estimates):
        raise SpecError(
            "--topology",
            over[0].topology,
            f"{oversubscribed(over[0].memory)}; shard it further (--tp, --pp, --zero), "
            "recompute (--recompute), or pass --allow-oversubscribed-memory",
        )
    if allow_oversubscribed:
        warnings += [
            f"--topology {r.topology} {oversubscribed(r.memory)}; estimated anyway "
            "(--allow-oversubscribed-memory)"
            for r in over
        ]
        return list(estimates), warnings
    warnings += [
        f"--topology {r.topology} {oversubscribed(r.memory)}: its column says it does not fit "
        "(--allow-oversubscribed-memory estimates it anyway)"
        for r in over
    ]
    marked = [replace(r, does_not_fit=True) if any(r is o for o in over) else r for r in estimates]
    return marked, warnings


def _input_warnings(fabric: Fabric, inputs: Inputs, pricer: CurvePricer) -> list[str]:
    topology = fabric.topology
    warnings: list[str] = []
    for run in fabric.curve_runs:
        warnings += run_warnings(run, "--curves", topology)
        if not any(curve.run == run.path for curve in fabric.curves):
            warnings.append(
                f"--curves {run.path}: no curve could be fitted from its rows (one needs 3 "
                "or more sizes of a collective at 2 or more ranks), so it was not used on "
                f"{topology.name}"
            )
    warnings += [  # one line per measured curve no group of the workload used, saying why
        f"--curves {curve.run}: its {curve.collective} at {curve.world_size} ranks over "
        f"{curve.nodes} node{'' if curve.nodes == 1 else 's'} was not used on "
        f"{topology.name}: {why}"
        for curve, why in pricer.unused_curves()
    ]
    if inputs.overlap_run is not None:
        warnings += run_warnings(inputs.overlap_run, "--overlap", topology)
    return warnings


NVIDIA, AMD, CPU = "nccl", "rccl", "gloo"
# An accelerator model in a device or accelerator name: A100, H100, GB200, MI300X, L40S...
_MODEL = re.compile(r"\b(GB\d{3}|MI\d{3}[A-Z]?|[ABHLV]\d{2,3}[A-Z]?)\b", re.IGNORECASE)


def fabric_backend(topology: Topology) -> str | None:
    """The communication backend a fabric runs: nccl (NVIDIA), rccl (AMD), gloo (CPU),
    or None when its file does not say enough to tell."""
    name = topology.accelerator.name.lower()
    if topology.scale_up.kind == "shm" or "cpu" in name.split():
        return CPU
    if topology.scale_up.kind == "xgmi" or "amd" in name or "instinct" in name:
        return AMD
    return NVIDIA if topology.scale_up.kind == "nvlink" or "nvidia" in name else None


def run_warnings(run: Run, option: str, topology: Topology) -> list[str]:
    """Why a measured run (`--curves` or `--overlap`) may not apply to `topology`: taken
    on another backend or device, or with knobs of another backend."""
    backend = fabric_backend(topology)
    warnings = []
    mismatch = _platform_mismatch(run, topology, backend)
    if mismatch:
        warnings.append(
            f"{option} {run.path} was measured {mismatch}: its figures may not hold there"
        )
    foreign = [knob_mismatch(name, backend) for name in sorted(_recorded_knobs(run))]
    if any(foreign):
        warnings.append(
            f"{option} {run.path} recorded knobs for another backend than "
            f"{topology.name}'s {backend}: {'; '.join(text for text in foreign if text)}"
        )
    return warnings


def _platform_mismatch(run: Run, topology: Topology, backend: str | None) -> str:
    """'with gloo on CPU, not ... nccl on NVIDIA H100 ...', or '' when nothing differs
    (or the run or the fabric does not say)."""
    backends = {str(row.backend) for row in run.rows if row.backend}
    backends = backends or ({str(run.meta.backend)} if run.meta.backend else set())
    devices = _run_devices(run)
    wanted_device = "cpu" if backend == CPU else _model(topology.accelerator.name)
    other_backend = backend is not None and bool(backends) and backends != {backend}
    other_device = wanted_device is not None and bool(devices) and devices != {wanted_device}
    if not (other_backend or other_device):
        return ""
    measured = "with " + "/".join(sorted(backends)) if backends else "with an unknown backend"
    measured += f" on {'/'.join(sorted(devices))}" if devices else ""
    fabric = f"{backend or 'an unknown backend'} on {topology.accelerator.name}"
    return f"{measured}, not as {topology.name} runs ({fabric})"


def _run_devices(run: Run) -> set[str]:
    """The accelerator models (or 'cpu') the run's ranks recorded; empty if none."""
    devices = set()
    for rank in run.meta.ranks:
        if not isinstance(rank, Mapping):
            continue
        if str(rank.get("device", "")).startswith("cpu"):
            devices.add("cpu")
        elif model := _model(str(rank.get("device_name", ""))):
            devices.add(model)
    return devices


def _model(name: str) -> str | None:
    found = _MODEL.search(name)
    return found.group(1).upper() if found else None


def _recorded_knobs(run: Run) -> set[str]:
    """Knob names in the run's meta.json and in its rows' provenance."""
    names = set(_env_names(run.meta.knobs))
    for row in run.rows:
        names.update(_env_names(row.knobs if isinstance(row.knobs, Mapping) else {}))
    return names


def _env_names(knobs: Mapping[str, Any]) -> list[str]:
    env = knobs.get("env")
    source = env if isinstance(env, Mapping) else knobs
    return [str(name) for name, value in source.items() if not isinstance(value, Mapping)]
