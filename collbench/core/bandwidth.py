"""nccl-tests' bandwidth math: algbw = size / time, busbw = algbw x the collective's factor."""

from __future__ import annotations

from collbench.core.collectives import REGISTRY


def bus_factor(collective: str, world_size: int) -> float:
    """The busbw correction factor (all-reduce 2(n-1)/n, all-gather (n-1)/n, ...)."""
    return REGISTRY[collective].bus_factor(world_size)


def algbw_gbps(size_bytes: int, time_us: float) -> float:
    """Algorithm bandwidth in GB/s (1e9 bytes per second, as nccl-tests)."""
    return size_bytes / (time_us * 1e-6) / 1e9 if time_us > 0 else 0.0


def busbw_gbps(collective: str, world_size: int, size_bytes: int, time_us: float) -> float:
    """Bus bandwidth in GB/s: comparable to the hardware's link speed."""
    return algbw_gbps(size_bytes, time_us) * bus_factor(collective, world_size)
