"""A recorded noise floor: how far identical runs of one configuration land apart, per size
and per size band (pure vocabulary; `collbench noise` measures it, store/noise_floor.py reads and writes
the file, analysis/rules/decision.py holds verdicts against it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from collbench.core.errors import SpecError
from collbench.core.units import format_size

# 2: a floor per size (pct_by_size) beside the bands'; a version-1 file (bands only) still reads.
NOISE_FLOOR_VERSION = 2
# Above this, identical runs landed more than 2x apart: that is no floor to hold a gate or a
# doctor against (a 1e308% floor would pass any slowdown).
MAX_FLOOR_PCT = 100.0


@dataclass(frozen=True)
class NoiseFloor:
    """Run-to-run noise as a percentage of busbw, per size and per size band (analysis.bands').

    `pct_by_size[size_bytes]` is the change (in percent, either way) that identical runs stay
    within at that size (docs/methodology/decisions.md); `pct_by_band[band]` the band's (its
    largest size's, or a version-1 file's only figure), used at sizes without their own. `runs`
    counts the runs it was measured from, `source` says where it came from (a file path, or how
    it was measured), `detail` keeps the evidence (pairs, the quantile used, changes per size)."""

    pct_by_band: Mapping[str, float]
    source: str
    runs: int = 0
    detail: Mapping[str, Any] = field(default_factory=dict)
    pct_by_size: Mapping[int, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for where, pct in {**self.pct_by_band, **self.pct_by_size}.items():
            if isinstance(pct, bool) or not isinstance(pct, (int, float)) or not pct >= 0:
                raise SpecError(
                    "noise floor", where, f"has a floor {pct!r}: it must be >= 0 (a percentage)"
                )
            if pct > MAX_FLOOR_PCT:
                raise SpecError(
                    "noise floor",
                    where,
                    f"has a floor of {pct:.4g}%: above {MAX_FLOOR_PCT:g}% identical runs "
                    "landed more than 2x apart, which is no floor (rerun on a quieter machine)",
                )

    def pct_at(self, size_bytes: int, band: str) -> tuple[float | None, str]:
        """The floor at a size (its own, else its band's: None without either) and what it is."""
        if size_bytes in self.pct_by_size:
            return self.pct_by_size[size_bytes], f"at {format_size(size_bytes)}"
        return self.pct_by_band.get(band), f"{band} band"

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": NOISE_FLOOR_VERSION,
            "source": self.source,
            "runs": self.runs,
            "pct_by_band": dict(self.pct_by_band),
            "pct_by_size": {str(size): pct for size, pct in self.pct_by_size.items()},
            "detail": dict(self.detail),
        }

    @classmethod
    def from_dict(cls, data: Any, where: str) -> NoiseFloor:
        """The floor a noise-floor file holds; SpecError naming `where` for anything else."""
        if not isinstance(data, Mapping) or not isinstance(data.get("pct_by_band"), Mapping):
            raise SpecError(
                "--noise-floor", where, "is not a noise-floor file (make one with collbench noise)"
            )
        version = data.get("version", NOISE_FLOOR_VERSION)
        if isinstance(version, bool) or version not in (1, NOISE_FLOOR_VERSION):
            raise SpecError(
                "--noise-floor",
                where,
                f"is version {data.get('version')!r}; this collbench reads versions 1 to "
                f"{NOISE_FLOOR_VERSION} (record it again with collbench noise)",
            )
        by_size = data.get("pct_by_size") or {}
        if not isinstance(by_size, Mapping) or not all(str(k).isdigit() for k in by_size):
            raise SpecError("--noise-floor", where, "has a pct_by_size that is not sizes in bytes")
        runs = data.get("runs", 0)  # 0: not said
        if isinstance(runs, bool) or not isinstance(runs, int) or ("runs" in data and runs < 2):
            why = "a floor needs a whole number of at least 2 identical runs"
            raise SpecError("--noise-floor", where, f"has runs {runs!r}: {why}")
        detail = data.get("detail") or {}
        return cls(
            pct_by_band={str(band): pct for band, pct in data["pct_by_band"].items()},
            source=str(data.get("source") or where),
            runs=runs,
            detail=detail if isinstance(detail, Mapping) else {},
            pct_by_size={int(size): pct for size, pct in by_size.items()},
        )
