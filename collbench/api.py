"""collbench as a library, for notebooks and a team's own tooling: the CLI's use-cases as
typed calls that return typed results (docs/api.md). Each call is the one the command runs;
bad input is a SpecError (its `str` is the line the CLI prints), a failed run a RunFailed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collbench.core.errors import CollbenchError
from collbench.core.errors import SpecError as SpecError  # api.SpecError: what bad input raises
from collbench.core.spec import SweepSpec
from collbench.store.load import Run, load_run

if TYPE_CHECKING:
    from collbench.run.compare import Compared
    from collbench.run.fit import Fitted
    from collbench.run.mfu import MfuEstimate


class RunFailed(CollbenchError):
    """A sweep ended with a failure; `run_dir` keeps every finished row."""

    def __init__(self, message: str, run_dir: Path) -> None:
        super().__init__(message)
        self.run_dir = run_dir


def sweep(
    spec: SweepSpec | None = None,
    out: Path | str | None = None,
    launcher: str = "local",
    nproc: int | None = None,
    **launcher_options: Any,
) -> Run:
    """Run a sweep (an overlap probe: a spec with `overlap`) and return it as loaded: what
    `collbench sweep` does, quietly. `launcher_options` are the launcher's settings, as
    the CLI's flags name them (`ntasks_per_node=2` ...)."""
    return load_run(_launch(spec, out, launcher, nproc, launcher_options))


@dataclass(frozen=True)
class Submitted:
    """A sweep submitted to Slurm through submitit (`submit`): `result()` follows it to its
    end, as `collbench wait` does, and returns the run."""

    job_id: str
    run_dir: Path

    @property
    def job(self) -> Any:
        """submitit's job object of the submission (its state, cancel(), stdout())."""
        from collbench.launchers.slurm import SUBMITIT_FOLDER
        from collbench.launchers.slurm_state import slurm_job

        return slurm_job(self.job_id, self.run_dir / SUBMITIT_FOLDER)

    def result(self) -> Run:
        from collbench.run.status import wait_for_run

        _ended(wait_for_run(self.run_dir, _no_sink), self.run_dir)
        return load_run(self.run_dir)


def submit(spec: SweepSpec | None = None, out: Path | str | None = None, **slurm: Any) -> Submitted:
    """Submit a sweep to Slurm (`--launcher slurm --no-wait`; `slurm`: nodes,
    ntasks_per_node, partition, time ... as the CLI's flags name them)."""
    from collbench.launchers.slurm_state import read_slurm_record

    run_dir = _launch(spec, out, "slurm", None, {**slurm, "no_wait": True})
    return Submitted(str((read_slurm_record(run_dir) or {})["job_id"]), run_dir)


def load(path: Path | str) -> Run:
    """A run directory's meta.json and typed rows."""
    return load_run(path, "RUN")


def fit(*runs: Path | str, topology: str | None = None) -> Fitted:
    """Each collective's latency + size/bandwidth fit over the runs' sweep rows
    (run.fit.Fitted: `fits` holds (GroupFit, its comparison with the topology))."""
    from collbench.run.fit import FitRequest, fit_runs

    return fit_runs(FitRequest(tuple(Path(run) for run in runs), topology=topology))


def compare(baseline: Path | str, *runs: Path | str, **gate: Any) -> Compared:
    """Each run compared with `baseline` under the one decision rule (run.compare.Compared;
    `gate`: fail_if_slower, band, sizes, noise_floor, alpha, as `collbench compare` takes)."""
    from collbench.run.compare import CompareRequest, compare_runs

    paths = tuple(Path(run) for run in (baseline, *runs))
    return compare_runs(CompareRequest(paths, **gate))


def mfu(
    model: str | Any,
    topologies: Sequence[str],
    global_batch: int,
    parallelism: Mapping[str, Any] | None = None,
    **request: Any,
) -> MfuEstimate:
    """Training MFU and the time exposed collectives cost, per topology (run.mfu.MfuEstimate):
    `model` a preset's name or an analysis.mfu Model, `parallelism` Parallelism's fields
    (tp, pp, dp ...), `request` MfuRequest's (seq, nodes, curves ...)."""
    from collbench.analysis.mfu.estimate import EstimateOptions
    from collbench.analysis.mfu.presets import preset
    from collbench.analysis.mfu.workload import Training
    from collbench.run.mfu import MfuRequest, estimate_mfu

    wanted = MfuRequest(topology=tuple(topologies), **request)
    chosen = preset(model) if isinstance(model, str) else model
    training = Training(seq=wanted.seq, global_batch=global_batch)
    return estimate_mfu(wanted, chosen, training, dict(parallelism or {}), EstimateOptions())


def _launch(
    spec: SweepSpec | None,
    out: Path | str | None,
    launcher: str,
    nproc: int | None,
    extra: Mapping[str, Any],
) -> Path:
    """run_sweep as `collbench sweep` calls it, quietly; the run directory."""
    from collbench.run.sweep import RunOptions, run_sweep

    where = None if out is None else Path(out)
    options = RunOptions(launcher, nproc, where, "quiet", extra=dict(extra))
    result, run_dir = run_sweep(spec or SweepSpec(), options, ["collbench.api"], _no_sink)
    return _ended(result, run_dir)


def _ended(result: Any, run_dir: Path) -> Path:
    if result.code != 0:
        raise RunFailed(result.error or f"the sweep ended with exit {result.code}", run_dir)
    return Path(run_dir)


def _no_sink(spec: Any) -> Any:
    from collbench.render.console import ConsoleSink

    return ConsoleSink(spec, "quiet")
