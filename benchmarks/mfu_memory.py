"""The memory estimate against published configurations: the table of docs/mfu/memory.md, and the
estimate's demonstrated error that `collbench mfu`'s memory check allows for.

    python benchmarks/mfu_memory.py

The configurations and their sources are in tests/published_memory.py;
tests/unit/analysis/mfu/test_mfu_memory_published.py pins each estimate and error, and checks that
analysis/mfu/memory.py's DEMONSTRATED_ERROR and VALIDATED_CONFIGURATIONS are what this
table gives. Pure arithmetic: no GPU, no network, about a second.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from collbench.analysis.mfu.memory import GIB  # noqa: E402
from tests.published_memory import CASES, MemoryCase  # noqa: E402
from tests.published_runs import parallelism_words  # noqa: E402

REPORTED = {"ran": "ran", "oom": "out of memory", "edge": "at the edge (OOM in some runs)"}


def demonstrated_error(cases: tuple[MemoryCase, ...] = CASES) -> float:
    """The largest |error| over the cases with one: the peak known (at the edge), or a run
    that ran above the capacity the estimate gives it."""
    errors = [abs(error) for case in cases if (error := case.error()) is not None]
    return max(errors, default=0.0)


def table(cases: tuple[MemoryCase, ...] = CASES) -> str:
    lines = [
        "| configuration | hardware | parallelism | estimate (GiB) | reported | error | source |",
        "|---|---|---|---|---|---|---|",
    ]
    for case in cases:
        memory = case.estimate()
        error = case.error(memory)
        lines.append(
            f"| {case.case} | {_hardware(case)} | {_setup(case)} | "
            f"{memory.total_bytes / GIB:,.1f} of {case.capacity_gib:g} (stage {memory.stage}) | "
            f"{REPORTED[case.outcome]} | {_error(case, error)} | {case.source} |"
        )
    consistent = sum(case.consistent() for case in cases)
    lines += [
        "",
        f"{len(cases)} configurations, {consistent} consistent with what they reported; "
        f"demonstrated error {demonstrated_error(cases):.0%}",
    ]
    return "\n".join(lines)


def _hardware(case: MemoryCase) -> str:
    workload = case.workload()
    return f"{workload.parallelism.world_size} x {case.topology}"


def _setup(case: MemoryCase) -> str:
    workload = case.workload()
    run = workload.training
    setup = parallelism_words(workload.parallelism)
    setup.append(f"recompute {run.recompute}")
    setup.append(f"{run.grad_bytes * 8}-bit grads")
    if not workload.model.dropout:
        setup.append("no dropout")
    setup.append(f"micro {run.micro_batch} x seq {run.seq}")
    return f"{workload.model.name}: {', '.join(setup)}"


def _error(case: MemoryCase, error: float | None) -> str:
    if error is not None:
        return f"{error:+.1%}"
    return "refused: consistent" if case.outcome == "oom" else "fits: consistent"


def main() -> None:
    print(table())


if __name__ == "__main__":
    main()
