"""A tune directory's result (`TuneResult`): tune.json, best.env, nccl_tuner.conf, saved together.

The method, in full: docs/tune.md#collbench-store-tune-result-py.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from collbench.core.convert import convert, plain
from collbench.core.errors import SpecError
from collbench.core.safe_text import ENV_NAME
from collbench.store.reading import load_json
from collbench.store.rundir import write_atomically, write_json_atomic

TUNE_JSON = "tune.json"
BEST_ENV = "best.env"
TUNER_CONF = "nccl_tuner.conf"
CHOICES_FILE = "choices.jsonl"  # what NCCL chose per setting (a launched tune on NCCL/RCCL)
TUNE_KIND = "tune"  # tune.json's "kind" for a launched tune


@dataclass(frozen=True)
class TuneSetting:
    """One setting as tune.json lists it."""

    knobs: dict[str, str] = field(default_factory=dict)
    status: str = "ok"  # "ok" or "failed"
    error: str | None = None
    id: str = ""
    label: str = ""
    baseline: bool = False
    rows: int = 0
    repeats: int = 0
    # A launched tune's: the full sweeps' run directories (one per repeat, relative to the
    # tune directory), probe rounds, why the search dropped it, later repeats' errors, time.
    # None: a `tune from` setting, which ran nothing here.
    runs: SettingRuns | None = None

    @property
    def run_dir(self) -> str | None:
        """Its first full sweep's directory (None: none ran)."""
        return self.runs.run_dirs[0] if self.runs and self.runs.run_dirs else None

    @property
    def run_dirs(self) -> tuple[str, ...]:
        return self.runs.run_dirs if self.runs else ()

    @property
    def dropped(self) -> str | None:
        return self.runs.dropped if self.runs else None

    @property
    def failed(self) -> bool:
        return self.status == "failed"

    def to_dict(self) -> dict[str, Any]:
        data = plain(replace(self, runs=None))
        del data["runs"]  # its keys follow the setting's own
        return data if self.runs is None else {**data, **self.runs.to_dict()}


@dataclass(frozen=True)
class SettingRuns:
    """What a launched tune ran of one setting."""

    run_dirs: tuple[str, ...] = ()
    probes: tuple[str, ...] = ()
    dropped: str | None = None
    repeat_errors: tuple[str, ...] = ()
    duration_s: float | None = None
    # pairings NCCL cannot run under the setting, never launched: {collective, reason} each
    skipped: tuple[dict[str, str], ...] = ()
    # the pairing its sweep failed in, its finished rows kept: {collective, error}
    failed_in: dict[str, str] | None = None

    def to_dict(self) -> dict[str, Any]:
        data = {"run_dir": self.run_dirs[0] if self.run_dirs else None, **plain(self)}
        # written only where they say something: an older tune.json reads back unchanged
        if not self.skipped:
            del data["skipped"]
        if self.failed_in is None:
            del data["failed_in"]
        return data


@dataclass(frozen=True)
class EnvExport:
    """What best.env exports ({}: the default is the choice) and the ranges it does not follow."""

    knobs: dict[str, str] = field(default_factory=dict)
    setting: str = "baseline"
    why: str = ""
    conflicts: tuple[str, ...] = ()


@dataclass(frozen=True)
class TuneLaunch:
    """How a launched tune ran (absent from a `tune from` result)."""

    search: str | None = None
    repeats: int | None = None
    budget_s: float | None = None
    command_line: tuple[str, ...] = ()
    spec: dict[str, Any] = field(default_factory=dict)  # SweepSpec.to_dict
    launcher: str | None = None
    not_run: tuple[dict[str, Any], ...] = ()  # knobs, label, reason
    elapsed_s: float | None = None


@dataclass(frozen=True)
class TunerConfStatus:
    """Whether nccl_tuner.conf was written, why not, and the notes that go with it."""

    written: bool = False
    reason: str | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class TuneEvidence:
    """What a range's call rests on: the best other setting against the default, over the
    range's sizes. `basis` is the weakest basis among the sizes (repeats | noise floor |
    threshold | unjudged); `calls` counts the rule's call per size; the effect, interval,
    floor and Holm p are the verdict at the median effect (percent of the default's busbw;
    null in tune.json where none was measured)."""

    basis: str
    baseline_repeats: int
    candidate_repeats: int
    calls: dict[str, int]
    effect_pct: float | None
    low_pct: float | None
    high_pct: float | None
    floor_pct: float | None
    floor_source: str
    p_holm: float | None
    verdict: str  # Verdict.describe() of that median size


@dataclass(frozen=True)
class BestRecord:
    """One collective x size range: what to deploy there; a tune.json "best" entry (the
    issue's keys first). An entry written by hand may give only the range and its knobs."""

    collective: str
    min_bytes: int
    max_bytes: int
    # the chosen setting's knobs: {} when the default is best (tune from where every run
    # set a knob: the knobs of the first RUN, which stands for the default)
    knobs: dict[str, str] = field(default_factory=dict)
    busbw_gbps: float | None = None  # null in tune.json where none was measured
    baseline_busbw_gbps: float | None = None
    gain: float | None = None  # busbw_gbps / baseline_busbw_gbps - 1
    confident: bool = False
    band: str = ""
    placement: str = ""
    sizes: tuple[int, ...] = ()
    setting: str = "baseline"  # the chosen setting's label
    setting_id: str = ""
    default_is_best: bool = False
    # significant | not significant (repeats) | beyond noise floor | within noise floor
    # (noise floor) | decided by threshold, no samples | unjudged | no baseline | baseline only
    confidence: str = ""
    reason: str = ""
    candidate: dict[str, Any] | None = None  # the best other setting
    evidence: TuneEvidence | None = None  # the best other setting against the default


@dataclass(frozen=True)
class TuneResult:
    """tune.json's content (see the module)."""

    settings: tuple[TuneSetting, ...]
    best: tuple[BestRecord, ...]  # per collective and size range
    env: EnvExport = field(default_factory=EnvExport)
    rule: dict[str, Any] = field(default_factory=dict)  # the SelectRule used
    launch: TuneLaunch | None = None  # a launched tune's; None: `tune from`
    sources: tuple[str, ...] | None = None  # `tune from`'s RUNs as given
    tuner_conf: TunerConfStatus | None = None
    warnings: tuple[str, ...] = ()
    # How a launched tune was cut short ("interrupted (Ctrl-C)"); None: it ran to its end.
    interrupted: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # keys collbench does not know

    @property
    def baseline(self) -> TuneSetting | None:
        return next((item for item in self.settings if item.baseline), None)

    @property
    def spec(self) -> dict[str, Any]:
        """The launched tune's sweep (SweepSpec.to_dict); {} for `tune from`."""
        return dict(self.launch.spec) if self.launch is not None else {}

    @property
    def repeats(self) -> int | None:
        return self.launch.repeats if self.launch is not None else None

    def to_dict(self) -> dict[str, Any]:
        """tune.json's content, in its key order."""
        data: dict[str, Any] = {
            "settings": [item.to_dict() for item in self.settings],
            "best": plain(self.best),
            "env": plain(self.env),
            "rule": dict(self.rule),
        }
        launch = self.launch
        if launch is not None:
            launched = plain(launch)
            launched["spec"] = dict(launch.spec)  # SweepSpec.to_dict's values, as they are
            del launched["elapsed_s"]  # written after the warnings
            data.update(kind=TUNE_KIND, **launched)
        if self.sources is not None:
            data["from"] = list(self.sources)
        if self.tuner_conf is not None:
            data["tuner_conf"] = plain(self.tuner_conf)
        data["warnings"] = list(self.warnings)
        if launch is not None:
            data["elapsed_s"] = launch.elapsed_s
        if self.interrupted is not None:
            data["interrupted"] = self.interrupted
        return {**data, **self.extra}

    @classmethod
    def from_dict(cls, data: Any, where: str = TUNE_JSON) -> TuneResult:
        """The result of tune.json's content. SpecError(TUNE_JSON, where, ...) for content
        that is not a tune's: it needs a settings list and a best list of objects."""
        if not isinstance(data, Mapping):
            raise SpecError(TUNE_JSON, where, "that is not a JSON object: not a tune directory")
        for key in ("settings", "best"):
            items = data.get(key)
            if not isinstance(items, list) or not all(isinstance(i, Mapping) for i in items):
                raise SpecError(TUNE_JSON, where, f"without a {key} list: not a tune directory")
        try:
            return _read(data, where)
        except (TypeError, ValueError, AttributeError) as error:
            raise SpecError(
                TUNE_JSON, where, f"with a value of the wrong type ({error}): not a tune's"
            ) from None


_KNOWN = {"settings", "best", "env", "rule", "kind", "from", "tuner_conf", "warnings"}
_LAUNCH_KEYS = tuple(launch_key.name for launch_key in fields(TuneLaunch))
_KNOWN |= {"interrupted", *_LAUNCH_KEYS}
_RUN_KEYS = ("run_dir", *(run_key.name for run_key in fields(SettingRuns)))


def _read(data: Mapping[str, Any], where: str) -> TuneResult:
    """tune.json's content through msgspec; a key that is null or missing takes its
    field's default (files older than a field read as before it existed)."""

    def typed(value: Any, kind: Any) -> Any:
        if isinstance(value, Mapping):
            value = {key: item for key, item in value.items() if item is not None}
        return convert(value, kind, TUNE_JSON, where)

    launched = data.get("kind") == TUNE_KIND or "search" in data
    conf = data.get("tuner_conf")
    launch = {key: data[key] for key in _LAUNCH_KEYS if data.get(key) is not None}
    return TuneResult(
        settings=tuple(_setting(typed, item) for item in data["settings"]),
        best=typed(data["best"], tuple[BestRecord, ...]),
        env=typed(data.get("env") or {}, EnvExport),
        rule=dict(data.get("rule") or {}),
        launch=typed(launch, TuneLaunch) if launched else None,
        sources=typed(data["from"], tuple[str, ...]) if "from" in data else None,
        tuner_conf=None if conf is None else typed(conf, TunerConfStatus),
        warnings=typed(data.get("warnings") or [], tuple[str, ...]),
        interrupted=typed(data.get("interrupted"), str | None),
        extra={key: value for key, value in data.items() if key not in _KNOWN},
    )


def _setting(typed: Callable[[Any, Any], Any], item: Mapping[str, Any]) -> TuneSetting:
    """A setting's entry: its own keys, and a launched tune's run keys (SettingRuns)."""
    runs = {key: item[key] for key in _RUN_KEYS if item.get(key) is not None}
    if "run_dirs" not in runs and runs.get("run_dir"):  # older files: one run_dir
        runs["run_dirs"] = [runs["run_dir"]]
    runs.pop("run_dir", None)
    own = {key: value for key, value in item.items() if key not in _RUN_KEYS}
    setting = typed(own, TuneSetting)
    launched = any(key in item for key in _RUN_KEYS)
    return replace(setting, runs=typed(runs, SettingRuns)) if launched else setting


def is_tune_dir(path: Path) -> bool:
    """A directory `collbench tune` (or `tune from`) wrote: it holds tune.json."""
    return (Path(path) / TUNE_JSON).is_file()


def load_tune_result(tune_dir: Path, field: str) -> TuneResult:
    """A tune directory's tune.json, or one SpecError naming `field` (the option that gave
    the directory) and the directory, saying why it is not a tune's, or that a setting's
    run directory lies outside it (never followed)."""
    path = Path(tune_dir) / TUNE_JSON
    if not Path(tune_dir).is_dir():
        raise SpecError(field, str(tune_dir), "is not a directory")
    if not path.is_file():
        raise SpecError(
            field, str(tune_dir), f"is not a tune directory (no {TUNE_JSON}: run collbench tune)"
        )
    try:
        data = load_json(path, TUNE_JSON)  # within core.limits (store.reading)
    except (OSError, ValueError) as error:
        raise SpecError(
            field, str(tune_dir), f"has a {TUNE_JSON} that cannot be read ({error})"
        ) from None
    try:
        result = TuneResult.from_dict(data, str(path))
    except SpecError as error:
        raise SpecError(field, str(tune_dir), f"has a {TUNE_JSON} {error.hint}") from None
    _check_contained(result, tune_dir, field)
    return result


def _check_contained(result: TuneResult, tune_dir: Path, field: str) -> None:
    """Every setting's run and probe directories lie inside the tune directory (relative,
    no `..`, not leading out through a link): a tune.json edited to point elsewhere
    (`../../etc`) is refused, never followed."""
    root = Path(tune_dir).resolve()
    for item in result.settings:
        runs = item.runs
        for path in (*runs.run_dirs, *runs.probes) if runs else ():
            inside = not Path(path).is_absolute() and ".." not in Path(path).parts
            if not inside or not (root / path).resolve().is_relative_to(root):
                raise SpecError(
                    field,
                    str(tune_dir),
                    f"has a {TUNE_JSON} whose setting {item.label!r} names the run directory "
                    f"{path!r}, outside the tune directory: refused, not followed",
                )


# best.env is a few lines; more than this is not one collbench wrote.
BEST_ENV_MAX_BYTES = 1 << 20


def read_best_env(tune_dir: Path, field: str) -> dict[str, str]:
    """What a tune directory's best.env exports ({NAME: VALUE}, in order): comment and blank
    lines, and `export NAME=VALUE` lines (the value shell-quoted, as best.env is written).
    One SpecError naming `field` and the file (and line) for a missing, unreadable or
    oversized file or any other line."""
    path = Path(tune_dir) / BEST_ENV
    if not path.is_file():
        raise SpecError(field, str(tune_dir), f"has no {BEST_ENV}: not a complete tune result")
    if path.stat().st_size > BEST_ENV_MAX_BYTES:
        raise SpecError(field, str(path), f"is over {BEST_ENV_MAX_BYTES:,} bytes: not a best.env")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise SpecError(field, str(path), f"cannot be read ({error})") from None
    exports: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            words = shlex.split(line)
        except ValueError:
            words = []
        name, equals, value = words[1].partition("=") if len(words) == 2 else ("", "", "")
        if words[:1] != ["export"] or not equals or not ENV_NAME.fullmatch(name):
            raise SpecError(
                field,
                f"{path} line {number}",
                "is not a comment or an `export NAME=VALUE` line: not a best.env collbench wrote",
            )
        exports[name] = value
    return exports


def save_tune_result(
    out: Path, result: TuneResult, best_env: str, tuner_conf: str | None
) -> list[Path]:
    """tune.json, best.env and (when given) nccl_tuner.conf into `out`, each atomically;
    the paths written."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = [out / TUNE_JSON, out / BEST_ENV]
    write_json_atomic(written[0], result.to_dict())
    _write_text(written[1], best_env)
    if tuner_conf is not None:
        written.append(out / TUNER_CONF)
        _write_text(written[-1], tuner_conf)
    return written


def _write_text(path: Path, text: str) -> None:
    write_atomically(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
