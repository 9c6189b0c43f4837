"""`collbench tune verify DIR`: measure a tune result against the default, in fresh
processes, and say what gain it really gives.

The method, in full: docs/tune.md#collbench-run-tune-verify-py.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collbench.analysis.rules.decision import SLOWER, UNJUDGED
from collbench.analysis.tune.select import BestRecord, SizeRange, describe_evidence, select_best
from collbench.analysis.tune.tuner_conf_rules import parse_tuner_conf
from collbench.core.errors import EXIT_RUN_FAILED, SpecError
from collbench.core.spec import SweepSpec
from collbench.core.tune_grid import BASELINE, KnobAxis, Setting
from collbench.run.sweep import RunOptions
from collbench.run.tune.launch import TunePlan, Tuner
from collbench.store.outputs import check_output_dir
from collbench.store.rundir import new_run_id, write_json_atomic
from collbench.store.sink import SinkFactory
from collbench.store.tune_result import (
    BEST_ENV,
    TUNE_JSON,
    TUNER_CONF,
    TuneResult,
    load_tune_result,
    read_best_env,
)

TUNER_PLUGIN_VAR = "NCCL_TUNER_PLUGIN"
TUNER_CONFIG_VAR = "NCCL_TUNER_CONFIG_FILE"


@dataclass(frozen=True)
class VerifyLine:
    """One collective x range of the tune: the gain it predicted and the gain measured now."""

    collective: str
    band: str
    min_bytes: int
    max_bytes: int
    setting: str  # what was verified there
    predicted_gain: float | None  # None: the tune chose another setting in this range
    tuned_best: str  # the tune's choice in this range
    realised_gain: float | None
    busbw_gbps: float | None
    baseline_busbw_gbps: float | None
    confident: bool
    confidence: str
    call: str = ""  # kept | lost | no difference | unjudged
    evidence: str = "-"  # the evidence the call rests on, one line


@dataclass(frozen=True)
class VerifyResult:
    out: Path
    settings: list[dict[str, Any]]  # label, knobs, status, error, run_dir
    lines: list[VerifyLine]
    document: dict[str, Any]
    notes: list[str] = field(default_factory=list)


def run_verify(
    tune_dir: Path,
    out: Path | None,
    options: RunOptions,
    spec_fields: Mapping[str, Any],
    command_line: list[str],
    make_sink: SinkFactory,
    say: Callable[[str], None],
    repeats: int | None = None,
) -> tuple[VerifyResult | None, int]:
    """Measure the default and the tune's choice side by side (see the module); `repeats`:
    runs of each (None: the tune's own count, else TunePlan's default)."""
    document = load_tune_result(tune_dir, "DIR")
    knobs = dict(document.env.knobs)
    exported = read_best_env(tune_dir, "DIR")
    if exported != knobs:
        raise SpecError(
            "DIR",
            str(tune_dir),
            f"has a {BEST_ENV} that exports {_words(exported)} but its {TUNE_JSON} chose "
            f"{_words(knobs)}: one of them was changed; run the tune again",
        )
    if not knobs:
        say(f"tune verify: {tune_dir}'s best.env exports nothing (the default is best)")
        return None, 0
    out = Path(out) if out is not None else Path(tune_dir) / f"verify-{new_run_id()}"
    check_output_dir("--out", out)
    spec = _spec(document, spec_fields)
    sides = verify_sides(knobs, Path(tune_dir) / TUNER_CONF, os.environ)
    settings, notes = sides.settings, list(sides.notes)
    for warning in sides.warnings:
        say(f"collbench: warning: {warning}")
    repeats = repeats if repeats is not None else document.repeats
    counted = {"repeats": int(repeats)} if repeats is not None else {}
    axes = tuple(KnobAxis(name, (value,)) for name, value in knobs.items())
    plan = TunePlan(axes, out, record_choices=False, **counted)
    tuner = Tuner(spec, options, plan, command_line, make_sink, say)
    tuner.base_env = dict(sides.base_env)  # the plugin goes only with its config
    Path(out).mkdir(parents=True, exist_ok=True)
    say(
        f"tune verify: the default, then {', '.join(s.label for s in settings[1:])}"
        f"{tuner.repeat_words()}"
    )
    tuner.run_all(settings, spec)
    items = [tuner.measured[setting] for setting in settings if setting in tuner.measured]
    lines = []
    for setting in settings[1:]:
        pair = [items[0].outcome(), tuner.measured[setting].outcome()]
        lines += _lines(document, setting, select_best(pair, ranges=tuned_ranges(document)))
    entries = [
        {
            "label": item.setting.label,
            "knobs": item.setting.as_dict(),
            "status": "failed" if item.error else "ok",
            "error": item.error,
            "run_dir": item.run_dir,
            "run_dirs": item.run_dirs,
        }
        for item in items
    ]
    result_doc = {
        "kind": "tune-verify",
        "tune_dir": str(tune_dir),
        "repeats": plan.repeats,
        "settings": entries,
        "lines": [vars(line) for line in lines],
        "notes": notes,
        "warnings": list(sides.warnings),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    write_json_atomic(Path(out) / "verify.json", result_doc)
    code = 0 if all(entry["status"] == "ok" for entry in entries) else EXIT_RUN_FAILED
    return VerifyResult(Path(out), entries, lines, result_doc, notes), code


@dataclass(frozen=True)
class VerifySides:
    """What --verify runs: the settings (the default, best.env's, and the nccl_tuner.conf
    one when a plugin is named), the environment they start from, and what to say."""

    settings: list[Setting]
    base_env: Mapping[str, str]
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


def verify_sides(knobs: Mapping[str, str], conf: Path, environ: Mapping[str, str]) -> VerifySides:
    """The settings --verify measures from the environment as given. The tuner plugin goes
    only with its config: NCCL_TUNER_PLUGIN and NCCL_TUNER_CONFIG_FILE are taken out of the
    environment the default and best.env's setting run with (NCCL's example plugin gives a
    call no rule matches 1 channel, so a plugin without the tune's config would slow them),
    and only the config setting names both; a warning says so when the environment loaded a
    plugin. NCCL may still load libnccl-tuner.so, or a network plugin's tuner, by itself
    (NCCL_TUNER_PLUGIN=none stops that): the warning names it."""
    plugin, names = environ.get(TUNER_PLUGIN_VAR), (TUNER_PLUGIN_VAR, TUNER_CONFIG_VAR)
    base_env = {name: value for name, value in environ.items() if name not in names}
    settings = [BASELINE, Setting.from_mapping(knobs)]
    notes, warnings = [], []
    loaded = [f"{name}={environ[name]}" for name in names if environ.get(name)]
    if loaded:
        warnings.append(
            f"the environment loads a tuner plugin ({' and '.join(loaded)}): the default and "
            f"best.env's setting run without it, so the default is NCCL's own choice; only "
            f"the {TUNER_CONF} setting loads the plugin, with its config "
            f"({TUNER_PLUGIN_VAR}=none also stops NCCL loading libnccl-tuner.so or a network "
            "plugin's tuner by itself)"
        )
    if conf.is_file() and plugin:
        parse_tuner_conf(conf.read_text(errors="replace"))  # the plugin's CSV, or refused
        with_conf = {TUNER_PLUGIN_VAR: plugin, TUNER_CONFIG_VAR: str(conf.absolute())}
        settings.append(Setting.from_mapping(with_conf))
    elif conf.is_file():
        notes.append(
            f"{TUNER_CONF} not verified: set {TUNER_PLUGIN_VAR} to the tuner plugin's library "
            "to measure it too"
        )
    return VerifySides(settings, base_env, tuple(notes), tuple(warnings))


def _spec(document: TuneResult, spec_fields: Mapping[str, Any]) -> SweepSpec:
    """The tune's sweep with the options given now replacing its values."""
    recorded = document.spec
    if not recorded:
        collectives = sorted({entry.collective for entry in document.best})
        if collectives:
            recorded["collectives"] = tuple(collectives)
    # One pass per process, as tune measured: verify's repeats start fresh processes.
    return SweepSpec(**{**recorded, **spec_fields, "repeats": 1})


def _lines(document: TuneResult, setting: Setting, measured: list[BestRecord]) -> list[VerifyLine]:
    lines = []
    for record in measured:
        if record.default_is_best:
            candidate = record.candidate or {}
            realised, busbw = candidate.get("gain"), candidate.get("busbw_gbps")
        else:
            realised, busbw = record.gain, record.busbw_gbps
        match = _tuned_for(document.best, record)
        tuned_best = "-" if match is None else match.setting or "baseline"
        predicted = match.gain if match is not None and match.knobs == setting.as_dict() else None
        lines.append(
            VerifyLine(
                record.collective,
                record.band,
                record.min_bytes,
                record.max_bytes,
                setting.label,
                predicted,
                tuned_best,
                realised,
                busbw,
                record.baseline_busbw_gbps,
                record.confident and not record.default_is_best,
                record.confidence,
                verify_call(record),
                describe_evidence(record.evidence),
            )
        )
    return lines


def verify_call(record: BestRecord) -> str:
    """The rule's call on the verified setting against the default in one range: kept when
    it replaces the default there (called faster), lost when called slower at most sizes."""
    evidence = record.evidence
    if evidence is None or evidence.basis == UNJUDGED:
        return UNJUDGED
    if not record.default_is_best:
        return "kept"
    slower = evidence.calls.get(SLOWER, 0)
    return "lost" if slower > sum(evidence.calls.values()) / 2 else "no difference"


def tuned_ranges(document: TuneResult) -> dict[str, list[SizeRange]]:
    """The tune's own ranges per collective (tune.json's best entries), judged again on the
    verify runs: ranges drawn afresh from those runs would not line up with the tune's."""
    ranges: dict[str, list[SizeRange]] = {}
    for entry in document.best:
        size_range = SizeRange(entry.band, entry.min_bytes, entry.max_bytes)
        ranges.setdefault(entry.collective, []).append(size_range)
    return ranges


def _tuned_for(tuned: Sequence[BestRecord], record: BestRecord) -> BestRecord | None:
    """The tune's best entry for the same collective whose range holds this one's sizes."""
    return next(
        (
            entry
            for entry in tuned
            if entry.collective == record.collective
            and entry.min_bytes <= record.min_bytes <= record.max_bytes <= entry.max_bytes
        ),
        None,
    )


def _words(knobs: Mapping[str, str]) -> str:
    """Knobs as one short phrase: `NAME=VALUE NAME=VALUE`, or `nothing`."""
    text = " ".join(f"{name}={value}" for name, value in knobs.items()) or "nothing"
    return text if len(text) <= 80 else text[:77] + "..."
