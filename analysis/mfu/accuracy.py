"""How close the estimator has landed on published runs, per accelerator: what `mfu`
prints beside each fabric's column, so an estimate is read with its demonstrated error.

The method, in full: docs/mfu/validation.md#analysis-mfu-accuracy-py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Demonstrated:
    """The estimator's MFU error over the published runs on one accelerator family, each
    run predicted without its source (leave-one-source-out)."""

    family: str  # "A100", "H100": the accelerator's model number ("H100 MoE": MoE runs)
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
    "A100": Demonstrated("A100", 12, -0.073, 0.066, 0.048),
    "H100": Demonstrated("H100", 10, -0.128, 0.005, 0.058),
    "H100 MoE": Demonstrated("H100 MoE", 1, 0.216, 0.216, 0.216),
}
# accuracy:end

_FAMILY = re.compile(r"\b([A-Z]{1,2}\d{2,4}[A-Z]?)\b")


def family(accelerator: str) -> str | None:
    """The model number in an accelerator's name: "NVIDIA A100-SXM4-80GB" -> "A100",
    "NVIDIA H100 80GB HBM3 (SXM5)" -> "H100", "AMD Instinct MI300X" -> "MI300X"."""
    match = _FAMILY.search(accelerator)
    return match.group(1) if match else None


def key(family_name: str, moe: bool) -> str:
    """DEMONSTRATED's key: the family, and " MoE" for mixture-of-experts workloads (their
    all-to-alls and overlap are their own model, validated on their own runs)."""
    return f"{family_name} MoE" if moe else family_name


def demonstrated(accelerator: str, moe: bool = False) -> Demonstrated | None:
    """The published runs' verdict on this accelerator (and kind of workload), None where
    none validates it."""
    name = family(accelerator)
    return DEMONSTRATED.get(key(name, moe)) if name else None


def band(accelerator: str, moe: bool = False) -> str:
    """A fabric's headline tag: how far the estimate erred on the published runs of its
    accelerator (and kind of workload), or that none validates it."""
    known = demonstrated(accelerator, moe)
    return "not validated" if known is None else f"{_pct(known.low)} to {_pct(known.high)}"


def accuracy_line(column: str, accelerator: str, moe: bool = False) -> str:
    """One line for a fabric's column: its demonstrated error, or that there is none."""
    known = demonstrated(accelerator, moe)
    if known is not None:
        return known.line(column)
    kind = "MoE " if moe else ""
    return (
        f"validated: {column} ({key(family(accelerator) or accelerator, moe)}): no published "
        f"{kind}run on this accelerator validates the estimate; its error is not known"
    )


def _pct(value: float) -> str:
    return f"{value:+.1%}"
