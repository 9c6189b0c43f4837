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
