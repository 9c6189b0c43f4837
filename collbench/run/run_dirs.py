"""RUN arguments of the commands that read finished runs (fit, compare, noise, report): run
directories, and a tune directory (DIR/tune.json) read as the runs of its settings
(`expand_runs`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collbench.core.errors import SpecError
from collbench.store.tune_result import CHOICES_FILE, TuneResult, is_tune_dir, load_tune_result

if TYPE_CHECKING:
    from collbench.store.load import Reduce, Run
    from collbench.store.rows import ResultRow


def load_run_dir(path: Path, reduce: Reduce | None = None) -> Run:
    """A run directory's meta and rows, or SpecError naming the path (`reduce`: store.load)."""
    from collbench.store.load import load_run

    if not Path(path).is_dir():
        raise SpecError("RUN", str(path), "is not a run directory")
    return load_run(
        path, "RUN", ": pass a directory written by collbench sweep or collbench import", reduce
    )


@dataclass(frozen=True)
class TuneDir:
    """A tune directory as read: tune.json, each setting's sweep rows, NCCL's choices, and
    what could not be read (one line each); the report's Tuning section draws it."""

    path: str
    document: TuneResult  # tune.json
    # setting label -> the sweep rows of its full run (settings that ran one and could be read)
    setting_rows: dict[str, tuple[ResultRow, ...]]
    choices: tuple[dict[str, Any], ...] | None  # None: no choices.jsonl
    warnings: tuple[str, ...]

    @property
    def name(self) -> str:
        return Path(self.path).name or self.path


@dataclass(frozen=True)
class ExpandedRuns:
    """RUN arguments with every tune directory replaced by its settings' runs: the runs in
    order (a tune's baseline first among its own), the path each came from, the legend
    name of each expanded run (its setting's label), and the tunes read."""

    paths: list[Path]
    runs: list[Run]
    labels: dict[str, str]  # run path -> name, for runs a tune directory gave
    tunes: list[TuneDir]


def expand_runs(paths: list[Path], reduce: Reduce | None = None) -> ExpandedRuns:
    """Load RUN arguments, a tune directory as the runs of its settings (see ExpandedRuns).
    With several tune directories, each setting's name starts with its directory's.
    `reduce`: run directories are read with their samples apart (store.load)."""
    several = sum(is_tune_dir(path) for path in paths) > 1
    expanded = ExpandedRuns([], [], {}, [])
    for path in paths:
        if not is_tune_dir(path):
            expanded.paths.append(Path(path))
            expanded.runs.append(load_run_dir(path, reduce))
            continue
        source, members = load_tune_dir(Path(path))
        expanded.tunes.append(source)
        for member, run, label in members:
            expanded.paths.append(member)
            expanded.runs.append(run)
            expanded.labels[run.path] = f"{source.name}: {label}" if several else label
    return expanded


def load_tune_dir(path: Path) -> tuple[TuneDir, list[tuple[Path, Run, str]]]:
    """A tune directory's tune.json, choices and runs ((path, run, label), the baseline
    first). A setting's run directory or a `tune from` RUN that cannot be read is left out
    with a warning; a tune.json that is not a tune's is a SpecError."""
    document = load_tune_result(path, "RUN")
    if any(item.run_dir for item in document.settings):
        members, warnings = _setting_runs(path, document)
        rows = {label: tuple(run.sweep_rows) for _, run, label in members}
        warnings += _later_repeats(path, document, rows)
    else:
        members, rows, warnings = _from_runs(path, document)
    choices, choice_warnings = _choices(path / CHOICES_FILE)
    source = TuneDir(str(path), document, rows, choices, tuple(warnings + choice_warnings))
    return source, members


def _later_repeats(
    path: Path, document: TuneResult, rows: dict[str, tuple[ResultRow, ...]]
) -> list[str]:
    """tune run --repeats: add each setting's later repeats to `rows`, numbered as the tune
    pooled them (repeat K's rows at K); a repeat that cannot be read is left out with a
    warning, as a setting's first run is."""
    from collbench.analysis.tune.from_runs import as_repeats

    warnings = []
    for item in document.settings:
        label = item.label
        if label not in rows:
            continue
        for index, later in enumerate(item.run_dirs[1:], start=1):
            try:
                measured = load_run_dir(path / str(later)).sweep_rows
            except SpecError as error:
                warnings.append(f"{label}: repeat {index + 1} ({later}) left out: {error}")
                continue
            rows[label] += tuple(as_repeats(measured, index))
    return warnings


def _setting_runs(
    path: Path, document: TuneResult
) -> tuple[list[tuple[Path, Run, str]], list[str]]:
    """The settings' full runs (entries with a run_dir), the baseline first. A failed
    setting is left out: the tune chose without its rows, and the Tuning section lists it."""

    members, warnings = [], []
    for item in sorted(document.settings, key=lambda item: not item.baseline):
        if not item.run_dir or item.failed:
            continue
        member = path / item.run_dir
        try:
            run = load_run_dir(member)
        except SpecError as error:
            warnings.append(f"setting {item.label} left out: {error}")
            continue
        members.append((member, run, item.label))
    return members, warnings


def _from_runs(
    path: Path, document: TuneResult
) -> tuple[list[tuple[Path, Run, str]], dict[str, tuple[ResultRow, ...]], list[str]]:
    """A `tune from` result: its RUNs (as given to it, or relative to the tune directory),
    grouped into settings as tune from grouped them; a RUN that is gone is left out."""
    from collbench.analysis.tune.from_runs import outcomes_from_runs, run_label, varying_knobs

    loaded, warnings = [], []
    for given in document.sources or ():
        member = next(
            (where for where in (Path(given), path / given) if where.is_dir()), Path(given)
        )
        try:
            loaded.append((member, load_run_dir(member)))
        except SpecError as error:
            warnings.append(f"tune from RUN {given} left out: {error}")
    if not loaded:
        return [], {}, warnings
    runs = [run for _, run in loaded]
    outcomes = outcomes_from_runs(runs)
    names = varying_knobs(runs)
    labels = [run_label(run, names) for run in runs]
    baseline = next(item.setting.label for item in outcomes if item.is_baseline)
    members = [
        (member, run, label if labels.count(label) == 1 else f"{label} ({member.name})")
        for (member, run), label in sorted(
            zip(loaded, labels, strict=True), key=lambda pair: pair[1] != baseline
        )
    ]
    return members, {item.setting.label: item.rows for item in outcomes}, warnings


def _choices(file: Path) -> tuple[tuple[dict[str, Any], ...] | None, list[str]]:
    """choices.jsonl's lines (None without the file); a line that is not a JSON object is
    left out with a warning."""
    if not file.is_file():
        return None, []
    lines, warnings = [], []
    for number, text in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
        if not text.strip():
            continue
        try:
            line = json.loads(text)
        except ValueError:
            line = None
        if isinstance(line, dict):
            lines.append(line)
        else:
            warnings.append(f"{file} line {number} is not a JSON object; left out")
    return tuple(lines), warnings
