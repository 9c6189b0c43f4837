"""Rows in the formats other tools read: CSV, and nccl-tests' JSON output (`-J FILE`).

The method, in full: docs/architecture.md#collbench-render-export-py.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

from collbench.analysis.imports.nccl_logs import JSON_CONFIG_KEYS
from collbench.core.dtypes import DTYPES
from collbench.core.errors import CollbenchError
from collbench.core.spec import DEFAULT_FACTOR
from collbench.core.tune_catalog import release
from collbench.store.load import load_run
from collbench.store.meta import RunMeta
from collbench.store.outputs import OutputError, check_output_file, write_outputs
from collbench.store.rows import ALL_COLUMNS, OVERLAP, ROW_COLUMNS, SWEEP, ResultRow, row_is
from collbench.store.rundir import write_atomically
from collbench.store.side_files import SIDE_FILES, read_side_files

NCCL_TESTS_JSON_VERSION = 3  # nccl-tests' JSON_FILE_VERSION, the layout written here
# Columns left out of the CSV: the per-iteration series (rows.jsonl keeps them).
_NOT_IN_CSV = ("time_us_samples", "probe_samples_us")
_TIME_FORMAT = "%Y-%m-%d %H:%M:%S"  # nccl-tests' TIME_STRING_FORMAT
# What makes a spreadsheet read a cell as a formula (csv_text).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_columns(with_probes: bool) -> tuple[str, ...]:
    """The CSV header: every row column (with the probe columns for a run with probes)."""
    columns = ALL_COLUMNS if with_probes else ROW_COLUMNS
    return tuple(column for column in columns if column not in _NOT_IN_CSV)


def csv_record(row: ResultRow, columns: Sequence[str]) -> list[str]:
    """One CSV line's cells: None is empty, knobs are compact JSON, text through csv_text."""
    return [_csv_cell(getattr(row, column, None)) for column in columns]


def _csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    return csv_text(value) if isinstance(value, str) else str(value)


def csv_text(text: str) -> str:
    """A text cell a spreadsheet shows as text: one starting with `= + - @`, tab or CR (a
    formula to Excel, LibreOffice and Sheets: a topology named `=HYPERLINK(...)`) gets a
    leading `'` (OWASP's CSV-injection rule). Numbers are written as numbers (-1.5 stays)."""
    return "'" + text if text.startswith(_FORMULA_START) else text


def json_paths(path: Path, collectives: Iterable[str]) -> dict[str, Path]:
    """Where -J PATH puts each collective: PATH itself for one, PATH's stem.NAME.json for
    several (nccl-tests writes one file per collective binary)."""
    names = list(dict.fromkeys(collectives))
    if len(names) == 1:
        return {names[0]: Path(path)}
    stem, suffix = Path(path).stem, Path(path).suffix or ".json"
    return {name: Path(path).with_name(f"{stem}.{name}{suffix}") for name in names}


def nccl_head(meta: RunMeta, per_iter: bool) -> dict[str, Any]:
    """The top of an nccl-tests JSON file, up to and including config; per_iter: nccl-tests'
    -I 1. A time or setting the run did not record is null."""
    config = {
        **(_imported_config(meta) if meta.source else _sweep_config(meta)),
        "blocking_collectives": _bool(blocking_collectives(meta)),
        "per_iter_timing": _bool(per_iter),
        "per_iter_skip": 0,
        "parallel_init": "false",
        "devices": [_device(identity) for identity in meta.ranks],
    }
    return {
        "version": NCCL_TESTS_JSON_VERSION,
        "start_time": nccl_time(meta.started_utc),
        "args": _args(meta.command_line),
        "env": [f"{name}={value}" for name, value in sorted(_env(meta).items())],
        "nccl_version": _nccl_version(meta.versions.get("nccl") or meta.versions.get("rccl")),
        "config": config,
    }


def _sweep_config(meta: RunMeta) -> dict[str, Any]:
    """nccl-tests' config keys from a sweep's spec (one thread, one device per rank)."""
    spec = meta.spec or {}
    factor = spec.get("factor") or DEFAULT_FACTOR  # validated: None or above 1
    return {
        "nthreads": 1,
        "ngpus": 1 if (meta.backend or "") in ("nccl", "rccl") else 0,
        "minimum_bytes": spec.get("min_bytes"),
        "maximum_bytes": spec.get("max_bytes"),
        **(
            {"step_bytes": spec["step_bytes"]}
            if spec.get("step_bytes")
            else {"step_factor": int(factor) if float(factor).is_integer() else factor}
        ),
        "warmup_iters": spec.get("warmup"),
        "iterations": spec.get("iters"),
        "aggregated_iterations": 1,
        "validation": 1 if spec.get("check", True) else 0,
        "graph": 0,
    }


def _imported_config(meta: RunMeta) -> dict[str, Any]:
    header = meta.extra.get("header") or {}
    unused = "step_factor" if header.get("step_bytes") else "step_bytes"  # one step is written
    return {theirs: header.get(ours) for ours, theirs in JSON_CONFIG_KEYS if ours != unused}


def nccl_entry(rows: Sequence[ResultRow]) -> dict[str, Any]:
    """One results entry: the rows of one size (one per placement measured)."""
    first = rows[0]
    by_placement = {row.placement: row for row in rows}
    entry: dict[str, Any] = {
        "size": first.size_bytes,
        "count": first.count,
        "type": DTYPES[first.dtype].nccl_name if first.dtype in DTYPES else first.dtype,
        "redop": first.op or "none",
        "root": f"{first.root if first.root is not None else -1:6d}",
    }
    for placement in ("out_of_place", "in_place"):
        row = by_placement.get(placement)
        if row is None:
            entry[placement] = None
            continue
        entry[placement] = {
            "time": row.time_us,
            "alg_bw": row.algbw_gbps,
            "bus_bw": row.busbw_gbps,
            "nwrong": None if row.n_wrong is None else float(row.n_wrong),
        }
        if (series := per_iter_series(row)) is not None:
            entry[f"{placement}_per_iter"] = iteration_stats(series)
    entry["actual_iterations"] = first.iters
    entry["experiment_name"] = ""
    return entry


def iteration_stats(times_us: Sequence[float]) -> dict[str, Any]:
    """nccl-tests' per-iteration summary (-I 1) of a series, computed its way: p50 is the
    middle sample, p95/p99 the nearest rank, stdev over the population."""
    ordered = sorted(times_us)
    count = len(ordered)
    mean = sum(ordered) / count
    stdev = math.sqrt(sum((value - mean) ** 2 for value in ordered) / count)

    def nearest(percent: int) -> float:
        return ordered[min(count - 1, (count * percent + 99) // 100 - 1)]

    return {
        "skipped_iterations": 0,
        "min_us": ordered[0],
        "max_us": ordered[-1],
        "avg_us": mean,
        "p50_us": ordered[count // 2],
        "p95_us": nearest(95),
        "p99_us": nearest(99),
        "stdev_us": stdev,
        "cv_pct": stdev / mean * 100 if mean > 0 else 0.0,
        "times_us": list(times_us),
    }


class ExportSink:
    """Passes rows on to the sink a person watches, and writes them to --csv and -J files
    as they arrive (flushed per row: a run cut short keeps every finished row there)."""

    def __init__(
        self,
        inner: Any,
        csv_path: Path | None,
        json_path: Path | None,
        on_start: Callable[[RunMeta], None] | None = None,
    ) -> None:
        self.inner, self.on_start = inner, on_start
        self.csv_path, self.json_path = csv_path, json_path
        self.written: list[Path] = []
        self._meta: RunMeta | None = None
        self._csv: TextIO | None = None
        self._columns: tuple[str, ...] = ()
        self._json: dict[str, _JsonStream] = {}
        self._exporting = True
        # One line per side file dropped because it could not be written (_drop).
        self.failures: list[str] = []
        self._dropped: set[str] = set()

    @property
    def mode(self) -> str:
        return self.inner.mode

    @mode.setter
    def mode(self, value: str) -> None:
        # A launcher sets "quiet" on nodes other than node 0: those write no files either.
        self.inner.mode = value
        self._exporting = value != "quiet"

    def side_files(self) -> tuple[Path | None, Path | None]:
        """The --csv and -J files this sink writes, recorded for `collbench finalize`."""
        return (self.csv_path, self.json_path) if self._exporting else (None, None)

    def start(self, meta: RunMeta) -> None:
        self.inner.start(meta)
        if not self._exporting or self._meta is not None:
            return
        self._meta = meta
        if self.on_start is not None:
            self.on_start(meta)
        if self.csv_path is not None:
            self._columns = csv_columns((meta.spec or {}).get("overlap") is not None)
            try:
                self._csv = open(self.csv_path, "w", newline="")  # noqa: SIM115 - closed in finish
                self.written.append(Path(self.csv_path))
                self._write_csv(self._columns)
            except OSError as error:
                self._drop("--csv", self.csv_path, error, self._csv)

    def row(self, row: ResultRow) -> None:
        self.inner.row(row)
        if self._meta is None:
            return
        if self._csv is not None:
            try:
                self._write_csv(csv_record(row, self._columns))
            except OSError as error:
                self._drop("--csv", self.csv_path, error, self._csv)
        if self.json_path is not None and row_is(row, SWEEP):
            if row.collective not in self._dropped:
                try:
                    self._json_stream(row.collective).add(row)
                except OSError as error:
                    self._drop_json(row.collective, error)

    def finish(self, unfinished: str | None = None) -> None:
        """Close the files (each JSON file gets its end_time); `unfinished`: RowSink.finish."""
        self.inner.finish(unfinished)
        if self._csv is not None:
            try:
                self._csv.close()
                self._csv = None
            except OSError as error:
                self._drop("--csv", self.csv_path, error, self._csv)
        self.fail(f"run {unfinished}" if unfinished else None)

    def fail(self, error: str | None) -> None:
        """Say in each JSON file's errors how the run ended (nccl-tests: its last error)."""
        end = datetime.now(timezone.utc).strftime(_TIME_FORMAT)  # UTC, as start_time
        for collective, stream in list(self._json.items()):
            try:
                stream.close([error] if error else (), end)
            except OSError as failure:
                self._drop_json(collective, failure)

    def _write_csv(self, cells: Sequence[str]) -> None:
        csv.writer(self._csv).writerow(cells)
        self._csv.flush()  # a run cut short keeps every finished row

    def _drop_json(self, collective: str, error: OSError) -> None:
        stream = self._json.pop(collective, None)
        self._dropped.add(collective)
        path = stream.path if stream is not None else self._json_path(collective)
        self._drop("-J", path, error, stream.file if stream is not None else None)

    def _drop(self, flag: str, path: Path | None, error: OSError, handle: Any = None) -> None:
        """A side file that cannot be written (a full disk): removed, so no half file is
        left (rows.jsonl keeps the rows), and named in `failures`; the run goes on."""
        if flag == "--csv":
            self._csv = None
        for step in (getattr(handle, "close", None), Path(str(path)).unlink):
            try:
                if step is not None:
                    step()
            except OSError:
                pass
        if Path(str(path)) in self.written:
            self.written.remove(Path(str(path)))
        kept = "removed it; `collbench export RUN` writes it from the run's rows"
        self.failures.append(str(OutputError(flag, str(path), error, kept)))

    def _json_stream(self, collective: str) -> _JsonStream:
        if collective not in self._json:
            path = self._json_path(collective)
            per_iter = (self._meta.spec or {}).get("rank_stat") == "max"
            self._json[collective] = _JsonStream(path, nccl_head(self._meta, per_iter))
            self.written.append(path)
        return self._json[collective]

    def _json_path(self, collective: str) -> Path:
        collectives = (self._meta.spec or {}).get("collectives") or []
        return json_paths(self.json_path, [*collectives, collective])[collective]


class _JsonStream:
    """One nccl-tests JSON file kept whole after every row: finished sizes are appended
    once; the size still in progress and the footer are rewritten behind them."""

    def __init__(self, path: Path, head: dict[str, Any]) -> None:
        self.path = path
        self.file = open(path, "w")  # noqa: SIM115 - closed in close()
        self.file.write(json.dumps(head)[:-1] + ',"results":[')
        self.done_end = self.file.tell()
        self.sizes = _Collective(indent=None)
        self.appended = 0  # of sizes.entries
        self._write_tail(())

    def add(self, row: ResultRow) -> None:
        self.sizes.add(row)
        self._write_tail(())

    def close(self, errors: Sequence[str], end: str) -> None:
        """Finish the file; called again (a run's error known later), it rewrites the end."""
        if self.file.closed:
            self.file = open(self.path, "r+")  # noqa: SIM115 - closed below
        self.sizes.commit()
        self._write_tail(errors, end)
        self.file.close()

    def _write_tail(self, errors: Sequence[str], end: str | None = None) -> None:
        sizes = self.sizes
        self.file.seek(self.done_end)
        for index in range(self.appended, len(sizes.entries)):
            self.file.write(("," if index else "") + sizes.entries[index])
        self.appended = len(sizes.entries)
        self.done_end = self.file.tell()
        # the size in progress, and the footer with it, from a copy that commits it
        now = replace(sizes, entries=[], pending=list(sizes.pending))
        now.commit()
        tail = ("," if sizes.entries else "") + now.entries[0] if now.entries else ""
        footer = json.dumps(now.footer(errors, end, finished=end is not None))
        self.file.write(tail + "]," + footer[1:])
        self.file.truncate()
        self.file.flush()


def same_line(group: Sequence[ResultRow], row: ResultRow) -> bool:
    first = group[0]
    key = (first.collective, first.size_bytes, first.dtype, first.op, first.root, first.repeat)
    placements = {member.placement for member in group}
    same = (row.collective, row.size_bytes, row.dtype, row.op, row.root, row.repeat) == key
    return same and row.placement not in placements


def per_iter_series(row: ResultRow) -> list[float] | None:
    """The samples, when they mean what nccl-tests' per-iteration times mean: each
    iteration's slowest rank (collbench combines ranks by --rank-stat; `max` matches)."""
    settings = (row.knobs or {}).get("settings") or {}
    if not row.time_us_samples or settings.get("rank_stat") != "max":
        return None
    return list(row.time_us_samples)


def _device(identity: dict[str, Any]) -> dict[str, Any]:
    device = identity.get("device", "")
    index = device if isinstance(device, int) else str(device).partition(":")[2]
    return {
        "rank": identity.get("rank"),
        "group": identity.get("group", 0),
        "pid": identity.get("pid"),
        "hostname": identity.get("host"),
        "device": int(index) if str(index).isdigit() else -1,  # -1: a CPU rank
        "device_hex": identity.get("bus_id") or "",
        "device_info": identity.get("device_name") or str(device),
    }


def _args(command_line: Any) -> list[str]:
    if isinstance(command_line, list):
        return [str(arg) for arg in command_line]
    return str(command_line).split() if command_line else []


def _nccl_version(version: Any) -> int | None:
    """'2.21.5' -> 22105 (NCCL_VERSION_CODE); None when the run used no NCCL/RCCL."""
    if isinstance(version, int):
        return version
    if isinstance(version, (list, tuple)):
        version = ".".join(str(part) for part in version)
    numbers = release(str(version or ""))
    return numbers[0] * 10000 + numbers[1] * 100 + numbers[2] if len(numbers) == 3 else None


def nccl_time(utc: str | None) -> str | None:
    """A recorded UTC timestamp as nccl-tests writes times (its local time; UTC here)."""
    if not utc:
        return None
    try:
        return datetime.fromisoformat(utc.replace("Z", "+00:00")).strftime(_TIME_FORMAT)
    except ValueError:
        return utc


def _bool(value: bool) -> str:
    return "true" if value else "false"


def blocking_collectives(meta: RunMeta) -> bool:
    """nccl-tests' `blocking_collectives` (-z: the host waits for each collective to finish).

    An import: what the log recorded, else -z/--blocking in its command (default 0). A sweep: a
    gloo call returns when the operation is done, so CPU ranks block; GPU ranks queue their
    collectives unless the environment makes the host wait (core.overlap.BLOCKING_ENV).
    """
    from collbench.bench.timing import CpuTimer
    from collbench.core.overlap import blocking_env

    if meta.source:
        recorded = (meta.extra.get("header") or {}).get("blocking")
        return bool(recorded) or _blocking_arg(_args(meta.command_line))
    if meta.timing_method == CpuTimer.method or (
        meta.timing_method is None and meta.backend == "gloo"
    ):
        return True
    return bool(blocking_env({str(name): str(value) for name, value in _env(meta).items()}))


def _env(meta: RunMeta) -> dict[str, Any]:
    env = meta.knobs.get("env")
    return env if isinstance(env, dict) else meta.knobs


def _blocking_arg(args: Sequence[str]) -> bool:
    """Whether the arguments hold -z N or --blocking N (also -zN, --blocking=N), N != 0."""
    for index, arg in enumerate(args):
        for flag in ("-z", "--blocking"):
            if arg == flag and index + 1 < len(args):
                value = args[index + 1]
            elif arg.startswith(flag + "=") or (flag == "-z" and arg.startswith("-z")):
                value = arg.removeprefix(flag).removeprefix("=")
            else:
                continue
            return value.strip() not in ("", "0")
    return False


# `collbench export RUN` keeps no row once its text is made, so memory follows the files
# written, not the run's samples; the bytes are those of building from every row at once.
_ROW_CELLS = len(csv_columns(False))
_MARK = '\n "results": [],\n'  # where a collective's entries go in its document


@dataclass
class _Collective:
    """One collective's -J entries as its rows arrive: the texts of the sizes done (as
    json.dumps writes them at `indent`), the size in progress, and the footer's sums."""

    indent: int | None = 1
    entries: list[str] = field(default_factory=list)
    pending: list[ResultRow] = field(default_factory=list)
    wrong: float = 0  # summed as nccl-tests sums: entry by entry, placement by placement
    busbw: float = 0
    bodies: int = 0
    per_iter: bool = True

    def add(self, row: ResultRow) -> None:
        if self.pending and not same_line(self.pending, row):
            self.commit()
        self.pending.append(row)
        self.per_iter = self.per_iter and per_iter_series(row) is not None

    def commit(self) -> None:
        if not self.pending:
            return
        entry = nccl_entry(self.pending)
        self.pending = []
        for placement in ("out_of_place", "in_place"):
            body = entry.get(placement)
            if body:
                self.wrong += body["nwrong"] or 0
                self.busbw += body["bus_bw"]
                self.bodies += 1
        text = json.dumps(entry, indent=self.indent)
        # Indented, the entry as json.dumps(document, indent=1) writes it: two levels in.
        self.entries.append(text if self.indent is None else "  " + text.replace("\n", "\n  "))

    def footer(
        self,
        errors: Sequence[str],
        end: str | None,
        finished: bool = True,
        average: float | None = None,
    ) -> dict[str, Any]:
        """What follows results (the average busbw over every placement measured, as
        nccl-tests averages, unless `average` is given); end_time only once `finished`: a
        file without it was cut short."""
        wrong = int(self.wrong)
        if average is None:
            average = self.busbw / self.bodies if self.bodies else 0.0
        footer: dict[str, Any] = {
            "out_of_bounds": {"count": wrong, "okay": _bool(wrong == 0)},
            "average_bus_bandwidth": {"bandwidth": average, "okay": "unchecked"},
            "errors": list(errors),
        }
        if finished:
            footer["end_time"] = end
        return footer

    def document(self, head: dict[str, Any], footer: dict[str, Any]) -> str:
        """The document of the entries done, as json.dumps(document, indent) writes it."""
        text = json.dumps({**head, "results": [], **footer}, indent=self.indent)
        if self.indent is None:
            before, after = text.split('"results": []', 1)
            return f'{before}"results": [{", ".join(self.entries)}]{after}'
        before, after = text.split(_MARK, 1)
        results = "[\n" + ",\n".join(self.entries) + "\n ]" if self.entries else "[]"
        return f'{before}\n "results": {results},\n{after}\n'


class RunExport:
    """The --csv text and -J documents of one run, built a row at a time (`add`)."""

    def __init__(self, csv_wanted: bool, json_wanted: bool, indent: int | None = 1) -> None:
        self.csv_wanted, self.json_wanted, self.indent = csv_wanted, json_wanted, indent
        self.rows = 0
        self.with_probes = False
        self._lines: list[tuple[str, str]] = []  # each row's CSV text: row cells, probe cells
        self._buffer = io.StringIO(newline="")
        self._writer = csv.writer(self._buffer)
        self.collectives: dict[str, _Collective] = {}

    def add(self, row: ResultRow) -> None:
        self.rows += 1
        if self.csv_wanted:
            self.with_probes = self.with_probes or row_is(row, OVERLAP)
            cells = csv_record(row, csv_columns(True))
            self._lines.append((self._line(cells[:_ROW_CELLS]), self._line(cells[_ROW_CELLS:])))
        if self.json_wanted and row_is(row, SWEEP):
            self.collectives.setdefault(row.collective, _Collective(self.indent)).add(row)

    def _line(self, cells: list[str]) -> str:
        self._buffer.seek(0)
        self._buffer.truncate()
        self._writer.writerow(cells)
        return self._buffer.getvalue()[:-2]  # without csv's "\r\n"

    def csv_text(self) -> str:
        header = self._line(list(csv_columns(self.with_probes)))
        if self.with_probes:
            lines = (f"{cells},{probes}\r\n" for cells, probes in self._lines)
        else:
            lines = (f"{cells}\r\n" for cells, _ in self._lines)
        return header + "\r\n" + "".join(lines)

    def json_text(self, collective: str, meta: RunMeta) -> str:
        """One collective's nccl-tests document, as json.dumps(document, indent=1) + "\\n"."""
        state = self.collectives[collective]
        state.commit()
        error = meta.extra.get("error")
        # An import of one log keeps that log's own average (nccl-tests' figure).
        single = meta.source and len(meta.imported_from) == 1
        recorded = (meta.extra.get("footer") or {}).get("avg_bus_bandwidth_gbps")
        errors = [error] if error else ()
        end = nccl_time(meta.finished_utc)
        footer = state.footer(errors, end, average=recorded if single else None)
        return state.document(nccl_head(meta, state.per_iter), footer)


def export_run(
    rows: Iterable[ResultRow],
    csv_path: Path | str | None,
    json_path: Path | str | None,
    indent: int | None = 1,
) -> RunExport:
    """The run's export of `rows`: the CSV if a csv_path is given, -J's if a json_path is."""
    export = RunExport(csv_path is not None, json_path is not None, indent)
    for row in rows:
        export.add(row)
    return export


def write_export(
    export: RunExport, meta: RunMeta, csv_path: Path | None, json_path: Path | None
) -> list[Path]:
    """Write the CSV and/or JSON files, each whole or not at all (write_outputs)."""
    files: dict[Path, Any] = {}
    if csv_path is not None:
        files[Path(csv_path)] = export.csv_text().encode()
    if json_path is not None:
        for collective, path in json_paths(json_path, export.collectives).items():
            files[Path(path)] = export.json_text(collective, meta).encode()
    write_outputs("-J", files, flags={Path(csv_path): "--csv"} if csv_path else None)
    return list(files)


@dataclass
class Completed:
    """What `complete_side_files` did: the files rewritten, and those it left alone (why)."""

    written: list[Path] = field(default_factory=list)
    left: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.written or self.left)

    def describe(self) -> str:
        """One clause for finalize's line ("" when nothing was to be done)."""
        parts = []
        if self.written:
            names = ", ".join(str(path) for path in self.written)
            parts.append(f"side file(s) completed from rows.jsonl: {names}")
        parts += [f"not rewritten: {line}" for line in self.left]
        return "; ".join(parts)


def complete_side_files(run_dir: Path) -> Completed:
    """Rewrite the side files of a run whose launcher died before finishing them."""
    record = read_side_files(run_dir)
    done = Completed()
    if record is None or record.complete or record.writer_alive():
        return done
    run = load_run(run_dir)
    # entries compact, as the sink writes them
    export = export_run(run.rows, record.csv, record.nccl_json, indent=None)
    if record.csv is not None:
        export.with_probes = (run.meta.spec or {}).get("overlap") is not None  # as the sink began
        header = ",".join(csv_columns(export.with_probes)) + "\r\n"
        _complete(run_dir, Path(record.csv), export.csv_text(), header, done)
    if record.nccl_json is not None:
        head = nccl_head(run.meta, (run.meta.spec or {}).get("rank_stat") == "max")
        end = datetime.now(timezone.utc).strftime(_TIME_FORMAT)
        error = run.meta.extra.get("error")
        errors = [str(error)] if error else []
        named = list(record.collectives) or list(export.collectives)
        for collective, state in export.collectives.items():
            path = json_paths(Path(str(record.nccl_json)), [*named, collective])[collective]
            state.commit()
            text = state.document(head, state.footer(errors, end))
            _complete(run_dir, path, text, '{"version": ', done)
    if not done.left:
        record.completed().save(run_dir)
    return done


def _complete(run_dir: Path, path: Path, text: str, begins: str, done: Completed) -> None:
    """Write `text` to `path` unless the file there no longer `begins` as collbench began it."""
    try:  # as an export's file is: never in a run directory (this one or another), a folder
        target = check_output_file(SIDE_FILES, path, (run_dir,), force=True)
    except CollbenchError as error:
        done.left.append(str(error))
        return
    if target.exists():
        with open(target, encoding="utf-8", errors="replace", newline="") as stream:
            ours = stream.read(len(begins)) == begins
        if not ours:
            done.left.append(f"{path} is no longer the file collbench began (changed or replaced)")
            return
    write_atomically(target, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    done.written.append(path)
