"""The settings `collbench tune` runs: `--knob NAME=V1,V2,...` axes, checked against what the
backend reads, and the grid of settings they span, baseline first.

The method, in full: docs/tune.md#collbench-core-tune-grid-py.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from collbench.core.errors import SpecError
from collbench.core.knobs import backend_warning, check_knob_name, check_knob_value
from collbench.core.safe_text import find_control, refuse_control
from collbench.core.tune_catalog import CATALOG

DEFAULT_MAX_SETTINGS = 64  # grid settings, the baseline not counted (tune run --max-settings)
# Runs of each setting, each in fresh processes, interleaved (tune run --repeats). Measured on
# A/A tunes (README "collbench tune"): the smallest count whose false winners stayed rare.
DEFAULT_TUNE_REPEATS = 3
MAX_TUNE_REPEATS = 100  # more runs of every setting is a typo that would run for days
GRID_LIMIT = 100_000  # no search enumerates more settings than this


@dataclass(frozen=True)
class KnobAxis:
    """One `--knob NAME=V1,V2,...`: the values as they will be exported."""

    name: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class Setting:
    """One point of the grid: knobs as sorted (name, value) pairs; () is the baseline,
    the environment exactly as the user gave it. A knob holding a control character (one
    a recorded run or tune.json holds: `--knob` refuses them) is a SpecError: its label
    and value reach best.env."""

    knobs: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        pairs = tuple(sorted((str(name), str(value)) for name, value in self.knobs))
        names = [name for name, _ in pairs]
        if len(set(names)) != len(names):
            raise ValueError(f"a setting sets a knob twice: {names}")
        for name, value in pairs:
            char = find_control(name + value)
            if char is not None:
                raise SpecError(
                    "knob",
                    f"{name}={value}",
                    f"holds a control character ({char!r}): a knob's name and value must be "
                    "one line of text (a recorded run's knobs too)",
                )
        object.__setattr__(self, "knobs", pairs)

    @classmethod
    def from_mapping(cls, knobs: Mapping[str, str]) -> Setting:
        """The setting that sets `knobs` ({} is the baseline)."""
        return cls(tuple(knobs.items()))

    @property
    def is_baseline(self) -> bool:
        """No knob changed."""
        return not self.knobs

    @property
    def id(self) -> str:
        """Short stable id: 12 hex digits of the sha256 of the sorted JSON {name: value}."""
        text = json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @property
    def label(self) -> str:
        """`NCCL_ALGO=Ring NCCL_PROTO=LL`, or `baseline`."""
        return " ".join(f"{name}={value}" for name, value in self.knobs) or "baseline"

    def as_dict(self) -> dict[str, str]:
        """{name: value}: `{}` for the baseline (tune.json's `knobs`)."""
        return dict(self.knobs)


BASELINE = Setting()


def split_values(text: str) -> list[str]:
    """Values of `V1,V2,...`: split at commas not written `\\,`, each stripped."""
    parts = re.split(r"(?<!\\),", text)
    return [part.replace("\\,", ",").strip() for part in parts]


def join_values(values: Sequence[str]) -> str:
    """`V1,V2,...` that split_values reads back as `values` (a comma in one is `\\,`)."""
    return ",".join(value.replace(",", "\\,") for value in values)


def parse_knob(text: str) -> KnobAxis:
    """`NAME=V1,V2,...` as an axis, the name and format checked (core.knobs, as every
    `--knob` is), the values not yet (check_axis); SpecError("--knob", text, reason) when it
    is malformed or holds a control character (checked on the whole text: splitting and
    stripping the values could hide one)."""
    refuse_control("--knob", text)
    name, sep, values_text = text.partition("=")
    if not sep or not name:
        raise SpecError("--knob", text, "is not NAME=V1,V2,... (e.g. NCCL_ALGO=Ring,Tree)")
    check_knob_name(name, text)  # its warnings: check_axis
    if not values_text.strip():
        raise SpecError("--knob", text, f"gives {name} no values: NAME=V1,V2,...")
    values = split_values(values_text)
    if "" in values:
        raise SpecError("--knob", text, f"has an empty value in {name}'s list")
    return KnobAxis(name, tuple(values))


def check_axis(
    axis: KnobAxis, backend: str | None = None, version: str | None = None
) -> tuple[KnobAxis, list[str]]:
    """The axis with each value checked against the catalog (`backend`'s ranges at
    `version`, its NCCL/RCCL release) and written as it will be exported (NCCL_BUFFSIZE=4M
    -> 4194304), and the warnings (one line each) for it: a knob `backend` does not read, a
    name collbench does not know. SpecError for a bad value, a value given twice, or a name
    that is a typo of a known one."""
    text = f"{axis.name}={join_values(axis.values)}"
    warnings = check_knob_name(axis.name, text)
    spec = CATALOG.get(axis.name)
    values, seen = [], {}
    for value in axis.values:
        value = check_knob_value(axis.name, value, text, backend, version)
        key = value.lower() if spec is not None and spec.fold_case else value
        if key in seen:
            raise SpecError("--knob", text, f"gives {axis.name}={seen[key]} twice")
        seen[key] = value
        values.append(value)
    mismatch = backend_warning(axis.name, backend)
    if mismatch:
        warnings.append(mismatch)
    return KnobAxis(axis.name, tuple(values)), warnings


def parse_knobs(
    texts: Sequence[str], backend: str | None = None, version: str | None = None
) -> tuple[tuple[KnobAxis, ...], list[str]]:
    """Every `--knob` parsed and checked, in the order given, and the warnings to print.
    SpecError for a malformed one, a bad value, or a knob given twice."""
    axes: list[KnobAxis] = []
    warnings: list[str] = []
    for text in texts:
        axis = parse_knob(text)
        if any(other.name == axis.name for other in axes):
            raise SpecError(
                "--knob", text, f"repeats {axis.name}: give all its values in one --knob"
            )
        checked, notes = check_axis(axis, backend, version)
        axes.append(checked)
        warnings.extend(notes)
    return tuple(axes), warnings


def grid_size(axes: Sequence[KnobAxis]) -> int:
    """Settings in the grid of `axes`, the baseline not counted (0 without axes)."""
    return math.prod(len(axis.values) for axis in axes) if axes else 0


def build_grid(
    axes: Sequence[KnobAxis], max_settings: int = DEFAULT_MAX_SETTINGS, exhaustive: bool = True
) -> tuple[Setting, ...]:
    """The baseline, then every combination of the axes (first axis slowest, values in
    the order given). exhaustive: a grid search, refused (SpecError) when the grid is
    larger than `max_settings`; a non-grid search (halving, coordinate) gets the whole
    candidate list, up to GRID_LIMIT."""
    if max_settings < 1:
        raise SpecError("--max-settings", max_settings, "must be at least 1")
    size = grid_size(axes)
    shape = " x ".join(f"{len(axis.values)} {axis.name}" for axis in axes)
    if exhaustive and size > max_settings:
        raise SpecError(
            "--max-settings",
            max_settings,
            f"is below the grid's {size} settings ({shape}): raise it, give fewer values, "
            "or choose a non-grid --search",
        )
    if size > GRID_LIMIT:
        raise SpecError("--knob", shape, f"spans {size} settings, more than {GRID_LIMIT}")
    names = [axis.name for axis in axes]
    combos = itertools.product(*(axis.values for axis in axes)) if axes else ()
    return (BASELINE, *(Setting(tuple(zip(names, combo, strict=True))) for combo in combos))


def setting_env(setting: Setting, base_env: Mapping[str, str]) -> dict[str, str]:
    """The environment a setting runs with: `base_env`, each knob's value overriding any
    value it already holds; the baseline gets `base_env` unchanged."""
    return {**base_env, **setting.as_dict()}


def conf_variables(text: str) -> dict[str, str]:
    """The variables an NCCL config file sets, read as NCCL reads it (src/misc/param.cc):
    a line `NAME=VALUE`; a line starting with `#` or without `=` is skipped."""
    variables: dict[str, str] = {}
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if sep and not line.startswith("#"):
            variables.setdefault(name, value)
    return variables


def conf_file_warnings(
    files: Mapping[str, str], axes: Sequence[KnobAxis], base_env: Mapping[str, str]
) -> list[str]:
    """One line per tuned knob an NCCL config file sets: the baseline runs with the file's
    value unless the environment sets it too (NCCL never overrides a set variable), while
    every setting's own value wins. `files`: path -> contents (provenance.nccl_conf_files).
    And one when the environment loads a tuner plugin the tune does not vary: every setting
    runs under it (NCCL's example plugin gives a call its config does not match 1 channel)."""
    tuned = {axis.name for axis in axes}
    plugin = base_env.get("NCCL_TUNER_PLUGIN", "none")
    warnings = []
    if plugin != "none" and "NCCL_TUNER_PLUGIN" not in tuned:
        warnings.append(
            f"the environment loads a tuner plugin (NCCL_TUNER_PLUGIN={plugin}): every setting, "
            "the baseline too, runs under its choices, not NCCL's; unset it or set "
            "NCCL_TUNER_PLUGIN=none to tune NCCL's own"
        )
    for path, contents in files.items():
        for name, value in conf_variables(contents).items():
            if name in tuned and name not in base_env:
                warnings.append(
                    f"{path} sets {name}={value}: the baseline runs with it, "
                    "each setting's own value overrides it"
                )
    return warnings
