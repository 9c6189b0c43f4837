"""Knobs: the environment variables that change how a communication library behaves.

The method, in full: docs/architecture.md#collbench-core-knobs-py.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping, Sequence

from collbench.core.errors import SpecError
from collbench.core.safe_text import refuse_control
from collbench.core.tune_catalog import CATALOG, KNOWN_NAMES, knob_checker

KNOB_FLAG = "--knob"
# An environment variable's name as the libraries spell them.
_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")
# difflib ratio from which an unknown name is a typo of a known one.
TYPO_CUTOFF = 0.85

# NCCL/RCCL and their transports (UCX, libfabric), the ROCm/CUDA runtimes under them, and
# the torch.distributed and gloo settings above them. GPU_*: ROCm's runtime (CLR) reads
# GPU_MAX_HW_QUEUES (hardware queues the streams share: with fewer queues than streams, a
# collective and a matmul can serialise) and other GPU_* settings; AMD_SERIALIZE_* make it
# wait around every kernel or copy (no overlap at all).
KNOB_PREFIXES = (
    "NCCL_",
    "RCCL_",
    "HSA_",
    "HIP_",
    "GPU_",
    "CUDA_",
    "UCX_",
    "FI_",
    "TORCH_",
    "GLOO_",
)
KNOB_NAMES = (
    "ROCR_VISIBLE_DEVICES",
    "AMD_SERIALIZE_KERNEL",
    "AMD_SERIALIZE_COPY",
    "OMP_NUM_THREADS",
)

# The backends (SweepSpec.backend, resolved) that read a knob, by name or prefix; a knob
# not listed here (TORCH_*, GLOO_*, OMP_NUM_THREADS) applies to every backend. RCCL reads
# NCCL_* too; the network plugins (UCX, libfabric) and the device runtimes sit under NCCL
# and RCCL only, since collbench's gloo runs on CPU tensors.
_READ_BY: dict[str, tuple[str, ...]] = {
    "NCCL_": ("nccl", "rccl"),
    "RCCL_": ("rccl",),
    "HSA_": ("rccl",),
    "HIP_": ("rccl",),
    "GPU_": ("rccl",),
    "ROCR_VISIBLE_DEVICES": ("rccl",),
    "AMD_SERIALIZE_KERNEL": ("rccl",),
    "AMD_SERIALIZE_COPY": ("rccl",),
    "CUDA_": ("nccl", "rccl"),
    "UCX_": ("nccl", "rccl"),
    "FI_": ("nccl", "rccl"),
}


# Recorded variables that never make two runs different settings (tune from) and that
# best.env never exports: what the library logs, which devices a process sees (a property
# of the job's placement, not a tuning), and what versions or install paths it reports.
LOGGING_KNOBS = frozenset(
    {
        "NCCL_DEBUG",
        "NCCL_DEBUG_SUBSYS",
        "NCCL_DEBUG_FILE",
        "NCCL_DEBUG_TIMESTAMP_FORMAT",
        "NCCL_WARN_ENABLE_DEBUG_INFO",
        "RCCL_LOG_LEVEL",
        "TORCH_CPP_LOG_LEVEL",
        "TORCH_DISTRIBUTED_DEBUG",
        "TORCH_SHOW_CPP_STACKTRACES",
        "TORCH_LOGS",
    }
)
PLACEMENT_KNOBS = frozenset(
    {"CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL"}
)
# The variables collbench's launcher sets in its ranks' environment (OMP_NUM_THREADS for
# local gloo ranks) are named in OWN_ENV_VAR: the rows record them as collbench's settings,
# never as a knob, so they are never a tuning setting, an export or a methodology
# difference. A value the user exported is not named there and stays a knob.
OWN_ENV_VAR = "COLLBENCH_OWN_ENV"
# A test mode, never a measurement of a fabric: with COLLBENCH_SHARED_GPU=1 every rank is a
# host of its own ("HOST~rRANK", NCCL_HOSTID on a GPU backend), so 2-4 ranks share one GPU
# and talk over sockets through NCCL's multi-node paths. meta.json records it; compare refuses
# it against a run that did not share.
SHARED_GPU_VAR = "COLLBENCH_SHARED_GPU"
SHARED_GPU_NOTE = (
    f"{SHARED_GPU_VAR}=1: test mode, each rank is a host of its own and ranks may share a GPU; "
    "the figures test collbench's code paths, not this machine's fabric"
)


def shared_gpu() -> bool:
    return os.environ.get(SHARED_GPU_VAR) == "1"


_REPORT_SUFFIXES = ("_VERSION", "_HOME", "_PATH", "_ROOT")  # CUDA_VERSION, CUDA_HOME, ...


def is_setting_knob(name: str) -> bool:
    """Whether a recorded knob is part of a setting (see LOGGING_KNOBS, PLACEMENT_KNOBS)."""
    return not (
        name in LOGGING_KNOBS
        or name in PLACEMENT_KNOBS
        or (name.endswith(_REPORT_SUFFIXES) and not name.startswith(("NCCL_", "RCCL_")))
        or name in ("NCCL_VERSION", "RCCL_VERSION")
    )


def is_knob(name: str) -> bool:
    """Whether an environment variable is one `knob_env` records."""
    return name.startswith(KNOB_PREFIXES) or name in KNOB_NAMES


def own_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """What collbench's launcher set in this rank's environment itself (OWN_ENV_VAR)."""
    environ = os.environ if environ is None else environ
    names = environ.get(OWN_ENV_VAR, "").split(",")
    return {name: environ[name] for name in sorted(names) if name and name in environ}


def knob_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every environment variable that changes how the communication library behaves,
    except what collbench set itself (own_env)."""
    environ = os.environ if environ is None else environ
    own = own_env(environ)
    return {
        name: value for name, value in sorted(environ.items()) if is_knob(name) and name not in own
    }


def reads_knob(name: str) -> tuple[str, ...] | None:
    """The backends that read knob `name` (None: every backend): the catalog's entry where it
    names fewer backends than the prefix rule (GLOO_SOCKET_IFNAME: gloo only), else _READ_BY's."""
    spec = CATALOG.get(name)
    if spec is not None and spec.backends is not None:
        return spec.backends
    for key, backends in _READ_BY.items():
        if name == key or (key.endswith("_") and name.startswith(key)):
            return backends
    return None


def knob_mismatch(name: str, backend: str | None) -> str | None:
    """Why knob `name` has no effect on `backend` (a resolved backend: nccl, rccl, gloo),
    e.g. "NCCL_MAX_NCHANNELS is read by nccl/rccl, not by gloo"; None when it may apply
    or the backend is not known (None, "auto")."""
    backends = reads_knob(name)
    if backends is None or backend in (None, "auto") or backend in backends:
        return None
    return f"{name} is read by {'/'.join(backends)}, not by {backend}"


def backend_warning(name: str, backend: str | None) -> str | None:
    """knob_mismatch as one line, e.g. "--knob NCCL_ALGO does not apply to --backend gloo
    (NCCL_ALGO is read by nccl/rccl, not by gloo)"; None when it may apply."""
    why = knob_mismatch(name, backend)
    return why and f"{KNOB_FLAG} {name} does not apply to --backend {backend} ({why})"


def check_knob_name(name: str, text: str, flag: str = KNOB_FLAG) -> list[str]:
    """Refuse (SpecError naming `text`) a name that is no environment variable, no
    communication knob, or a typo of one collbench knows ("did you mean"); return the warning
    for an NCCL_*/RCCL_* name collbench does not know (newer releases add variables).
    A control character (a newline...) is refused first: see core/safe_text.py."""
    refuse_control(flag, text, name)
    if not _NAME.fullmatch(name):
        upper = name.upper()
        hint = f"; did you mean {upper}?" if _NAME.fullmatch(upper) and is_knob(upper) else ""
        raise SpecError(flag, text, f"names no environment variable (upper case, digits, _){hint}")
    if not is_knob(name):
        close = difflib.get_close_matches(name, CATALOG, n=1, cutoff=TYPO_CUTOFF)
        listing = ", ".join([*(f"{prefix}*" for prefix in KNOB_PREFIXES), *KNOB_NAMES])
        hint = f"; did you mean {close[0]}?" if close else f" ({listing})"
        raise SpecError(flag, text, f"does not name a communication knob{hint}")
    if name in CATALOG or name in KNOWN_NAMES:
        return []
    close = difflib.get_close_matches(name, [*CATALOG, *KNOWN_NAMES], n=1, cutoff=TYPO_CUTOFF)
    if close:
        raise SpecError(flag, text, f"names no knob collbench knows; did you mean {close[0]}?")
    if name.startswith(("NCCL_", "RCCL_")):
        return [
            f"{KNOB_FLAG} {name} is not a variable collbench knows (NCCL 2.30, RCCL): "
            "its values are passed on unchecked"
        ]
    return []


def check_knob_value(
    name: str, value: str, text: str, backend: str | None = None, version: str | None = None
) -> str:
    """`value` as it will be exported (NCCL_BUFFSIZE=4M -> 4194304), checked against the
    catalog (`backend`'s ranges at `version`: core.tune_catalog.knob_checker); SpecError
    naming `text` for a value the library would not take. A knob the catalog does not list
    passes unchecked; a control character (a newline would end best.env's line and run what
    follows) is refused for every knob."""
    refuse_control(KNOB_FLAG, text, value)
    check = knob_checker(name, backend, version)
    if check is None:
        return value
    try:
        return check(value)
    except ValueError as error:
        raise SpecError(KNOB_FLAG, text, f"value {value!r} {error}") from None


def parse_knob_settings(
    texts: Sequence[str], backend: str | None = None, version: str | None = None
) -> tuple[tuple[tuple[str, str], ...], list[str]]:
    """`--knob NAME=VALUE` settings, one value each, taken as written (a comma is part of
    the value, as NCCL reads NCCL_SOCKET_IFNAME=eth0,eth1), checked like tune checks its
    axes (`backend`'s ranges at `version`): the (name, value) pairs in the order given, and
    the warnings to print. SpecError for a malformed setting, a control character, an
    unknown or misspelt name, a bad value or a knob given twice. (tune's `NAME=V1,V2,...` axes: core/tune_grid.py parse_knobs, on the same checks.)"""
    settings: dict[str, str] = {}
    warnings: list[str] = []
    for text in texts:
        refuse_control(KNOB_FLAG, text)
        name, sep, value = text.partition("=")
        if not sep or not name:
            raise SpecError(KNOB_FLAG, text, "is not NAME=VALUE (e.g. NCCL_ALGO=Ring)")
        warnings += check_knob_name(name, text)
        if name in settings:
            raise SpecError(KNOB_FLAG, text, f"repeats {name}: give each knob once")
        settings[name] = check_knob_value(name, value, text, backend, version)
    return tuple(settings.items()), warnings


def knob_args(knobs: Sequence[tuple[str, str]]) -> list[str]:
    """The `--knob NAME=VALUE` options that parse back to `knobs`."""
    return [arg for name, value in knobs for arg in (KNOB_FLAG, f"{name}={value}")]


def apply_knobs(knobs: Sequence[tuple[str, str]]) -> None:
    """Set the knobs in this process's environment: before the communication library (or
    the runtime under it) starts, so it reads them, and so processes started from here
    inherit them."""
    os.environ.update(dict(knobs))
