"""The noise-floor file `collbench noise` writes (NoiseFloor.to_dict, JSON) and `compare
--noise-floor FILE` reads: one load of core.noise.NoiseFloor."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from collbench.core.errors import SpecError
from collbench.core.limits import JSON_MAX_BYTES
from collbench.core.noise import NoiseFloor
from collbench.store.reading import check_depth, read_text


def load_noise_floor(
    path: Path, flag: str = "--noise-floor", bands: tuple[str, ...] = ()
) -> NoiseFloor:
    """The floor a file holds, its source set to the file's path (what a verdict names);
    SpecError (one line, exit 2) for a missing, unreadable or malformed file, or one that
    names none of `bands` (the size bands the caller knows)."""
    path = Path(path)
    text = read_text(path, flag, JSON_MAX_BYTES)  # a regular file within core.limits
    check_depth(text, flag, str(path))
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise SpecError(
            flag, str(path), f"is not JSON (line {error.lineno}): make one with collbench noise"
        ) from None
    try:
        floor = NoiseFloor.from_dict(data, str(path))
    except SpecError as error:
        if error.field == flag:
            raise
        where = f"band {error.value!r}" if isinstance(error.value, str) else f"size {error.value}"
        raise SpecError(flag, str(path), f"{where} {error.hint}") from None
    if not floor.pct_by_band or (bands and not set(floor.pct_by_band) & set(bands)):
        raise SpecError(
            flag,
            str(path),
            f"holds no floor of a known band ({', '.join(bands) or 'none'}): make one with "
            "collbench noise",
        )
    return replace(floor, source=str(path))
