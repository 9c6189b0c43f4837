"""How long the process group may wait on one operation: --timeout plus the longest queue.

The method, in full: docs/architecture.md#collbench-core-watchdog-py.
"""

from __future__ import annotations

from collbench.core.collectives import REGISTRY
from collbench.core.dtypes import DTYPES
from collbench.core.spec import SweepSpec

# The slowest fabric a plan is sized for: bus bandwidth of NCCL over TCP sockets on one
# 10 GbE link, and a per-operation latency well above any healthy fabric's. Slower than
# that, the watchdog fires as it did before; a real hang still ends by the estimate plus
# --timeout.
PLANNING_BUSBW_GBPS = 1.0
PLANNING_LATENCY_S = 100e-6
QUEUEING_BACKENDS = ("nccl", "rccl")


def planned_op_s(collective: str, size_bytes: int, world_size: int) -> float:
    """One operation's time at the planning fabric: latency + size x bus factor / busbw
    (busbw = algbw x factor, so time = size / algbw = size x factor / busbw)."""
    factor = REGISTRY[collective].bus_factor(world_size)
    return PLANNING_LATENCY_S + size_bytes * factor / (PLANNING_BUSBW_GBPS * 1e9)


def planned_batch_s(spec: SweepSpec, world_size: int) -> float:
    """The longest run of operations the plan enqueues before it waits (a warm-up loop or
    the timed iterations) at the planning fabric; 0 where the backend queues nothing."""
    if spec.backend not in QUEUEING_BACKENDS or spec.max_bytes is None:
        return 0.0
    depth = max(spec.warmup, spec.iters)
    elem_bytes = max(DTYPES[name].elem_bytes for name in spec.dtypes)  # the widest rounds up most
    longest = 0.0
    for name in spec.collectives:
        for size in (spec.min_bytes, spec.max_bytes):  # op time grows with size
            geometry = REGISTRY[name].geometry(size, elem_bytes, world_size, 0)
            longest = max(longest, planned_op_s(name, geometry.size_bytes, world_size))
    return depth * longest


def process_group_timeout_s(spec: SweepSpec, world_size: int, grace_s: float = 0.0) -> float:
    """The timeout the process group is created with: --timeout, the launcher's grace for
    naming a hang first, and the longest queued batch."""
    return spec.timeout_s + grace_s + planned_batch_s(spec, world_size)
