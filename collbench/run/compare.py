"""`collbench compare`'s use-case: load the runs, compare each with the baseline, check the gate.

The method, in full: docs/architecture.md#collbench-run-compare-py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collbench.analysis.compare.comparison import ALPHA, Comparison, common_keys, compare
from collbench.core.errors import SpecError

if TYPE_CHECKING:
    from collbench.analysis.compare.gate import GateResult, SizeSelection
    from collbench.store.load import Run
    from collbench.store.rows import ResultRow


@dataclass(frozen=True)
class CompareRequest:
    """What `collbench compare` was asked for."""

    runs: tuple[Path, ...] = ()  # the baseline first
    # Exit 2 when the runs' methodology differs.
    strict: bool = False
    # Significance level of the test on repeats (Holm-corrected over the sizes compared).
    alpha: float = ALPHA
    # The CI gate: a size more than this percent slower than the baseline fails (None: off).
    fail_if_slower: float | None = None
    band: str | None = None  # the size bands the gate checks (comma-separated)
    sizes: str | None = None  # MIN:MAX, the sizes the gate checks
    noise_floor: Path | None = None  # a file `collbench noise` wrote

    def selection(self) -> SizeSelection | None:
        """The sizes --fail-if-slower checks; --band and --sizes only make sense with it."""
        from collbench.analysis.compare.gate import SizeSelection, parse_bands, parse_size_range

        threshold_pct, band, sizes = self.fail_if_slower, self.band, self.sizes
        if threshold_pct is None:
            for flag, value in (("--band", band), ("--sizes", sizes)):
                if value is not None:
                    raise SpecError(flag, value, "only applies with --fail-if-slower PCT")
            return None
        if not 0 <= threshold_pct < 100:
            raise SpecError("--fail-if-slower", threshold_pct, "must be a percentage in [0, 100)")
        if band is not None and sizes is not None:
            raise SpecError("--sizes", sizes, "and --band both pick sizes: give one of them")
        if band is not None:
            return parse_bands(band)
        return parse_size_range(sizes) if sizes is not None else SizeSelection()


@dataclass(frozen=True)
class Compared:
    """The runs, the baseline first, and each other run compared with it."""

    runs: list[Run]
    comparisons: list[Comparison]
    selection: SizeSelection | None  # the sizes the gate checks (None: no gate)

    @property
    def baseline(self) -> str:
        return self.runs[0].path

    @property
    def paths(self) -> list[str]:
        """The compared runs' paths (the baseline's left out)."""
        return [run.path for run in self.runs[1:]]


def compare_runs(request: CompareRequest) -> Compared:
    """Every run compared with the first under the decision rule, a tune directory as its
    settings' runs (the baseline first: `compare TUNE_DIR` compares every setting with the
    default); SpecError on bad input, or unless there is a baseline and a run that shares
    sizes with it."""
    from collbench.analysis.rules.bands import BAND_NAMES
    from collbench.analysis.rules.decision import Rule
    from collbench.run.run_dirs import expand_runs
    from collbench.store.noise_floor import load_noise_floor

    selection = request.selection()
    floor = None
    if request.noise_floor is not None:
        floor = load_noise_floor(request.noise_floor, bands=BAND_NAMES)
    rule = Rule(alpha=request.alpha, threshold_pct=request.fail_if_slower, floor=floor)
    runs = list(request.runs)
    # A run directory's samples are reduced as they are read (never all in memory at once);
    # a tune directory's runs come whole.
    loaded = expand_runs(runs, _sample_summary).runs if runs else []
    if len(loaded) < 2:
        raise SpecError(
            "RUN",
            " ".join(map(str, runs)),
            "needs a baseline and at least one run to compare with it",
        )
    for run in loaded:  # as noise refuses one: its rows are not all there yet
        if run.meta.state == "running":
            why = "if it was killed, collbench finalize RUN ends it"
            raise SpecError("RUN", run.path, f"is still being written (state running; {why})")
    for candidate in loaded[1:]:
        if not common_keys(loaded[0], candidate):
            raise SpecError(
                "RUN",
                candidate.path,
                f"has no (collective, placement, size) in "
                f"common with {loaded[0].path}: nothing to compare",
            )
    gated = selection.covers if selection is not None else None
    comparisons = [compare(loaded[0], candidate, rule, gated) for candidate in loaded[1:]]
    return Compared(loaded, comparisons, selection)


def _sample_summary(row: ResultRow, times: Any) -> Any:
    """What compare keeps of a row's samples: the decision rule's summary of a sweep row's."""
    from collbench.analysis.rules.decision import sample_summary
    from collbench.store.rows import SWEEP, row_is

    return sample_summary(row, times) if row_is(row, SWEEP) else None


def gate_results(request: CompareRequest, compared: Compared) -> list[GateResult]:
    """--fail-if-slower on every compared run ([] without it); a selection that checks
    nothing is refused."""
    from collbench.analysis.compare.gate import check_slower

    threshold_pct, selection = request.fail_if_slower, compared.selection
    if threshold_pct is None or selection is None:
        return []
    results = [check_slower(item, threshold_pct, selection) for item in compared.comparisons]
    for result, path in zip(results, compared.paths, strict=True):
        if not result.checks:
            raise SpecError.from_message(
                f"--fail-if-slower: {selection.describe()} holds no size that both the baseline "
                f"and {path} measured: the gate would check nothing"
            )
    return results
