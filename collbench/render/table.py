"""nccl-tests-style text, rendered from result rows (the rows are the source of truth)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from collbench.core.bandwidth import bus_factor
from collbench.core.collectives import REGISTRY
from collbench.core.collectives.base import IN_PLACE, OUT_OF_PLACE
from collbench.core.dtypes import DTYPES
from collbench.core.spec import SweepSpec
from collbench.core.stats import median
from collbench.core.units import format_size
from collbench.store.rows import OVERLAP, ProbeRow, ResultRow

HEADER = (
    "#                                                              out-of-place"
    "                       in-place          ",
    "#       size         count      type   redop    root     time   algbw   busbw #wrong"
    "     time   algbw   busbw #wrong",
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)      "
    "      (us)  (GB/s)  (GB/s)       ",
)
MISSING = "n/a"


def text_columns(lines: Sequence[Sequence[str]], left: Collection[int]) -> list[str]:
    """Rows of cells aligned two spaces apart: columns in `left` left-justified, the others
    right-justified; trailing blanks cut."""
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return [
        "  ".join(
            text.ljust(widths[i]) if i in left else text.rjust(widths[i])
            for i, text in enumerate(line)
        ).rstrip()
        for line in lines
    ]


def format_time_us(time_us: float) -> str:
    """nccl-tests' precision rule: 2 decimals below 100 us, 1 below 10 ms, then none."""
    if time_us >= 10000.0:
        return f"{time_us:7.0f}"
    return f"{time_us:7.1f}" if time_us >= 100.0 else f"{time_us:7.2f}"


def format_line(rows: Mapping[str, ResultRow]) -> str:
    """One table line from the rows of one size, keyed by placement."""
    first = next(iter(rows.values()))
    dtype = DTYPES[first.dtype].nccl_name if first.dtype in DTYPES else first.dtype
    line = (
        f"{first.size_bytes:12d}  {first.count:12d}  {dtype:>8}  "
        f"{first.op or 'none':>6}  {first.root:6d}"
    )
    for placement in (OUT_OF_PLACE, IN_PLACE):
        row = rows.get(placement)
        if row is None:
            line += f"  {MISSING:>7}  {MISSING:>6}  {MISSING:>6}  {MISSING:>5}"
            continue
        wrong = "N/A" if row.n_wrong is None else str(row.n_wrong)
        line += (
            f"  {format_time_us(row.time_us)}  {row.algbw_gbps:6.2f}  "
            f"{row.busbw_gbps:6.2f}  {wrong:>5}"
        )
    return line


def summary_lines(rows: Sequence[ResultRow], unfinished: str | None = None) -> list[str]:
    """nccl-tests' closing lines (its "Avg bus bandwidth" kept for compatibility), plus the
    peak; `unfinished` ("cancelled after 6 of 12 rows"): the check says INCOMPLETE, never OK.
    """
    if not rows:
        return ["# No sizes measured" + (f" (the run was {unfinished})" if unfinished else "")]
    average = sum(row.busbw_gbps for row in rows) / len(rows)
    peak = max(rows, key=lambda row: row.busbw_gbps)
    return [
        f"# Out of bounds values : {_checked(rows, unfinished)}",
        f"# Avg bus bandwidth    : {average:g}",
        _one_rank_line(rows)
        or f"# Peak bus bandwidth   : {peak.busbw_gbps:.2f} GB/s at {peak.size_bytes} B "
        f"({format_size(peak.size_bytes)}, {peak.placement})",
        "#",
    ]


def _checked(rows: Sequence[ResultRow], unfinished: str | None) -> str:
    """The data check's count, OK or FAILED; INCOMPLETE, never OK, when `unfinished`."""
    checked = [row.n_wrong for row in rows if row.n_wrong is not None]
    counted = (f"{sum(checked)} FAILED" if sum(checked) else "0 OK") if checked else "N/A"
    if unfinished:  # whatever was checked, the sizes not reached were not
        return f"{counted.removesuffix(' OK')} INCOMPLETE (the run was {unfinished})"
    return counted if checked else "N/A (data check off)"


def _one_rank_line(rows: Sequence[ResultRow]) -> str | None:
    """In place of the peak line when one rank ran a collective whose bus factor is 0 there
    (all-reduce 2(n-1)/n, ...): busbw is 0 by definition, not a measured 0."""
    first = rows[0]
    if first.world_size != 1 or first.collective not in REGISTRY:
        return None
    if bus_factor(first.collective, 1) != 0:
        return None
    return (
        "# Peak bus bandwidth   : none: with one rank busbw is 0 by definition "
        "(-g is the total number of ranks here)"
    )


def preface_lines(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> list[str]:
    """The run header: nccl-tests' parameter line and its "Using devices" block."""
    step = (
        f"{spec['step_bytes']}(bytes)"
        if spec.get("step_bytes")
        else f"{spec.get('factor') or 2:g}(factor)"
    )
    gpus_per_rank = devices_per_rank(meta.get("ranks", []))
    ranks = (
        f"{meta.get('world_size')} ranks, one GPU each,"
        if gpus_per_rank
        else f"{meta.get('world_size')} CPU ranks (no GPU)"
    )
    lines = [
        f"# collbench {meta.get('versions', {}).get('collbench', '')}: backend "
        f"{meta.get('backend')}, {ranks} on {meta.get('nodes')} "
        f"node(s), timing {meta.get('timing_method')}, rank stat {spec['rank_stat']}",
        f"# nThread 1 nGpus {gpus_per_rank} minBytes {spec['min_bytes']} "
        f"maxBytes {spec['max_bytes']} "
        f"step: {step} warmup iters: {spec['warmup']} iters: {spec['iters']} agg iters: 1 "
        f"validation: {int(bool(spec['check']))} graph: 0",
        "#",
        "# Using devices",
    ]
    for rank in meta.get("ranks", []):
        lines.append(
            f"#  Rank {rank['rank']:2d} Group  0 Pid {rank['pid']:6d} on "
            f"{rank['host']:>10} device {rank['device']:>6} {rank['device_name']}"
        )
    lines.append("#")
    return lines


def devices_per_rank(ranks: Sequence[Mapping[str, Any]]) -> int:
    """nccl-tests' nGpus: 1 when the ranks run on GPUs (one each), 0 on CPU."""
    devices = [str(rank.get("device", "")) for rank in ranks]
    return 1 if devices and all(not device.startswith("cpu") for device in devices) else 0


def collective_banner(collective: str, spread: bool = False) -> list[str]:
    """A collective's table heading; with `spread` (over --repeats) a spread column."""
    if not spread:
        return [f"# Collective: {collective}", *HEADER]
    return [
        f"# Collective: {collective} (median of the repeats; spread: slowest over fastest)",
        HEADER[0],
        HEADER[1] + "   spread",
        HEADER[2] + "        ",
    ]


PROBE_HEADER = (
    "#       size  ratio  ratio    t_comm    t_comp    t_both  comp_dur  overlap   exposed"
    "  comp_slow  comm_slow #wrong",
    "#        (B)  (req)  (act)      (us)      (us)      (us)      (us)      (%)      (us)"
    "        (%)        (%)       ",
)


def probe_banner(row: ProbeRow) -> list[str]:
    """Heading of one collective's overlap probes."""
    return [
        f"# Overlap probes: {row.collective} ({row.placement}) vs "
        f"{row.compute_dtype} matmul on {row.compute_streams} stream(s), "
        f"timing {row.probe_timing}",
        *PROBE_HEADER,
    ]


# Overlap probes on CPU ranks, roughly (the default `collbench overlap` ran 133 s on this
# project's 2-core VM): a round runs the collective alone, the compute alone (ratio x it) and
# both, plus ROUND_S of barriers; a collective of S bytes takes LATENCY_S + S / BYTES_PER_S.
CPU_LATENCY_S, CPU_BYTES_PER_S, CPU_ROUND_S = 0.5e-3, 1.5e9, 3e-3


def overlap_plan_lines(spec: SweepSpec, meta: Mapping[str, Any]) -> list[str]:
    """On CPU ranks, before the first probe: about how long the probes take (the model
    above) and that their figure means little there."""
    probes = [step for step in spec.steps() if step.kind == OVERLAP]
    if not probes or devices_per_rank(meta.get("ranks", [])):
        return []
    rounds = spec.warmup + spec.iters
    seconds = rounds * sum(
        (1 + (step.ratio or 1) + max(1, step.ratio or 1))
        * (CPU_LATENCY_S + step.size_bytes / CPU_BYTES_PER_S)
        + CPU_ROUND_S
        for step in probes
    )
    about = f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"
    return [
        f"# Overlap: {len(probes)} probe(s) of {rounds} rounds (the collective alone, the "
        f"compute alone, both): about {about} on CPU ranks, longer beside other jobs",
        "# On CPU ranks the overlap figure means little: gloo's thread and the matmul share "
        "the same cores, so little can hide; measure overlap on GPUs",
    ]


def _percent(value: float | None) -> str:
    return f"{100.0 * value:+9.1f}" if value is not None else f"{MISSING:>9}"


def format_probe_line(row: ProbeRow) -> str:
    """One overlap-probe row: the raw times, then what they mean."""
    ratio = f"{row.compute_ratio:5g}" if row.compute_ratio is not None else "tflop"
    wrong = "N/A" if row.n_wrong is None else str(row.n_wrong)
    times = "".join(
        f" {format_time_us(getattr(row, f't_{name}_us')):>9}"
        for name in ("comm", "comp", "both", "comp_during")
    )
    return (
        f"{row.size_bytes:12d}  {ratio:>5}  {row.compute_ratio_actual:5.2f}{times}"
        f"  {row.overlap_pct:7.1f}  {format_time_us(row.exposed_comm_us):>8}"
        f"  {_percent(row.compute_slowdown)}  {_percent(row.comm_slowdown)}"
        f" {wrong:>6}"
    )


def probe_summary_lines(rows: Sequence[ProbeRow], unfinished: str | None = None) -> list[str]:
    """Per ratio: the median overlap and compute slowdown (`unfinished`: as summary_lines)."""
    lines = []
    for ratio in sorted({row.compute_ratio for row in rows}, key=lambda r: (r is None, r)):
        group = [row for row in rows if row.compute_ratio == ratio]
        overlap = [row.overlap_pct for row in group]
        slowdown = median(row.compute_slowdown for row in group)
        label = f"ratio {ratio:g}" if ratio is not None else "fixed compute"
        lines.append(
            f"# {label}: median overlap {median(overlap):.1f}% "
            f"(range {min(overlap):.1f}-{max(overlap):.1f}), median compute slowdown "
            f"{100 * slowdown:+.1f}% over {len(group)} size(s)"
        )
    if short := sum(row.short_holds or 0 for row in rows):
        lines.append(f"# Short holds: {short} timed span(s) include the launch cost (short_holds)")
    if any(row.n_wrong is not None for row in rows):
        under = "" if unfinished else " (checked under compute)"
        lines.append(f"# Out of bounds values : {_checked(rows, unfinished)}{under}")
    return [*lines, "#"]
