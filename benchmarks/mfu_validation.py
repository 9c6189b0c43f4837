"""The MFU estimator against every published run: the validation table of
docs/mfu/validation.md, and how far each default moves the predictions.

    python benchmarks/mfu_validation.py            # the table (markdown) and the summary
    python benchmarks/mfu_validation.py --sensitivity
    python benchmarks/mfu_validation.py --write    # rewrite both tables in docs/mfu/validation.md
    python benchmarks/mfu_validation.py --accuracy   # rewrite analysis/mfu/accuracy.py's table

The runs and their sources are in tests/published_runs.py; tests/unit/analysis/mfu/test_mfu_published.py
pins each error. Sensitivity: each default is scaled by 0.9 and by 1.1 (a share of a peak
no higher than 1), every run predicted again, and the median and largest move of the
predicted figure reported. Pure arithmetic: no GPU, no network, about a second.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from collbench.analysis.mfu import accuracy, compute  # noqa: E402
from collbench.analysis.mfu.accuracy import Demonstrated  # noqa: E402
from collbench.analysis.mfu.estimate import EstimateOptions, estimate  # noqa: E402
from collbench.analysis.mfu.fabrics import sized_for  # noqa: E402
from collbench.analysis.mfu.inputs import DEFAULT_COMM_EFFICIENCY, cost_model_pricer  # noqa: E402
from collbench.analysis.mfu.workload import parallelism_words  # noqa: E402
from collbench.analysis.model import gemm_model  # noqa: E402
from collbench.topologies.loader import load_topology  # noqa: E402
from tests.published_runs import MOE_STEP, PUBLISHED, PublishedRun, _topology_path  # noqa: E402

WHAT = {
    "mfu": "MFU",
    "hfu": "HFU",
    "step": "step time (s)",
    "tflops": "model TFLOP/s per GPU",
    "tokens": "tokens/s per GPU",
}


def predict(run: PublishedRun, fraction_scale: float = 1.0, comm: float = 1.0) -> float:
    workload = run.workload()
    topology = sized_for(workload, load_topology(_topology_path(run.topology)))
    accelerator = topology.accelerator
    # the burst fractions scaled (the sustained share, matmul_sustained, stays as it is)
    sustained = accelerator.matmul_sustained or 1.0
    fraction = gemm_model.matmul_fraction(accelerator) / sustained * fraction_scale
    fp8 = gemm_model.matmul_fraction(accelerator, "fp8") / sustained * fraction_scale
    scaled = replace(accelerator, matmul_fraction=min(1, fraction), matmul_fraction_fp8=min(1, fp8))
    topology = replace(topology, accelerator=scaled)
    pricer = cost_model_pricer(topology, min(1.0, DEFAULT_COMM_EFFICIENCY * comm))
    options = EstimateOptions(**run.options)
    return run.predicted(estimate(workload, topology, pricer, options))


def table() -> str:
    lines = [
        "| run | hardware | parallelism | reported | predicted | error | source |",
        "|---|---|---|---|---|---|---|",
    ]
    errors = []
    for run in PUBLISHED:
        predicted = predict(run)
        error = predicted / run.reported - 1
        errors.append(abs(error))
        workload = run.workload()
        par, training = workload.parallelism, workload.training
        setup = parallelism_words(par)
        setup.append(f"recompute {training.recompute}")
        if training.recompute_layers:
            setup.append(f"{training.recompute_layers} layers/chunk in full")
        setup.append(f"{training.attention} attention")
        if training.dtype != "bf16":
            setup.append(training.dtype)
        if run.options.get("tp_overlap"):
            own = " (recipe's ub_cfg)" if run.options.get("tp_overlap_pairs") else ""
            setup.append(f"TP overlap {run.options['tp_overlap']:g}{own}")
        if par.tp > 1 and not par.tp_async_backward:
            setup.append("TP backward not overlapped")
        lines.append(
            f"| {run.run} ({workload.model.name}) | {run.hardware} | {', '.join(setup)}, "
            f"batch {training.global_batch} x {training.seq} | {WHAT[run.what]} "
            f"{_figure(run.reported, run.what)} | {_figure(predicted, run.what)} | "
            f"{error:+.1%} | {run.source} |"
        )
    lines.append("")
    lines.append(
        f"{len(errors)} runs: median |error| {statistics.median(errors):.1%}, max {max(errors):.1%}"
    )
    return "\n".join(lines)


@contextmanager
def _patched(module: object, name: str, value: float) -> Iterator[None]:
    old = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, old)


def _constant(module: object, name: str) -> Callable[[float], Callable[[PublishedRun], float]]:
    def at(scale: float) -> Callable[[PublishedRun], float]:
        def run_with(run: PublishedRun) -> float:
            value = getattr(module, name) * scale
            value = min(1.0, value) if name != "K_RAMP" else value
            with _patched(module, name, value):
                return predict(run)

        return run_with

    return at


DEFAULTS: dict[str, Callable[[float], Callable[[PublishedRun], float]]] = {
    "accelerator matmul_fraction (bf16, fp8)": lambda scale: (
        lambda run: predict(run, fraction_scale=scale)
    ),
    "IN_STEP_SHARE (0.92)": _constant(compute, "IN_STEP_SHARE"),
    "MEMORY_FRACTION (0.85 of HBM)": _constant(gemm_model, "MEMORY_FRACTION"),
    "FLASH_FORWARD (0.80)": _constant(compute, "FLASH_FORWARD"),
    "FLASH_BACKWARD (0.65)": _constant(compute, "FLASH_BACKWARD"),
    "K_RAMP (32)": _constant(gemm_model, "K_RAMP"),
    "--comm-efficiency (0.8)": lambda scale: lambda run: predict(run, comm=scale),
}


def sensitivity() -> str:
    base = {run.run: predict(run) for run in PUBLISHED}
    lines = [
        "| default x0.9 / x1.1 | median move | largest move |",
        "|---|---|---|",
    ]
    for name, at in DEFAULTS.items():
        moves = []
        for scale in (0.9, 1.1):
            moves.append(
                [_speed(run, at(scale)(run)) / _speed(run, base[run.run]) - 1 for run in PUBLISHED]
            )
        low, high = moves
        lines.append(
            f"| {name} | {statistics.median(low):+.1%} / {statistics.median(high):+.1%} | "
            f"{_largest(low):+.1%} / {_largest(high):+.1%} |"
        )
    return "\n".join(lines)


def _speed(run: PublishedRun, figure: float) -> float:
    """The predicted figure as a rate (a step time inverted), so moves compare."""
    return 1 / figure if run.what == "step" else figure


def _largest(values: list[float]) -> float:
    return max(values, key=abs)


def demonstrated() -> dict[str, Demonstrated]:
    """Per accelerator family: the runs' MFU errors (analysis/mfu/accuracy.py's table)."""
    errors: dict[str, list[float]] = {}
    for runs, moe in ((PUBLISHED, False), (MOE_STEP, True)):
        for run in runs:
            name = accuracy.key(run.family or run.topology, moe)
            errors.setdefault(name, []).append(run.mfu_error())
    return {
        name: Demonstrated(
            name,
            len(values),
            round(min(values), 3),
            round(max(values), 3),
            round(statistics.median(abs(value) for value in values), 3),
        )
        for name, values in sorted(errors.items())
    }


def accuracy_block() -> str:
    """The DEMONSTRATED table as analysis/mfu/accuracy.py holds it."""
    rows = "".join(
        f'    "{name}": Demonstrated("{value.family}", {value.runs}, {value.low!r}, '
        f"{value.high!r}, {value.median_abs!r}),\n"
        for name, value in demonstrated().items()
    )
    return f"DEMONSTRATED: dict[str, Demonstrated] = {{\n{rows}}}"


def write_accuracy() -> Path:
    path = Path(accuracy.__file__)
    text = path.read_text(encoding="utf-8")
    start, end = "# accuracy:start\n", "\n# accuracy:end"
    head, tail = text.index(start) + len(start), text.index(end)
    path.write_text(text[:head] + accuracy_block() + text[tail:], encoding="utf-8")
    return path


PAGE = Path(__file__).resolve().parents[1] / "docs" / "mfu" / "validation.md"


def write_page(path: Path = PAGE) -> Path:
    """Rewrite the page's validation and sensitivity blocks (tests/unit/test_mfu_published.py
    holds the page to what this script prints)."""
    text = path.read_text(encoding="utf-8")
    for name, block in (("validation", table()), ("sensitivity", sensitivity())):
        start, end = f"<!-- {name}:start -->\n", f"\n<!-- {name}:end -->"
        head, tail = text.index(start) + len(start), text.index(end)
        text = text[:head] + block + text[tail:]
    path.write_text(text, encoding="utf-8")
    return path


def _figure(value: float, what: str) -> str:
    if what in ("mfu", "hfu"):
        return f"{value:.1%}"
    if what == "step":
        return f"{value:.2f}"
    return f"{value:,.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sensitivity", action="store_true", help="also the sensitivity table")
    parser.add_argument(
        "--accuracy", action="store_true", help="rewrite analysis/mfu/accuracy.py's table"
    )
    parser.add_argument(
        "--write", action="store_true", help="rewrite both tables in docs/mfu/validation.md"
    )
    args = parser.parse_args()
    if args.write:
        print(f"wrote {write_page()}")
        return
    if args.accuracy:
        print(f"wrote {write_accuracy()}")
        print(accuracy_block())
        return
    print(table())
    if args.sensitivity:
        print()
        print(sensitivity())


if __name__ == "__main__":
    main()
