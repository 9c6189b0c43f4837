"""`collbench noise RUN RUN [RUN...]`: the A/A noise floor of one configuration from identical
reruns (analysis/rules/decision.aa_floor), written for `compare --noise-floor FILE`. Runs not
measured alike are refused (methodology's NOISE purpose); other environment differences are
listed: they are part of the noise the floor covers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from collbench.analysis.compare.comparison import rows_by_key
from collbench.analysis.rules.decision import Evidence, aa_floor, evidence_of
from collbench.analysis.rules.methodology import NOISE, Difference, check
from collbench.core.errors import SpecError
from collbench.core.noise import NoiseFloor
from collbench.store.load import Run
from collbench.store.outputs import check_output_file, path_error
from collbench.store.rundir import write_json_atomic

MIN_RUNS = 2
NAMED_RUNS = 3  # a floor's source names this many runs, then counts the rest


@dataclass(frozen=True)
class NoiseReport:
    floor: NoiseFloor  # per size, and the evidence in its detail (decision.aa_floor)
    runs: list[str]  # the runs' paths, in the order given
    sizes: int  # (collective, placement, size) measured by every run
    environment: list[Difference]  # differences kept (part of the noise measured)
    out: Path


@dataclass(frozen=True)
class NoiseRequest:
    """What `collbench noise` was asked for."""

    runs: tuple[Path, ...] = ()  # identical runs of one configuration
    out: Path = Path("noise-floor.json")  # in the working directory
    force: bool = False  # write over an existing file (never into a run directory)


def record_noise_of(request: NoiseRequest) -> NoiseReport:
    """Load the runs given, measure their A/A floor per size and write it to --out (over an
    existing file only with --force; never into a run: store/outputs.py's checks); SpecError
    naming a bad RUN (runs not identical, no size in common) or --out."""
    from collbench.run.run_dirs import load_run_dir

    runs = [load_run_dir(path) for path in request.runs]
    check_output_file("--out", request.out, [run.path for run in runs], request.force)
    environment = _check_identical(runs)
    keyed = [rows_by_key(run.rows) for run in runs]
    common = sorted(set.intersection(*(set(keys) for keys in keyed)))
    if not common:
        raise SpecError(
            "RUN", " ".join(run.path for run in runs), "have no size that every run measured"
        )
    by_size: dict[tuple[str, int], list[Evidence]] = {
        (" ".join(map(str, key[:2] + key[3:])), key[2]): [evidence_of(keys[key]) for keys in keyed]
        for key in common
    }
    floor = aa_floor(by_size, _source(runs))
    if not floor.pct_by_size:  # no size with a positive figure in every run
        raise SpecError(
            "RUN", " ".join(run.path for run in runs), "have no size with a time in every run"
        )
    out = Path(request.out)
    report = NoiseReport(floor, [run.path for run in runs], len(common), environment, out)
    try:
        write_json_atomic(report.out, floor.to_dict())  # checked above
    except OSError as error:  # a full disk: the atomic write left nothing behind
        raise path_error("--out", request.out, error) from None
    return report


def _check_identical(runs: Sequence[Run]) -> list[Difference]:
    """Refuse runs that are not reruns of one configuration; the environment differences
    that remain."""
    if len(runs) < MIN_RUNS:
        raise SpecError(
            "RUN",
            " ".join(run.path for run in runs),
            f"is not enough: an A/A floor needs at least {MIN_RUNS} identical runs",
        )
    seen: dict[tuple[str, str], str] = {}
    for run in runs:
        for key in (("dir", str(Path(run.path).resolve())), ("run id", str(run.run_id))):
            if key in seen:
                why = f"is the same run as {seen[key]} (one {key[0]}): the floor would be 0"
                raise SpecError("RUN", run.path, f"{why}; give reruns")
            seen[key] = run.path
        if run.meta.state == "running":
            raise SpecError("RUN", run.path, "is still being written (state running)")
    return check(runs, NOISE, label=lambda run: run.path).differences


def _source(runs: Sequence[Run]) -> str:
    names = [run.run_id for run in runs]
    shown = ", ".join(names[:NAMED_RUNS])
    if len(names) > NAMED_RUNS:
        shown += f" and {len(names) - NAMED_RUNS} more"
    return f"collbench noise over {len(runs)} runs ({shown})"
