"""Which CPUs a rank may run on, and what bound it: recorded per rank in meta.json.

A rank pinned to one core shares it with NCCL's proxy thread and torch's watchdog, and its
figures say so only indirectly; so every rank records its affinity (os.sched_getaffinity)
and the binding variables Slurm sets (SLURM_CPU_BIND*, SLURM_CPUS_PER_TASK,
SLURM_CPUS_ON_NODE) beside its host and device (bench.provenance.rank_identity).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

BINDING_VARS = ("SLURM_CPUS_PER_TASK", "SLURM_CPUS_ON_NODE")
BINDING_PREFIX = "SLURM_CPU_BIND"


def rank_binding(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """This process's CPUs ("0-3,8"), their count, and Slurm's binding variables if any."""
    environ = os.environ if environ is None else environ
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cpus = []
    slurm = {
        name: value
        for name, value in sorted(environ.items())
        if name.startswith(BINDING_PREFIX) or name in BINDING_VARS
    }
    return {"cpus": cpu_ranges(cpus), "cpu_count": len(cpus), "slurm": slurm}


def cpu_ranges(cpus: Iterable[int]) -> str:
    """CPU numbers as Linux lists them: [0, 1, 2, 3, 8] -> "0-3,8"."""
    parts: list[str] = []
    ordered = sorted(set(cpus))
    start = previous = None
    for cpu in [*ordered, None]:
        if previous is not None and cpu == previous + 1:
            previous = cpu
            continue
        if start is not None:
            parts.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = cpu
    return ",".join(parts)
