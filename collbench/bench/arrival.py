"""When each rank reaches a collective: the doctor's straggler data (docs/doctor.md, "Stragglers").

A straggler is a rank the others wait for. Timing a batch of collectives cannot show one
on a GPU: the batch is queued back to back and every rank's collectives finish together,
whichever host enqueued late. So each all-reduce group of the doctor also runs `iters`
blocking collectives (one-element all-reduces: the lateness is the host's), each on its own, and every rank keeps its host's wait in each: from a
timestamp taken just before the call to the collective's end (after a device synchronize).
The end is common to all ranks (they leave a blocking collective together, within a hop's
latency), so it serves as the synchronised clock: no wall clocks are compared, and the rank
with the shortest wait arrived last. This holds on CPU (gloo) and GPU alike.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

# Test hook: "RANK:SECONDS" makes that rank reach each arrival-timed collective this late (a
# straggler: its host busy elsewhere between collectives).
TEST_LATE_RANK_VAR = "COLLBENCH_TEST_DOCTOR_LATE_RANK"


def arrival_waits(
    run: Callable[[], None], synchronize: Callable[[], None], iters: int, delay_s: float = 0.0
) -> list[float]:
    """Each of `iters` blocking collectives' host wait: synchronize, stamp, run, synchronize,
    stamp. Every rank leaves a blocking collective together (within a hop's latency), so
    that end is the ranks' common clock and the rank that waited least arrived last. On a
    GPU the timed batch cannot say this: its collectives are queued back to back and finish
    together on every rank, whoever enqueued late. `delay_s`: the test hook's delay."""
    waits = []
    for _ in range(iters):
        synchronize()
        if delay_s:
            time.sleep(delay_s)
        started = time.perf_counter()
        run()
        synchronize()
        waits.append(time.perf_counter() - started)
    return waits


def late_s(rank: int) -> float:
    """The test hook's delay for this rank (TEST_LATE_RANK_VAR "RANK:SECONDS"), else 0."""
    late_rank, _, seconds = os.environ.get(TEST_LATE_RANK_VAR, "").partition(":")
    return float(seconds) if late_rank.strip() == str(rank) and seconds else 0.0
