"""`collbench noise` as text: the A/A floor per size band and what it rests on (pure:
run.noise's report in, a string out)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from collbench.analysis.rules.bands import bands_legend

if TYPE_CHECKING:
    from collbench.run.noise import NoiseReport


# A typical CI gate's threshold (docs/compare.md uses --fail-if-slower 5): a floor above it
# blinds such a gate in that band, which `noise` says when it writes the floor.
TYPICAL_GATE_PCT = 5.0


def noise_warnings(report: NoiseReport) -> list[str]:
    """One warning per band whose floor is larger than a typical gate's threshold."""
    return [
        f"collbench: warning: the {band.band} band's floor is {band.floor_pct:.1f}%: a gate "
        f"at --fail-if-slower {TYPICAL_GATE_PCT:g} held against it sees only slowdowns of "
        f"{100 * band.floor_pct / (100 + band.floor_pct):.1f}% or more there and says so "
        "(blind); measure on a quieter machine or with more --repeats"
        for band in report.bands
        if band.floor_pct > TYPICAL_GATE_PCT
    ]


def render_noise(report: NoiseReport) -> str:
    """A header, one line per band (floor, pairs of runs, largest change, sizes), where the
    file went and how to use it."""
    lines = [
        f"# noise: A/A floor of {len(report.runs)} runs of one configuration, "
        f"{report.sizes} size(s) measured by every run",
        *(f"#   run {path}" for path in report.runs),
    ]
    if report.environment:
        changes = "; ".join(
            f"{diff.field} {diff.baseline} -> {diff.candidate}" for diff in report.environment
        )
        lines.append(f"# environment differs (its noise is in the floor): {changes}")
    lines += [
        f"# per size band ({bands_legend()}): busbw change identical runs stayed within",
        "#  band        floor  run pairs  largest change  sizes",
    ]
    for band in report.bands:
        lines.append(
            f"   {band.band:8s} {band.floor_pct:7.2f}%  {band.pairs:9d}  "
            f"{band.largest_pct:13.2f}%  {band.sizes:5d}"
        )
    quantiles = sorted({band.quantile for band in report.bands})
    lines += [
        "# floor: per pair of runs the largest change over the band's sizes, then the "
        + ", ".join(f"{q:.3g}" for q in quantiles)
        + " quantile over pairs (the largest change for a few runs)",
        f"# wrote {report.out}: use it with collbench compare BASE NEW --noise-floor {report.out}",
    ]
    return "\n".join(lines)
