"""What a backend and a machine can do, checked before anything is allocated or launched."""

from __future__ import annotations

import contextlib
from pathlib import Path

from collbench.bench.datacheck import CHUNK_ELEMS
from collbench.core.collectives import REGISTRY
from collbench.core.collectives.base import IN_PLACE
from collbench.core.doctor_spec import DOCTOR
from collbench.core.dtypes import DTYPES
from collbench.core.errors import SpecError
from collbench.core.overlap import MAX_SQUARE
from collbench.core.spec import SweepSpec
from collbench.core.units import format_size

# Temporary tensors of the data check: an int64 index, the expected values and a compare
# mask per chunk, with room to spare.
CHECK_OVERHEAD_BYTES = CHUNK_ELEMS * 32
# Share of the available memory a sweep may plan to use.
MEMORY_HEADROOM = 0.9
# Per timed iteration, one rank keeps its timestamps and samples (Python floats in lists,
# then a float64 tensor: ~96 bytes) and every rank's samples gathered, stacked and
# combined (~32 bytes per rank).
SAMPLE_BYTES_PER_ITER = 96
SAMPLE_BYTES_PER_ITER_PER_RANK = 32
# One local rank process before its buffers: Python, torch and a process group (measured
# at ~250-300 MB resident for a CPU rank; CUDA contexts add more on the host).
RANK_PROCESS_BYTES = 300 * 1024**2


def peak_buffer_bytes(spec: SweepSpec, world_size: int) -> int:
    """Largest memory one rank needs at once for the sweep's biggest size."""
    # The widest dtype rounds sizes up the most (a size is whole elements).
    elem_bytes = max(DTYPES[name].elem_bytes for name in spec.dtypes)
    peak = 0
    for name in spec.collectives:
        coll = REGISTRY[name]
        geometry = coll.geometry(spec.sizes()[-1], elem_bytes, world_size, 0)
        for placement in spec.placements_for(name):
            if placement == IN_PLACE:
                elems = max(geometry.send_elems, geometry.recv_elems)
            else:
                elems = geometry.send_elems + geometry.recv_elems
            peak = max(peak, elems * elem_bytes)
    return peak + (CHECK_OVERHEAD_BYTES if spec.check else 0)


def sample_bytes(spec: SweepSpec, world_size: int) -> int:
    """Memory one rank needs for one size's timing samples (--iters of them)."""
    return spec.iters * (SAMPLE_BYTES_PER_ITER + SAMPLE_BYTES_PER_ITER_PER_RANK * world_size)


def probe_operand_bytes(spec: SweepSpec, device_type: str) -> int:
    """Memory one rank's overlap probe allocates for its matmul (0 without probes): A (M x K)
    and B (K x N) once, and an M x N output per compute stream, in the compute dtype. An
    automatic shape is at most the largest square the probe tries (MAX_SQUARE)."""
    overlap = spec.overlap
    if overlap is None:
        return 0
    side = MAX_SQUARE[device_type]
    m, n, k = overlap.matmul_shape or (side, side, side)
    elem_bytes = DTYPES[overlap.resolved_dtype(device_type)].elem_bytes
    return (m * k + k * n + max(1, overlap.compute_streams) * m * n) * elem_bytes


def check_memory(
    spec: SweepSpec, world_size: int, ranks_sharing: int, available_bytes: int, where: str
) -> None:
    """SpecError when the ranks sharing one memory would not fit in it (buffers, timing
    samples and an overlap probe's matmul operands), naming whichever of --max-bytes,
    --iters and --matmul-shape needs most. `where` is "GPU" (a CUDA device) or "host"."""
    device_type = "cuda" if where == "GPU" else "cpu"
    parts = {
        "--max-bytes": peak_buffer_bytes(spec, world_size),
        "--iters": sample_bytes(spec, world_size),
        "--matmul-shape": probe_operand_bytes(spec, device_type),
    }
    need = sum(parts.values()) * ranks_sharing
    if need <= available_bytes * MEMORY_HEADROOM:
        return
    flag = max(parts, key=lambda name: parts[name])
    value: object = {"--max-bytes": spec.max_bytes, "--iters": spec.iters}.get(flag)
    if flag == "--matmul-shape":
        shape = spec.overlap.matmul_shape if spec.overlap else None
        value = "x".join(map(str, shape)) if shape else "auto"
    detail = ", ".join(
        f"{label} {format_size(parts[name])}"
        for name, label in (
            ("--max-bytes", "buffers"),
            ("--iters", "timing samples"),
            ("--matmul-shape", "matmul operands"),
        )
        if parts[name]
    )
    raise SpecError(
        flag,
        value,
        f"needs {format_size(need)} of {where} memory for {ranks_sharing} rank(s) "
        f"({detail} each) but {format_size(available_bytes)} is available; lower {flag}",
    )


def check_rank_processes(nproc: int, available_bytes: int) -> None:
    """SpecError when `nproc` local rank processes (RANK_PROCESS_BYTES each, before any
    buffer) would not fit in the host's available memory."""
    need = nproc * RANK_PROCESS_BYTES
    if need > available_bytes * MEMORY_HEADROOM:
        raise SpecError(
            "--nproc",
            nproc,
            f"rank processes need about {format_size(need)} of host memory "
            f"({format_size(RANK_PROCESS_BYTES)} each before buffers) but "
            f"{format_size(available_bytes)} is available; lower --nproc",
        )


def host_memory_available() -> int:
    """MemAvailable from /proc/meminfo (bytes); a large number where it cannot be read."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 1 << 62


def check_world_size(spec: SweepSpec, world_size: int) -> None:
    if spec.command == DOCTOR:
        return  # a doctor runs the stages this world size has (one rank: the intra-node one)
    for name in spec.collectives:
        minimum = REGISTRY[name].min_world_size
        if world_size < minimum:
            raise SpecError(
                "--collective", name, f"needs at least {minimum} ranks; this run has {world_size}"
            )
