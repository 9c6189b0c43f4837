"""What a backend and a machine can do, checked before anything is allocated or launched."""

from __future__ import annotations

from pathlib import Path

from collbench.bench.datacheck import CHUNK_ELEMS
from collbench.core.collectives import REGISTRY
from collbench.core.collectives.base import IN_PLACE
from collbench.core.dtypes import DTYPES
from collbench.core.errors import SpecError
from collbench.core.spec import SweepSpec
from collbench.core.units import format_size

# Temporary tensors of the data check: an int64 index, the expected values and a compare
# mask per chunk, with room to spare.
CHECK_OVERHEAD_BYTES = CHUNK_ELEMS * 32
# Share of the available memory a sweep may plan to use.
MEMORY_HEADROOM = 0.9


def peak_buffer_bytes(spec: SweepSpec, world_size: int) -> int:
    """Largest memory one rank needs at once for the sweep's biggest size."""
    elem_bytes = DTYPES[spec.dtype].elem_bytes
    peak = 0
    for name in spec.collectives:
        coll = REGISTRY[name]
        geometry = coll.geometry(max(spec.sizes()), elem_bytes, world_size, 0)
        for placement in spec.placements_for(name):
            if placement == IN_PLACE:
                elems = max(geometry.send_elems, geometry.recv_elems)
            else:
                elems = geometry.send_elems + geometry.recv_elems
            peak = max(peak, elems * elem_bytes)
    return peak + (CHECK_OVERHEAD_BYTES if spec.check else 0)


def check_memory(
    spec: SweepSpec, world_size: int, ranks_sharing: int, available_bytes: int, where: str
) -> None:
    """SpecError when the ranks sharing one memory would not fit in it."""
    need = peak_buffer_bytes(spec, world_size) * ranks_sharing
    if need > available_bytes * MEMORY_HEADROOM:
        raise SpecError(
            "--max-bytes",
            spec.max_bytes,
            f"needs {format_size(need)} of {where} memory for {ranks_sharing} "
            f"rank(s) but {format_size(available_bytes)} is available; lower "
            "--max-bytes",
        )


def host_memory_available() -> int:
    """MemAvailable from /proc/meminfo (bytes); a large number where it cannot be read."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 1 << 62


def check_world_size(spec: SweepSpec, world_size: int) -> None:
    for name in spec.collectives:
        minimum = REGISTRY[name].min_world_size
        if world_size < minimum:
            raise SpecError(
                "--collective", name, f"needs at least {minimum} ranks; this run has {world_size}"
            )
