"""Parse nccl-tests' `-J` JSON output (JSON_FILE_VERSION 2 of nccl-tests' src/util.cu) into
the same plain records as nccl_logs' text parser (pure: no files are touched)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from collbench.analysis.imports.log_columns import LogColumns
from collbench.analysis.imports.nccl_logs import (
    _PROGRAM,
    LOG_FIELD,
    LogRow,
    LogTable,
    ParsedLog,
    _finite,
    _integer,
    _number,
    check_integers,
    nccl_version_from_code,
)
from collbench.core.collectives.base import IN_PLACE, OUT_OF_PLACE
from collbench.core.errors import SpecError
from collbench.core.knobs import KNOB_PREFIXES


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
    config = data.get("config") if isinstance(data.get("config"), dict) else {}
    args = [str(arg) for arg in data.get("args") or []]
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
            _json_rank(device) for device in config.get("devices") or data.get("devices") or []
        ),
        program=program,
        layout="json",
        footer=_json_footer(data),
    )
    env = dict(
        entry.split("=", 1)
        for entry in data.get("env") or []
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


def _json_params(config: dict[str, Any]) -> dict[str, Any]:
    keys = (
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
    params = {ours: config[theirs] for ours, theirs in keys if theirs in config}
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
    return {ours: device.get(theirs, 0 if ours == "group" else None) for ours, theirs in keys}


def _json_footer(data: dict[str, Any]) -> dict[str, Any]:
    footer: dict[str, Any] = {}
    bounds, average = data.get("out_of_bounds"), data.get("average_bus_bandwidth")
    if isinstance(bounds, dict):
        footer["out_of_bounds_values"] = bounds.get("count")
        footer["out_of_bounds_ok"] = str(bounds.get("okay")).lower() == "true"
    if isinstance(average, dict):
        footer["avg_bus_bandwidth_gbps"] = _finite(str(average.get("bandwidth")))
    return footer
