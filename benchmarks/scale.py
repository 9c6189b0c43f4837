"""How collbench's commands scale with rows, samples, runs, settings and nodes (issue 31).

Builds synthetic runs in the store's own format (rows made by tests/rows.py, written by
store/rundir.py; nccl-tests logs by tests/nccl_log.py; tune directories by `collbench tune
--from` over such runs), then times each command as a whole process (wall time, and peak
memory from os.wait4's rusage of that process) and prints one table: per work item, each
size's median time over --repeats and its peak memory, and the growth exponent between the
two largest sizes (log time ratio / log size ratio: 1 is linear).

    python benchmarks/scale.py                    # the whole table (tens of minutes)
    python benchmarks/scale.py --only fit,report  # some rows
    python benchmarks/scale.py --quick            # smallest sizes, one repeat: a smoke test
    python benchmarks/scale.py --keep /tmp/scale  # keep the synthetic runs

Not a test: it measures, and its exit status is 0 whatever the figures (non-zero only if a
command fails). The doctor row runs benchmarks/doctor_scale.py for one fleet size (whole
process: plan, synthetic rows, diagnose, text, doctor.json, report; `--pairs auto`).
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")
DTYPES = ("float32", "bfloat16", "float16")  # 3 x 3 = 9 groups per run
NODE_RANKS = 8
SAMPLED_ROWS = 10_000  # rows of the runs with samples (compare, status, export); --quick: 999


@dataclass(frozen=True)
class Work:
    """One row of the table: a command timed at several sizes."""

    name: str
    unit: str  # what a size counts (rows, settings, nodes)
    sizes: tuple[int, ...]
    quick: tuple[int, ...]
    # (scratch dir, size) -> argv to time (setup, untimed, happens inside)
    prepare: Callable[[Path, int], list[str]]


def collbench(*args: str) -> list[str]:
    return [sys.executable, "-m", "collbench", *args]


def time_curve(size_bytes: float, shift: float = 1.0) -> float:
    """A three-protocol curve (LL, LL128, Simple): microseconds."""
    return min(5 + size_bytes / 2e3, 12 + size_bytes / 6e3, 30 + size_bytes / 2e4) * shift


def sweep_rows(sizes_per_group: int, samples: int, seed: int, run_id: str, shift: float = 1.0):
    """9 groups of `sizes_per_group` sizes (8 B .. 8 GiB, geometric), 2% noise."""
    import numpy as np

    from tests.rows import make_row

    rng = np.random.default_rng(seed)
    sizes = np.unique(np.round(np.geomspace(8, 8 << 30, sizes_per_group)).astype(int))
    for collective in COLLECTIVES:
        for dtype in DTYPES:
            for size in sizes:
                time_us = time_curve(float(size), shift) * math.exp(rng.normal(0, 0.02))
                spread = np.exp(rng.normal(0, 0.02, samples)) * time_us
                yield make_row(
                    run_id=run_id,
                    collective=collective,
                    dtype=dtype,
                    size_bytes=int(size),
                    time_us=float(time_us),
                    time_us_samples=[float(value) for value in spread],
                )


def write_sweep(path: Path, rows: int, samples: int = 0, seed: int = 1, shift: float = 1.0) -> Path:
    """A run directory of about `rows` rows (9 groups), built once per path, finished as a
    sweep finishes one (rows.parquet, the copy that compare reads its samples from)."""
    from collbench.core.spec import SweepSpec
    from collbench.store.job import Job
    from collbench.store.meta import RunMeta
    from collbench.store.rundir import append_rows, write_meta

    if path.exists():
        return path
    path.mkdir(parents=True)
    per_group = max(2, round(rows / len(COLLECTIVES) / len(DTYPES)))
    append_rows(path, sweep_rows(per_group, samples, seed, path.name, shift))
    # In a process of its own: the peak memory of a timed command, read from its rusage,
    # includes this process's at the moment it started the command.
    parquet = (
        "import sys; from collbench.store.rundir import write_parquet; write_parquet(sys.argv[1])"
    )
    subprocess.run([sys.executable, "-c", parquet, str(path)], check=True, cwd=ROOT)
    write_meta(path, RunMeta.from_dict({"run_id": path.name, "state": "done"}))
    Job(SweepSpec().with_backend("gloo"), path, path.name, "local", 2).save()  # for status
    return path


def prepare_fit(scratch: Path, rows: int) -> list[str]:
    return collbench("fit", str(write_sweep(scratch / f"sweep-{rows}", rows)))


def prepare_report(scratch: Path, rows: int) -> list[str]:
    run = write_sweep(scratch / f"sweep-{rows}", rows)
    out = scratch / f"report-{rows}.html"
    return collbench("report", str(run), "--out", str(out), "--force")


def prepare_compare(scratch: Path, samples: int) -> list[str]:
    first = write_sweep(scratch / f"samples-{samples}-a", SAMPLED_ROWS, samples, seed=1)
    second = write_sweep(
        scratch / f"samples-{samples}-b", SAMPLED_ROWS, samples, seed=2, shift=1.02
    )
    return collbench("compare", str(first), str(second))


def prepare_status(scratch: Path, rows: int) -> list[str]:
    samples = 2_000 if rows <= SAMPLED_ROWS else 20
    name = f"samples-{samples}-a" if rows <= SAMPLED_ROWS else f"status-{rows}"
    return collbench("status", str(write_sweep(scratch / name, rows, samples)))


def prepare_export(scratch: Path, samples: int) -> list[str]:
    run = write_sweep(scratch / f"samples-{samples}-a", SAMPLED_ROWS, samples)
    return collbench("export", str(run), "--csv", str(scratch / "export.csv"), "--force")


def prepare_import(scratch: Path, rows: int) -> list[str]:
    from tests.nccl_log import write_nccl_tests_log

    sizes = [8 + 1024 * index for index in range(rows // 2)]  # -i 1K; out- and in-place
    log = write_nccl_tests_log(
        scratch / f"nccl-{rows}.log", "all_reduce", 16, 2, sizes, lambda s: time_curve(s)
    )
    out = scratch / f"imported-{rows}"
    shutil.rmtree(out, ignore_errors=True)
    return collbench("import", "nccl-tests", str(log), "--out", str(out))


def tune_settings(scratch: Path, settings: int, samples: int = 200) -> list[Path]:
    """`settings` runs of 3 collectives x 24 sizes, each under its own NCCL_MIN_NCHANNELS."""
    from collbench.store.meta import RunMeta
    from collbench.store.rundir import append_rows, write_meta
    from tests.rows import make_row

    runs = []
    for index in range(settings):
        path = scratch / f"setting-{settings}-{index}"
        runs.append(path)
        if path.exists():
            continue
        path.mkdir(parents=True)
        knobs = {"env": {"NCCL_MIN_NCHANNELS": str(index + 1)}}
        shift = 1 + 0.01 * ((index * 7) % 11 - 5)
        rows = [
            make_row(
                run_id=path.name,
                collective=collective,
                size_bytes=size,
                time_us=time_curve(size, shift),
                knobs=knobs,
                time_us_samples=[
                    time_curve(size, shift) * (1 + 0.001 * (k % 7)) for k in range(samples)
                ],
            )
            for collective in COLLECTIVES
            for size in (1 << power for power in range(3, 27))
        ]
        append_rows(path, rows)
        write_meta(path, RunMeta.from_dict({"run_id": path.name, "state": "done"}))
    return runs


def tune_dir(scratch: Path, settings: int) -> Path:
    out = scratch / f"tune-{settings}"
    if not out.exists():
        runs = [str(run) for run in tune_settings(scratch, settings)]
        done = subprocess.run(
            collbench("tune", "from", *runs, "--out", str(out)), capture_output=True, text=True
        )
        if done.returncode != 0:
            raise RuntimeError(f"tune from failed: {done.stderr.strip()[-400:]}")
    return out


def prepare_report_tune(scratch: Path, settings: int) -> list[str]:
    out = scratch / f"report-tune-{settings}.html"
    return collbench("report", str(tune_dir(scratch, settings)), "--out", str(out), "--force")


def prepare_tune_from(scratch: Path, settings: int) -> list[str]:
    runs = [str(run) for run in tune_settings(scratch, settings)]
    out = scratch / f"tune-from-{settings}"
    shutil.rmtree(out, ignore_errors=True)
    return collbench("tune", "from", *runs, "--out", str(out))


def prepare_doctor(scratch: Path, nodes: int) -> list[str]:
    """benchmarks/doctor_scale.py for one fleet: the plan, synthetic rows, diagnose, the text,
    doctor.json and the report section, with the default --pairs auto (every pair up to 256
    nodes, sampled rounds above), one slow node that must be found."""
    script = Path(__file__).resolve().parent / "doctor_scale.py"
    return [sys.executable, str(script), "--one", str(nodes), "--pairs", "auto", "--repeats", "3"]


def prepare_mfu(scratch: Path, nodes: int) -> list[str]:
    return collbench(
        "mfu", "-T", "dgx-h100", "-T", "mi300x", "-m", "llama3-405b", "--nodes", str(nodes),
        "--tp", "8", "--pp", "16", "--zero", "1", "--recompute", "full",
        "--global-batch", "16384", "--explain",
    )  # fmt: skip


def prepare_sweep(scratch: Path, ranks: int) -> list[str]:
    out = scratch / "sweep-run"
    shutil.rmtree(out, ignore_errors=True)
    return collbench(
        "sweep", "-c", "all_reduce", "-b", "1M", "-e", "1M", "-g", str(ranks),
        "--backend", "gloo", "--out", str(out), "-q",
    )  # fmt: skip


PLAIN_SCRIPT = """
import os, sys, torch, torch.distributed as dist, torch.multiprocessing as mp
def rank(index, size, port):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=index, world_size=size)
    data = torch.ones(262144)
    for _ in range(25):
        dist.all_reduce(data)
    dist.destroy_process_group()
import socket
with socket.socket() as s:
    s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
mp.start_processes(rank, args=(int(sys.argv[1]), port), nprocs=int(sys.argv[1]), start_method="fork")
"""


def prepare_plain(scratch: Path, ranks: int) -> list[str]:
    return [sys.executable, "-c", PLAIN_SCRIPT, str(ranks)]


WORKS = (
    Work("fit RUN", "rows", (99, 999, 2_997, 9_999, 99_999), (99, 999), prepare_fit),
    Work("report RUN", "rows", (99, 999, 2_997, 9_999), (99, 999), prepare_report),
    Work("compare RUN RUN2 (10k rows)", "samples", (200, 2_000), (20, 200), prepare_compare),
    Work("status RUN", "rows", (10_000, 100_000), (999, 9_999), prepare_status),
    Work("export RUN --csv (10k rows)", "samples", (200, 2_000), (20, 200), prepare_export),
    Work("import nccl-tests", "rows", (98, 994, 9_996, 99_996), (98, 994), prepare_import),
    Work("report TUNEDIR", "settings", (2, 8, 32), (2, 4), prepare_report_tune),
    Work("tune from (200 samples)", "settings", (2, 8, 32), (2, 4), prepare_tune_from),
    Work(
        "doctor, --pairs auto (8 ranks/node; whole process)",
        "nodes",
        (64, 256, 1_024, 4_096),
        (16, 32),
        prepare_doctor,
    ),
    Work("mfu 405B, 2 fabrics, --explain", "nodes", (64, 4_096), (64,), prepare_mfu),
    Work("sweep 1M, gloo (whole process)", "ranks", (2,), (2,), prepare_sweep),
    Work("plain torch script, fork (same work)", "ranks", (2,), (2,), prepare_plain),
)


def measure(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, peak resident MiB) of one whole process (and the children it waited
    for), from os.wait4's rusage of that process."""
    start = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    stderr = process.stderr.read() if process.stderr else b""
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    process.returncode = code
    if code != 0:
        raise RuntimeError(f"{' '.join(argv[2:6])}... exit {code}: {stderr.decode()[-400:]}")
    return wall, usage.ru_maxrss / 1024  # ru_maxrss is in KiB on Linux


def run_work(
    work: Work, scratch: Path, quick: bool, repeats: int
) -> list[tuple[int, float, float]]:
    """(size, median seconds, peak MiB) per size."""
    results = []
    for size in work.quick if quick else work.sizes:
        times, peaks = [], []
        for _ in range(repeats):
            argv = work.prepare(scratch, size)  # setup is not timed
            seconds, peak = measure(argv)
            times.append(seconds)
            peaks.append(peak)
        results.append((size, statistics.median(times), max(peaks)))
        print(
            f"  {work.name} @ {size:,} {work.unit}: {results[-1][1]:.2f} s, {results[-1][2]:.0f} MiB",
            file=sys.stderr,
            flush=True,
        )
    return results


def growth(results: list[tuple[int, float, float]]) -> str:
    """log(t2 / t1) / log(n2 / n1) between the two largest sizes."""
    if len(results) < 2:
        return "-"
    (n1, t1, _), (n2, t2, _) = results[-2], results[-1]
    return f"{math.log(t2 / t1) / math.log(n2 / n1):.2f}"


def table(rows: list[tuple[Work, list[tuple[int, float, float]]]]) -> str:
    lines = [
        "| work | size | time | peak memory | growth (two largest) |",
        "|---|---|---|---|---|",
    ]
    for work, results in rows:
        sizes = " / ".join(f"{size:,}" for size, _, _ in results)
        times = " / ".join(f"{seconds:.2f} s" for _, seconds, _ in results)
        peaks = " / ".join(f"{peak:.0f}" for _, _, peak in results)
        lines.append(
            f"| `{work.name}` | {sizes} {work.unit} | {times} | {peaks} MiB | {growth(results)} |"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smallest sizes, one repeat")
    parser.add_argument("--repeats", type=int, default=3, help="median of this many (default 3)")
    parser.add_argument("--only", default="", help="comma list of words a row's name starts with")
    parser.add_argument("--keep", type=Path, help="keep the synthetic runs in this directory")
    args = parser.parse_args(argv)
    wanted = [word.strip() for word in args.only.split(",") if word.strip()]
    works = [work for work in WORKS if not wanted or any(work.name.startswith(w) for w in wanted)]
    scratch = args.keep or Path(tempfile.mkdtemp(prefix="collbench-scale-"))
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        repeats = 1 if args.quick else args.repeats
        global SAMPLED_ROWS
        SAMPLED_ROWS = 999 if args.quick else SAMPLED_ROWS
        rows = [(work, run_work(work, scratch, args.quick, repeats)) for work in works]
    finally:
        if args.keep is None:
            shutil.rmtree(scratch, ignore_errors=True)
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
