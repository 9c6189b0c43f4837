"""Knobs: the environment variables that change how a communication library behaves.

One list, used to record provenance (every row's and meta.json's `knobs`), to accept
`--knob NAME=VALUE`, and to pick knob settings out of imported nccl-tests/rccl-tests logs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

# NCCL/RCCL and their transports (UCX, libfabric), the ROCm/CUDA runtimes under them, and
# the torch.distributed and gloo settings above them.
KNOB_PREFIXES = ("NCCL_", "RCCL_", "HSA_", "HIP_", "CUDA_", "UCX_", "FI_", "TORCH_", "GLOO_")
KNOB_NAMES = ("ROCR_VISIBLE_DEVICES", "OMP_NUM_THREADS")

# The backends (SweepSpec.backend, resolved) that read a knob, by name or prefix; a knob
# not listed here (TORCH_*, GLOO_*, OMP_NUM_THREADS) applies to every backend. RCCL reads
# NCCL_* too; the network plugins (UCX, libfabric) and the device runtimes sit under NCCL
# and RCCL only, since collbench's gloo runs on CPU tensors.
_READ_BY: dict[str, tuple[str, ...]] = {
    "NCCL_": ("nccl", "rccl"),
    "RCCL_": ("rccl",),
    "HSA_": ("rccl",),
    "HIP_": ("rccl",),
    "ROCR_VISIBLE_DEVICES": ("rccl",),
    "CUDA_": ("nccl", "rccl"),
    "UCX_": ("nccl", "rccl"),
    "FI_": ("nccl", "rccl"),
}


def is_knob(name: str) -> bool:
    """Whether an environment variable is one `knob_env` records."""
    return name.startswith(KNOB_PREFIXES) or name in KNOB_NAMES


def knob_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every environment variable that changes how the communication library behaves."""
    environ = os.environ if environ is None else environ
    return {name: value for name, value in sorted(environ.items()) if is_knob(name)}


def knob_listing() -> str:
    """What counts as a knob, for messages: `NCCL_*, RCCL_*, ..., OMP_NUM_THREADS`."""
    return ", ".join([*(f"{prefix}*" for prefix in KNOB_PREFIXES), *KNOB_NAMES])


def knob_backends(name: str) -> tuple[str, ...] | None:
    """The backends that read knob `name` (None: every backend)."""
    for key, backends in _READ_BY.items():
        if name == key or (key.endswith("_") and name.startswith(key)):
            return backends
    return None


def knob_mismatch(name: str, backend: str | None) -> str | None:
    """Why knob `name` has no effect on `backend` (a resolved backend: nccl, rccl, gloo),
    e.g. "NCCL_MAX_NCHANNELS is read by nccl/rccl, not by gloo"; None when it may apply
    or the backend is not known (None, "auto")."""
    backends = knob_backends(name)
    if backends is None or backend in (None, "auto") or backend in backends:
        return None
    return f"{name} is read by {'/'.join(backends)}, not by {backend}"
