"""Whether the store's column-wise paths still earn their place beside the row-by-row ones
(issue 37): each command timed as a whole process (benchmarks/scale.py's measure) as it is,
and with its column-wise path switched off, so that it takes the row-by-row one:

- import: a log's whole lines parsed a column at a time (analysis/imports/log_columns.py),
  rows.jsonl and rows.parquet written from the columns (store/row_block.py); switched off:
  every line through nccl_logs.parse_row ("lines by parse_row"), and then also every row a
  ResultRow written by ResultWriter's encoding and write_parquet ("row by row"; the same
  bytes: tests/unit/test_import_columnar.py);
- compare: samples read column-wise from a faithful rows.parquet (store/columns.py);
  switched off: every row of rows.jsonl decoded (store/rundir.iter_rows).

    python benchmarks/row_paths.py            # import 100k rows, compare 10k rows x 2,000
    python benchmarks/row_paths.py --quick    # import 10k rows, compare 10k rows x 200

Not a test: it measures. Prints, per command, the median seconds and the peak MiB of each path.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale  # noqa: E402  (benchmarks/scale.py: synthetic runs and logs, measure)

# Run in the timed process before the command: the row-by-row paths.
ROWS_PARSE = """
import collbench.analysis.imports.nccl_logs as logs
logs.whole_lines_columns = lambda *args: None
"""
ROWS_IMPORT = (
    ROWS_PARSE
    + """
import collbench.run.import_logs as imp
from collbench.analysis.imports.nccl_rows import block_rows
from collbench.store.rundir import JSON_ENCODER, write_parquet
imp.block_lines = lambda block: (JSON_ENCODER.encode(r.to_dict()) + "\\n" for r in block_rows(block))
imp.write_blocks_parquet = lambda run_dir, blocks: write_parquet(
    run_dir, [row for block in blocks for row in block_rows(block)])
"""
)
ROWS_COMPARE = "import collbench.store.columns as c; c.read_copy = lambda *args: None\n"
MAIN = "import sys; from collbench.cli.app import main; sys.exit(main(sys.argv[1:]))\n"


def timed(prepare: Callable[[], list[str]], patches: list[str], repeats: int) -> list[str]:
    """Per patch, the median seconds and peak MiB of the collbench command `prepare` makes
    (["python", "-m", "collbench", ...], its inputs made, untimed) run after that patch; the
    patches take turns, so that a machine's load falls on each alike."""
    runs: list[list[tuple[float, float]]] = [[] for _ in patches]
    for _ in range(repeats):
        for patch, results in zip(patches, runs, strict=True):
            argv = [sys.executable, "-c", patch + MAIN, *prepare()[3:]]
            results.append(scale.measure(argv))
    return [
        f"{statistics.median(r[0] for r in results):.2f} s, {max(r[1] for r in results):.0f} MiB"
        for results in runs
    ]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller runs")
    parser.add_argument("--repeats", type=int, default=3, help="median of this many (default 3)")
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="collbench-row-paths-"))
    rows, samples = (9_996, 200) if args.quick else (99_996, 2_000)
    try:
        cases = [
            (
                f"import nccl-tests, {rows:,} rows",
                lambda: scale.prepare_import(scratch, rows),
                [ROWS_PARSE, ROWS_IMPORT],
            ),
            (
                f"compare, {scale.SAMPLED_ROWS:,} rows x {samples:,} samples",
                lambda: scale.prepare_compare(scratch, samples),
                [ROWS_COMPARE],
            ),
        ]
        print(f"{'command':<38} {'column-wise':>18} {'lines by parse_row':>18} {'row by row':>18}")
        for name, prepare, patches in cases:
            cells = timed(prepare, ["", *patches], args.repeats)
            cells[1:-1] = cells[1:-1] or ["-"]  # compare parses no log
            print(f"{name:<38} {cells[0]:>18} {cells[1]:>18} {cells[2]:>18}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
