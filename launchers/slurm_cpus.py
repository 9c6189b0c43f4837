"""How many CPUs each Slurm task (rank) gets, when the user does not say.

The method, in full: docs/launchers.md#launchers-slurm-cpus-py.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping

SINFO_TIMEOUT_S = 30


def node_cpus(partition: str | None) -> int | None:
    """The fewest CPUs of a node in `partition` (None: the default one) as sinfo lists
    them, or None when sinfo is missing or does not answer."""
    argv = ["sinfo", "-h", "-N", "-o", "%c"] + (["-p", partition] if partition else [])
    try:
        listing = subprocess.run(argv, capture_output=True, text=True, timeout=SINFO_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if listing.returncode != 0:
        return None
    return parse_node_cpus(listing.stdout)


def parse_node_cpus(text: str) -> int | None:
    """The smallest count in sinfo's `%c` lines ("64", or "64+" for a range), or None."""
    counts = [int(line.strip().rstrip("+")) for line in text.splitlines() if line.strip()]
    counts = [count for count in counts if count > 0]
    return min(counts, default=None)


def cpus_per_task(cpus: int | None, tasks_per_node: int) -> int | None:
    """The node's CPUs shared out among its tasks (None: unknown, or one CPU or less each,
    which is Slurm's default anyway)."""
    if cpus is None or tasks_per_node < 1:
        return None
    share = cpus // tasks_per_node
    return share if share >= 2 else None


def step_cpus_per_task(environ: Mapping[str, str], tasks_per_node: int) -> int | None:
    """Inside an allocation: its SLURM_CPUS_PER_TASK, else SLURM_CPUS_ON_NODE shared out."""
    given = environ.get("SLURM_CPUS_PER_TASK", "")
    if given.isdigit() and int(given) > 0:
        return int(given)
    on_node = environ.get("SLURM_CPUS_ON_NODE", "")
    return cpus_per_task(int(on_node), tasks_per_node) if on_node.isdigit() else None
