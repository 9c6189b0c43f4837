"""`collbench tune` as text and JSON: per collective and size range the best setting, its
gain and the evidence it rests on; then the notes, conflicts and files written.

The method, in full: docs/tune.md#collbench-render-tune-py.
"""

from __future__ import annotations

import itertools
import json
from typing import TYPE_CHECKING

from collbench.analysis.rules.bands import BAND_NAMES
from collbench.analysis.tune.select import BYTES_MAX, describe_evidence, range_label
from collbench.core.units import format_number, format_size, time_unit
from collbench.render.table import text_columns

if TYPE_CHECKING:
    from collbench.analysis.tune.select import BestRecord
    from collbench.run.tune.from_runs import TuneFromResult
    from collbench.run.tune.verify import VerifyLine, VerifyResult

HEADER = (
    "collective",
    "sizes",
    "best",
    "busbw GB/s",
    "default GB/s",
    "gain",
    "confident",
    "evidence",
)
DEFAULT_IS_BEST = "default is best"
LEGEND = (
    "# busbw: the geometric mean over the range's measured sizes (and repeats), in GB/s as "
    "nccl-tests computes it; gain: best over default on the same sizes. A range covers the "
    "sizes between its measured ones up to the geometric midpoint (tune.json has each range's "
    "bytes)."
)


def render_tune(result: TuneFromResult, as_json: bool = False) -> str:
    """The table (or tune.json's content as JSON), then the reasons per collective, the
    ranges best.env does not follow, the notes, and `# Wrote: PATH` lines."""
    if as_json:
        return json.dumps(result.document.to_dict(), indent=2, default=str)
    lines = aligned_table(HEADER, [_cells(record) for record in result.best])
    lines.append(LEGEND)
    lines += _grouped(result.best)
    conflicts = result.document.env.conflicts
    if conflicts:
        lines.append(f"# best.env exports {result.document.env.setting}; not followed in:")
        lines += [f"#   {line}" for line in conflicts]
    if result.notes:
        lines.append("# notes:")
        lines += [f"#   {note}" for note in result.notes]
    lines += workload_lines(result.document.extra.get("workload"))
    lines += [f"# Wrote: {path}" for path in result.written]
    return "\n".join(lines)


def _grouped(best: list[BestRecord]) -> list[str]:
    """Why each range was called, under one heading per collective."""
    lines: list[str] = []
    for collective, records in itertools.groupby(best, key=lambda record: record.collective):
        lines.append(f"# {collective}:")
        lines += [f"#   {range_label(item.band, item.sizes)}: {item.reason}" for item in records]
    return lines


def aligned_table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    """Aligned columns: the header as a `# ` comment line, the rows indented under it."""
    lines = text_columns([header, *rows], range(len(header)))
    return ["# " + lines[0], *("  " + line for line in lines[1:])]


def _cells(record: BestRecord) -> tuple[str, ...]:
    best = DEFAULT_IS_BEST if record.default_is_best else record.setting
    base = record.baseline_busbw_gbps
    return (
        record.collective,
        range_label(record.band, record.sizes),
        best,
        format_number(record.busbw_gbps),
        "-" if base is None else format_number(base),
        "-" if record.gain is None else f"{record.gain * 100:+.1f}%",
        "yes" if record.confident else f"no ({record.confidence})",
        describe_evidence(record.evidence),
    )


VERIFY_HEADER = (
    "collective",
    "range",
    "setting",
    "busbw",
    "default",
    "realised",
    "predicted",
    "call",
    "evidence",
)


def render_verify(result: VerifyResult, as_json: bool = False) -> str:
    """`tune verify`: per collective and range the realised gain next to the predicted one."""
    if as_json:
        return json.dumps(result.document, indent=2, default=str)
    lines = aligned_table(VERIFY_HEADER, [_verify_cells(line) for line in result.lines])
    for setting in result.settings:
        if setting["error"]:
            lines.append(f"# {setting['label']}: FAILED: {setting['error']}")
    for line in result.lines:
        if line.predicted_gain is None:
            lines.append(
                f"# {line.collective} {line.band}: the tune chose {line.tuned_best} there, "
                "not what best.env exports: no prediction to check"
            )
    lines += [f"# note: {note}" for note in result.notes]
    lines.append(f"# Results: {result.out}")
    return "\n".join(lines)


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:+.1f}%"


def _verify_cells(line: VerifyLine) -> tuple[str, ...]:
    high = "end]" if line.max_bytes >= BYTES_MAX else f"{format_size(line.max_bytes + 1)})"
    base = line.baseline_busbw_gbps
    # a fixed band's name says no sizes; a range named by its measured sizes says them
    where = f"{line.band} [{format_size(line.min_bytes)}, {high}"
    return (
        line.collective,
        where if line.band in BAND_NAMES else line.band,
        line.setting,
        "-" if line.busbw_gbps is None else format_number(line.busbw_gbps),
        "-" if base is None else format_number(base),
        _percent(line.realised_gain),
        _percent(line.predicted_gain),
        line.call or "-",
        line.evidence,
    )


def workload_lines(workload: dict | None) -> list[str]:
    """tune --workload's section: the job, every setting's modelled step (step time,
    exposed communication, MFU), best.env's rule and margin, the collectives and sizes where
    the fastest setting is not, and the notes ([] without a workload)."""
    if not workload:
        return []
    job, export = workload["workload"], workload["export"]
    steps = {step["setting"]: step for step in workload["settings"]}
    chosen, exported = steps[workload["chosen"]], steps[export["setting"]]
    default = next((step for step in workload["settings"] if step["baseline"]), None)
    # a unit per column, from its largest time (a 20-minute step: '19.73' min, not ms)
    units = {key: time_unit(max(step[key] for step in workload["settings"])) for key in _TIMES}
    table = [
        (
            f"{step['setting']}{' (default)' if step['baseline'] else ''}"
            f"{' (best.env)' if step is exported else ''}",
            *(f"{step[key] / units[key][1]:,.{units[key][2]}f}" for key in _TIMES),
            f"{step['mfu']:.2%}",
        )
        for step in workload["settings"]
    ]
    params = job["params"]
    size = f"{params / 1e9:.3g}B" if params >= 1e9 else f"{params / 1e6:.3g}M"
    buckets = job["dp_bucket_mb"]
    dp = f"DP buckets of {buckets:g} MiB" if buckets else "one DP collective (no buckets)"
    lines = [
        f"# workload: {job['model']} ({size} params), tp {job['tp']} pp {job['pp']} dp "
        f"{job['dp']}, zero {job['zero']}, seq {job['seq']}, global batch "
        f"{job['global_batch']}, {dp}, on {workload['topology']}",
        *aligned_table(
            ("setting", *(f"{what} {units[key][0]}" for key, what in _TIMES.items()), "MFU"), table
        ),
        f"# best.env: {export['text']}",
    ]
    if default is not None and default is not chosen:
        points = (chosen["mfu"] - default["mfu"]) * 100
        held = "" if exported is chosen else f" by {chosen['setting']}, within what is resolved"
        lines.append(f"# tuning recovers {points:+.2f} MFU points on this fabric (modelled){held}")
    if workload["losses"]:
        lines.append(f"# where {chosen['setting']} is not the fastest for the workload:")
        lines += [f"#   {loss['text']}" for loss in workload["losses"]]
    lines.append("# workload notes:")
    return lines + [f"#   {note}" for note in workload["notes"]]


_TIMES = {"step_time_s": "step", "exposed_comm_s": "exposed comm", "comm_s": "all comm"}
