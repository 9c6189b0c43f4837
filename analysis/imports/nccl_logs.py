"""Parse nccl-tests / rccl-tests output into plain records (pure: no files are touched).

The method, in full: docs/import.md#analysis-imports-nccl-logs-py.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collbench.analysis.imports.log_columns import LogColumns, whole_lines_columns
from collbench.core.collectives.base import IN_PLACE, OUT_OF_PLACE
from collbench.core.errors import SpecError
from collbench.core.knobs import KNOB_PREFIXES
from collbench.core.limits import INT64_MAX
from collbench.store.rows import int_bounds

LOG_FIELD = "LOG"

_PREFIX = re.compile(r"^(?:\[\d+,\d+\]<std(?:out|err)>:|\s*\d+: )")
_RANK = re.compile(
    r"^#\s*Rank\s+(?P<rank>\d+)(?:\s+Group\s+(?P<group>\d+))?\s+Pid\s+(?P<pid>\d+)\s+on\s+"
    r"(?P<host>\S+)\s+device\s+(?P<device>\d+)\s+\[(?P<bus_id>[^\]]*)\]\s*(?P<name>.*?)\s*$"
)
_PARAMS = re.compile(r"^#\s*nThread\s+\d+")
_PARAM_FIELDS = (
    ("n_threads", r"nThread\s+(\d+)"),
    ("n_gpus", r"nGpus\s+(\d+)"),
    ("min_bytes", r"minBytes\s+(\d+)"),
    ("max_bytes", r"maxBytes\s+(\d+)"),
    ("warmup_iters", r"warmup iters:\s*(\d+)"),
    ("iters", r"(?<=\d )iters:\s*(\d+)"),
    ("agg_iters", r"agg iters:\s*(\d+)"),
    ("validation", r"validation:\s*(\d+)"),
    ("graph", r"graph:\s*(\d+)"),
    ("unalign", r"unalign:\s*(\d+)"),
)
_STEP = re.compile(r"step:\s*(\d+)\((factor|bytes)\)")
_REDUCED_MAX = re.compile(r"Reducing maxBytes to (\d+)")
_VERSIONS = (
    ("rccl_tests", re.compile(r"rccl-tests:\s*Version\s+(\S+)")),
    ("nccl_tests", re.compile(r"nccl-tests version\s+(\S+)")),
    ("", re.compile(r"\b(NCCL|RCCL|HIP|ROCm|ROCM) version\s*:?\s*(\d\S*)")),  # key: group 1
)
_NCCL_LIBRARY = re.compile(r"nccl-library=(\d+)")
_OUT_OF_BOUNDS = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s*(\w*)")
_AVG_BUSBW = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)\s*(\w*)")
_PROGRAM = re.compile(r"\b([a-z_]+?)_perf(?:_mpi)?\b")
_ENV_KNOB = re.compile(r"\b([A-Z][A-Z0-9]*_[A-Z0-9_]+) set by environment to (\S+)")
_ROW_START = re.compile(r"^\s*\d+\s+\d+\s+[A-Za-z]")
_RCCL_ONLY = ("Errors with asterisks",)
# The tools' own banner lines: not a comment someone put at the top of a log.
_TOOL_BANNERS = (
    "nccl-tests version",
    "Collective test",
    "Blocking Enabled",
    "Parallel Init",
    "Per-Iteration",
    "Writing JSON",
    "Writing results",
)
_TIME_NAMES = ("time", "cputime", "hipevt")
_COLUMN_ALIASES = {"#wrong": "wrong"}
_COLUMN_RUN = 1024  # whole lines parsed a column at a time together (log_columns)


@dataclass(frozen=True)
class LogRow:
    """One placement of one size, with the figures exactly as the log printed them."""

    size_bytes: int
    count: int
    nccl_type: str
    redop: str
    root: int
    placement: str
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    n_wrong: int | None  # `#wrong`; None for N/A and for legacy logs
    max_error: float | None = None  # legacy `error` column: the largest deviation, not a count


@dataclass(frozen=True)
class LogTable:
    """One result table and the run parameters and devices printed with it."""

    data: LogColumns  # the rows, column by column
    params: dict[str, Any]
    ranks: tuple[dict[str, Any], ...]
    program: str | None  # the program the log names (`all_reduce_perf`, `AllReduce`), if any
    layout: str  # "current", "legacy", "headerless" or "json"
    columns: tuple[str, ...] = ()
    extra_columns: tuple[str, ...] = ()
    footer: dict[str, Any] = field(default_factory=dict)  # empty when the log has none


@dataclass(frozen=True)
class ParsedLog:
    """Everything read from one log file."""

    path: str
    tool: str  # "nccl-tests" or "rccl-tests"
    form: str  # "text" or "json"
    tables: tuple[LogTable, ...]
    versions: dict[str, str]
    version_lines: tuple[str, ...] = ()
    comment: str | None = None
    command_line: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Layout:
    """Which field of a table line holds what: the leading columns, then one group per
    placement (column names normalized: `time`, `algbw`, `busbw`, `wrong`, `error`)."""

    prefix: tuple[str, ...]
    groups: tuple[tuple[str, tuple[str, ...]], ...]
    kind: str


def nccl_version_from_code(code: int) -> str:
    """NCCL_VERSION_CODE as text: 22703 -> 2.27.3 (codes before 2.9 are 1000-based)."""
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def parse_text_log(text: str, path: str = "<log>") -> ParsedLog:
    """Parse the text output of nccl-tests or rccl-tests (see the module docstring)."""
    return parse_text_lines(text.splitlines(keepends=True), path)


def parse_text_lines(lines: Iterable[str], path: str = "<log>") -> ParsedLog:
    """parse_text_log of whole lines given a few at a time, with their line endings."""
    parser = _TextParser(path)
    number = last_line = 0
    ends_with_newline = True
    row_start = _ROW_START.match
    for chunk in lines:  # a line or several, each with its line ending
        ends_with_newline = chunk.endswith("\n")
        # The lines str.splitlines makes of the whole text (\r, \f, \u2028... end one too).
        for raw in chunk.splitlines():
            number += 1
            if row_start(raw):  # a table row, as feed takes it (no prefix can precede it)
                last_line = number
                parser.row(raw.split(), number)
                continue
            if raw.strip():
                last_line = number
            try:
                parser.feed(_PREFIX.sub("", raw.rstrip("\r")).rstrip(), number)
            except SpecError:
                raise
            except ValueError:  # int() of a number of thousands of digits
                raise SpecError(
                    LOG_FIELD, path, f"line {number} holds a number too long to be a log's"
                ) from None
    return parser.finish(cut_last_line=not ends_with_newline and parser.last_row_line == last_line)


@dataclass
class _TableDraft:
    params: dict[str, Any] = field(default_factory=dict)
    ranks: list[dict[str, Any]] = field(default_factory=list)
    program: str | None = None
    banner: tuple[str, ...] = ()
    layout: Layout | None = None
    columns: tuple[str, ...] = ()
    lines: list[tuple[int, list[str]]] = field(default_factory=list)
    footer: dict[str, Any] = field(default_factory=dict)

    def started(self) -> bool:
        return bool(self.lines or self.footer)


class _TextParser:
    """Line-by-line state: the table being read, and facts about the whole file."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.drafts = [_TableDraft()]
        self.versions: dict[str, str] = {}
        self.version_lines: list[str] = []
        self.env: dict[str, str] = {}
        self.comment: str | None = None
        self.pending_program: str | None = None
        self.command_line: str | None = None
        self.last_row_line = 0
        self.rccl = False
        self.seen_content = False
        self.warnings: list[str] = []

    @property
    def draft(self) -> _TableDraft:
        return self.drafts[-1]

    def feed(self, line: str, number: int) -> None:
        if not line.strip():
            return
        first, self.seen_content = not self.seen_content, True
        if _ROW_START.match(line):
            self.row(line.split(), number)
            return
        self._note_facts(line)
        if (
            not self._table_line(line)
            and first
            and line.startswith("#")
            and line != "#"
            and not any(banner in line for banner in _TOOL_BANNERS)
        ):
            self.comment = line.lstrip("#").strip()

    def row(self, fields: list[str], number: int) -> None:
        """A table row's fields (parsed when its table is finished)."""
        self.seen_content = True
        self.drafts[-1].lines.append((number, fields))
        self.last_row_line = number

    def _note_facts(self, line: str) -> None:
        for fixed_key, pattern in _VERSIONS:
            match = pattern.search(line)
            if match:
                key = fixed_key or match.group(1).lower()
                self.versions.setdefault(key, match.group(match.lastindex))
                if line.strip() not in self.version_lines:
                    self.version_lines.append(line.strip())
        library = _NCCL_LIBRARY.search(line)
        if library:
            self.versions.setdefault("nccl", nccl_version_from_code(int(library.group(1))))
        for name, value in _ENV_KNOB.findall(line):
            self.env.setdefault(name, value)
        self.rccl = self.rccl or any(marker in line for marker in _RCCL_ONLY)
        for found in _PROGRAM.findall(line):
            program = found + "_perf"
            if self.draft.program is None:
                self.draft.program = program
            elif self.draft.started() and program != self.draft.program:
                self.pending_program = program
            if self.command_line is None and not line.startswith("#") and " -" in line:
                self.command_line = line.strip()

    def _table_line(self, line: str) -> bool:
        """Handle a line of the table's header, parameters, devices or footer."""
        if _PARAMS.match(line):
            self._new_table_if_started().params.update(parse_params(line))
        elif _RANK.match(line):
            self._new_table_if_started().ranks.append(_rank(_RANK.match(line)))
        elif line.startswith("#") and line.lstrip("# ").startswith("size"):
            draft = self._new_table_if_started()
            draft.columns = tuple(line.lstrip("#").split())
            draft.layout = layout_from_header(draft.columns, draft.banner, self.path)
        elif line.startswith("#") and ("out-of-place" in line or "in-place" in line):
            self._new_table_if_started().banner = tuple(line.lstrip("#").split())
        elif _REDUCED_MAX.search(line):
            self.draft.params["max_bytes_reduced"] = int(_REDUCED_MAX.search(line).group(1))
        elif "Blocking Enabled" in line:  # -z 1, 2 or 3: the host waits for each collective
            self.draft.params["blocking"] = True
        else:
            return self._footer_line(line) or "(B)" in line or "Using devices" in line
        return True

    def _footer_line(self, line: str) -> bool:
        bounds, average = _OUT_OF_BOUNDS.match(line), _AVG_BUSBW.match(line)
        if bounds:
            self.draft.footer["out_of_bounds_values"] = int(bounds.group(1))
            self.draft.footer["out_of_bounds_ok"] = bounds.group(2).upper() != "FAILED"
        elif average:
            self.draft.footer["avg_bus_bandwidth_gbps"] = _finite(average.group(1))
            if average.group(2):
                self.draft.footer["avg_bus_bandwidth_check"] = average.group(2)
        return bool(bounds or average)

    def _new_table_if_started(self) -> _TableDraft:
        if self.draft.started():
            self.drafts.append(_TableDraft(program=self.pending_program))
            self.pending_program = None
        return self.draft

    def finish(self, cut_last_line: bool) -> ParsedLog:
        drafts = [draft for draft in self.drafts if draft.lines]
        if not self.seen_content:
            raise SpecError(LOG_FIELD, self.path, "is empty")
        if not drafts:
            if any(draft.layout for draft in self.drafts):
                raise SpecError(
                    LOG_FIELD,
                    self.path,
                    "has a result table header but no rows "
                    "(did the run stop before its first size?)",
                )
            raise SpecError(
                LOG_FIELD,
                self.path,
                "is not an nccl-tests/rccl-tests log: no result table found "
                "(no '# size count type ...' header, no rows)",
            )
        tables = [
            self._table(draft, cut_last_line and draft is self.drafts[-1]) for draft in drafts
        ]
        rccl = self.rccl or {"rccl_tests", "rccl", "hip", "rocm"} & set(self.versions)
        tool = "rccl-tests" if rccl else "nccl-tests"
        return ParsedLog(
            path=self.path,
            tool=tool,
            form="text",
            tables=tuple(tables),
            versions=dict(self.versions),
            version_lines=tuple(self.version_lines),
            comment=self.comment,
            command_line=self.command_line,
            env=dict(self.env),
            warnings=tuple(self.warnings),
        )

    def _line_rows(self, line: tuple[int, list[str]], layout: Layout, cut: bool) -> list[LogRow]:
        """parse_row of one table line, checked, with a warning if it is skipped or cut."""
        number, fields = line
        parsed = parse_row(fields, layout, cut=cut)
        for row in parsed or ():
            check_integers(row, self.path, f"line {number}: ")
        if parsed is None:
            self.warnings.append(
                f"{self.path} line {number}: skipped, not a table row ({' '.join(fields)[:60]!r})"
            )
        elif cut and len(parsed) < len(layout.groups):
            self.warnings.append(
                f"{self.path} line {number}: the last row is cut short; "
                f"kept {len(parsed)} of its {len(layout.groups)} placement(s)"
            )
        return parsed or []

    def _table(self, draft: _TableDraft, cut_last_line: bool) -> LogTable:
        layout = draft.layout or layout_from_fields(draft.lines[0][1], self.path)
        data, lines = LogColumns(), draft.lines
        whole = len(layout.prefix) + sum(len(names) for _, names in layout.groups)
        # Runs of whole lines a column at a time (log_columns), up to _COLUMN_RUN lines each,
        # any other line alone; a table without a footer may end in a line cut short.
        end, start = len(lines) - (0 if draft.footer else 1), 0
        while start < len(lines):
            stop = start
            while stop < min(end, start + _COLUMN_RUN) and len(lines[stop][1]) == whole:
                stop += 1
            run = [fields for _, fields in lines[start:stop]]
            columns = whole_lines_columns(run, layout.prefix, layout.groups)
            if columns is not None:
                data.extend(columns)
            else:
                for index in range(start, max(stop, start + 1)):
                    last = index == len(lines) - 1 and not draft.footer
                    cut = last and (cut_last_line or len(lines[index][1]) < whole)
                    data.extend(LogColumns.from_rows(self._line_rows(lines[index], layout, cut)))
            start = max(stop, start + 1)
        extras = tuple(
            name
            for _, names in layout.groups
            for name in names
            if name not in ("time", "algbw", "busbw", "wrong", "error")
        )
        return LogTable(
            data=data,
            params=dict(draft.params),
            ranks=tuple(draft.ranks),
            program=draft.program,
            layout=layout.kind,
            columns=draft.columns,
            extra_columns=tuple(dict.fromkeys(extras)),
            footer=dict(draft.footer),
        )


def parse_params(line: str) -> dict[str, Any]:
    """The `# nThread 1 nGpus 1 minBytes ... graph: 0` line as snake_case numbers."""
    params: dict[str, Any] = {}
    for key, pattern in _PARAM_FIELDS:
        match = re.search(pattern, line)
        if match:
            params[key] = int(match.group(1))
    step = _STEP.search(line)
    if step:
        params["step_factor" if step.group(2) == "factor" else "step_bytes"] = int(step.group(1))
    return params


def _rank(match: re.Match) -> dict[str, Any]:
    group = match.group("group")
    return {
        "rank": int(match.group("rank")),
        "group": int(group) if group else 0,
        "pid": int(match.group("pid")),
        "host": match.group("host"),
        "device": int(match.group("device")),
        "bus_id": match.group("bus_id"),
        "device_name": match.group("name"),
    }


def layout_from_header(columns: tuple[str, ...], banner: tuple[str, ...], path: str) -> Layout:
    """Split the header's column names into the leading columns and placement groups."""
    names = [_COLUMN_ALIASES.get(name.lower(), name.lower()) for name in columns]
    groups: list[list[str]] = []
    prefix: list[str] = []
    for name in names:
        if name in _TIME_NAMES and not (groups and "algbw" not in groups[-1]):
            groups.append(["time"])  # whichever clock opens the group is its time
            continue
        (groups[-1] if groups else prefix).append(name)
    if not groups or len(groups) > 2:
        raise SpecError(
            LOG_FIELD,
            path,
            f"has a table header with {len(groups)} groups of "
            f"time/algbw/busbw columns ({' '.join(columns)!r}); expected 1 or 2",
        )
    kind = "legacy" if "error" in groups[0] or "root" not in prefix else "current"
    placements = _placements(banner, len(groups))
    return Layout(tuple(prefix), tuple(zip(placements, map(tuple, groups), strict=True)), kind)


def _placements(banner: tuple[str, ...], n_groups: int) -> tuple[str, ...]:
    named = tuple(
        {"out-of-place": OUT_OF_PLACE, "in-place": IN_PLACE}[word]
        for word in banner
        if word in ("out-of-place", "in-place")
    )
    if len(named) == n_groups:
        return named
    # No banner: two groups are always out-of-place then in-place; a single group is
    # in-place (rccl-tests -O 0 and nccl-tests trace replay are the tools' in-place-only modes).
    return (OUT_OF_PLACE, IN_PLACE) if n_groups == 2 else (IN_PLACE,)


def layout_from_fields(fields: list[str], path: str) -> Layout:
    """Guess the layout of a table whose header is missing, from one row's field count."""
    group_current = ("time", "algbw", "busbw", "wrong")
    group_legacy = ("time", "algbw", "busbw", "error")
    for prefix, group in (
        (("size", "count", "type", "redop", "root"), group_current),
        (("size", "count", "type", "redop"), group_legacy),
    ):
        n_groups, extra = divmod(len(fields) - len(prefix), 4)
        if extra == 0 and n_groups in (1, 2):
            return Layout(
                prefix,
                tuple((placement, group) for placement in _placements((), n_groups)),
                "headerless",
            )
    raise SpecError(
        LOG_FIELD,
        path,
        f"has rows but no table header, and a row with {len(fields)} fields fits no "
        "nccl-tests layout (9, 13, 8 or 12 fields)",
    )


def parse_row(fields: list[str], layout: Layout, cut: bool = False) -> list[LogRow] | None:
    """The LogRows of one table line (one per placement printed), or None if malformed.

    A line with fewer groups than the header has the trailing ones (nccl-tests leaves the
    out-of-place columns blank when it skips them), unless `cut`: the last line of a log
    that stopped mid-line, whose complete leading groups are kept.
    """
    prefix = dict(zip(layout.prefix, fields, strict=False))
    size, count = _integer(prefix.get("size")), _integer(prefix.get("count"))
    if size is None or count is None or len(fields) <= len(layout.prefix):
        return None
    rest = fields[len(layout.prefix) :]
    groups = _groups_present(layout, len(rest), cut)
    if not groups:
        return None
    rows, offset = [], 0
    for placement, names in groups:
        values = dict(zip(names, rest[offset : offset + len(names)], strict=True))
        offset += len(names)
        if values.get("time", "").lower() == "n/a":  # collbench's table: placement not run
            continue
        row = _row(size, count, prefix, placement, values)
        if row is None:
            return None
        rows.append(row)
    return rows


@functools.lru_cache(maxsize=256)  # a table's lines share a layout and a field count
def _groups_present(layout: Layout, n_fields: int, cut: bool) -> tuple:
    groups = layout.groups
    while groups and sum(len(names) for _, names in groups) > n_fields:
        groups = groups[:-1] if cut else groups[1:]
    if not cut and groups != layout.groups and sum(len(names) for _, names in groups) != n_fields:
        return ()  # neither a whole line nor whole trailing groups: malformed
    return groups


def _row(
    size: int, count: int, prefix: dict[str, str], placement: str, values: dict[str, str]
) -> LogRow | None:
    time_us, algbw, busbw = _number(values.get("time")), None, None
    if time_us is not None:
        algbw = _number(values.get("algbw"))
        busbw = _number(values.get("busbw")) if algbw is not None else None
    if busbw is None:
        return None
    wrong = _integer(values["wrong"].rstrip("*")) if "wrong" in values else None
    root = _integer(prefix.get("root"))
    error = values.get("error")
    # LogRow(...) without the frozen dataclass's __init__, an object.__setattr__ per field
    # (a third of parsing a 100k-row log); the same fields, in field order.
    row = object.__new__(LogRow)
    row.__dict__.update(
        size_bytes=size,
        count=count,
        nccl_type=prefix.get("type", "float"),
        redop=prefix.get("redop", "none"),
        root=-1 if root is None else root,
        placement=placement,
        time_us=time_us,
        algbw_gbps=algbw,
        busbw_gbps=busbw,
        n_wrong=wrong,
        max_error=None if error is None else _finite(error.rstrip("*")),
    )
    return row


def check_integers(row: LogRow, path: str, where: str = "") -> None:
    """SpecError naming the log (and `where`, e.g. "line 12: ") when a row's size, count,
    root or #wrong lies outside what a row holds (store.rows.int_bounds: int64, which
    rows.parquet stores; a size, count or #wrong from 0)."""
    for name in ("size_bytes", "count", "root", "n_wrong"):
        value, (least, most) = getattr(row, name), int_bounds(name)
        if value is not None and not least <= value <= most:
            beyond = "lies beyond the 64-bit integer range collbench stores"
            raise SpecError(
                LOG_FIELD,
                path,
                f"{where}{name} {value} "
                f"{f'is below {least}' if -INT64_MAX - 1 <= value < least else beyond}; "
                "nothing was written",
            )


def _number(token: str | None) -> float | None:
    try:
        return float(token) if token is not None else None
    except ValueError:
        return None


def _finite(token: str | None) -> float | None:
    """A number, None where it is missing, NaN or infinite (JSON cannot hold those)."""
    value = _number(token)
    return value if value is not None and math.isfinite(value) else None


def _integer(token: str | None) -> int | None:
    """An integer as printed: exactly (a size above 2**53 keeps every digit), else a finite
    number rounded; None where it is not a number."""
    if token is None:
        return None
    try:
        return int(token)
    except ValueError:
        value = _finite(token)
        return int(round(value)) if value is not None else None


# --- nccl-tests' -J JSON (JSON_FILE_VERSION 2 of nccl-tests' src/util.cu) ---------------------


def parse_json_log(data: Any, path: str = "<json>", cut_short: bool = False) -> ParsedLog:
    """Parse nccl-tests' -J output: one object with `args`, `env`, `nccl_version` (a code
    such as 22703), `config` (`nthreads`, `ngpus`, `minimum_bytes`, `maximum_bytes`,
    `step_factor` or `step_bytes`, `warmup_iters`, `iterations`, `aggregated_iterations`,
    `validation`, `graph`, `devices`: `rank`, `group`, `pid`, `hostname`, `device`,
    `device_hex`, `device_info`), `results` (per size: `size`, `count`, `type`, `redop`,
    `root` as a padded string, `out_of_place`/`in_place` objects with `time` or `cpu_time`,
    `alg_bw`, `bus_bw`, `nwrong` (null: not checked), or null when not run, and
    `experiment_name`), `out_of_bounds` (`count`, `okay`), `average_bus_bandwidth`."""
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise SpecError(LOG_FIELD, path, "is JSON but not nccl-tests -J output (no 'results' list)")
    results = [result for result in data["results"] if isinstance(result, dict)]
    rows = [row for result in results for row in _json_rows(result, path)]
    if not rows:
        raise SpecError(
            LOG_FIELD, path, "has a result table header but no rows (empty 'results' list)"
        )
    # A damaged file's fields of the wrong type (a string of devices, "env": 5) read as absent.
    config = data.get("config") if isinstance(data.get("config"), dict) else {}
    args = [str(arg) for arg in _list(data, "args")]
    # The program: the binary's name, else the first result's experiment_name.
    match = _PROGRAM.search(Path(args[0]).name) if args else None
    names = (str(result["experiment_name"]) for result in results if result.get("experiment_name"))
    program = match.group(1) + "_perf" if match else next(names, None)
    code = data.get("nccl_version")
    versions = {"nccl": nccl_version_from_code(code)} if isinstance(code, int) and code else {}
    table = LogTable(
        data=LogColumns.from_rows(rows),
        params=_json_params(config),
        ranks=tuple(
            _json_rank(device)
            for device in _list(config, "devices") or _list(data, "devices")
            if isinstance(device, dict)
        ),
        program=program,
        layout="json",
        footer=_json_footer(data),
    )
    env = dict(
        entry.split("=", 1)
        for entry in _list(data, "env")
        if isinstance(entry, str) and "=" in entry and entry.startswith(KNOB_PREFIXES)
    )
    warnings = (
        (f"{path}: the JSON was cut short; kept the {len(rows)} row(s) of its complete results",)
        if cut_short
        else ()
    )
    return ParsedLog(
        path=path,
        tool="nccl-tests",
        form="json",
        tables=(table,),
        versions=versions,
        command_line=" ".join(args) or None,
        env=env,
        warnings=warnings,
    )


def _json_rows(result: dict[str, Any], path: str) -> list[LogRow]:
    rows = []
    for key, placement in (("out_of_place", OUT_OF_PLACE), ("in_place", IN_PLACE)):
        body = result.get(key)
        if not isinstance(body, dict):
            continue
        time_us = body.get("time", body.get("cpu_time"))
        figures = [
            _number(str(value)) for value in (time_us, body.get("alg_bw"), body.get("bus_bw"))
        ]
        size, count = _integer(str(result.get("size"))), _integer(str(result.get("count")))
        root = _integer(str(result.get("root")).strip())  # a padded string; None: -1
        if None in figures or size is None or count is None:
            raise SpecError(
                LOG_FIELD,
                path,
                f"has a result without size/count/time/alg_bw/bus_bw: {json.dumps(result)[:80]}",
            )
        wrong = body.get("nwrong")
        rows.append(
            LogRow(
                size_bytes=size,
                count=count,
                nccl_type=str(result.get("type")),
                redop=str(result.get("redop", "none")),
                root=-1 if root is None else root,
                placement=placement,
                time_us=figures[0],
                algbw_gbps=figures[1],
                busbw_gbps=figures[2],
                n_wrong=None if wrong is None else _integer(str(wrong)),
            )
        )
        check_integers(rows[-1], path, f"the result of size {size}: ")
    return rows


# A log's run parameters (ours) and nccl-tests' -J config keys (theirs), in -J's order; the
# export writes an import's back from them (render.export).
JSON_CONFIG_KEYS = (
    ("n_threads", "nthreads"),
    ("n_gpus", "ngpus"),
    ("min_bytes", "minimum_bytes"),
    ("max_bytes", "maximum_bytes"),
    ("step_factor", "step_factor"),
    ("step_bytes", "step_bytes"),
    ("warmup_iters", "warmup_iters"),
    ("iters", "iterations"),
    ("agg_iters", "aggregated_iterations"),
    ("validation", "validation"),
    ("graph", "graph"),
)


def _json_params(config: dict[str, Any]) -> dict[str, Any]:
    params = {ours: config[key] for ours, key in JSON_CONFIG_KEYS if type(config.get(key)) is int}
    if str(config.get("blocking_collectives")).lower() == "true":
        params["blocking"] = True
    return params


def _json_rank(device: dict[str, Any]) -> dict[str, Any]:
    keys = (
        ("rank", "rank"),
        ("group", "group"),
        ("pid", "pid"),
        ("host", "hostname"),
        ("device", "device"),
        ("bus_id", "device_hex"),
        ("device_name", "device_info"),
    )
    values = {ours: device.get(theirs, 0 if ours == "group" else None) for ours, theirs in keys}
    return {ours: v if type(v) in (str, int, float) else None for ours, v in values.items()}


def _list(data: dict[str, Any], key: str) -> list[Any]:
    return data[key] if isinstance(data.get(key), list) else []


def _json_footer(data: dict[str, Any]) -> dict[str, Any]:
    footer: dict[str, Any] = {}
    bounds, average = data.get("out_of_bounds"), data.get("average_bus_bandwidth")
    if isinstance(bounds, dict):
        footer["out_of_bounds_values"] = bounds.get("count")
        footer["out_of_bounds_ok"] = str(bounds.get("okay")).lower() == "true"
    if isinstance(average, dict):
        footer["avg_bus_bandwidth_gbps"] = _finite(str(average.get("bandwidth")))
    return footer
