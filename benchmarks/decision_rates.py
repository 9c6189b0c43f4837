"""How often the CI gate (`compare --fail-if-slower PCT`) fails identical reruns, and how often
it catches a real slowdown (docs/methodology/decisions.md).

Two experiments, each with real sweeps through the real CLI:

- `aa`: N identical sweeps back to back on loopback (default: `-c all_reduce -b 64K -e 16M`,
  the sweep's default repeats), then the gate on every ordered pair (N(N-1) pairs): the share
  that exits non-zero is the false-alarm rate.
- `slow`: two network-namespace "nodes" joined by a veth pair shaped with `tc tbf`; runs
  alternate between the reference rate and a rate `--slowdown` lower (A B A B ..., so drift
  cancels). The gate on every (B vs A) pair, limited to the bandwidth-bound sizes, gives the
  detection rate; the gate on every (A vs A) pair gives the false-alarm rate on that fabric.
  Needs root, `ip`, `unshare` and `tc`.

Every figure printed is measured in this run; nothing is assumed.

    python benchmarks/decision_rates.py aa --runs 7                 # 42 ordered pairs
    python benchmarks/decision_rates.py slow --runs 7 --slowdown 10 # 49 B-vs-A pairs
    python benchmarks/decision_rates.py aa --runs 7 --sweep-args "--repeats 3"
"""

from __future__ import annotations

import argparse
import itertools
import json
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

AA_SWEEP = ["-c", "all_reduce", "-b", "64K", "-e", "16M", "-q"]
SHAPED_SWEEP = ["-c", "all_reduce", "-b", "64K", "-e", "16M", "-q", "--timeout", "120"]


def collbench(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "collbench", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def gate(baseline: Path, candidate: Path, pct: float, extra: list[str]) -> tuple[bool, str]:
    """(failed?, the gate's stderr) of `compare BASELINE CANDIDATE --fail-if-slower PCT`."""
    done = collbench(
        "compare", str(baseline), str(candidate), "--fail-if-slower", f"{pct:g}", *extra
    )
    if done.returncode not in (0, 4):
        raise SystemExit(f"compare failed ({done.returncode}): {done.stderr.strip()}")
    return done.returncode == 4, done.stderr


def wilson(hits: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a rate (95% by default)."""
    if not total:
        return 0.0, 1.0
    rate = hits / total
    centre = (rate + z * z / (2 * total)) / (1 + z * z / total)
    half = (
        z * ((rate * (1 - rate) / total + z * z / (4 * total * total)) ** 0.5) / (1 + z * z / total)
    )
    return max(0.0, centre - half), min(1.0, centre + half)


def report(name: str, hits: int, total: int, lines: list[str]) -> dict:
    low, high = wilson(hits, total)
    print(
        f"{name}: {hits} of {total} pairs ({100 * hits / max(1, total):.1f}%, 95% interval "
        f"{100 * low:.1f}..{100 * high:.1f}%)"
    )
    for line in lines[:10]:
        print(f"    {line}")
    return {
        "name": name,
        "hits": hits,
        "pairs": total,
        "rate": hits / max(1, total),
        "interval": [low, high],
    }


def aa(args: argparse.Namespace, work: Path) -> list[dict]:
    runs = []
    for index in range(args.runs):
        out = work / f"aa{index}"
        started = time.perf_counter()
        done = collbench("sweep", *AA_SWEEP, *args.sweep, "--out", str(out))
        if done.returncode != 0:
            raise SystemExit(f"sweep failed: {done.stderr.strip()}")
        print(f"sweep {index + 1}/{args.runs}: {time.perf_counter() - started:.1f} s", flush=True)
        runs.append(out)
    failed, lines = 0, []
    for base, cand in itertools.permutations(runs, 2):
        hit, stderr = gate(base, cand, args.pct, args.compare)
        failed += hit
        if hit:
            lines.append(f"{base.name} -> {cand.name}: " + _failed_lines(stderr))
    return [
        report(
            f"A/A false alarms, loopback, --fail-if-slower {args.pct:g}",
            failed,
            args.runs * (args.runs - 1),
            lines,
        )
    ]


def slow(args: argparse.Namespace, work: Path) -> list[dict]:
    from tests.netns import reason_to_skip, torchrun_pair, two_nodes

    reason = reason_to_skip(shaping=True)
    if reason:
        raise SystemExit(f"slow: {reason}")
    fast_mbit = args.rate_mbit
    slow_mbit = args.rate_mbit * (1 - args.slowdown / 100)
    reference, slowed = [], []
    with two_nodes(fast_mbit) as nodes:
        for index in range(args.runs):
            for rate, bucket, tag in ((fast_mbit, reference, "a"), (slow_mbit, slowed, "b")):
                _set_rate(nodes, rate)
                out = work / f"{tag}{index}"
                started = time.perf_counter()
                results = torchrun_pair(
                    nodes, out, [*SHAPED_SWEEP, *args.sweep], port=29700 + index * 2 + (tag == "b")
                )
                for code, _, stderr in results:
                    if code != 0:
                        raise SystemExit(f"shaped sweep failed: {stderr.strip()[-500:]}")
                print(
                    f"{tag}{index} at {rate:g} Mbit/s: {time.perf_counter() - started:.1f} s",
                    flush=True,
                )
                bucket.append(out)
    window = ["--sizes", args.bandwidth_sizes, *args.compare]
    caught, missed = 0, []
    for base, cand in itertools.product(reference, slowed):
        hit, stderr = gate(base, cand, args.pct, window)
        caught += hit
        if not hit:
            missed.append(f"{base.name} -> {cand.name}: missed")
    false, lines = 0, []
    for base, cand in itertools.permutations(reference, 2):
        hit, stderr = gate(base, cand, args.pct, window)
        false += hit
        if hit:
            lines.append(f"{base.name} -> {cand.name}: " + _failed_lines(stderr))
    pairs = len(reference) * len(slowed)
    return [
        report(
            f"{args.slowdown:g}% slowdown caught ({fast_mbit:g} vs {slow_mbit:g} Mbit/s, sizes "
            f"{args.bandwidth_sizes}, --fail-if-slower {args.pct:g})",
            caught,
            pairs,
            missed,
        ),
        report(
            f"A/A false alarms at {fast_mbit:g} Mbit/s (sizes {args.bandwidth_sizes})",
            false,
            len(reference) * (len(reference) - 1),
            lines,
        ),
    ]


def _set_rate(nodes, rate_mbit: float) -> None:
    for node in nodes:
        subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                node.netns,
                "tc",
                "qdisc",
                "replace",
                "dev",
                node.link,
                "root",
                "tbf",
                "rate",
                f"{rate_mbit}mbit",
                "burst",
                "32kb",
                "latency",
                "100ms",
            ],
            check=True,
            capture_output=True,
            timeout=10,
        )


def _failed_lines(stderr: str) -> str:
    failed = [line.split(": ", 2)[-1] for line in stderr.splitlines() if "FAILED" in line]
    return "; ".join(failed[:2]) or stderr.strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("experiment", choices=("aa", "slow"))
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--pct", type=float, default=5.0, help="--fail-if-slower PCT (5)")
    parser.add_argument("--slowdown", type=float, default=10.0, help="slow: percent slower (10)")
    parser.add_argument("--rate-mbit", type=float, default=400.0, help="slow: reference rate (400)")
    parser.add_argument(
        "--bandwidth-sizes", default="1M:", help="slow: sizes the gate checks (1M:)"
    )
    parser.add_argument(
        "--compare-args", default="", help='extra compare options, one string: "--noise-floor F"'
    )
    parser.add_argument("--json", type=Path, help="write the figures here as well")
    parser.add_argument("--keep", type=Path, help="keep the runs in this new directory")
    parser.add_argument(
        "--sweep-args", default="", help='extra sweep options, one string: "--repeats 3"'
    )
    args = parser.parse_args()
    args.sweep = shlex.split(args.sweep_args)
    args.compare = shlex.split(args.compare_args)
    experiment = aa if args.experiment == "aa" else slow
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=False)
        results = experiment(args, args.keep)
    else:
        with tempfile.TemporaryDirectory(prefix="collbench-rates-") as folder:
            results = experiment(args, Path(folder))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
