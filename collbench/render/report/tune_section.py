"""The report's Tuning section: a `collbench tune` directory (or a `tune --from` result) read
back as a story: every setting against the default, the winners, the failures, NCCL's choices.

The method, in full: docs/tune.md#collbench-render-report-tune-section-py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from collbench.analysis.rules.bands import bands_legend
from collbench.analysis.tune.select import PLACEMENTS, describe_evidence, range_label
from collbench.core.stats import median
from collbench.core.units import counted, format_size
from collbench.render import charts
from collbench.render.report.document import Chart, Flagged, Report, Section, Table
from collbench.render.tune import DEFAULT_IS_BEST
from collbench.run.run_dirs import TuneDir
from collbench.store.rows import ResultRow
from collbench.store.tune_result import TuneSetting

BEST_HEADER = (
    "collective",
    "range",
    "best",
    "busbw (GB/s)",
    "default (GB/s)",
    "gain",
    "confident",
    "evidence",
    "why",
)
CHOICES_HEADER = ("setting", "collective", "size", "algorithm", "protocol", "channels")


def with_tuning(report: Report, sources: Sequence[TuneDir]) -> Report:
    """The report with a Tuning section per tune directory ahead of the per-collective ones."""
    tuning = [tune_section(source, len(sources) > 1) for source in sources]
    return replace(report, sections=[*tuning, *report.sections])


def tune_section(source: TuneDir, named: bool = False) -> Section:
    """Everything the report says about one tune: the lead lines, a busbw chart per
    collective (one line per setting), and the tables."""
    section = Section(f"Tuning: {source.name}" if named else "Tuning")
    section.warnings += list(source.warnings)
    section.lead += _lead(source)
    section.charts += _charts(source)
    section.tables += [_best_table(source), _settings_table(source)]
    section.tables += [table for table in _problem_tables(source) if table.rows]
    if source.choices is not None:
        section.tables.append(_choices_table(source))
    section.notes += list(source.document.warnings)
    return section


def _lead(source: TuneDir) -> list[str]:
    settings = source.document.settings
    failed = sum(item.failed for item in settings)
    dropped = sum(bool(item.dropped) for item in settings)
    launch = source.document.launch
    search = launch.search if launch is not None else None
    how = f"search {search}" if search else "from runs already measured (tune --from)"
    baseline = source.document.baseline
    lines = [
        f"{source.path}: {len(settings)} settings ({how}): {len(settings) - failed} ran, "
        f"{failed} failed, {dropped} dropped by the search; the default is "
        f"{baseline.label if baseline else 'unknown (no baseline setting)'}. "
        + _ranges_words(source)
    ]
    interrupted = source.document.interrupted
    if interrupted:
        not_run = len(launch.not_run) if launch is not None else 0
        lines.append(
            f"This tune was interrupted ({interrupted}): the result is chosen from the "
            f"settings that ran before it stopped; {not_run} setting(s) never started."
        )
    env = source.document.env
    lines.append(f"best.env exports {env.setting or 'baseline'}: {env.why or '-'}.")
    lines += [f"Not followed by best.env: {line}" for line in env.conflicts]
    return lines


def _ranges_words(source: TuneDir) -> str:
    """How the tune drew its size ranges (tune.json's rule)."""
    granularity = (source.document.rule or {}).get("granularity")
    if granularity == "band":
        return f"Size bands: {bands_legend()}."
    if granularity == "size":
        return "One range per measured size."
    return "Ranges end where the winner changes."


def _charts(source: TuneDir) -> list[Chart]:
    """One busbw chart per collective the settings measured, at the placement tuned."""
    rows = [row for rows in source.setting_rows.values() for row in rows]
    found = []
    for collective in sorted({str(row.collective) for row in rows}):
        placement = _placement(source, collective, rows)
        curves = setting_curves(source, collective, placement)
        marks = [
            RangeMark(item.band, item.min_bytes)
            for item in source.document.best
            if item.collective == collective
        ]
        title = f"{collective} ({placement}): bus bandwidth per setting"
        png = settings_chart(title, curves, marks)
        if png is not None:
            stem = f"tune_{source.name}_{collective}_{placement}"
            found.append(Chart(stem, f"{collective} {placement}: busbw per setting", png))
    return found


def _placement(source: TuneDir, collective: str, rows: list[ResultRow]) -> str:
    """The placement tune chose for a collective (its "best" entries say), else the first of
    PLACEMENTS measured, as the tune's selection does."""
    for item in source.document.best:
        if item.collective == collective and item.placement:
            return item.placement
    measured = {row.placement for row in rows if row.collective == collective}
    return next((name for name in PLACEMENTS if name in measured), sorted(measured)[0])


def setting_curves(source: TuneDir, collective: str, placement: str) -> list[SettingCurve]:
    """Each setting's median busbw per size (the settings' order as tune.json lists them)."""
    winners = {
        item.setting
        for item in source.document.best
        if item.collective == collective and not item.default_is_best
    }
    baseline = source.document.baseline and source.document.baseline.label
    curves = []
    for label, rows in source.setting_rows.items():
        by_size: dict[int, list[float]] = {}
        for row in rows:
            if (row.collective, row.placement) == (collective, placement) and row.size_bytes > 0:
                by_size.setdefault(int(row.size_bytes), []).append(float(row.busbw_gbps))
        if not by_size:
            continue
        sizes = tuple(sorted(by_size))
        busbw = tuple(float(median(by_size[size])) for size in sizes)
        curves.append(SettingCurve(label, sizes, busbw, label == baseline, label in winners))
    return curves


def _gbps(value: Any) -> str:
    return "-" if value is None else f"{float(value):.4g}"


def _best_table(source: TuneDir) -> Table:
    rows = []
    for item in source.document.best:
        confident = "yes" if item.confident else f"no ({item.confidence or '-'})"
        rows.append(
            (
                item.collective,
                range_label(item.band, item.sizes),  # as `collbench tune` prints it
                DEFAULT_IS_BEST if item.default_is_best else item.setting,
                _gbps(item.busbw_gbps),
                _gbps(item.baseline_busbw_gbps),
                "-" if item.gain is None else f"{item.gain * 100:+.1f}%",
                confident,
                describe_evidence(item.evidence),
                item.reason or "-",
            )
        )
    caption = "the winner per collective and size range (tune.json's best)"
    if not rows:
        caption += ": none (no setting measured a range the default measured)"
    return Table(BEST_HEADER, rows, caption=caption)


def _run_dirs(item: TuneSetting) -> str:
    """The setting's first run directory, and how many repeats it has beyond it."""
    first = item.run_dir
    if not first:
        return "-"
    more = len(item.run_dirs) - 1
    return f"{first} (+{counted(more, 'repeat')})" if more > 0 else str(first)


def _settings_table(source: TuneDir) -> Table:
    rows = []
    for item in source.document.settings:
        status = item.status or "-"
        if item.dropped:
            status += ", dropped"
        label = item.label
        drawn = "yes" if label in source.setting_rows else "no"
        duration_s = item.runs.duration_s if item.runs else None
        rows.append(
            (
                label + (" (default)" if item.baseline else ""),
                Flagged(status) if status.startswith("failed") else status,
                item.rows,
                "-" if duration_s is None else f"{float(duration_s):.1f}",
                _run_dirs(item),
                drawn,
            )
        )
    header = ("setting", "status", "rows", "time (s)", "run directory", "in the charts")
    return Table(header, rows, caption="every setting, in the order tune ran them")


def _problem_tables(source: TuneDir) -> list[Table]:
    """Failed settings with their error, settings the search dropped with its reason, and
    settings never run (the budget ran out)."""
    settings = source.document.settings
    failed = [
        (item.label, Flagged(str(item.error or "failed (no error recorded)")))
        for item in settings
        if item.failed
    ]
    dropped = [(item.label, item.dropped) for item in settings if item.dropped]
    launch = source.document.launch
    not_run = [
        (item.get("label"), item.get("reason") or "-")
        for item in (launch.not_run if launch is not None else ())
    ]
    return [
        Table(("setting", "error"), failed, caption="failed settings"),
        Table(("setting", "reason"), dropped, caption="dropped by the search (never fully swept)"),
        Table(("setting", "reason"), not_run, caption="not run"),
    ]


def _choices_table(source: TuneDir) -> Table:
    """What NCCL chose per setting, collective and size (choices.jsonl), folded: it is long."""
    labels = {item.id: item.label for item in source.document.settings}
    rows = [
        (
            labels.get(str(line.get("setting")), str(line.get("setting"))),
            line.get("collective"),
            "-" if line.get("size_bytes") is None else format_size(int(line["size_bytes"])),
            line.get("algorithm") or "-",
            line.get("protocol") or "-",
            "-" if line.get("channels") is None else line.get("channels"),
        )
        for line in source.choices or ()
    ]
    caption = f"what NCCL chose (choices.jsonl, {len(rows)} lines)"
    return Table(CHOICES_HEADER, rows, caption=caption, folded=True)


SETTINGS_LEGEND_MAX = 10  # more settings than this: the ones that win no range share one entry
RANGE_NAMES_MAX = 6  # more ranges than this (one per size): boundaries only, no names
BASELINE_COLOR = "#000000"


@dataclass(frozen=True)
class SettingCurve:
    """One tune setting's busbw per size (filled from the setting's rows)."""

    label: str
    sizes: tuple[int, ...]
    busbw_gbps: tuple[float, ...]
    baseline: bool = False  # the default environment: drawn black, thick, on top
    winner: bool = False  # best in some size range: drawn solid; the others lighter


@dataclass(frozen=True)
class RangeMark:
    """A size range of the tune's choice, drawn as a boundary at its lower end."""

    name: str
    min_bytes: int


def settings_chart(
    title: str, curves: Sequence[SettingCurve], ranges: Sequence[RangeMark] = ()
) -> bytes | None:
    """busbw vs size, one line per setting: the baseline black and thick so every other line
    reads against it, settings that win a range in full color, the rest lighter (grey, in one
    legend entry, past SETTINGS_LEGEND_MAX settings). None without a size above 0."""
    drawn = [curve for curve in curves if any(size > 0 for size in curve.sizes)]
    if not drawn:
        return None
    plt = charts.pyplot()
    figure, axes = plt.subplots(figsize=charts.FIGSIZE_IN)
    crowded = len(drawn) > SETTINGS_LEGEND_MAX
    handles: list[Any] = []
    labels: list[str] = []
    others: list[Any] = []
    colored = 0
    for curve in drawn:
        grey = crowded and not (curve.baseline or curve.winner)
        color = BASELINE_COLOR if curve.baseline else charts.OTHER_COLOR if grey else None
        if color is None:
            color = charts.COLORS[colored % len(charts.COLORS)]
            colored += 1
        line = _draw_setting(axes, curve, color)
        if grey:
            others.append(line)
            continue
        handles.append(line)
        mark = " (default)" if curve.baseline else " (best in a range)" if curve.winner else ""
        labels.append(charts.short(curve.label) + mark)
    if others:
        handles.append(others[0])
        labels.append(f"{len(others)} other settings")
    sizes = [size for curve in drawn for size in curve.sizes if size > 0]
    busbw = [value for curve in drawn for value in curve.busbw_gbps]
    charts.size_axis(axes, sizes)
    axes.set_ylim(0, max(max(busbw, default=0.0), 1e-9) * charts.HEADROOM)
    _draw_ranges(axes, ranges, min(sizes), max(sizes))
    axes.set_ylabel("bus bandwidth (GB/s)")
    axes.set_title(title)
    charts.legend_below(axes, handles, labels)
    return charts.save_png(figure)


def _draw_setting(axes: Any, curve: SettingCurve, color: str) -> Any:
    points = sorted(
        (size, value)
        for size, value in zip(curve.sizes, curve.busbw_gbps, strict=True)
        if size > 0 and np.isfinite(value)
    )
    sizes, busbw = zip(*points, strict=True) if points else ((), ())
    if curve.baseline:
        style = {"linewidth": 2.6, "marker": "s", "markersize": 5, "zorder": 5}
    elif curve.winner:
        style = {"linewidth": 1.6, "marker": "o", "markersize": 4, "zorder": 4}
    else:
        style = {"linewidth": 1.0, "marker": "o", "markersize": 3, "alpha": 0.55, "zorder": 3}
    (line,) = axes.plot(sizes, busbw, "-", color=color, **style)
    return line


def _draw_ranges(axes: Any, ranges: Sequence[RangeMark], low: float, high: float) -> None:
    """A dotted boundary at each range's lower end inside the sizes drawn, the range's
    name just right of it at the top (the first range's name at the left edge; one that
    starts at the largest size drawn has its boundary alone)."""
    from matplotlib.transforms import blended_transform_factory

    place = blended_transform_factory(axes.transData, axes.transAxes)
    named = len(ranges) <= RANGE_NAMES_MAX
    for index, item in enumerate(sorted(ranges, key=lambda mark: mark.min_bytes)):
        start = max(float(item.min_bytes), low)
        if start > high:
            continue
        if index and item.min_bytes > low:
            axes.axvline(start, color=charts.MODEL_COLOR, linewidth=0.8, linestyle=":")
        if named and start < high:  # no room right of the largest size
            axes.text(
                start,
                0.97,
                f" {item.name}",
                transform=place,
                fontsize=8,
                va="top",
                color=charts.MODEL_COLOR,
            )
