"""`collbench tune`'s nccl_tuner.conf: the best setting per collective and size range, written
for NCCL's example tuner plugin (NCCL_TUNER_PLUGIN, NCCL_TUNER_CONFIG_FILE) or RCCL's copy of
it (pure: best records in, text and notes out). How the plugin reads the file is in
analysis/tune/tuner_conf_rules.py; the rules of writing it, each written once here:

- What a rule can say: one algorithm, one protocol and a channel count, per collective and
  inclusive byte range. A range's algorithm/protocol come from its setting's NCCL_ALGO and
  NCCL_PROTO, read as NCCL reads them (per-collective `allreduce:tree;...` and `^X` included)
  and only when exactly one of each is left for that collective. Other knobs (NCCL_BUFFSIZE,
  NCCL_IB_*, ...) cannot be said here; the notes name them (best.env carries knobs).
- NCCL: every byte range of a tuned collective, 0 to SIZE_MAX, gets a rule with an explicit
  channel count, because NCCL's plugin runs anything no rule matches (and `-1`) on 1 channel.
  Ranges the sweep did not reach take the rule of the nearest measured range below them (the
  first one extends down to 0), and the notes say so. A range where the default is best
  still needs a pair: the one NCCL itself used at every size of it in the baseline (from
  its debug log, `baseline_choices`), else the best other setting's, when it measured at
  least the default's busbw there; otherwise the file cannot be written
  (TunerConfUnavailable says where).
- RCCL: its tuner supports ring and tree with simple, ll and ll128 only, and its plugin
  leaves a size no rule matches to RCCL (channels 0). So a range where the default is best,
  or whose setting RCCL's tuner cannot express, gets no rule, and the notes say why.
- Channels: a count the setting pins (NCCL_MAX_NCHANNELS or NCCL_MAX_CTAS; the rule forces
  it at every size of the range, where NCCL would have used fewer for small sizes); else the
  caller's `channels`; else 0, NCCL's own count, which is what was measured when the setting
  leaves channels alone. Imported nccl-tests/rccl-tests logs record no environment, so there
  the count is unknown: without `channels`, ChannelsUnknown (the caller writes the rest).
- nNodes/nRanks: the caller's (rules then match only jobs of that shape; any other job runs
  every collective as if no rule existed), else -1. numPipeOps and regBuff: -1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from collbench.analysis.tune.tuner_conf_rules import (
    ANY,
    BACKENDS,
    COLLECTIVES,
    FIELDS,
    PLUGIN_COLLECTIVE,
    SIZE_MAX,
    Rule,
    TunerConfSyntaxError,
    effective_channels,
    lookup,
    parse_tuner_conf,
    uncovered,
)
from collbench.core.errors import CollbenchError, SpecError
from collbench.core.units import format_size

__all__ = [  # the reader's API is re-exported: one import for tune's callers
    "ChannelsUnknown",
    "Rule",
    "TunerConfSyntaxError",
    "TunerConfUnavailable",
    "effective_channels",
    "enabled_names",
    "lookup",
    "parse_tuner_conf",
    "render_tuner_conf",
    "uncovered",
]

RCCL_ALGORITHMS = ("tree", "ring")
RCCL_PROTOCOLS = ("ll", "ll128", "simple")
# NCCL's names in NCCL_ALGO / NCCL_PROTO (ncclAlgoStr, ncclProtoStr; compared ignoring case)
# and the plugin's names for them.
ALGO_ENV_NAMES = {
    "tree": "tree",
    "ring": "ring",
    "collnetdirect": "collnet_direct",
    "collnetchain": "collnet_chain",
    "nvls": "nvls",
    "nvlstree": "nvls_tree",
    "pat": "pat",
}
PROTO_ENV_NAMES = {"ll": "ll", "ll128": "ll128", "simple": "simple"}
CHANNEL_CAPS = ("NCCL_MAX_NCHANNELS", "NCCL_MAX_CTAS")
CHANNEL_FLOORS = ("NCCL_MIN_NCHANNELS", "NCCL_MIN_CTAS")
EXPRESSED = ("NCCL_ALGO", "NCCL_PROTO", *CHANNEL_CAPS, *CHANNEL_FLOORS)
SHIPPED = {
    "nccl": "# NCCL >= 2.27 ships it (ext-tuner/example, later plugins/tuner/example).",
    "rccl": "# RCCL: ext-tuner/example's CSV version (its older model-based example reads no file).",
}
COMMENT_CHARS = 200  # comment lines are cut here; the plugin reads 255 characters a line


class TunerConfUnavailable(CollbenchError):
    """The result cannot be written as nccl_tuner.conf; `reasons` has one line per range.
    The caller writes tune.json and best.env and says why this file is missing."""

    def __init__(self, reasons: Sequence[str]) -> None:
        self.reasons = list(reasons)
        more = f" (and {len(self.reasons) - 1} more)" if len(self.reasons) > 1 else ""
        super().__init__(f"nccl_tuner.conf not written: {self.reasons[0]}{more}")


class ChannelsUnknown(TunerConfUnavailable):
    """The channel count a range was measured with is unknown (imported logs): the file
    needs --channels N (0: the library's own count)."""


@dataclass(frozen=True)
class _Range:
    """One best record, in the plugin's collective name."""

    collective: str
    min_bytes: int
    max_bytes: int
    knobs: Mapping[str, str]
    label: str
    gain: float | None
    confidence: str
    candidate: Mapping[str, Any] | None

    @property
    def span(self) -> str:
        low = format_size(self.min_bytes)
        if self.max_bytes == SIZE_MAX:
            return f"{self.collective} [{low}, end]"
        return f"{self.collective} [{low}, {format_size(self.max_bytes + 1)})"


@dataclass(frozen=True)
class _Options:
    channels: int | None
    backend: str
    nodes: int
    ranks: int
    imported: bool
    choices: tuple[Any, ...] = ()


def render_tuner_conf(
    best_records: Sequence[Any],
    *,
    channels: int | None = None,
    backend: str = "nccl",
    nodes: int | None = None,
    ranks: int | None = None,
    imported: bool = False,
    baseline_choices: Sequence[Any] = (),
) -> tuple[str, list[str]]:
    """nccl_tuner.conf's text and the notes to show with it (one line each), from best
    records (analysis.tune_select.BestRecord or dicts with its keys: collective, min_bytes,
    max_bytes, knobs, and optionally setting, gain, confidence, candidate).

    channels: the count for ranges whose setting pins none (0: the library's own).
    imported: the records come from imported logs (the channel count is unknown).
    baseline_choices: what NCCL used in the baseline run (analysis.nccl_choice
    ChoiceSummary, or its to_dict); where the default is best and NCCL used one pair at every
    size of the range, the rule names that pair with channels 0, reproducing the default.
    Raises ChannelsUnknown / TunerConfUnavailable where the file cannot say the result (see
    the module's rules), SpecError for bad arguments."""
    options = replace(
        _options(channels, backend, nodes, ranks, imported), choices=tuple(baseline_choices)
    )
    notes: list[str] = []
    ranges = _ranges(best_records, notes)
    rules, comments, problems = [], [], []
    for collective in COLLECTIVES:
        mine = _cover([item for item in ranges if item.collective == collective], options, notes)
        for item in mine:
            rule, comment = _decide(item, options, notes, problems)
            comments.append(comment)
            if rule is not None:
                rules.append(rule)
    if not rules and not problems:
        problems.append(("empty", "no range of a collective the tuner plugin consults"))
    if problems:
        channel_only = all(kind == "channels" for kind, _ in problems)
        error = ChannelsUnknown if channel_only else TunerConfUnavailable
        raise error([reason for _, reason in problems])
    notes += _scope_notes(rules, options)
    text = _text(_merge(rules), comments, options)
    parse_tuner_conf(text)  # what we write, the plugin reads without fallbacks
    return text, notes


# ---- inputs ----


def _options(
    channels: int | None, backend: str, nodes: int | None, ranks: int | None, imported: bool
) -> _Options:
    if backend not in BACKENDS:
        raise SpecError("--backend", backend, f"has no tuner plugin; one of {', '.join(BACKENDS)}")
    if channels is not None and not 0 <= channels < 2**31:
        raise SpecError("--channels", channels, "must be a count, or 0 for the library's own")
    for flag, value in (("--nodes", nodes), ("world size", ranks)):
        if value is not None and not 1 <= value < 2**31:
            raise SpecError(flag, value, "must be a positive count")
    return _Options(channels, backend, nodes or ANY, ranks or ANY, imported)


def _get(record: Any, key: str, default: Any = None) -> Any:
    if isinstance(record, Mapping):
        return record.get(key, default)
    return getattr(record, key, default)


def _ranges(records: Sequence[Any], notes: list[str]) -> list[_Range]:
    ranges, skipped = [], set()
    for record in records:
        name = _get(record, "collective")
        if name not in PLUGIN_COLLECTIVE and name not in COLLECTIVES:
            skipped.add(name)
            continue
        knobs = dict(_get(record, "knobs") or {})
        ranges.append(
            _Range(
                collective=PLUGIN_COLLECTIVE.get(name, name),
                min_bytes=int(_get(record, "min_bytes")),
                max_bytes=int(_get(record, "max_bytes")),
                knobs=knobs,
                label=_get(record, "setting") or _label(knobs),
                gain=_get(record, "gain"),
                confidence=_get(record, "confidence") or "",
                candidate=_get(record, "candidate"),
            )
        )
    for name in sorted(skipped):
        notes.append(f"{name}: NCCL does not consult a tuner plugin for it; no rule")
    return ranges


def _label(knobs: Mapping[str, str]) -> str:
    return " ".join(f"{name}={value}" for name, value in knobs.items()) or "baseline"


def _cover(ranges: list[_Range], options: _Options, notes: list[str]) -> list[_Range]:
    """The ranges of one collective, sorted, stretched to cover 0..SIZE_MAX without gaps
    (NCCL only; RCCL leaves sizes without a rule to RCCL)."""
    ranges = sorted(ranges, key=lambda item: item.min_bytes)
    for low, high in zip(ranges, ranges[1:], strict=False):
        if high.min_bytes <= low.max_bytes:
            raise SpecError("best records", f"{low.span} and {high.span}", "overlap")
    if not ranges or options.backend != "nccl":
        return ranges
    covered = []
    for index, item in enumerate(ranges):
        low = 0 if index == 0 else item.min_bytes
        high = ranges[index + 1].min_bytes - 1 if index + 1 < len(ranges) else SIZE_MAX
        stretched = replace(item, min_bytes=low, max_bytes=high)
        if (low, high) != (item.min_bytes, item.max_bytes):
            notes.append(
                f"{stretched.span}: only {item.span} was a tuned range; its rule covers the rest"
            )
        covered.append(stretched)
    return covered


# ---- one range ----


def _decide(
    item: _Range, options: _Options, notes: list[str], problems: list[tuple[str, str]]
) -> tuple[Rule | None, str]:
    """A range's rule (None: no rule) and its comment line; what stops the file goes to
    `problems` as (kind, reason)."""
    knobs, how = item.knobs, f"{item.label}{_gain(item.gain, item.confidence)}"
    if not knobs:
        if options.backend == "rccl":
            notes.append(f"{item.span}: the default is best; no rule, so RCCL chooses")
            return None, f"{item.span}: default is best; no rule (RCCL chooses)"
        knobs, how = _stand_in(item, options, problems)
        if knobs is None:
            return None, ""
    algorithm, protocol = (_single(knobs, name, item.collective) for name in ("ALGO", "PROTO"))
    if algorithm is None or protocol is None:
        return _no_pair(item, knobs, options, notes, problems)
    if options.backend == "rccl" and (
        algorithm not in RCCL_ALGORITHMS or protocol not in RCCL_PROTOCOLS
    ):
        notes.append(
            f"{item.span}: {algorithm}/{protocol} is not in RCCL's tuner (ring/tree with "
            "simple/ll/ll128); no rule, so RCCL chooses"
        )
        return None, f"{item.span}: {how}; no rule (RCCL's tuner lacks {algorithm}/{protocol})"
    count = _channels(item, knobs, options, problems)
    if count is None:
        return None, ""
    _note_unexpressed(item, knobs, notes)
    rule = Rule(item.collective, item.min_bytes, item.max_bytes, algorithm, protocol, count)
    return replace(rule, nnodes=options.nodes, nranks=options.ranks), f"{item.span}: {how}"


def _gain(gain: float | None, confidence: str) -> str:
    if gain is None:
        return ""
    return f" {gain * 100:+.1f}%" + (f" ({confidence})" if confidence else "")


def _stand_in(
    item: _Range, options: _Options, problems: list[tuple[str, str]]
) -> tuple[Mapping[str, str] | None, str]:
    """For NCCL where the default is best (a rule must name a pair): the one pair NCCL
    itself used there in the baseline, else the best other setting, if it measured at least
    the default's busbw and names a pair."""
    seen = _baseline_pair(item, options.choices)
    if seen is not None:
        knobs = {"NCCL_ALGO": seen[0].replace("_", ""), "NCCL_PROTO": seen[1]}
        return knobs, f"default is best; NCCL's own choice there: {seen[0]}/{seen[1]}"
    candidate = item.candidate or {}
    knobs, gain = candidate.get("knobs") or {}, candidate.get("gain")
    named = all(_single(knobs, name, item.collective) for name in ("ALGO", "PROTO"))
    if named and gain is not None and gain >= 0:
        label = candidate.get("setting") or _label(knobs)
        return knobs, f"default is best; the plugin must name a pair: {label} {gain * 100:+.1f}%"
    verdict = "names no single pair" if not named else "measured below the default"
    verdict = "has no gain against the default" if named and gain is None else verdict
    label = candidate.get("setting") or _label(knobs)
    why = f"the best other setting ({label}) {verdict}" if candidate else "nothing else ran there"
    problems.append(
        (
            "pair",
            f"{item.span}: the default is best and NCCL's example plugin cannot leave the "
            f"algorithm/protocol to NCCL (a size without a rule runs on 1 channel); {why}",
        )
    )
    return None, ""


def _baseline_pair(item: _Range, choices: Sequence[Any]) -> tuple[str, str] | None:
    """The one (algorithm, protocol) NCCL used at every size of the range it printed, or
    None (nothing printed there, several pairs, or a path the plugin cannot name)."""
    pairs = set()
    for summary in choices:
        name = _get(summary, "collective")
        if PLUGIN_COLLECTIVE.get(name, name) != item.collective or _get(summary, "size_is_logged"):
            continue
        if item.min_bytes <= int(_get(summary, "size_bytes")) <= item.max_bytes:
            pairs |= {
                (_get(used, "algorithm"), _get(used, "protocol")) for used in _get(summary, "used")
            }
    if len(pairs) != 1:
        return None
    algorithm, protocol = pairs.pop()
    known = algorithm in ALGO_ENV_NAMES.values() and protocol in PROTO_ENV_NAMES.values()
    return (algorithm, protocol) if known else None


def _no_pair(
    item: _Range,
    knobs: Mapping[str, str],
    options: _Options,
    notes: list[str],
    problems: list[tuple[str, str]],
) -> tuple[None, str]:
    what = f"{item.label} names no single algorithm and protocol for {item.collective}"
    if options.backend == "rccl":
        notes.append(f"{item.span}: {what}; no rule, so RCCL chooses")
        return None, f"{item.span}: {item.label}; no rule (no single pair)"
    problems.append(("pair", f"{item.span}: {what}; the example plugin needs both"))
    return None, ""


def _single(knobs: Mapping[str, str], kind: str, collective: str) -> str | None:
    """The one algorithm (kind ALGO) or protocol (PROTO) NCCL_<kind> leaves for a collective
    in the plugin's names, or None when it leaves several (or is not set)."""
    name = f"NCCL_{kind}"
    value = knobs.get(name)
    if value is None:
        return None
    names = ALGO_ENV_NAMES if kind == "ALGO" else PROTO_ENV_NAMES
    enabled = enabled_names(name, value, names, collective)
    return enabled[0] if len(enabled) == 1 else None


def enabled_names(knob: str, value: str, names: Mapping[str, str], collective: str) -> list[str]:
    """What NCCL_ALGO/NCCL_PROTO `value` enables for `collective` (plugin names), read as
    NCCL's parseList does: `a,b` (all collectives), then `coll:a,b` entries that replace the
    list of one collective; `^a,b` enables all but those. SpecError where NCCL refuses it."""
    enabled = list(names.values())
    for index, entry in enumerate(part for part in value.split(";") if part):
        prefix, _, elements = entry.rpartition(":")
        if index > 0 and not prefix:
            raise SpecError(
                knob, value, "needs a 'collective:' prefix on every entry but the first"
            )
        if prefix and prefix.lower() not in COLLECTIVES:
            raise SpecError(knob, value, f"names an unknown collective {prefix!r}")
        exclude = elements.startswith("^")
        listed = [item.lower() for item in elements.lstrip("^").split(",") if item]
        unknown = [item for item in listed if item not in names]
        if unknown:
            raise SpecError(knob, value, f"names {unknown[0]!r}; NCCL knows {', '.join(names)}")
        if prefix and prefix.lower() != collective:
            continue
        chosen = {names[item] for item in listed}
        enabled = [name for name in names.values() if (name in chosen) != exclude]
    return enabled


def _channels(
    item: _Range, knobs: Mapping[str, str], options: _Options, problems: list[tuple[str, str]]
) -> int | None:
    caps = [_count(knobs, name) for name in CHANNEL_CAPS if name in knobs]
    if caps:
        return min(caps)
    if options.channels is not None:
        return options.channels
    floors = [name for name in CHANNEL_FLOORS if name in knobs]
    if floors:
        why = f"{floors[0]}={knobs[floors[0]]} sets a floor, not a count"
    elif options.imported:
        why = "imported logs record no environment, so NCCL's channel count there is unknown"
    else:
        return 0
    problems.append(("channels", f"{item.span}: {why}; pass --channels N (0: NCCL's own)"))
    return None


def _count(knobs: Mapping[str, str], name: str) -> int:
    text = knobs[name].strip()
    if not text.isdigit() or int(text) < 1:
        raise SpecError(name, knobs[name], "is not a channel count")
    return int(text)


def _note_unexpressed(item: _Range, knobs: Mapping[str, str], notes: list[str]) -> None:
    others = [f"{name}={value}" for name, value in knobs.items() if name not in EXPRESSED]
    if others:
        notes.append(
            f"{item.span}: {' '.join(others)} cannot be said in nccl_tuner.conf; "
            "export it (best.env) for the gain measured"
        )


# ---- the file ----


def _scope_notes(rules: Sequence[Rule], options: _Options) -> list[str]:
    notes = []
    ruled = {rule.collective for rule in rules}
    if options.backend == "nccl" and ruled:
        missing = [name for name in COLLECTIVES if name not in ruled]
        if missing:
            notes.append(
                f"{', '.join(missing)}: no rule; NCCL's example plugin runs them on 1 channel "
                "(load it only where the tuned collectives are the ones that matter)"
            )
    if options.nodes != ANY or options.ranks != ANY:
        notes.append(
            f"rules match only {options.nodes} node(s) and {options.ranks} rank(s); other jobs "
            "get the plugin's no-rule behaviour for every collective"
        )
    return notes


def _merge(rules: Sequence[Rule]) -> list[Rule]:
    """Neighbouring rules of one collective that say the same thing, joined."""
    merged: list[Rule] = []
    for rule in rules:
        last = merged[-1] if merged else None
        if last is not None and last.max_bytes + 1 == rule.min_bytes and _same(last, rule):
            merged[-1] = replace(last, max_bytes=rule.max_bytes)
        else:
            merged.append(rule)
    return merged


def _same(first: Rule, second: Rule) -> bool:
    return replace(first, min_bytes=0, max_bytes=0) == replace(second, min_bytes=0, max_bytes=0)


def _text(rules: Sequence[Rule], comments: Sequence[str], options: _Options) -> str:
    library = "NCCL" if options.backend == "nccl" else "RCCL"
    unmatched = "1 channel" if options.backend == "nccl" else "RCCL's own choice"
    header = [
        f"# nccl_tuner.conf for {library}'s example tuner plugin (CSV rules), by collbench tune.",
        SHIPPED[options.backend],
        "# Load: NCCL_TUNER_PLUGIN=<the example plugin's .so> NCCL_TUNER_CONFIG_FILE=<this file>",
        f"# {','.join(FIELDS)}",
        "# Byte ranges are inclusive; the first matching rule wins; -1 matches any.",
        f"# channels 0: {library}'s own count. A size no rule matches gets {unmatched}.",
        "# A pair the system cannot run falls through to the next matching rule.",
    ]
    if options.backend == "rccl":
        header.append("# RCCL's tuner: ring/tree with simple/ll/ll128 only; other ranges: no rule.")
    body = [f"# {_one_line(comment)}" for comment in comments if comment]
    return "\n".join([*header, *body, *(rule.line() for rule in rules)]) + "\n"


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= COMMENT_CHARS else flat[: COMMENT_CHARS - 3] + "..."
