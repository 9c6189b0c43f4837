"""collbench's all-reduce time against the way PARAM comms, nccl-tests and OSU time it (gloo, CPU).

Run from the repository root (collbench installed, e.g. `pip install -e .`):

    python benchmarks/peers.py                          # 2 ranks, 64K,4M,16M, 5 rounds
    python benchmarks/peers.py --sizes 4M,16M --rounds 8 --iters 20

The script starts --nproc rank processes itself (gloo over 127.0.0.1), all in ONE process
group, and for every size runs every method below once per round, in an order that rotates
from round to round so that drift on a shared machine falls on every method alike. Every
method does a float32 sum all-reduce in place on a fresh buffer of that size, with --warmup
untimed and --iters timed operations (PARAM's own defaults are a separate method). --methods
picks a subset: fewer methods per round put the compared ones closer together in time.

Methods (what each one times, and how the ranks' figures are combined):
  collbench        collbench's real `Runner.measure`: barrier, iters blocking calls back to
                   back, perf_counter between them; batch time / iters, mean over ranks.
                   The same measurement's per-iteration median and minimum are shown too.
  plain            the same loop written by hand (the issue's "plain torch.distributed loop").
  nccl-tests       one untimed op, barrier, iters calls issued with async_op=True back to back,
                   then one wait on all of them; total / iters, mean over ranks (-z 0 -a 1).
  in-flight-2      the nccl-tests loop, but op i waits for op i-2 before it is issued: at
                   most two all-reduces in flight (blocking calls have one).
  1thread          blocking calls, then the nccl-tests loop, on a second gloo group whose
                   ProcessGroupGloo has one worker thread (torch's default has two).
  osu              per iteration: time one blocking call, then an untimed barrier; mean of the
                   iteration times, mean over ranks (osu_allreduce's "Avg Latency").
  param-z0         PARAM comms' default non-blocking mode: warm-up issued async and waited,
                   no barrier, then iters async issues (each one timed) and one timed wait on
                   them all; sum / iters per rank, p50 over ranks.
  param-z1         PARAM's blocking mode: untimed barrier, then one timed blocking call, per
                   iteration; sum / iters per rank, p50 over ranks.
  param-defaults   param-z0 with PARAM's own --w 5 --n 5.

Reading the tables (printed by rank 0): `median ms` is the median over rounds and `range ms`
the spread; `x collbench` is the median over rounds of (method / collbench of the same round)
and `IQR` the quartiles of those per-round ratios: the figures to read. `busbw` is nccl-tests'
all-reduce bus bandwidth (GB/s) from the median time. Below 1.00 the method reports a shorter
time (a higher busbw) than collbench; the table under each size repeats the ratios for pairs
of methods that differ by one factor. The exit status is 0 whatever the figures, nonzero only if a rank fails.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_SIZES = "64K,4M,16M"
ELEM_BYTES = 4  # float32
PARAM_DEFAULT_WARMUP = 5  # PARAM comms' --w
PARAM_DEFAULT_ITERS = 5  # PARAM comms' --n
CHILD_VAR = "PEERS_CHILD"
REFERENCE = "collbench"
Figures = dict[str, float]  # row label -> seconds per operation, combined over ranks


def combine(values: Sequence[float], how: str) -> float:
    """One figure from every rank's figure: "avg" (nccl-tests -a 1, OSU's Avg) or "p50"
    (PARAM: numpy's linear-interpolated 50th percentile, which is the median; with two
    ranks that is the mean of the two, so it equals "avg")."""
    if not values:
        raise ValueError("no values to combine")
    if how == "avg":
        return statistics.fmean(values)
    if how == "p50":
        return statistics.median(values)
    raise ValueError(f"unknown rank statistic {how!r}")


def ratio_summary(
    values: Sequence[float], reference: Sequence[float]
) -> tuple[float, float, float]:
    """(median, first quartile, third quartile) of the per-round ratios values[i] / reference[i].

    Quartiles, not min and max: on a shared machine one disturbed round sets the extremes."""
    ratios = [value / ref for value, ref in zip(values, reference, strict=True)]
    if len(ratios) < 2:
        return ratios[0], ratios[0], ratios[0]
    low, mid, high = statistics.quantiles(ratios, n=4, method="inclusive")
    return mid, low, high


def rotated(items: Sequence[Any], round_index: int) -> list[Any]:
    """`items` started at position round_index (mod len): every item takes every slot."""
    shift = round_index % len(items)
    return [*items[shift:], *items[:shift]]


@dataclass
class Loop:
    """What every method needs on this rank."""

    torch: Any
    dist: Any
    runner: Any  # collbench.bench.runner.Runner
    one_thread_group: Any  # a second gloo group over the same ranks, one worker thread
    warmup: int
    iters: int

    def buffer(self, size_bytes: int) -> Any:
        return self.torch.zeros(size_bytes // ELEM_BYTES, dtype=self.torch.float32)

    def over_ranks(self, seconds: float, how: str) -> float:
        """Every rank's figure, gathered (outside any timed region) and combined by `how`."""
        torch, dist = self.torch, self.dist
        mine = torch.tensor([seconds], dtype=torch.float64)
        gathered = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
        dist.all_gather(gathered, mine)
        return combine([float(value.item()) for value in gathered], how)


def collbench_method(loop: Loop, size_bytes: int) -> Figures:
    """collbench's own timing path, not a copy: Runner.measure with CpuTimer."""
    stats = loop.runner.measure("all_reduce", size_bytes, "in_place").stats
    return {
        REFERENCE: stats.time_us * 1e-6,
        "collbench-p50": stats.time_us_p50 * 1e-6,
        "collbench-min": stats.time_us_min * 1e-6,
    }


def plain_method(loop: Loop, size_bytes: int) -> Figures:
    dist, buf = loop.dist, loop.buffer(size_bytes)
    for _ in range(loop.warmup):
        dist.all_reduce(buf)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(loop.iters):
        dist.all_reduce(buf)
    per_op = (time.perf_counter() - start) / loop.iters
    return {"plain": loop.over_ranks(per_op, "avg")}


def _async_batch(loop: Loop, issue: Callable[[], Any], in_flight: int | None) -> float:
    """nccl-tests' loop: warm-up, one synchronous op, barrier, then iters issued back to back
    and waited at the end; total / iters. issue() starts one all-reduce and returns its Work;
    in_flight caps the operations issued and not yet waited (None: no cap, as nccl-tests;
    1: each one is waited before the next is issued, which is what a blocking call does)."""
    for work in [issue() for _ in range(loop.warmup)]:
        work.wait()
    issue().wait()
    loop.dist.barrier()
    start = time.perf_counter()
    pending: deque[Any] = deque()
    for _ in range(loop.iters):
        if in_flight is not None and len(pending) >= in_flight:
            pending.popleft().wait()
        pending.append(issue())
    for work in pending:
        work.wait()
    return (time.perf_counter() - start) / loop.iters


def _default_group_issue(loop: Loop, size_bytes: int) -> Callable[[], Any]:
    dist, buf = loop.dist, loop.buffer(size_bytes)
    return lambda: dist.all_reduce(buf, async_op=True)


def _one_thread_issue(loop: Loop, size_bytes: int) -> Callable[[], Any]:
    group, buf = loop.one_thread_group, loop.buffer(size_bytes)
    return lambda: group.allreduce([buf])


def nccl_tests_method(loop: Loop, size_bytes: int) -> Figures:
    per_op = _async_batch(loop, _default_group_issue(loop, size_bytes), in_flight=None)
    return {"nccl-tests": loop.over_ranks(per_op, "avg")}


def two_in_flight_method(loop: Loop, size_bytes: int) -> Figures:
    per_op = _async_batch(loop, _default_group_issue(loop, size_bytes), in_flight=2)
    return {"in-flight-2": loop.over_ranks(per_op, "avg")}


def one_thread_method(loop: Loop, size_bytes: int) -> Figures:
    """Blocking and the nccl-tests loop on a gloo group with one worker thread: does async
    issue still gain anything when gloo cannot run two operations at once?"""
    issue = _one_thread_issue(loop, size_bytes)
    blocking = _async_batch(loop, issue, in_flight=1)
    issued = _async_batch(loop, issue, in_flight=None)
    return {
        "1thread-blocking": loop.over_ranks(blocking, "avg"),
        "1thread-nccl-tests": loop.over_ranks(issued, "avg"),
    }


def osu_method(loop: Loop, size_bytes: int) -> Figures:
    dist, buf = loop.dist, loop.buffer(size_bytes)
    dist.barrier()
    timed = 0.0
    for index in range(loop.warmup + loop.iters):
        start = time.perf_counter()
        dist.all_reduce(buf)
        stop = time.perf_counter()
        dist.barrier()
        if index >= loop.warmup:
            timed += stop - start
    return {"osu": loop.over_ranks(timed / loop.iters, "avg")}


def _param_non_blocking(loop: Loop, buf: Any, warmup: int, iters: int) -> float:
    """PARAM comms' run_coll_non_graph with --z 0 (its default), on CPU."""
    dist, clock = loop.dist, time.monotonic
    dist.barrier()
    works: list[Any] = []
    elapsed = 0.0
    for index in range(warmup + iters):
        if index == warmup:  # flush the warm-up, then start counting; no barrier here
            for work in works:
                work.wait()
            works.clear()
            buf[-1].item()
            elapsed = 0.0
        start = clock()
        works.append(dist.all_reduce(buf, async_op=True))
        elapsed += clock() - start  # only the issue call is timed
    start = clock()
    for work in works:
        work.wait()
    elapsed += clock() - start
    return elapsed / iters


def param_method(loop: Loop, size_bytes: int) -> Figures:
    buf = loop.buffer(size_bytes)
    per_op = _param_non_blocking(loop, buf, loop.warmup, loop.iters)
    return {"param-z0": loop.over_ranks(per_op, "p50")}


def param_defaults_method(loop: Loop, size_bytes: int) -> Figures:
    buf = loop.buffer(size_bytes)
    per_op = _param_non_blocking(loop, buf, PARAM_DEFAULT_WARMUP, PARAM_DEFAULT_ITERS)
    return {"param-defaults": loop.over_ranks(per_op, "p50")}


def param_blocking_method(loop: Loop, size_bytes: int) -> Figures:
    """PARAM comms' run_coll_non_graph with --z 1: a barrier before every timed call."""
    dist, buf, clock = loop.dist, loop.buffer(size_bytes), time.monotonic
    dist.barrier()
    elapsed = 0.0
    for index in range(loop.warmup + loop.iters):
        if index == loop.warmup:
            elapsed = 0.0
        dist.barrier()
        start = clock()
        dist.all_reduce(buf)
        elapsed += clock() - start
    return {"param-z1": loop.over_ranks(elapsed / loop.iters, "p50")}


# --methods name -> the method; each returns the rows named in ROWS.
METHODS: dict[str, Callable[[Loop, int], Figures]] = {
    REFERENCE: collbench_method,
    "plain": plain_method,
    "nccl-tests": nccl_tests_method,
    "in-flight-2": two_in_flight_method,
    "1thread": one_thread_method,
    "osu": osu_method,
    "param-z0": param_method,
    "param-z1": param_blocking_method,
    "param-defaults": param_defaults_method,
}
# Row order in the tables, with the one factor each row changes against collbench.
ROWS: tuple[tuple[str, str], ...] = (
    (REFERENCE, "reference: blocking, back to back, batch / iters, mean of ranks"),
    ("plain", "same loop by hand (control)"),
    ("collbench-p50", "statistic: median of per-iteration times"),
    ("collbench-min", "statistic: min of per-iteration times"),
    ("osu", "untimed barrier after every call"),
    ("param-z1", "untimed barrier before every call; p50 of ranks"),
    ("nccl-tests", "async issue back to back, one wait"),
    ("in-flight-2", "async issue, at most 2 operations in flight"),
    ("1thread-blocking", "gloo group with 1 worker thread (blocking)"),
    ("1thread-nccl-tests", "gloo group with 1 worker thread, async issue"),
    ("param-z0", "async issue, one wait, no barrier; p50 of ranks"),
    ("param-defaults", f"param -z 0 with --w {PARAM_DEFAULT_WARMUP} --n {PARAM_DEFAULT_ITERS}"),
)


def one_thread_group(dist: Any, store: Any) -> Any:
    """A second gloo group over the same ranks whose ProcessGroupGloo has one worker thread
    (init_process_group gives gloo no options, so it is built directly)."""
    from datetime import timedelta

    options = dist.ProcessGroupGloo._Options()
    options._threads = 1
    options._devices = [dist.ProcessGroupGloo.create_default_device()]
    options._timeout = timedelta(seconds=300)
    prefixed = dist.PrefixStore("peers-one-thread", store)
    return dist.ProcessGroupGloo(prefixed, dist.get_rank(), dist.get_world_size(), options)


def default_gloo_threads(torch: Any, dist: Any) -> int:
    """Worker threads of the default gloo group: how many operations it can run at once."""
    return int(dist.group.WORLD._get_backend(torch.device("cpu")).options._threads)


def rank_main(args: argparse.Namespace) -> int:
    import torch
    import torch.distributed as dist

    from collbench.bench.runner import Runner
    from collbench.bench.timing import CpuTimer
    from collbench.core.spec import SweepSpec

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    store = dist.TCPStore("127.0.0.1", int(os.environ["MASTER_PORT"]), world, rank == 0)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
    spec = SweepSpec(
        collectives=("all_reduce",), warmup=args.warmup, iters=args.iters, check=False
    ).with_backend("gloo")
    loop = Loop(
        torch=torch,
        dist=dist,
        runner=Runner(spec, torch.device("cpu"), CpuTimer()),
        one_thread_group=one_thread_group(dist, store),
        warmup=args.warmup,
        iters=args.iters,
    )
    if rank == 0:
        threads = default_gloo_threads(torch, dist)
        print(f"gloo worker threads per rank: {threads} (1thread: 1)\n", flush=True)
    series: dict[tuple[int, str], list[float]] = {}
    for round_index in range(args.rounds):
        for size in args.sizes:
            for method in rotated([METHODS[name] for name in args.methods], round_index):
                for label, seconds in method(loop, size).items():
                    series.setdefault((size, label), []).append(seconds)
    if rank == 0:
        print_tables(args.sizes, series, world)
    dist.barrier()
    dist.destroy_process_group()
    return 0


# One factor at a time: (what changes, method, the method it differs from by that factor).
FACTORS: tuple[tuple[str, str, str], ...] = (
    ("hand loop vs collbench (overhead control)", "plain", REFERENCE),
    ("statistic: median of iterations vs batch", "collbench-p50", REFERENCE),
    ("statistic: min of iterations vs batch", "collbench-min", REFERENCE),
    ("untimed barrier per call vs none", "osu", REFERENCE),
    ("async back-to-back issue vs blocking", "nccl-tests", REFERENCE),
    ("2 in flight vs 1 (blocking)", "in-flight-2", REFERENCE),
    ("no cap vs 2 in flight", "nccl-tests", "in-flight-2"),
    ("async vs blocking, 1 gloo worker thread", "1thread-nccl-tests", "1thread-blocking"),
    ("PARAM -z 0 vs nccl-tests loop", "param-z0", "nccl-tests"),
    ("PARAM -z 1 vs OSU loop", "param-z1", "osu"),
    ("PARAM --w 5 --n 5 vs --warmup/--iters", "param-defaults", "param-z0"),
)


def print_tables(sizes: list[int], series: dict[tuple[int, str], list[float]], world: int) -> None:
    from collbench.core.bandwidth import busbw_gbps
    from collbench.core.units import format_size

    for size in sizes:
        reference = series[(size, REFERENCE)]
        head = (
            f"{'method':<29}{'median ms':>10}{'range ms':>17}{'x collbench':>12}"
            f"{'IQR':>14}{'busbw':>8}  differs from collbench by"
        )
        print(f"all_reduce {format_size(size)}, {world} ranks, {len(reference)} rounds")
        print(head + "\n" + "-" * len(head))
        for label, differs in ROWS:
            if (size, label) not in series:
                continue
            times = series[(size, label)]
            mid, low, high = ratio_summary(times, reference)
            median_s = statistics.median(times)
            busbw = busbw_gbps("all_reduce", world, size, median_s * 1e6)
            print(
                f"{label:<29}{median_s * 1e3:>10.3f}"
                f"{f'{min(times) * 1e3:.3f}-{max(times) * 1e3:.3f}':>17}{mid:>12.3f}"
                f"{f'{low:.3f}-{high:.3f}':>14}{busbw:>8.3f}  {differs}"
            )
        print("\none factor at a time (median of per-round ratios, IQR):")
        for question, numerator, denominator in FACTORS:
            if (size, numerator) not in series or (size, denominator) not in series:
                continue
            mid, low, high = ratio_summary(series[(size, numerator)], series[(size, denominator)])
            print(f"  {question:<44}{numerator} / {denominator} = {mid:.3f} ({low:.3f}-{high:.3f})")
        print(flush=True)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nproc", type=int, default=2, help="rank processes (default 2)")
    parser.add_argument(
        "--sizes", default=DEFAULT_SIZES, help=f"bytes, K/M suffixes ({DEFAULT_SIZES})"
    )
    parser.add_argument(
        "--methods",
        default=",".join(METHODS),
        help=f"comma list of {','.join(METHODS)} (default all; {REFERENCE} always runs)",
    )
    parser.add_argument("--rounds", type=int, default=5, help="rounds of every method (default 5)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed operations (default 5)")
    parser.add_argument("--iters", type=int, default=20, help="timed operations (default 20)")
    args = parser.parse_args(argv)
    from collbench.core.errors import SpecError
    from collbench.core.units import parse_size

    names = [name.strip() for name in args.methods.split(",") if name.strip()]
    unknown = sorted(set(names) - set(METHODS))
    if unknown:
        parser.error(f"--methods: unknown {', '.join(unknown)} (known: {', '.join(METHODS)})")
    args.methods = [REFERENCE, *dict.fromkeys(name for name in names if name != REFERENCE)]
    try:
        args.sizes = [parse_size(text.strip()) for text in args.sizes.split(",") if text.strip()]
    except SpecError as error:
        parser.error(str(error))
    if not args.sizes or min(args.sizes) < ELEM_BYTES:
        parser.error(f"--sizes: give at least one size of {ELEM_BYTES} bytes or more")
    if args.nproc < 2 or args.rounds < 1 or args.iters < 1 or args.warmup < 0:
        parser.error("--nproc must be >= 2, --rounds and --iters >= 1, --warmup >= 0")
    return args


def launch(args: argparse.Namespace, argv: list[str]) -> int:
    import torch

    from collbench.bench.distributed import free_port

    print("command: " + shlex.join(["python", "benchmarks/peers.py", *argv]))
    print(
        f"torch {torch.__version__}, gloo on 127.0.0.1, {args.nproc} ranks, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.2f}, warmup {args.warmup}, iters {args.iters}, "
        f"rounds {args.rounds}",
        flush=True,
    )
    env = {
        **os.environ,
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "WORLD_SIZE": str(args.nproc),
    }
    procs = [
        subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), *argv],
            env={**env, "RANK": str(rank), CHILD_VAR: "1"},
        )
        for rank in range(args.nproc)
    ]
    started = time.monotonic()
    codes: list[int | None] = [None] * len(procs)
    while any(code is None for code in codes):
        time.sleep(0.05)
        codes = [proc.poll() for proc in procs]
        if any(code not in (None, 0) for code in codes):  # one rank failed: its peers would hang
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
            codes = [proc.wait() for proc in procs]
    print(f"wall time {time.monotonic() - started:.1f} s, load average {os.getloadavg()[0]:.2f}")
    return max(abs(code or 0) for code in codes)


def main() -> int:
    argv = sys.argv[1:]
    args = parse_args(argv)
    if os.environ.get(CHILD_VAR) == "1":
        return rank_main(args)
    return launch(args, argv)


if __name__ == "__main__":
    sys.exit(main())
