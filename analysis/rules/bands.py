"""Size bands: where a collective is latency-bound, in between, or bandwidth-bound.

The one definition compare, fit --topology and the reports group sizes by.
"""

from __future__ import annotations

from collbench.core.units import format_size

KIB, MIB = 1024, 1024**2
# (name, first size in the band): small is latency-bound, large bandwidth-bound.
BANDS = (("small", 0), ("medium", 64 * KIB), ("large", 16 * MIB))
BAND_NAMES = tuple(name for name, _ in BANDS)


def band_of(size_bytes: int) -> str:
    """The band a size falls in."""
    return next((band for band, start in reversed(BANDS) if size_bytes >= start), BANDS[0][0])


def bands_legend() -> str:
    """The bands in one line, e.g. `small < 64 KiB <= medium < 16 MiB <= large`."""
    parts = [BANDS[0][0]]
    for name, start in BANDS[1:]:
        parts.append(f"< {format_size(start)} <= {name}")
    return " ".join(parts)
