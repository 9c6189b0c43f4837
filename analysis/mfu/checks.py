"""Does an input `collbench mfu` was given apply to the fabric it prices? One-line warnings
for a measured run taken on another backend or device than the fabric (a CPU gloo probe
applied to H100s), for knobs a run recorded that belong to another backend (RCCL_* on an
NVIDIA fabric, NCCL_* on gloo: collbench.core.knobs' rule, the sweep's too), and for
measured curves no group of the workload used.

Pure: runs and topologies in, sentences out (the command prints them).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from collbench.analysis.mfu.inputs import MeasuredCurve
from collbench.core.knobs import knob_mismatch
from collbench.store.load import Run
from collbench.topologies.schema import Topology

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
    if topology.scale_up.kind == "nvlink" or "nvidia" in name:
        return NVIDIA
    return None


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


def unused_curve_warnings(
    unused: Iterable[tuple[MeasuredCurve, str]], topology: Topology
) -> list[str]:
    """One line per measured curve no group of the workload used, saying why."""
    return [
        f"--curves {curve.run}: its {curve.collective} at {curve.world_size} ranks over "
        f"{curve.nodes} node{'' if curve.nodes == 1 else 's'} was not used on "
        f"{topology.name}: {why}"
        for curve, why in unused
    ]


def _platform_mismatch(run: Run, topology: Topology, backend: str | None) -> str:
    """'with gloo on CPU, not ... nccl on NVIDIA H100 ...', or '' when nothing differs
    (or the run or the fabric does not say)."""
    backends = _run_backends(run)
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


def _run_backends(run: Run) -> set[str]:
    backends = {str(row.backend) for row in run.rows if row.backend}
    return backends or ({str(run.meta.backend)} if run.meta.backend else set())


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
