"""How each sweep of a tune is run: its rendezvous port (alike on every node), the sweep a
halving round measures, the environment a setting runs in, and which collective a failed
sweep failed in (pure but for `environment`, which sets os.environ)."""

from __future__ import annotations

import contextlib
import math
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from collbench.analysis.tune.search import HalvingRule, probe_sizes
from collbench.core.spec import SweepSpec


def round_port(port: int, index: int, slot: int, repeats: int) -> int:
    """The rendezvous port of one sweep of a tune: setting `index` (its place in the walk,
    alike on every node), sweep `slot` of it (0..repeats-1: its full sweeps; repeats: the
    choices pass; repeats + K: halving's probe round K), from these alone, so nodes that see
    different rows still meet, and no two sweeps of one tune share a port (until the span
    up to 65535 is used up: it wraps to `port`)."""
    slots = repeats + 1 + HalvingRule().max_rounds
    return port + (index * slots + slot) % (65536 - port)


FAILED_STEP = re.compile(r"during (\w+) \d+ B ")


def failed_collective(spec: SweepSpec, rows: Sequence[Any], error: str) -> str | None:
    """The collective a sweep of `spec` failed in: the one its error names (the launchers
    say "failed during all_gather 1024 B out_of_place"), else, where it finished some rows,
    the first collective with fewer rows than steps; None for a failure before any step
    (at init) or where the sizes are not known here (the backend's default)."""
    named = FAILED_STEP.search(error)
    if named and named.group(1) in spec.collectives:
        return named.group(1)
    if not rows:
        return None
    try:
        steps = [step.collective for step in spec.steps() if step.kind == "sweep"]
    except ValueError:
        return None
    done = [row.collective for row in rows]
    return next((name for name in spec.collectives if done.count(name) < steps.count(name)), None)


def probe_spec(spec: SweepSpec) -> SweepSpec:
    """The sweep a halving round measures: a few sizes across the bands (probe_sizes), as
    a geometric series so one sweep measures them all."""
    probes = probe_sizes(spec.sizes())
    low, high = min(probes), max(probes)
    if len(probes) == 1 or low == high:
        return replace(spec, min_bytes=low, max_bytes=low, factor=None, step_bytes=None)
    steps = len(probes) - 1
    factor = 2.0 ** max(1, round(math.log2(high / low) / steps))
    return replace(
        spec, min_bytes=low, max_bytes=int(low * factor**steps), factor=factor, step_bytes=None
    )


@contextlib.contextmanager
def environment(env: Mapping[str, str]) -> Iterator[None]:
    """os.environ is exactly `env` inside (every launcher hands os.environ to the ranks)."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def sized_spec(spec: SweepSpec) -> SweepSpec:
    """`spec` with its largest size known: the backend's default when not given (the
    backend itself stays as given: the ranks resolve "auto" where they run)."""
    if spec.max_bytes is not None:
        return spec
    from collbench.bench.distributed import resolve_backend
    from collbench.core.spec import DEFAULT_MAX_BYTES

    return replace(spec, max_bytes=DEFAULT_MAX_BYTES[resolve_backend(spec.backend)])
