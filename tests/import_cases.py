"""Logs that exercise every path of `collbench import` at once, for the test that holds its
outputs (rows.jsonl byte for byte, meta.json, rows.parquet as a table) to what the
row-wise importer wrote before imports were made columnar (tests/unit/golden_import, made by
`python -m tests.import_cases --write` with that importer: rewrite them only when an
import's output is meant to change).

Each case is a list of logs (the fixtures, and synthetic ones built from tests/nccl_log.py:
several tables, blank and N/A placements, #wrong with asterisks, malformed and cut lines, NaN
rows, mixed types, numbers printed as floats, -J JSON, a headerless table), a --collective
and --knob labels. A case whose import is refused holds the refusal's one line instead.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.nccl_log import nccl_tests_log

ROOT = Path(__file__).resolve().parent
FIXTURES = ROOT / "fixtures" / "nccl-tests"
GOLDEN = ROOT / "unit" / "golden_import"
RUN_ID = "20260101T000000Z-abcdef"
IMPORTED_UTC = "2026-01-01T00:00:00.000000Z"


def _curve(size: int) -> float:
    return 5 + size / 2e3


def _two_tables() -> str:
    """An all_reduce table then an all_gather one in one file, with odd lines."""
    first = nccl_tests_log("all_reduce", 4, 1, [8 * 4**i for i in range(8)], _curve)
    lines = first.splitlines()
    rows = [i for i, line in enumerate(lines) if line[:1] == " "]
    # blank out-of-place columns (trailing in-place group only), and collbench's N/A
    fields = lines[rows[1]].split()
    lines[rows[1]] = "  ".join(fields[:5] + fields[9:])
    lines[rows[2]] = lines[rows[2]].replace(lines[rows[2]].split()[5], "N/A", 1)
    fields = lines[rows[2]].split()
    lines[rows[2]] = " ".join(fields[:5] + ["N/A", "N/A", "N/A", "N/A"] + fields[9:])
    lines[rows[3]] = lines[rows[3]].rstrip()[:-1] + "3*"  # a failed check
    lines[rows[4]] = lines[rows[4]].replace(" float ", "  half ")
    figures = lines[rows[5]].split()[5:]  # an integer printed as a float, and as 1e0
    figures[3] = "1e0"
    lines[rows[5]] = "  1024   256  bfloat16   max   2.0  " + "  ".join(figures)
    lines.insert(rows[6], "       4096   1024  float  sum  -1  oops  1.0  1.0  0  2.0 1.0 1.0 0")
    lines.insert(rows[6], "NCCL INFO comm 0x1234 rank 0 nranks 8 - Init COMPLETE")
    second = nccl_tests_log("all_gather", 4, 1, [1024 * 2**i for i in range(6)], _curve, "int8")
    second_lines = second.splitlines()
    row = next(i for i, line in enumerate(second_lines) if line[:1] == " ")
    second_lines[row + 1] = second_lines[row + 1].replace(
        second_lines[row + 1].split()[5], "nan", 1
    )
    second_lines[row + 2] = second_lines[row + 2].replace(" int8 ", " weird ")
    return "\n".join(lines + second_lines[1:]) + "\n"


def _cut_headerless() -> str:
    """A table without its header lines, the last line cut mid-row (no footer)."""
    text = nccl_tests_log("reduce_scatter", 4, 1, [64 * 8**i for i in range(6)], _curve)
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    return "\n".join(lines)[:-12]


def _json_log() -> str:
    """nccl-tests -J output built from a table, with a null placement and a cut tail."""
    results = []
    for index, size in enumerate(256 * 4**i for i in range(6)):
        time_us = _curve(size) + 0.123456789 * index
        body = {"time": time_us, "alg_bw": size / time_us / 1e3, "bus_bw": size / time_us / 1e3}
        results.append(
            {
                "size": size,
                "count": size // 2,
                "type": "half",
                "redop": "sum",
                "root": "    0",
                "out_of_place": None if index == 2 else {**body, "nwrong": 0.0},
                "in_place": {**body, "time": time_us * 1.01, "nwrong": None},
                "experiment_name": "Reduce",
            }
        )
    data = {
        "version": 2,
        "args": ["/opt/nccl-tests/build/reduce_perf", "-g", "1", "-J", "r.json"],
        "env": ["NCCL_ALGO=Tree", "PATH=/bin"],
        "nccl_version": 22703,
        "config": {"nthreads": 1, "ngpus": 2, "warmup_iters": 5, "iterations": 20},
        "results": results,
    }
    text = json.dumps(data, indent=1)
    return text[: text.rfind('"experiment_name"') - 20]  # cut short inside the last result


def _overflow() -> str:
    text = nccl_tests_log("all_reduce", 2, 1, [8, 16], _curve)
    return text.replace("          16 ", " 99999999999999999999 ", 1)


def _all_nan() -> str:
    text = nccl_tests_log("all_reduce", 2, 1, [8], _curve)
    line = next(line for line in text.splitlines() if line[:1] == " ")
    fields = line.split()
    fields[5:9] = ["nan", "nan", "nan", "0"]
    fields[9:13] = ["inf", "inf", "inf", "0"]
    return text.replace(line, " ".join(fields))


SYNTHETIC = {
    "two_tables_all_reduce.log": _two_tables,
    "cut_headerless.log": _cut_headerless,
    "reduce.json": _json_log,
    "overflow_all_reduce.log": _overflow,
    "nan_all_reduce.log": _all_nan,
}


def cases(folder: Path) -> dict[str, dict[str, Any]]:
    """Case name -> {"logs": [paths], "collective": str | None, "knobs": {NAME: VALUE}};
    the synthetic logs are written into `folder`."""
    for name, build in SYNTHETIC.items():
        (folder / name).write_text(build(), encoding="utf-8")
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(FIXTURES.iterdir()):
        found[path.stem] = {"logs": [path], "collective": None, "knobs": {}}
    for name in SYNTHETIC:
        found[Path(name).stem] = {"logs": [folder / name], "collective": None, "knobs": {}}
    found["cut_headerless_collective"] = {
        "logs": [folder / "cut_headerless.log"],
        "collective": "reduce_scatter",
        "knobs": {},
    }
    found["two_logs_knobs"] = {
        "logs": [FIXTURES / "legacy_all_reduce_info.log", folder / "two_tables_all_reduce.log"],
        "collective": None,
        "knobs": {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple,LL"},
    }
    found["rccl_knob"] = {
        "logs": [FIXTURES / "rccl_hipevt_all_reduce.log"],
        "collective": None,
        "knobs": {"NCCL_MIN_NCHANNELS": "4"},
    }
    return found


def parquet_summary(path: Path) -> dict[str, Any]:
    """rows.parquet as JSON-able text: schema, pandas metadata (less versions), rows."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    metadata = {key.decode(): value.decode() for key, value in table.schema.metadata.items()}
    pandas = json.loads(metadata.pop("pandas"))
    pandas.pop("creator", None)
    pandas.pop("pandas_version", None)
    stamps = pandas.get("attributes") or {}  # rows.jsonl's size:mtime; the size is the same
    for key, stamp in stamps.items():
        stamps[key] = str(stamp).split(":")[0]
    attrs = json.loads(metadata.pop("PANDAS_ATTRS", "{}"))
    return {
        "schema": str(table.schema.remove_metadata()),
        "pandas": pandas,
        "attrs": sorted(attrs),
        "other_metadata": sorted(metadata),
        "rows": table.to_pylist(),
        "row_groups": pq.ParquetFile(path).metadata.num_row_groups,
    }


def run_case(case: dict[str, Any], out: Path) -> dict[str, Any]:
    """Import a case into `out` (pinned run id and time): what it wrote, or its refusal."""
    from collbench.core.errors import SpecError
    from collbench.run import import_logs as imports

    try:
        result = imports.import_logs(
            case["logs"],
            out=out,
            collective=case["collective"],
            knobs=case["knobs"],
            run_id=RUN_ID,
            imported_utc=IMPORTED_UTC,
        )
    except SpecError as error:
        return {"error": str(error)}
    return {"run_dir": result.run_dir, "result": result}


def portable(text: str, folder: Path) -> str:
    """Text with the scratch folder and the fixtures' folder as FOLDER and FIXTURES."""
    for path, name in ((folder.resolve(), "FOLDER"), (folder, "FOLDER"), (FIXTURES, "FIXTURES")):
        text = text.replace(json.dumps(str(path))[1:-1], name)
    return text


def main() -> None:
    import shutil
    import tempfile

    if sys.argv[1:] != ["--write"]:
        raise SystemExit("usage: python -m tests.import_cases --write")
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        shutil.rmtree(GOLDEN, ignore_errors=True)
        GOLDEN.mkdir(parents=True)
        for name, case in cases(folder).items():
            done = run_case(case, folder / f"run-{name}")
            target = GOLDEN / name
            target.mkdir()
            if "error" in done:
                text = portable(done["error"], folder) + "\n"
                (target / "error.txt").write_text(text, encoding="utf-8")
                continue
            run_dir = done["run_dir"]
            shutil.copy(run_dir / "rows.jsonl", target / "rows.jsonl")
            meta = (run_dir / "meta.json").read_text(encoding="utf-8")
            (target / "meta.json").write_text(portable(meta, folder), encoding="utf-8")
            summary = parquet_summary(run_dir / "rows.parquet")
            text = json.dumps(summary, indent=1, sort_keys=True, default=str)
            (target / "parquet.json").write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
