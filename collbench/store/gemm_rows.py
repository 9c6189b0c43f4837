"""`collbench gemm` rows (kind "gemm"): one matmul shape's measured throughput, streamed
to gemm.jsonl in the run directory as each shape finishes.

The method, in full: docs/run-directory.md#collbench-store-gemm-rows-py.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from collbench.core.errors import SpecError
from collbench.core.limits import ROWS_MAX_BYTES, ROWS_MAX_LINE_BYTES
from collbench.store.reading import iter_lines, json_lines
from collbench.store.row_values import float_range, short
from collbench.store.rundir import append_lines

GEMM_FILE = "gemm.jsonl"
GEMM = "gemm"
# 2: time_us is the median of the timed batch's chunks (time_stat says so; time_us_mean is
# the batch's mean); rows of schema 1 have no time_stat and their time_us is that mean.
SCHEMA_VERSION = 2


@dataclass(frozen=True, kw_only=True)
class GemmRow:
    """One shape's matmuls: `batch` x (M x K) · (K x N), timed `iters` times."""

    schema_version: int = SCHEMA_VERSION
    run_id: str | None
    timestamp_utc: str | None
    kind: str = GEMM
    op: str  # the workload's operator (qkv, mlp_up, ...) or "sweep"
    pass_name: str  # fwd, dgrad, wgrad; "-" for a sweep shape
    m: int
    n: int
    k: int
    batch: int = 1
    shape: str  # "MxNxK", or "BxMxNxK" when batch > 1
    dtype: str
    device: str  # "cuda" or "cpu"
    accelerator: str  # torch.cuda.get_device_name, or the CPU's model name
    time_us: float  # one matmul's time: `time_stat` (None: schema 1, the batch's mean)
    tflops: float  # 2·batch·M·N·K / time_us
    timing: str  # "cuda_events" or "perf_counter"
    warmup: int
    iters: int
    time_stat: str | None = None  # what time_us is, in words (bench.gemm.time_stat)
    time_us_mean: float | None = None  # the whole timed batch's mean
    time_us_chunks: list[float] = field(default_factory=list)  # each chunk's, per matmul
    time_us_p50: float | None = None  # of the per-iteration samples
    time_us_min: float | None = None
    time_us_max: float | None = None
    time_us_samples: list[float] = field(default_factory=list)
    warmup_s: float | None = None  # the warm-up's wall time (bench.gemm)
    operand_sets: int | None = None  # operand sets rotated through (1: none)
    # clocks/power "before" and "after" the timed batch, with their source (NVML, amdsmi)
    # or why there are none (bench.device_clocks)
    clocks: dict[str, Any] | None = None

    @property
    def flops(self) -> float:
        return 2.0 * self.batch * self.m * self.n * self.k

    def to_dict(self) -> dict[str, Any]:
        return {column.name: getattr(self, column.name) for column in fields(self)}


def gemm_row_from_dict(data: Any, where: str) -> GemmRow:
    """The typed row of one gemm.jsonl line; SpecError naming `where` when it is not one."""
    if not isinstance(data, Mapping) or data.get("kind") != GEMM:
        raise SpecError("row", short(data), f"in {where} is not a gemm row")
    for name in ("m", "n", "k", "batch", "warmup", "iters"):
        value = data.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise SpecError(name, short(value), f"in {where} is not a count")
    for name in ("time_us", "tflops"):
        value = data.get(name)
        if type(value) not in (int, float) or float_range(value, True, False):  # no NaN, bool
            raise SpecError(name, short(value), f"in {where} is not a positive finite number")
    for name in ("shape", "dtype", "device", "accelerator", "op", "pass_name", "timing"):
        if not isinstance(data.get(name), str):
            raise SpecError(name, short(data.get(name)), f"in {where} is not a string")
    known = {column.name for column in fields(GemmRow)}
    return GemmRow(**{key: value for key, value in data.items() if key in known})


def append_gemm_row(run_dir: Path, row: GemmRow) -> None:
    """Append one row and make it durable before the next shape starts (a killed run
    keeps every finished shape)."""
    append_lines(run_dir, [json.dumps(row.to_dict(), separators=(",", ":")) + "\n"], GEMM_FILE)


def load_gemm_rows(run_dir: Path) -> list[GemmRow]:
    """The rows of a gemm run (none: an empty list). A last line cut short by a kill is
    skipped with a warning; any other bad line is a SpecError naming file and line."""
    return [
        gemm_row_from_dict(data, where) for data, where in json_lines(Path(run_dir) / GEMM_FILE)
    ]


def count_gemm_rows(run_dir: Path) -> int:
    """How many lines of gemm.jsonl are gemm rows (as load_gemm_rows reads them), read
    leniently for a status line: a damaged line is not counted, and never refused."""
    path = Path(run_dir) / GEMM_FILE
    try:  # within core.limits: a FIFO or /dev/zero in its place is refused, not read
        lines = iter_lines(path, GEMM_FILE, ROWS_MAX_LINE_BYTES, ROWS_MAX_BYTES)
        return sum(_is_gemm_row(line) for _, line in lines)
    except SpecError:
        return 0


def _is_gemm_row(line: bytes) -> bool:
    try:
        gemm_row_from_dict(json.loads(line), GEMM_FILE)
    except (ValueError, TypeError, RecursionError, SpecError):
        return False
    return True
