"""collbench's measurement overhead against a raw torch.distributed loop (gloo, CPU).

Run from the repository root (collbench installed, e.g. `pip install -e .`):

    python benchmarks/overhead.py                       # 2 ranks, defaults below
    python benchmarks/overhead.py --sizes 8,1M --rounds 12 --iters 50 --no-check

The script starts --nproc rank processes itself (gloo over 127.0.0.1). For every
collective and size it runs --rounds rounds; each round measures
  A: collbench's `Runner.measure(...)` time_us (batch time per op, averaged over ranks), and
  B: a raw loop of the identical torch.distributed call on equally sized float32 buffers
     (same warmup, barrier, `perf_counter` around `iters` calls, averaged over ranks),
alternating the order (A then B, B then A) from round to round to cancel drift.
all_reduce runs in place; all_gather and reduce_scatter out of place, in both A and B.

Reading the table (printed by rank 0): `A us` and `B us` are medians over rounds;
`A/B` is median(A)/median(B), the figure judged against the goal (<= 1.03 below 1 MiB,
<= 1.01 from 1 MiB); `med r` is the median of the per-round ratios and `r range` their
spread, a guide to how much of the difference is noise; `--control` replaces A by a second
raw loop (an A/A run) to show the noise floor of the machine. Results are reported as measured;
the exit status is 0 whatever the ratios, nonzero only if a rank fails or data is wrong.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")
PLACEMENT = {
    "all_reduce": "in_place",
    "all_gather": "out_of_place",
    "reduce_scatter": "out_of_place",
}
DEFAULT_SIZES = "8,1K,64K,1M,4M,16M"
ONE_MIB = 1024**2
ELEM_BYTES = 4  # float32
Series = dict[tuple[str, int], list[float]]  # (collective, size) -> one time_us per round


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nproc", type=int, default=2, help="rank processes (default 2)")
    p.add_argument(
        "--collectives",
        default=",".join(COLLECTIVES),
        help=f"comma-separated subset of {','.join(COLLECTIVES)}",
    )
    p.add_argument("--sizes", default=DEFAULT_SIZES, help=f"bytes, K/M suffixes ({DEFAULT_SIZES})")
    p.add_argument("--rounds", type=int, default=8, help="alternating A/B rounds (default 8)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument(
        "--check",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="collbench's data check (outside the timed region; default on)",
    )
    p.add_argument(
        "--control",
        action="store_true",
        help="A/A control: A is a second raw loop, not collbench, so the ratios "
        "show this machine's noise floor",
    )
    args = p.parse_args(argv)
    from collbench.core.errors import SpecError
    from collbench.core.units import parse_size

    args.collectives = [c.strip() for c in args.collectives.split(",") if c.strip()]
    unknown = set(args.collectives) - set(COLLECTIVES)
    if unknown:
        p.error(f"unknown collective(s): {', '.join(sorted(unknown))}")
    try:
        args.sizes = [parse_size(s.strip()) for s in args.sizes.split(",") if s.strip()]
    except SpecError as error:
        p.error(str(error))
    if args.nproc < 1 or args.rounds < 1 or args.iters < 1 or args.warmup < 0:
        p.error("--nproc, --rounds and --iters must be >= 1, --warmup >= 0")
    return args


def raw_time_us(dist: Any, torch: Any, name: str, size: int, warmup: int, iters: int) -> float:
    """The hand-written loop: same call, same buffer sizes as collbench (nccl-tests' geometry)."""
    world = dist.get_world_size()
    count = size // ELEM_BYTES
    per_rank = count // world
    total = per_rank * world
    SUM = dist.ReduceOp.SUM
    clock = time.perf_counter
    if name == "all_reduce":
        buf = torch.zeros(count, dtype=torch.float32)
        for _ in range(warmup):
            dist.all_reduce(buf, op=SUM)
        dist.barrier()
        t0 = clock()
        for _ in range(iters):
            dist.all_reduce(buf, op=SUM)
        t1 = clock()
    elif name == "all_gather":
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        inp = torch.zeros(per_rank, dtype=torch.float32)
        out = torch.zeros(total, dtype=torch.float32)
        for _ in range(warmup):
            gather(out, inp)
        dist.barrier()
        t0 = clock()
        for _ in range(iters):
            gather(out, inp)
        t1 = clock()
    else:
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        inp = torch.zeros(total, dtype=torch.float32)
        out = torch.zeros(per_rank, dtype=torch.float32)
        for _ in range(warmup):
            scatter(out, inp, op=SUM)
        dist.barrier()
        t0 = clock()
        for _ in range(iters):
            scatter(out, inp, op=SUM)
        t1 = clock()
    mine = torch.tensor([(t1 - t0) / iters], dtype=torch.float64)
    dist.all_reduce(mine, op=SUM)  # average over ranks, as collbench's default rank_stat
    return float(mine.item()) / world * 1e6


def rank_main(args: argparse.Namespace) -> int:
    import torch
    import torch.distributed as dist

    from collbench.bench.runner import Runner
    from collbench.bench.timing import CpuTimer
    from collbench.core.spec import SweepSpec
    from collbench.core.units import format_size

    dist.init_process_group("gloo", init_method="env://")
    spec = SweepSpec(
        collectives=tuple(args.collectives), warmup=args.warmup, iters=args.iters, check=args.check
    ).with_backend("gloo")
    runner = Runner(spec, torch.device("cpu"), CpuTimer())
    steps = [(c, s) for c in args.collectives for s in args.sizes]
    a_us: Series = {k: [] for k in steps}
    b_us: Series = {k: [] for k in steps}
    wrong = 0

    def run_a(name: str, size: int) -> None:
        nonlocal wrong
        if args.control:
            a_us[(name, size)].append(raw_time_us(dist, torch, name, size, args.warmup, args.iters))
            return
        measured = runner.measure(name, size, PLACEMENT[name])
        wrong += measured.n_wrong or 0
        a_us[(name, size)].append(measured.stats.time_us)

    def run_b(name: str, size: int) -> None:
        b_us[(name, size)].append(raw_time_us(dist, torch, name, size, args.warmup, args.iters))

    for rnd in range(args.rounds):
        order = (run_a, run_b) if rnd % 2 == 0 else (run_b, run_a)
        for name, size in steps:
            for fn in order:
                fn(name, size)
    if dist.get_rank() == 0:
        print_table(steps, a_us, b_us, format_size)
        if wrong:
            print(f"\nERROR: collbench's data check found {wrong} wrong element(s)")
    dist.barrier()
    dist.destroy_process_group()
    return 1 if wrong else 0


def print_table(
    steps: list[tuple[str, int]], a_us: Series, b_us: Series, format_size: Callable[[int], str]
) -> None:
    head = (
        f"{'collective':<15}{'size':>10}{'A us':>11}{'B us':>11}{'A/B':>8}{'med r':>8}"
        f"{'r range':>15}{'goal':>7}  verdict"
    )
    print(head)
    print("-" * len(head))
    over = 0
    for name, size in steps:
        a, b = a_us[(name, size)], b_us[(name, size)]
        ratio = statistics.median(a) / statistics.median(b)
        per_round = [x / y for x, y in zip(a, b, strict=True)]
        goal = 1.03 if size < ONE_MIB else 1.01
        ok = ratio <= goal
        over += not ok
        spread = f"{min(per_round):.3f}-{max(per_round):.3f}"
        print(
            f"{name:<15}{format_size(size):>10}{statistics.median(a):>11.1f}"
            f"{statistics.median(b):>11.1f}{ratio:>8.3f}{statistics.median(per_round):>8.3f}"
            f"{spread:>15}{goal:>7.2f}  {'PASS' if ok else 'OVER GOAL'}"
        )
    print(f"\n{len(steps) - over}/{len(steps)} within goal (judged on A/B = median(A)/median(B))")
    sys.stdout.flush()


def launch(args: argparse.Namespace, argv: list[str]) -> int:
    import torch

    from collbench.launchers.local import free_port

    print("command: " + shlex.join([os.path.basename(sys.executable), *sys.argv]))
    print(
        f"torch {torch.__version__}, gloo, {args.nproc} ranks, {os.cpu_count()} CPUs, "
        f"warmup {args.warmup}, iters {args.iters}, rounds {args.rounds}, "
        f"check {'on' if args.check else 'off'}"
    )
    a_is = "a second raw loop (--control)" if args.control else "collbench Runner.measure time_us"
    print(f"A = {a_is}, B = raw torch.distributed loop; medians over rounds\n", flush=True)
    env = {
        **os.environ,
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "WORLD_SIZE": str(args.nproc),
    }
    procs = [
        subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), *argv],
            env={**env, "RANK": str(rank), "OVERHEAD_CHILD": "1"},
        )
        for rank in range(args.nproc)
    ]
    codes: list[int | None] = [None] * len(procs)
    started = time.monotonic()
    while any(c is None for c in codes):
        codes = [p.poll() for p in procs]
        if any(c not in (None, 0) for c in codes):  # one rank failed: peers would hang
            for p in procs:
                if p.poll() is None:
                    p.kill()
            codes = [p.wait() for p in procs]
        time.sleep(0.05)
    print(f"\nwall time {time.monotonic() - started:.1f} s")
    print_harness_overhead()
    return max(abs(c or 0) for c in codes)


def print_harness_overhead(calls: int = 200_000, repeats: int = 7) -> None:
    """collbench's own cost per timed call, free of network noise.

    The collective is replaced by a no-op in both loops, so what is left is exactly what
    collbench adds around each call: its bound closure and the clock read and store of
    CpuTimer.time_batch, against a bare `for` loop calling the same no-op. Medians of
    `repeats` runs; divide by a real operation's time to get the overhead ratio.
    """
    from types import SimpleNamespace

    from collbench.bench.timing import CpuTimer
    from collbench.core.collectives import REGISTRY, RankContext

    print("\ncollbench's own cost per timed call (collective replaced by a no-op):")
    fake_dist = SimpleNamespace(
        all_reduce=lambda tensor, op=None: None,
        all_gather_single=lambda out, inp: None,
        reduce_scatter_single=lambda out, inp, op=None: None,
    )
    context = RankContext(fake_dist, 0, 2, "sum")
    for name in COLLECTIVES:
        run = REGISTRY[name].bind(object(), object(), context)
        raw_call = getattr(
            fake_dist,
            {
                "all_reduce": "all_reduce",
                "all_gather": "all_gather_single",
                "reduce_scatter": "reduce_scatter_single",
            }[name],
        )
        collbench_ns, raw_ns = [], []
        for _ in range(repeats):
            start = time.perf_counter()
            CpuTimer().time_batch(run, calls)
            collbench_ns.append((time.perf_counter() - start) / calls * 1e9)
            start = time.perf_counter()
            for _ in range(calls):
                raw_call(None, None)
            raw_ns.append((time.perf_counter() - start) / calls * 1e9)
        extra = statistics.median(collbench_ns) - statistics.median(raw_ns)
        print(
            f"  {name:<15} collbench {statistics.median(collbench_ns):6.0f} ns, bare loop "
            f"{statistics.median(raw_ns):6.0f} ns: {extra:+.0f} ns per call "
            f"(= {extra / 1e3 / 20:.4%} of a 20 us operation)"
        )


def main() -> int:
    argv = sys.argv[1:]
    args = parse_args(argv)
    if os.environ.get("OVERHEAD_CHILD") == "1":
        return rank_main(args)
    return launch(args, argv)


if __name__ == "__main__":
    sys.exit(main())
