"""How close the estimator has landed on published runs, per accelerator and regime: what
`mfu` prints beside each fabric's column, so an estimate is read with its demonstrated error.

The method, in full: docs/mfu/validation.md#analysis-mfu-accuracy-py.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from collbench.analysis.mfu.workload import Workload

# The kinds of workload the estimator errs differently on, each workload in the first that
# holds it: its band is the error on the published runs of its accelerator in its regime
# (MoE's all-to-alls, a fleet's stragglers, eager mode's unfused kernels, FSDP's all-gathers
# and a small model's non-GEMM work are their own parts of the model).
REGIMES: dict[str, Callable[[Workload], bool]] = {
    "MoE": lambda w: w.model.experts > 0,
    "more than 4k GPUs": lambda w: w.parallelism.world_size > 4096,
    "PyTorch eager": lambda w: w.training.framework == "eager",
    "FSDP": lambda w: w.parallelism.zero == 3,
    "3-D parallel": lambda w: w.parallelism.tp > 1 and w.parallelism.pp > 1,
    "small models": lambda w: w.model.n_params < 9e9,
    "TP and DP": lambda w: True,
}


@dataclass(frozen=True)
class Demonstrated:
    """The estimator's MFU error over the published runs of one regime on one accelerator
    family, each run predicted without its source (leave-one-source-out)."""

    family: str  # the accelerator's model number and the regime: "H100 3-D parallel"
    runs: int
    low: float  # the most negative error (the estimate slower than the run)
    high: float  # the most positive error (the estimate faster than the run)
    median_abs: float  # median |error|

    def line(self, column: str) -> str:
        if self.runs == 1:
            erred, median = f"on 1 published run the estimated MFU erred {_pct(self.low)}", ""
        else:
            erred = (
                f"on {self.runs} published runs the estimated MFU erred {_pct(self.low)} to "
                f"{_pct(self.high)}"
            )
            median = f"; median |error| {self.median_abs:.1%}"
        return (
            f"validated: {column} ({self.family}): {erred} (each predicted without its "
            f"source; +: faster than the run{median}; docs/mfu/validation.md)"
        )

    def to_dict(self) -> dict[str, float | int | str]:
        return {
            "family": self.family,
            "runs": self.runs,
            "mfu_error_low": self.low,
            "mfu_error_high": self.high,
            "mfu_error_median_abs": self.median_abs,
        }


# Written by `python benchmarks/mfu_validation.py --accuracy` (tests/unit/analysis/mfu/test_mfu_published.py
# checks it against the validation set).
# accuracy:start
DEMONSTRATED: dict[str, Demonstrated] = {
    "A100 3-D parallel": Demonstrated("A100 3-D parallel", 10, -0.073, 0.066, 0.055),
    "A100 FSDP": Demonstrated("A100 FSDP", 11, -0.041, 0.122, 0.041),
    "A100 PyTorch eager": Demonstrated("A100 PyTorch eager", 2, -0.054, 0.004, 0.029),
    "A100 TP and DP": Demonstrated("A100 TP and DP", 2, -0.009, 0.038, 0.024),
    "B200 3-D parallel": Demonstrated("B200 3-D parallel", 2, 0.071, 0.125, 0.098),
    "B200 small models": Demonstrated("B200 small models", 3, 0.003, 1.078, 0.196),
    "H100 3-D parallel": Demonstrated("H100 3-D parallel", 13, -0.079, 0.071, 0.054),
    "H100 FSDP": Demonstrated("H100 FSDP", 6, -0.108, 0.12, 0.035),
    "H100 MoE": Demonstrated("H100 MoE", 3, -0.117, 0.247, 0.117),
    "H100 PyTorch eager": Demonstrated("H100 PyTorch eager", 2, -0.029, -0.007, 0.018),
    "H100 TP and DP": Demonstrated("H100 TP and DP", 2, -0.017, -0.009, 0.013),
    "H100 more than 4k GPUs": Demonstrated("H100 more than 4k GPUs", 7, -0.074, 0.002, 0.065),
    "H100 small models": Demonstrated("H100 small models", 3, 0.133, 0.468, 0.169),
}
# accuracy:end

_FAMILY = re.compile(r"\b([A-Z]{1,2}\d{2,4}[A-Z]?)\b")


def family(accelerator: str) -> str | None:
    """The model number in an accelerator's name: "NVIDIA A100-SXM4-80GB" -> "A100",
    "NVIDIA H100 80GB HBM3 (SXM5)" -> "H100", "AMD Instinct MI300X" -> "MI300X"."""
    match = _FAMILY.search(accelerator)
    return match.group(1) if match else None


def regime(workload: Workload) -> str:
    """The workload's regime (REGIMES: the first that holds it)."""
    return next(name for name, holds in REGIMES.items() if holds(workload))


def key(family_name: str, regime_name: str) -> str:
    """DEMONSTRATED's key: the family and the regime ("H100 FSDP")."""
    return f"{family_name} {regime_name}"


# Accelerators validated by another's runs: the H200 and H800 are the H100's GH100 die
# (faster HBM; less NVLink), priced at the same measured matmul rates (the catalog's H100
# sustained clock is the H200's measurement), so the H100 runs' errors are theirs.
SAME_DIE = {"H200": "H100", "H800": "H100"}


def demonstrated(accelerator: str, regime_name: str) -> Demonstrated | None:
    """The published runs' verdict on this accelerator (or its die's) in this regime, None
    where none validates it."""
    name = family(accelerator)
    return DEMONSTRATED.get(key(SAME_DIE.get(name, name), regime_name)) if name else None


def band(accelerator: str, regime_name: str) -> str:
    """A fabric's headline tag: how far the estimate erred on the published runs of its
    accelerator in the workload's regime, or that none validates it."""
    known = demonstrated(accelerator, regime_name)
    if known is None:
        return "not validated"
    if known.runs == 1:
        return f"{_pct(known.low)} on 1 run"
    return f"{_pct(known.low)} to {_pct(known.high)}"


def accuracy_line(column: str, accelerator: str, regime_name: str) -> str:
    """One line for a fabric's column: its demonstrated error, or that there is none."""
    known = demonstrated(accelerator, regime_name)
    if known is not None:
        return known.line(column)
    return (
        f"validated: {column} ({key(family(accelerator) or accelerator, regime_name)}): no "
        f"published run of this regime on this accelerator validates the estimate; its error "
        "is not known"
    )


def _pct(value: float) -> str:
    return f"{value:+.1%}"
