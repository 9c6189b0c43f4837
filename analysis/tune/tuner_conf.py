"""`collbench tune`'s nccl_tuner.conf: the best setting per collective and size range, written
for NCCL's example tuner plugin or RCCL's copy of it (pure: best records in, text and notes
out); how the plugin reads the file: analysis/tune/tuner_conf_rules.py.

The method, in full: docs/tune.md#analysis-tune-tuner-conf-py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from collbench.analysis.tune.tuner_conf_rules import (
    ALGORITHMS,
    ANY,
    COLLECTIVES,
    FIELDS,
    PLUGIN_COLLECTIVE,
    PROTOCOLS,
    SIZE_MAX,
    Rule,
    parse_tuner_conf,
    single_name,
)
from collbench.core.errors import CollbenchError, SpecError
from collbench.core.units import format_size

RCCL_ALGORITHMS = ("tree", "ring")
RCCL_PROTOCOLS = ("ll", "ll128", "simple")
PAIR_KNOBS = ("NCCL_ALGO", "NCCL_PROTO")
CHANNEL_CAPS = ("NCCL_MAX_NCHANNELS", "NCCL_MAX_CTAS")  # ring, tree, collnet, pat
# NVLS's channels are fixed at init (ncclNvlsTuning): NCCL_NVLS_NCHANNELS within the CTA bounds
NVLS_ALGORITHMS = ("nvls", "nvls_tree")
NVLS_CAPS = ("NCCL_MAX_CTAS", "NCCL_NVLS_NCHANNELS")
CHANNEL_FLOORS = ("NCCL_MIN_NCHANNELS", "NCCL_MIN_CTAS")
# --tuner-shape: rules name the tuned communicator's nNodes/nRanks, or match any (-1)
TUNER_SHAPES = ("tuned", "any")
DEFAULT_TUNER_SHAPE = "tuned"
SHIPPED = {
    "nccl": "# NCCL >= 2.27.5 ships it (ext-tuner/example, later plugins/tuner/example).",
    "rccl": "# RCCL: ext-tuner/example's CSV version (its older model-based example reads no file).",
}
_CHOICES_HINT = "tune records it with --choices on NCCL, or reads it from --nccl-log FILE"
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
    nodes, ranks: the tuned communicator's shape for nNodes/nRanks (None: -1, any).
    imported: the records come from imported logs (the channel count is unknown).
    baseline_choices: what NCCL used in the baseline run (analysis.nccl_choice
    ChoiceSummary, its to_dict, or choices.jsonl lines): NCCL's own pair where a rule must
    name one the winner does not (see the module's rules).
    Raises ChannelsUnknown / TunerConfUnavailable where the file cannot say the result (see
    the module's rules), SpecError for overlapping records. The caller has checked the
    backend (BACKENDS) and --channels (run/tune/from_runs.check_channels)."""
    options = _Options(
        channels, backend, nodes or ANY, ranks or ANY, imported, tuple(baseline_choices)
    )
    notes: list[str] = []
    ranges = _ranges(best_records, notes)
    rules, comments, problems = [], [], []
    for collective in COLLECTIVES:
        mine = _cover([item for item in ranges if item.collective == collective], options, notes)
        if not mine:
            made, comment = _untuned(collective, options, notes)
            rules += made
            comments.append(comment)
        for item in mine:
            made, comment = _decide(item, options, notes, problems)
            comments.append(comment)
            rules += made
    if not rules and not problems:
        problems.append(("empty", "no range of a collective the tuner plugin consults"))
    if problems:
        channel_only = all(kind == "channels" for kind, _ in problems)
        error = ChannelsUnknown if channel_only else TunerConfUnavailable
        raise error([reason for _, reason in problems])
    notes += _scope_notes(rules, options)
    text = _text(_merge(rules), comments, options)
    parse_tuner_conf(text)  # what we write, the plugin reads without fallbacks
    return text, list(dict.fromkeys(notes))


def communicator_shape(rows: Sequence[Any]) -> tuple[int | None, int | None]:
    """(nodes, ranks) of the communicator the rows were measured on, for nNodes/nRanks; None
    where the rows do not say it or disagree."""

    def one(key: str) -> int | None:
        values = {_get(row, key) for row in rows}
        return next(iter(values)) if len(values) == 1 else None

    return one("nodes"), one("world_size")


def parse_tuner_shape(text: str, flag: str = "--tuner-shape") -> str:
    """A --tuner-shape word (TUNER_SHAPES), or SpecError."""
    if text not in TUNER_SHAPES:
        raise SpecError(flag, text, f"must be one of {', '.join(TUNER_SHAPES)}")
    return text


# ---- inputs ----


def _get(record: Any, key: str) -> Any:
    """A key of a mapping or an attribute of a record (None: it has none)."""
    return record.get(key) if isinstance(record, Mapping) else getattr(record, key, None)


# NCCL's own algorithm/protocol per size range, from what it printed it used (nccl_choice.py),
# for rules that must name a pair the measured winner does not. A size counts only where NCCL
# printed collbench's size and used one pair the plugin can name; otherwise the whole range is
# unknown (a rule there would force a pair NCCL did not always use). A printed pair holds up to
# the next printed size with another pair; neighbouring parts with one pair are one part.
Pair = tuple[str, str]
# (min_bytes, max_bytes inclusive, (algorithm, protocol)) in the plugin's names
Part = tuple[int, int, Pair]


def own_parts(
    choices: Sequence[Any], collective: str, min_bytes: int, max_bytes: int
) -> list[Part] | None:
    """NCCL's own pair over [min_bytes, max_bytes] of `collective`, cut where it changed
    (the module's rules); None when it printed nothing there or one size is not usable."""
    sizes: dict[int, set[Pair]] = {}  # size_bytes -> the pairs NCCL used for it there
    for entry in choices:
        name = _get(entry, "collective")
        if PLUGIN_COLLECTIVE.get(name, name) != collective or _get(entry, "size_is_logged"):
            continue
        used = _get(entry, "used")
        items = [entry] if used is None else used  # a flat choices.jsonl line is one pair
        pairs = [(_get(item, "algorithm"), _get(item, "protocol")) for item in items]
        sizes.setdefault(int(_get(entry, "size_bytes")), set()).update(pairs)
    printed = sorted(size for size in sizes if min_bytes <= size <= max_bytes)
    if not printed:
        return None
    parts: list[Part] = []
    for size in printed:
        pairs = sizes[size]
        if len(pairs) != 1:
            return None
        pair = next(iter(pairs))
        if pair[0] not in ALGORITHMS or pair[1] not in PROTOCOLS:
            return None
        if parts and parts[-1][2] == pair:
            continue
        if parts:
            parts[-1] = (parts[-1][0], size - 1, parts[-1][2])
        parts.append((min_bytes if not parts else size, max_bytes, pair))
    return parts


def words(parts: Sequence[Part]) -> str:
    """`ring/ll below 64 KiB, ring/simple from 64 KiB` style: the pairs, in order."""
    if len(parts) == 1:
        return "/".join(parts[0][2])
    said = [f"{'/'.join(pair)} from {format_size(low)}" for low, _, pair in parts[1:]]
    return ", ".join([f"{'/'.join(parts[0][2])}", *said])


def _ranges(records: Sequence[Any], notes: list[str]) -> list[_Range]:
    ranges, skipped = [], set()
    for record in records:
        name = _get(record, "collective")
        if name not in PLUGIN_COLLECTIVE and name not in COLLECTIVES:
            skipped.add(name)
            continue
        knobs = dict(_get(record, "knobs") or {})
        plugin_name = PLUGIN_COLLECTIVE.get(name, name)
        named = all(single_name(knobs, kind, plugin_name) for kind in ("ALGO", "PROTO"))
        if _get(record, "default_is_best") and not named:
            # the default's own environment (tune from keeps the knobs every run shared)
            # names no pair: the range is NCCL's own choice, as for a default with no knobs
            knobs = {}
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
) -> tuple[list[Rule], str]:
    """A range's rules (none: no rule) and its comment line; what stops the file goes to
    `problems` as (kind, reason)."""
    knobs, how = item.knobs, f"{item.label}{_gain(item.gain, item.confidence)}"
    if not knobs:
        if options.backend == "rccl":
            notes.append(f"{item.span}: the default is best; no rule, so RCCL chooses")
            return [], f"{item.span}: default is best; no rule (RCCL chooses)"
        parts = own_parts(options.choices, item.collective, item.min_bytes, item.max_bytes)
        if parts is not None:
            rules = [_rule(item, low, high, pair, 0, options) for low, high, pair in parts]
            return rules, f"{item.span}: default is best; NCCL's own choice there: {words(parts)}"
        knobs, how = _stand_in(item, problems)
        if knobs is None:
            return [], ""
    algorithm, protocol = (single_name(knobs, name, item.collective) for name in ("ALGO", "PROTO"))
    if algorithm is None or protocol is None:
        return _no_pair(item, knobs, options, notes, problems)
    if options.backend == "rccl" and (
        algorithm not in RCCL_ALGORITHMS or protocol not in RCCL_PROTOCOLS
    ):
        notes.append(
            f"{item.span}: {algorithm}/{protocol} is not in RCCL's tuner (ring/tree with "
            "simple/ll/ll128); no rule, so RCCL chooses"
        )
        return [], f"{item.span}: {how}; no rule (RCCL's tuner lacks {algorithm}/{protocol})"
    count, counted = _channels(item, knobs, algorithm, options, notes, problems)
    if count is None:
        return [], ""
    _note_unexpressed(item, knobs, counted, notes)
    rule = _rule(item, item.min_bytes, item.max_bytes, (algorithm, protocol), count, options)
    return [rule], f"{item.span}: {how}"


def _rule(
    item: _Range, low: int, high: int, pair: tuple[str, str], count: int, options: _Options
) -> Rule:
    return Rule(item.collective, low, high, *pair, count, options.nodes, options.ranks)


def _gain(gain: float | None, confidence: str) -> str:
    if gain is None:
        return ""
    return f" {gain * 100:+.1f}%" + (f" ({confidence})" if confidence else "")


def _untuned(collective: str, options: _Options, notes: list[str]) -> tuple[list[Rule], str]:
    """NCCL: a collective no range tuned, covered with NCCL's own pairs where the baseline's
    choices say them (a job's debug log), so it does not drop to 1 channel."""
    named = {PLUGIN_COLLECTIVE.get(_get(entry, "collective")) for entry in options.choices}
    if options.backend != "nccl" or collective not in named:
        return [], ""
    parts = own_parts(options.choices, collective, 0, SIZE_MAX)
    if parts is None:
        notes.append(f"{collective}: not tuned, and NCCL's own choice is not one pair a size")
        return [], ""
    item = _Range(collective, 0, SIZE_MAX, {}, "baseline", None, "", None)
    notes.append(f"{item.span}: not tuned; NCCL's own choice from the baseline: {words(parts)}")
    rules = [_rule(item, low, high, pair, 0, options) for low, high, pair in parts]
    return rules, f"{item.span}: not tuned; NCCL's own choice: {words(parts)}"


def _stand_in(
    item: _Range, problems: list[tuple[str, str]]
) -> tuple[Mapping[str, str] | None, str]:
    """For NCCL where the default is best and its own choice there is not known (a rule
    must name a pair): the best other setting, if it measured at least the default's busbw
    and names a pair."""
    candidate = item.candidate or {}
    knobs, gain = candidate.get("knobs") or {}, candidate.get("gain")
    label = candidate.get("setting") or _label(knobs)
    named = all(single_name(knobs, name, item.collective) for name in ("ALGO", "PROTO"))
    if named and gain is not None and gain >= 0:
        return knobs, f"default is best; the plugin must name a pair: {label} {gain * 100:+.1f}%"
    verdict = "names no single pair" if not named else "measured below the default"
    verdict = "has no gain against the default" if named and gain is None else verdict
    why = f"the best other setting ({label}) {verdict}" if candidate else "nothing else ran there"
    reason = (
        f"{item.span}: the default is best and NCCL's example plugin cannot leave the "
        f"algorithm/protocol to NCCL (a size without a rule runs on 1 channel); {why}, "
        f"and NCCL's own choice there is not known ({_CHOICES_HINT})"
    )
    problems.append(("pair", reason))
    return None, ""


def _no_pair(
    item: _Range,
    knobs: Mapping[str, str],
    options: _Options,
    notes: list[str],
    problems: list[tuple[str, str]],
) -> tuple[list[Rule], str]:
    """A winner that names no single pair (CTAs, QPs, buffers ...): NCCL's own pairs from the
    baseline with the winner's channel count where it pins one, never claiming its gain."""
    what = f"{item.label} names no single algorithm and protocol for {item.collective}"
    if options.backend == "rccl":
        notes.append(f"{item.span}: {what}; no rule, so RCCL chooses")
        return [], f"{item.span}: {item.label}; no rule (no single pair)"
    parts = own_parts(options.choices, item.collective, item.min_bytes, item.max_bytes)
    if parts is None:
        unknown = "NCCL's own choice there is not known; the example plugin needs both"
        problems.append(("pair", f"{item.span}: {what}, and {unknown} ({_CHOICES_HINT})"))
        return [], ""
    rules = []
    for low, high, pair in parts:
        count, _ = _channels(item, knobs, pair[0], options, notes, problems)
        if count is None:
            return [], ""
        rules.append(_rule(item, low, high, pair, count, options))
    notes.append(
        f"{item.span}: {item.label} is best{_gain(item.gain, item.confidence)} but names no "
        f"algorithm/protocol; the rule is NCCL's own choice ({words(parts)}) and its gain "
        "needs best.env's knobs exported"
    )
    comment = (
        f"{item.span}: NCCL's own choice in the baseline, {words(parts)}: the winner names no "
        f"pair, and its gain needs best.env, not this rule ({item.label})"
    )
    return rules, comment


def _channels(
    item: _Range,
    knobs: Mapping[str, str],
    algorithm: str,
    options: _Options,
    notes: list[str],
    problems: list[tuple[str, str]],
) -> tuple[int | None, tuple[str, ...]]:
    """The rule's channel count (None: unknown, the reason in `problems`) and the knobs that
    count says (see the module's rules on channels)."""
    nvls = algorithm in NVLS_ALGORITHMS
    names = [name for name in (NVLS_CAPS if nvls else CHANNEL_CAPS) if name in knobs]
    if nvls and "NCCL_MAX_NCHANNELS" in knobs:
        notes.append(
            f"{item.span}: NCCL_MAX_NCHANNELS={knobs['NCCL_MAX_NCHANNELS']} caps ring/tree "
            f"channels, not {algorithm}'s (NCCL_NVLS_NCHANNELS within NCCL_MIN_CTAS.."
            "NCCL_MAX_CTAS, 16 on H100); not written as its channel count"
        )
    if names:
        return min(_count(knobs, name) for name in names), tuple(names)
    if options.channels is not None:
        return options.channels, ()
    if not options.imported:
        return 0, ()
    why = "imported logs record no environment, so NCCL's channel count there is unknown"
    problems.append(("channels", f"{item.span}: {why}; pass --channels N (0: NCCL's own)"))
    return None, ()


def _count(knobs: Mapping[str, str], name: str) -> int:
    text = knobs[name].strip()
    if not text.isdigit() or int(text) < 1:
        raise SpecError(name, knobs[name], "is not a channel count")
    return int(text)


def _note_unexpressed(
    item: _Range, knobs: Mapping[str, str], counted: Sequence[str], notes: list[str]
) -> None:
    said = (*PAIR_KNOBS, *counted)
    others = [f"{name}={value}" for name, value in knobs.items() if name not in said]
    floors = [name for name in CHANNEL_FLOORS if name in knobs and name not in counted]
    if others:
        floor = f" ({', '.join(floors)}: a floor, not a count)" if floors else ""
        notes.append(
            f"{item.span}: {' '.join(others)} cannot be said in nccl_tuner.conf{floor}; "
            "export it (best.env) for the gain measured"
        )


# ---- the file ----


def _scope_notes(rules: Sequence[Rule], options: _Options) -> list[str]:
    notes = []
    ruled = {rule.collective for rule in rules}
    nccl = options.backend == "nccl"
    if nccl and ruled:
        missing = [name for name in COLLECTIVES if name not in ruled]
        if missing:
            notes.append(
                f"{', '.join(missing)}: no rule; NCCL's example plugin runs them on 1 channel "
                "(give tune a debug log of the job, --nccl-log, to cover them with "
                "NCCL's own choice, or load the file only where the tuned collectives are all "
                "a job issues)"
            )
    if options.nodes != ANY or options.ranks != ANY:
        fallback = "on 1 channel" if nccl else "as RCCL chooses"
        notes.append(
            f"rules match only communicators of {_shape(options)} (the tuned one); any other "
            f"(a job's TP, DP or PP groups) matches none and runs every collective {fallback}"
            + (
                ", and no rule can hand it back to NCCL: load the file only in jobs whose "
                "communicators all have this shape, or write it for any shape "
                "(--tuner-shape any: the tuned pairs, untested on other shapes)"
                if nccl
                else ""
            )
        )
    return notes


def _shape(options: _Options) -> str:
    nodes = "any number of nodes" if options.nodes == ANY else f"{options.nodes} node(s)"
    ranks = "any number of ranks" if options.ranks == ANY else f"{options.ranks} rank(s)"
    return f"{nodes} and {ranks}"


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
    shape = [
        f"# Rules match only communicators of {_shape(options)}: any other shape",
        f"# matches none, so every collective of it gets {unmatched}.",
    ]  # the file's first words where they apply: a job of another shape runs untuned
    header = [
        *(shape if options.nodes != ANY or options.ranks != ANY else []),
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
