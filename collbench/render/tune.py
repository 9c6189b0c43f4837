"""`collbench tune` as text and JSON: per collective and size range the best setting (or
"default is best"), its busbw, the default's, the gain, whether it is confident and the
evidence that rests on (the best other setting against the default: the median effect, its
interval, the noise floor, the repeats per side and the rule's calls); then the notes and
conflicts, and the files written.

Pure: the use case's result in, a string out.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import TYPE_CHECKING

from collbench.analysis.tune.select import BYTES_MAX, describe_evidence
from collbench.core.units import format_number, format_size

if TYPE_CHECKING:
    from collbench.analysis.tune.select import BestRecord
    from collbench.run.tune_from import TuneFromResult
    from collbench.run.tune_verify import VerifyLine, VerifyResult

HEADER = ("collective", "range", "best", "busbw", "default", "gain", "confident", "evidence")
DEFAULT_IS_BEST = "default is best"


def render_tune(result: TuneFromResult, as_json: bool = False) -> str:
    """The table (or tune.json's content as JSON), then `# Wrote: PATH` lines."""
    if as_json:
        return json.dumps(result.document.to_dict(), indent=2, default=str)
    lines = aligned_table(HEADER, [_cells(record) for record in result.best])
    lines += [f"# {record.collective} {record.band}: {record.reason}" for record in result.best]
    lines += [f"# conflict: {line}" for line in result.document.env.conflicts]
    lines += [f"# note: {note}" for note in result.notes]
    lines += [f"# Wrote: {path}" for path in result.written]
    return "\n".join(lines)


def aligned_table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    """Aligned columns: the header as a `# ` comment line, the rows indented under it."""
    table = [header, *rows]
    widths = [max(len(row[index]) for row in table) for index in range(len(header))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in table
    ]
    return ["# " + lines[0], *("  " + line for line in lines[1:])]


def _cells(record: BestRecord) -> tuple[str, ...]:
    high = "end]" if record.max_bytes >= BYTES_MAX else f"{format_size(record.max_bytes + 1)})"
    best = DEFAULT_IS_BEST if record.default_is_best else record.setting
    base = record.baseline_busbw_gbps
    return (
        record.collective,
        f"{record.band} [{format_size(record.min_bytes)}, {high}",
        best,
        format_number(record.busbw_gbps),
        "-" if base is None else format_number(base),
        "-" if record.gain is None else f"{record.gain * 100:+.1f}%",
        "yes" if record.confident else f"no ({record.confidence})",
        describe_evidence(asdict(record.evidence) if record.evidence else None),
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
    """`tune --verify`: per collective and range the realised gain next to the predicted one."""
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
    return (
        line.collective,
        f"{line.band} [{format_size(line.min_bytes)}, {high}",
        line.setting,
        "-" if line.busbw_gbps is None else format_number(line.busbw_gbps),
        "-" if base is None else format_number(base),
        _percent(line.realised_gain),
        _percent(line.predicted_gain),
        line.call or "-",
        line.evidence,
    )
