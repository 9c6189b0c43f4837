"""Synthetic nccl-tests logs in the current format (a header, one `Rank` line per rank, the
out-of-place and in-place table), for tests that import them. The numbers are whatever the
test gives: times in microseconds, algbw and busbw computed from them as nccl-tests does."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

# nccl-tests' busbw factor per collective, as a function of the rank count
BUS_FACTOR: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
}


def nccl_tests_log(
    collective: str,
    ranks: int,
    nodes: int,
    sizes: Sequence[int],
    time_us: Callable[[int], float],
    dtype: str = "float",
) -> str:
    """The log text: `ranks` ranks spread evenly over `nodes` hosts, one row per size."""
    per_node = ranks // nodes
    lines = [
        "# nccl-tests version 2.17.6 nccl-headers=22703 nccl-library=22703",
        f"# Collective test starting: {collective}_perf",
        f"# nThread 1 nGpus 1 minBytes {min(sizes)} maxBytes {max(sizes)} step: 2(factor) "
        "warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0",
        "#",
        "# Using devices",
    ]
    for rank in range(ranks):
        node, device = divmod(rank, per_node)
        lines.append(
            f"#  Rank {rank:2d} Group  0 Pid {40000 + rank:6d} on node-{node:02d} device "
            f"{device:2d} [0000:{device:02x}:00] NVIDIA H100 80GB HBM3"
        )
    lines += [
        "#",
        "#                                                              out-of-place"
        "                       in-place          ",
        "#       size         count      type   redop    root     time   algbw   busbw "
        "#wrong     time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
        "            (us)  (GB/s)  (GB/s)       ",
    ]
    factor = BUS_FACTOR[collective](ranks)
    redop = "sum" if collective != "all_gather" else "none"
    for size in sizes:
        time = time_us(size)
        algbw = size / time / 1e3
        cells = f"{time:8.2f} {algbw:7.2f} {algbw * factor:7.2f}      0"
        lines.append(f"{size:12d} {size // 4:13d} {dtype:>9} {redop:>7}      -1 {cells} {cells}")
    lines += [
        "# Out of bounds values : 0 OK",
        "# Avg bus bandwidth    : 1.0 ",
        "#",
        f"# Collective test concluded: {collective}_perf",
    ]
    return "\n".join(lines) + "\n"


def write_nccl_tests_log(path: Path, *args, **kwargs) -> Path:
    Path(path).write_text(nccl_tests_log(*args, **kwargs), encoding="utf-8")
    return Path(path)
