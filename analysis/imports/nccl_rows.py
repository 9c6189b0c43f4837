"""nccl-tests / rccl-tests logs as collbench result rows and meta.json (pure: no I/O).

The method, in full: docs/import.md#analysis-imports-nccl-rows-py.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from collbench.analysis.imports.nccl_logs import (
    LOG_FIELD,
    LogTable,
    ParsedLog,
    parse_json_log,
    parse_text_log,
)
from collbench.core.bandwidth import bus_factor
from collbench.core.collectives import REGISTRY
from collbench.core.dtypes import lookup_dtype
from collbench.core.errors import SpecError
from collbench.core.limits import MAX_NESTING_DEPTH, too_deep
from collbench.core.spec import did_you_mean
from collbench.core.stats import median
from collbench.store.meta import RunMeta
from collbench.store.row_block import RowBlock
from collbench.store.rows import ResultRow

BUSBW_TOLERANCE = 0.02  # relative disagreement of printed busbw beyond which we warn
# Below 1 GB/s the two decimals nccl-tests prints make busbw/algbw too coarse to check.
MIN_CHECKED_ALGBW_GBPS = 1.0
MAX_IMPLIED_WORLD_SIZE = 4096
# The row columns a parsed table (LogColumns) holds as they are.
_TABLE_COLUMNS = "root size_bytes count placement time_us algbw_gbps busbw_gbps n_wrong".split()
# Binary stems and JSON experiment names, squeezed (`all_reduce_perf`, `AllReduce` ->
# "allreduce") -> registry name.
PROGRAMS = {
    alias: collective.name
    for collective in REGISTRY.values()
    for alias in collective.nccl_tests_names
}
# Names that are part of another's ("reduce" in "allreduce") only count as whole words.
_PART_OF_ANOTHER = frozenset(
    alias for alias in PROGRAMS if any(alias != other and alias in other for other in PROGRAMS)
)


@dataclass(frozen=True)
class TableContext:
    """What the rows of one table share: their log, collective and the system they ran on."""

    log: ParsedLog
    table: LogTable
    collective: str
    world_size: int
    hosts: tuple[str, ...]
    notes: tuple[str, ...] = ()  # how facts the log does not print were worked out

    @property
    def backend(self) -> str:
        return "rccl" if self.log.tool == "rccl-tests" else "nccl"

    @property
    def nodes(self) -> int | None:
        return len(self.hosts) or None


def parse_log(text: str, path: str) -> ParsedLog:
    """Parse one nccl-tests / rccl-tests log's text (a -J JSON file is detected); `path`
    names it in errors and warnings."""
    if not text.strip():
        raise SpecError(LOG_FIELD, path, "is empty")
    if not text.lstrip().startswith("{"):
        return parse_text_log(text, path)
    if too_deep(text):  # json.loads recurses once per level: refuse before parsing
        raise SpecError(
            LOG_FIELD,
            path,
            f"is JSON nested deeper than {MAX_NESTING_DEPTH} levels, collbench's limit "
            "(nccl-tests -J output nests 4)",
        )
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        repaired = _repair_json(text)
        if repaired is None:
            raise SpecError(
                LOG_FIELD,
                path,
                f"is not valid JSON (line {error.lineno}: "
                f"{error.msg}) and holds no complete nccl-tests result",
            ) from None
        return parse_json_log(repaired, path, cut_short=True)
    except ValueError:  # int() of a number of thousands of digits
        raise SpecError(LOG_FIELD, path, "is JSON with a number too long to be a log's") from None
    return parse_json_log(data, path)


def _repair_json(text: str) -> dict[str, Any] | None:
    """Close a -J file cut short after its last complete result (nccl-tests writes each
    result object in one piece, ending with `experiment_name`)."""
    end = text.find("}", text.rfind('"experiment_name"'))
    if '"experiment_name"' not in text or end < 0:
        return None
    try:
        data = json.loads(text[: end + 1] + "]}")
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def collective_from_program(program: str) -> str | None:
    """Registry name for a program (`alltoall_perf` -> `all_to_all`, `AllReduce`)."""
    return PROGRAMS.get(re.sub(r"[^a-z]", "", program.lower().removesuffix("_perf")))


def collective_from_file_name(path: str) -> str | None:
    """Last-resort guess from a file name such as `h100_allreduce.txt` (None if none)."""
    name = Path(path).name.lower()
    squeezed = re.sub(r"[^a-z0-9]", "", name)
    tokens = set(re.split(r"[^a-z0-9]+", name))
    for alias, collective in PROGRAMS.items():
        if alias not in _PART_OF_ANOTHER and alias in squeezed:
            return collective
    return next((PROGRAMS[alias] for alias in sorted(_PART_OF_ANOTHER) if alias in tokens), None)


def resolve_collective(name: str) -> str:
    """A --collective value as a registry name: one as sweep's -c takes it, or the program
    that measured it (`all_reduce_perf`); any other is refused as sweep refuses it."""
    found = collective_from_program(name) if name.endswith("_perf") else None
    if name not in REGISTRY and found is None:
        raise SpecError(
            "--collective",
            name,
            f"is unknown{did_you_mean(name)}; choose one of {', '.join(REGISTRY)}",
        )
    return found or name


def build_import(
    logs: Sequence[ParsedLog], run_id: str, collective: str | None = None, *, imported_utc: str
) -> tuple[list[RowBlock], RunMeta]:
    """Result rows for parsed logs, one RowBlock per table (block_rows makes them
    ResultRows), and meta stamped `imported_utc`, naming the logs by their parsed paths."""
    contexts = [table_context(log, table, collective) for log in logs for table in log.tables]
    check_compatible(contexts)
    blocks = [table_block(context, run_id, imported_utc) for context in contexts]
    warnings = [warning for log in logs for warning in log.warnings]
    for context in contexts:
        warnings += [*context.notes, *table_warnings(context)]
    warnings.extend(_duplicate_warnings(blocks))
    warnings.extend(_host_warnings(contexts))
    return blocks, import_meta(contexts, blocks, run_id, warnings, imported_utc)


def block_rows(block: RowBlock) -> list[ResultRow]:
    """A block's rows as ResultRows; shared samples (an import's empty list) are each row's
    own copy, as the rows' constructor would have them."""
    shared = dict(block.shared)
    samples = shared.pop("time_us_samples", None)
    rows = []
    for values in zip(*block.columns.values(), strict=True):
        own = dict(zip(block.columns, values, strict=True))
        if samples is not None:
            own["time_us_samples"] = list(samples)
        rows.append(block.row_type(**shared, **own))
    return rows


def table_context(log: ParsedLog, table: LogTable, collective: str | None) -> TableContext:
    """A table's collective, world size and hosts; rows that are no measurement are dropped,
    with a note (_usable_rows)."""
    table, dropped = _usable_rows(log, table)
    notes = [dropped] if dropped else []
    name = collective or (collective_from_program(table.program) if table.program else None)
    if name is None:
        name = _collective_from_name(log, table)
        notes.append(
            f"{log.path}: the log does not name its program; took {name} from the "
            "file name (pass --collective to override)"
        )
    world_size, note = table_world_size(log, table, name)
    hosts = tuple(dict.fromkeys(str(rank["host"]) for rank in table.ranks if rank.get("host")))
    return TableContext(
        log, table, name, world_size, hosts, tuple(notes) + ((note,) if note else ())
    )


def _usable_rows(log: ParsedLog, table: LogTable) -> tuple[LogTable, str | None]:
    """The table without rows that are no measurement, and a warning naming them: a NaN or
    infinite figure (JSON cannot hold it), a time of 0 or less or a negative bandwidth
    (every reader refuses those). A table left with no row is refused: no empty run."""
    data = table.data
    figures = (data.time_us, data.algbw_gbps, data.busbw_gbps)
    if not len(data):
        raise SpecError(LOG_FIELD, log.path, "has no measured row (every figure is N/A)")
    if all(math.isfinite(sum(column)) for column in figures):  # a NaN or inf makes it so
        if min(data.time_us) > 0 <= min(map(min, figures[1:])):
            return table, None
    finite = [math.isfinite(t + a + b) for t, a, b in zip(*figures, strict=True)]
    keep = [ok and t > 0 <= min(a, b) for ok, t, a, b in zip(finite, *figures, strict=True)]
    bad = [size for size, kept in zip(data.size_bytes, keep, strict=True) if not kept]
    nan_only = keep == finite
    what = "a NaN or infinite" if nan_only else "a NaN, infinite or negative"
    what += " time/algbw/busbw" + ("" if nan_only else " or a zero time")
    if not any(keep):
        usable = "finite" if nan_only else "usable"
        raise SpecError(
            LOG_FIELD, log.path, f"has no row with {usable} figures: all {len(bad)} print {what}"
        )
    sizes = list(dict.fromkeys(map(str, bad)))
    sizes = ", ".join(sizes[:5]) + (f" and {len(sizes) - 5} more" if len(sizes) > 5 else "")
    return replace(table, data=data.take(keep)), (
        f"{log.path}: dropped {len(bad)} row(s) with {what} "
        f"(sizes in bytes: {sizes}); they are not measurements"
    )


def _collective_from_name(log: ParsedLog, table: LogTable) -> str:
    if table.program:
        raise SpecError(
            LOG_FIELD,
            log.path,
            f"is from {table.program}, which has no collbench "
            f"collective; pass --collective NAME ({', '.join(REGISTRY)}) to import "
            "it as one",
        )
    guess = collective_from_file_name(log.path)
    if guess is None:
        raise SpecError(
            LOG_FIELD,
            log.path,
            "does not say which collective it measured (no "
            "*_perf program in the text or the file name); pass --collective NAME "
            f"({', '.join(REGISTRY)})",
        )
    return guess


def table_world_size(log: ParsedLog, table: LogTable, collective: str) -> tuple[int, str | None]:
    """Ranks in the collective, and a note when the log does not list them all."""
    params = table.params
    per_process = params.get("n_threads", 1) * params.get("n_gpus", 1)
    if table.ranks:
        groups = Counter(rank.get("group", 0) for rank in table.ranks)
        listed = max(groups.values())
        processes = len({(rank.get("host"), rank.get("pid")) for rank in table.ranks})
        counted = processes * per_process // len(groups)
        if counted > listed:
            return counted, (
                f"{log.path}: the device list shows {listed} ranks but "
                f"{processes} processes x nThread x nGpus make {counted}; used "
                f"{counted}"
            )
        return listed, None
    if "n_threads" in params and "n_gpus" in params:
        return per_process, (
            f"{log.path}: no 'Using devices' block; assumed one process, "
            f"nThread x nGpus = {per_process} rank(s)"
        )
    data = table.data
    pairs = zip(data.algbw_gbps, data.busbw_gbps, strict=True)
    ratio = median([bus / alg for alg, bus in pairs if alg >= MIN_CHECKED_ALGBW_GBPS])
    implied = implied_world_size(collective, ratio) if ratio is not None else None
    if implied is None:
        raise SpecError(
            LOG_FIELD,
            log.path,
            "does not say how many ranks ran (no 'Using "
            "devices' block and no '# nThread ... nGpus' line)",
        )
    return implied, (
        f"{log.path}: no device list or nThread/nGpus line; world size {implied} "
        f"inferred from busbw/algbw = {ratio:.3f}"
    )


def implied_world_size(collective: str, ratio: float) -> int | None:
    """The world size whose bus factor is nearest a busbw/algbw ratio (within 1%), if the
    collective's factor depends on the world size at all."""
    factors = {size: bus_factor(collective, size) for size in range(1, MAX_IMPLIED_WORLD_SIZE)}
    if max(factors.values()) - min(factors.values()) < 1e-9:
        return None
    best = min(factors, key=lambda size: abs(factors[size] - ratio))
    return best if abs(factors[best] - ratio) <= 0.01 * max(ratio, 1e-9) else None


def check_compatible(contexts: Sequence[TableContext]) -> None:
    """One run directory holds one system: refuse logs of different world sizes/backends."""
    for label, key in (("world sizes", "world_size"), ("backends", "backend")):
        seen: dict[Any, list[str]] = {}
        for context in contexts:
            seen.setdefault(getattr(context, key), []).append(context.log.path)
        if len(seen) > 1:
            detail = "; ".join(
                f"{value}: {', '.join(dict.fromkeys(paths))}" for value, paths in seen.items()
            )
            raise SpecError(
                LOG_FIELD,
                ", ".join(dict.fromkeys(path for paths in seen.values() for path in paths)),
                f"mix {label} ({detail}); import each system into its own run directory",
            )


def table_block(context: TableContext, run_id: str, timestamp: str) -> RowBlock:
    """One table's rows as a RowBlock: the figures the log printed, no statistics over
    iterations (nccl-tests prints none)."""
    params, nodes, data = context.table.params, context.nodes, context.table.data
    knobs = {"env": dict(context.log.env), "settings": {"imported": True}}
    shared = dict(
        run_id=run_id,
        timestamp_utc=timestamp,
        collective=context.collective,
        backend=context.backend,
        world_size=context.world_size,
        nodes=nodes,
        ranks_per_node=context.world_size // nodes if nodes else None,
        warmup=params.get("warmup_iters"),
        iters=params.get("iters"),
        time_us_p50=None,
        time_us_p95=None,
        time_us_min=None,
        time_us_max=None,
        time_cv=None,
        topology=None,
        knobs=knobs,
        time_us_samples=[],  # nccl-tests prints no per-iteration times
    )
    dtypes = {name: _dtype_name(name) for name in set(data.nccl_type)}
    ops = {redop: None if redop.lower() == "none" else redop for redop in set(data.redop)}
    columns = {name: getattr(data, name) for name in _TABLE_COLUMNS}  # the log's, as parsed
    columns.update(dtype=list(map(dtypes.__getitem__, data.nccl_type)))
    columns.update(op=list(map(ops.__getitem__, data.redop)))
    return RowBlock(ResultRow, shared, columns)


@functools.lru_cache(maxsize=64)  # once per type, not once per row of a 200k-row log
def _dtype_name(nccl_type: str) -> str:
    dtype = lookup_dtype(nccl_type)
    return dtype.name if dtype else nccl_type


def table_warnings(context: TableContext) -> list[str]:
    """busbw that does not add up, a missing footer or header, failed data checks, unknown
    element types."""
    log, table = context.log, context.table
    warnings = [busbw_warning(context)]
    if not table.footer:
        warnings.append(
            f"{log.path}: no footer ('# Out of bounds values', '# Avg bus "
            f"bandwidth'): the log may be cut short; kept its {len(table.data)} "
            "row(s)"
        )
    if table.layout == "headerless":
        warnings.append(
            f"{log.path}: no table header; the columns were inferred from the "
            "number of fields in a row"
        )
    wrong = sum(1 for n_wrong in table.data.n_wrong if n_wrong)
    if wrong or table.footer.get("out_of_bounds_ok") is False:
        warnings.append(
            f"{log.path}: the data check failed ({wrong} row(s) with #wrong > 0, "
            f"out of bounds values: {table.footer.get('out_of_bounds_values')})"
        )
    for name in sorted(name for name in set(table.data.nccl_type) if not lookup_dtype(name)):
        warnings.append(f"{log.path}: type {name!r} has no collbench dtype; kept as printed")
    return [warning for warning in warnings if warning]


def busbw_warning(context: TableContext) -> str | None:
    """A warning when printed busbw differs from algbw x bus factor by more than
    BUSBW_TOLERANCE, with the world size the printed ratio fits."""
    collective, world_size = context.collective, context.world_size
    factor = bus_factor(collective, world_size)
    data = context.table.data
    checked = [
        (algbw, busbw)
        for algbw, busbw in zip(data.algbw_gbps, data.busbw_gbps, strict=True)
        if algbw >= MIN_CHECKED_ALGBW_GBPS
    ]
    bad = [
        (algbw, busbw)
        for algbw, busbw in checked
        if abs(busbw - algbw * factor) > BUSBW_TOLERANCE * algbw * factor + 0.005
    ]
    if not bad:
        return None
    ratio = median([busbw / algbw for algbw, busbw in bad])  # all of them checked
    implied = implied_world_size(collective, ratio)
    fits = f"; that ratio fits {implied} ranks" if implied else ""
    return (
        f"{context.log.path}: printed busbw disagrees with algbw x bus factor in "
        f"{len(bad)} of {len(checked)} checked row(s): busbw/algbw = {ratio:.3f}, but "
        f"{collective} on {world_size} ranks gives {factor:.3f}{fits}. The printed "
        "figures are kept; check the world size before comparing them"
    )


def _duplicate_warnings(blocks: Sequence[RowBlock]) -> list[str]:
    names = ("collective", "dtype", "op", "root", "size_bytes", "placement")
    keys = Counter(key for block in blocks for key in zip(*map(block.column, names), strict=True))
    repeated = sum(1 for count in keys.values() if count > 1)
    if not repeated:
        return []
    return [
        f"{repeated} (collective, dtype, op, root, size, placement) combination(s) appear "
        "more than once (repeated runs or size-0 rows); all were kept"
    ]


def _host_warnings(contexts: Sequence[TableContext]) -> list[str]:
    host_sets = list(dict.fromkeys(context.hosts for context in contexts if context.hosts))
    if len(host_sets) < 2:
        return []
    listed = "; ".join(", ".join(hosts) for hosts in host_sets)
    return [
        f"the logs ran on different hosts ({listed}): same world size and backend, but "
        "maybe not the same system; each row keeps its own node count"
    ]


def import_meta(
    contexts: Sequence[TableContext],
    blocks: Sequence[RowBlock],
    run_id: str,
    warnings: list[str],
    imported_utc: str,
) -> RunMeta:
    """meta.json for an import: the run-level facts a sweep records, plus the logs' own."""
    first = contexts[0]
    logs = list({id(context.log): context.log for context in contexts}.values())
    hosts = list(dict.fromkeys(host for context in contexts for host in context.hosts))
    versions: dict[str, str] = {}
    env: dict[str, str] = {}
    for log in logs:
        versions.update({key: value for key, value in log.versions.items() if key not in versions})
        env.update({key: value for key, value in log.env.items() if key not in env})
    legacy = _legacy_errors(contexts)
    return RunMeta(
        run_id=run_id,
        state="completed",
        source=first.log.tool,
        imported_from=[log.path for log in logs],
        imported_utc=imported_utc,
        timing_method="nccl-tests",
        backend=first.backend,
        world_size=first.world_size,
        nodes=first.nodes,
        ranks_per_node=first.world_size // first.nodes if first.nodes else None,
        hosts=hosts,
        ranks=list(first.table.ranks),
        command_line=first.log.command_line,
        comment=first.log.comment,
        versions=versions,
        knobs={"env": env, "settings": {"imported": True}},
        topology=None,
        warnings=list(dict.fromkeys(warnings)),
        extra={
            "version_lines": list(
                dict.fromkeys(line for log in logs for line in log.version_lines)
            ),
            "header": dict(first.table.params),
            "footer": dict(first.table.footer) or None,
            "footer_missing": any(not context.table.footer for context in contexts),
            "collectives": dict(
                Counter(name for block in blocks for name in block.column("collective"))
            ),
            "logs": [
                _log_meta(log, [context for context in contexts if context.log is log])
                for log in logs
            ],
            **({"legacy_errors": legacy} if legacy else {}),
        },
    )


def _log_meta(log: ParsedLog, contexts: Sequence[TableContext]) -> dict[str, Any]:
    return {
        "path": log.path,
        "tool": log.tool,
        "format": log.form,
        "comment": log.comment,
        "command_line": log.command_line,
        "versions": dict(log.versions),
        "tables": [
            {
                "collective": context.collective,
                "program": context.table.program,
                "layout": context.table.layout,
                "columns": list(context.table.columns),
                "extra_columns": list(context.table.extra_columns),
                "header": dict(context.table.params),
                "world_size": context.world_size,
                "nodes": context.nodes,
                "hosts": list(context.hosts),
                "ranks": list(context.table.ranks),
                "footer": dict(context.table.footer) or None,
                "footer_missing": not context.table.footer,
                "rows": len(context.table.data),
            }
            for context in contexts
        ],
    }


def _legacy_errors(contexts: Sequence[TableContext]) -> list[dict[str, Any]]:
    """Legacy logs' `error` column (largest deviation, not a count), which has no row field."""
    return [
        {
            "log": context.log.path,
            "collective": context.collective,
            "dtype": _dtype_name(nccl_type),
            "size_bytes": size,
            "placement": placement,
            "max_error": max_error,
        }
        for context in contexts
        for nccl_type, size, placement, max_error in zip(
            context.table.data.nccl_type,
            context.table.data.size_bytes,
            context.table.data.placement,
            context.table.data.max_error,
            strict=True,
        )
        if max_error is not None
    ]
