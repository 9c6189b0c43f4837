"""Units and how numbers are spelled: sizes in bytes (powers of 1024, as nccl-tests) and
figures with a fixed number of significant digits. Every command formats through here."""

from __future__ import annotations

import math
import re
from typing import Any

from collbench.core.errors import SpecError
from collbench.core.limits import INT64_MAX

# The bounds (lowest, highest: both allowed) of every number a user gives (an option, a config
# key, a topology field), by what it measures: past them a figure is an overflow, not a setting.
NUMBER_BOUNDS: dict[str, tuple[float, float]] = {
    "bytes": (0, INT64_MAX),  # a size: what a row's int64 column holds
    "share": (0.01, 1.0),  # an efficiency: a fabric below 1% of its bound is broken
    "usd": (1e-4, 1e4),  # a price per GPU-hour
    "gbytes_s": (1e-3, 1e6),  # a bandwidth in GB/s (a topology's fields end in the unit)
    "gbits_s": (8e-3, 8e6),
    "tflops": (1e-9, 1e6),  # a peak: 1 kFLOP/s is no device, yet divides safely
    "gib": (1e-3, 1e6),
    "us": (0, 1e6),  # a latency
    "oversubscription": (1, 1e3),  # of a fat tree above its leaves
    "count": (1, 10**6),  # of nodes
}
# The options taking one of those numbers (sizes: every option parse_size reads;
# --matmul-efficiency's [NAME=]X list: its own parser, estimate.parse_efficiencies).
OPTION_NUMBERS = {
    "--comm-efficiency": "share",
    "--price": "usd",
    "--expect-busbw": "gbytes_s",
    "--nodes": "count",
}


def out_of_bounds(unit: str, value: Any) -> str | None:
    """Why `value` is no number within NUMBER_BOUNDS[unit] (None: it is one)."""
    low, high = NUMBER_BOUNDS[unit]
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return None if number and low <= value <= high else f"must be from {low:g} to {high:g}"


def check_number(unit: str, value: Any, name: str, shown: Any = None) -> Any:
    """`value`, or SpecError naming `name` (and `shown`, as given) when out_of_bounds."""
    problem = out_of_bounds(unit, value)
    if problem:
        raise SpecError(name, value if shown is None else shown, problem)
    return value


_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
_SIZE_RE = re.compile(r"^\s*(\d{1,40}(?:\.\d{1,40})?)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)


def parse_size(text: str | int, field_name: str = "size") -> int:
    """Bytes from '8', '4K', '1M', '2G' (powers of 1024, as nccl-tests), or SpecError."""
    if isinstance(text, int):
        value = text
    else:
        match = _SIZE_RE.match(str(text))
        if not match:
            raise SpecError(
                field_name,
                text,
                "is not a size: use a number with an optional "
                "K/M/G suffix (powers of 1024), e.g. 8, 4K, 1M, 2G",
            )
        number, unit = match.groups()
        whole, _, fraction = number.partition(".")
        value = int(whole + fraction) * _UNITS[unit.upper()]
        if value % 10 ** len(fraction):
            raise SpecError(field_name, text, "is not a whole number of bytes")
        value //= 10 ** len(fraction)
    return check_number("bytes", value, field_name, text)


def format_size(num_bytes: float, compact: bool = False, digits: int | None = None) -> str:
    """Short human form: 8 B, 4 KiB, 1.5 MiB; compact (chart ticks): 8, 4K, 1.5M.

    digits: round to that many significant digits (format_number), e.g. 1.39M, 155M.
    """

    def spell(value: float) -> str:
        return f"{value:g}" if digits is None else format_number(value, digits)

    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if num_bytes >= scale:
            return f"{spell(num_bytes / scale)}{unit[0] if compact else ' ' + unit}"
    if digits is not None:
        return spell(num_bytes) if compact else f"{spell(num_bytes)} B"
    return f"{num_bytes:g}" if compact else f"{num_bytes} B"


def size_arg(num_bytes: int) -> str:
    """The shortest --min-bytes style spelling that parses back to exactly num_bytes."""
    for suffix, scale in (("G", 1024**3), ("M", 1024**2), ("K", 1024)):
        if num_bytes >= scale and num_bytes % scale == 0:
            return f"{num_bytes // scale}{suffix}"
    return str(num_bytes)


def round_sig(value: float, digits: int = 6) -> float | None:
    """Significant digits for output (JSON); JSON has no inf, so an unbounded value is None."""
    return None if not math.isfinite(value) else float(f"{value:.{digits}g}")


def format_number(value: float, digits: int = 4, scientific: bool = False) -> str:
    """`digits` significant digits, whole numbers from 1000 up (2049, 123.4, 0.002951).

    scientific: values below 1e-3 or from 1e6 up in exponent form (3.050e-13) instead.
    """
    if not math.isfinite(value):
        return str(value)
    if scientific and value != 0 and not 1e-3 <= abs(value) < 1e6:
        return f"{value:.{digits - 1}e}"
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.{digits}g}"


_TIME_UNITS = (("ms", 1e-3), ("s", 1.0), ("min", 60.0), ("h", 3600.0))


def time_unit(seconds: float) -> tuple[str, float, int]:
    """The unit a time (or a column's largest) reads in, its length in seconds, and the
    decimals that give it 4 significant digits: ms below 1 s, else the largest unit it holds
    one of ('19.73 min', not '1,184,058.444 ms')."""
    name, scale = next((u for u in reversed(_TIME_UNITS) if seconds >= u[1]), _TIME_UNITS[0])
    value = seconds / scale
    return name, scale, min(3, max(0, 3 - math.floor(math.log10(value)))) if value > 0 else 3


def format_time(seconds: float) -> str:
    """A time in the unit it reads in (time_unit): '19.73 min', '812.3 ms'."""
    name, scale, decimals = time_unit(seconds)
    return f"{seconds / scale:,.{decimals}f} {name}"


_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|hr)?\s*$", re.IGNORECASE)
_DURATION_UNITS = {"": 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hr": 3600}


def parse_duration(text: str, field_name: str = "duration") -> float:
    """Seconds from '90', '90s', '10m', '1.5h' (a bare number is seconds), or SpecError."""
    match = _DURATION_RE.match(str(text))
    if not match:
        raise SpecError(
            field_name, text, "is not a duration: a number with s, m or h (e.g. 90s, 10m, 1h)"
        )
    seconds = float(match[1]) * _DURATION_UNITS[(match[2] or "").lower()]
    if not seconds > 0:
        raise SpecError(field_name, text, "must be more than 0 seconds")
    return seconds


def counted(count: int, noun: str) -> str:
    """'1 node', '2 nodes': a count with its noun, plural unless the count is 1."""
    return f"{count} {noun}{'' if count == 1 else 's'}"
