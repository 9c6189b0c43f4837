"""`collbench compare` as text and JSON: the methodology warning first, then size by size,
per size band, and every other difference between the runs.

Pure: comparisons in, strings out.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from collbench.analysis.bands import bands_legend

if TYPE_CHECKING:
    from collbench.analysis.comparison import Comparison


def render_comparisons(
    comparisons: Sequence[Comparison], base_path: str, cand_paths: Sequence[str], as_json: bool
) -> str:
    """Each candidate against the baseline: a JSON list, or text blocks one blank line apart."""
    if as_json:
        return json.dumps([item.to_dict() for item in comparisons], indent=2, default=str)
    return "\n\n".join(
        render_comparison(item, base_path, cand_path)
        for item, cand_path in zip(comparisons, cand_paths, strict=True)
    )


def render_comparison(result: Comparison, base_path: str, cand_path: str) -> str:
    """The comparison as text: the methodology warning first, then sizes, bands, the rest."""
    lines = [
        f"# compare: baseline {base_path} ({result.baseline})",
        f"#      vs candidate {cand_path} ({result.candidate})",
    ]
    method = [d for d in result.differences if d.kind == "methodology"]
    if method:
        lines += [
            "#",
            "# !!! METHODOLOGY DIFFERS: these runs were not measured the same way;",
            "# !!! the ratios below mix that difference with the system's:",
        ]
        lines += [f"# !!!   {d.field}: {d.baseline} -> {d.candidate}" for d in method]
    lines += _size_lines(result) + _band_lines(result)
    environment = [d for d in result.differences if d.kind == "environment"]
    if environment:
        lines += ["#", "# environment differences (what is being compared):"]
        lines += [
            f"#   {d.field}: {_shown(d.baseline)} -> {_shown(d.candidate)}" for d in environment
        ]
    for label, keys in (
        ("only in baseline", result.only_baseline),
        ("only in candidate", result.only_candidate),
    ):
        lines += [f"# {label}: {entry}" for entry in keys]
    return "\n".join(lines)


def _shown(value: Any) -> str:
    return "(unset)" if value is None else str(value)


def _size_lines(result: Comparison) -> list[str]:
    lines: list[str] = []
    current = None
    for item in result.sizes:
        if (item.collective, item.placement) != current:
            current = (item.collective, item.placement)
            lines += [
                "#",
                f"# {item.collective} ({item.placement})",
                "#        size   base busbw   cand busbw    ratio  verdict (p)",
            ]
        p_value = f" (p={item.p_value:.3g})" if item.p_value is not None else ""
        lines.append(
            f"{item.size_bytes:13d}  {item.baseline_busbw_gbps:11.4g}  "
            f"{item.candidate_busbw_gbps:11.4g}  {item.ratio:7.3f}x  "
            f"{item.verdict}{p_value}"
        )
    return lines


def _band_lines(result: Comparison) -> list[str]:
    lines = [
        "#",
        f"# per size band ({bands_legend()}): geometric mean ratio, verdicts",
    ]
    for band in result.bands:
        counts = ", ".join(f"{count} {verdict}" for verdict, count in sorted(band.counts.items()))
        lines.append(
            f"#   {band.collective} {band.placement} {band.band:6s} "
            f"{band.geomean_ratio:7.3f}x over {band.sizes} size(s): {counts}"
        )
    return lines
