"""`collbench tune`: the best setting of communication knobs per collective and size range.

Three forms, one command:
- `tune --knob NAME=V1,V2 ... [sweep options] [launcher options] --out DIR` measures every
  setting in fresh rank processes (run/tune.py);
- `tune --from RUN... --out DIR` chooses from runs already measured (run/tune_from.py);
- `tune --verify DIR` measures the default and the chosen setting side by side
  (run/tune_verify.py).
Each writes tune.json and best.env, and nccl_tuner.conf where the tuner plugin can say it.

app.py registers it. Imports stay light (typer, the option tables): the work loads only when
the command runs.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from collbench.analysis.tune.select import SelectRule
from collbench.cli.measure import SWEEP_OPTIONS
from collbench.cli.options import Option, given_fields
from collbench.core.spec import SweepSpec
from collbench.core.tune_grid import DEFAULT_MAX_SETTINGS, DEFAULT_TUNE_REPEATS
from collbench.run.sweep import RunOptions

# --ranges: the option's words for SelectRule.granularity (whose default is written there)
RANGES = {"bands": "band", "sizes": "size"}
DEFAULT_RANGES = next(name for name, value in RANGES.items() if value == SelectRule().granularity)
SEARCHES = ("grid", "halving", "coordinate")
_TUNE = None  # the main panel: tune's own options first
# The sweep's options that do not apply to tune: it names its own output and runs its own
# ranks (--knob is tune's own, with value lists).
_NOT_FOR_TUNE = {
    "--out",
    "--csv",
    "--nccl-json",
    "--quiet",
    "--json",
    "--knob",
    "--rank-env",
    "--print",
    "--print-sbatch",
    "--no-wait",
    "--overlap",
    "--compute-ratio",
    "--compute-tflop",
    "--compute-dtype",
    "--matmul-shape",
    "--compute-streams",
    "--repeats",  # tune's own: each repeat in fresh processes, interleaved across settings
}
MEASURE_OPTIONS = tuple(option for option in SWEEP_OPTIONS if option.flag not in _NOT_FOR_TUNE)

TUNE_OPTIONS = (
    Option(
        ("--knob",),
        "A knob and the values to try, e.g. NCCL_ALGO=Ring,Tree (repeatable; `\\,` is a "
        "comma inside one value). The baseline, the environment as given, always runs too.",
        kind=list[str],
        panel=_TUNE,
        metavar="NAME=V1,V2,...",
    ),
    Option(
        ("--search",),
        "grid: every setting; halving: probe a few sizes, drop the clearly worse, then full "
        "sweeps; coordinate: numeric knobs one at a time (AutoCCL).",
        default="grid",
        panel=_TUNE,
        metavar="NAME",
    ),
    Option(
        ("--repeats",),
        "Measure every setting R times, each time in fresh processes, interleaved (A B C A B "
        "C ...) so drift cancels; the winner's confidence comes from these repeats (3 or "
        "more: a test; fewer: the measured noise floor).",
        kind=int,
        default_text=f"{DEFAULT_TUNE_REPEATS}; --verify: the tune's own",
        panel=_TUNE,
        metavar="R",
    ),
    Option(
        ("--budget",),
        "Wall-clock limit (90s, 10m, 1h): no setting starts that would not fit, at the mean "
        "time of those measured so far.",
        panel=_TUNE,
        metavar="DURATION",
    ),
    Option(
        ("--max-settings",),
        "Refuse a grid of more settings than this (the baseline not counted); the most a "
        "coordinate search measures.",
        kind=int,
        default=DEFAULT_MAX_SETTINGS,
        panel=_TUNE,
        metavar="N",
    ),
    Option(
        ("--no-choices",),
        "NCCL/RCCL: skip the 1-iteration pass after each setting that records, with NCCL's "
        "debug output on, the algorithm, protocol and channels NCCL used (choices.jsonl).",
        kind=bool,
        default=False,
        panel=_TUNE,
    ),
    Option(
        ("--from",),
        "Tune from the runs given as RUN..., launching nothing.",
        kind=bool,
        default=False,
        name="from_runs",
    ),
    Option(
        ("--verify",),
        "A tune directory: measure its default and its best.env setting side by side, in "
        "fresh processes, and report the realised gain.",
        kind=Path,
        metavar="DIR",
    ),
    Option(
        ("--out",),
        "A new directory for tune.json, best.env, nccl_tuner.conf and (launching) one run "
        "directory per setting. --verify: DIR/verify-<time> unless given.",
        kind=Path,
        metavar="DIR",
    ),
    Option(
        ("--channels",),
        "nccl_tuner.conf's channel count where the setting pins none (0: NCCL's own); "
        "needed for imported logs, which record no environment.",
        kind=int,
        metavar="N",
    ),
    Option(
        ("--ranges",),
        "bands: one result per size band; sizes: one per measured size.",
        default=DEFAULT_RANGES,
        metavar="bands|sizes",
    ),
    Option(("--json",), "Print tune.json as JSON.", kind=bool, default=False, name="json_out"),
)


def _runs_parameter() -> inspect.Parameter:
    info = typer.Argument(
        help="Run directories (sweeps, imported logs), each measured under one setting (--from).",
        metavar="RUN...",
        show_default=False,
    )
    return inspect.Parameter(
        "runs",
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        default=None,
        annotation=Annotated[list[Path] | None, info],
    )


def _build() -> Any:
    options = (*TUNE_OPTIONS, *MEASURE_OPTIONS)
    parameters = [_runs_parameter(), *(option.parameter() for option in options)]

    def tune(**values: Any) -> None:
        """Find the best setting of communication knobs (NCCL_ALGO, NCCL_PROTO, channels,
        GLOO_SOCKET_IFNAME ...) per collective and size band: --knob measures each setting
        in fresh processes, --from chooses from runs already measured, --verify checks a
        result. Writes tune.json, best.env and nccl_tuner.conf."""
        run_tune_command(values)

    tune.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    tune.__annotations__ = {param.name: param.annotation for param in parameters}
    return tune


def run_tune_command(values: dict[str, Any]) -> None:
    from collbench.core.errors import SpecError

    if values["ranges"] not in RANGES:
        raise SpecError("--ranges", values["ranges"], f"must be one of {', '.join(RANGES)}")
    channels = values["channels"]
    if channels is not None and channels < 0:
        raise SpecError("--channels", channels, "must be a count, or 0 for NCCL's own")
    rule = SelectRule(granularity=RANGES[values["ranges"]])
    forms = [
        flag
        for flag, given in (
            ("--from", values["from_runs"]),
            ("--verify", values["verify"] is not None),
            ("--knob", bool(values["knob"])),
        )
        if given
    ]
    if len(forms) > 1:
        raise SpecError(
            forms[1], "", f"conflicts with {forms[0]}: give one of --knob, --from, --verify"
        )
    if values["runs"] and not values["from_runs"]:
        raise SpecError(
            "RUN", str(values["runs"][0]), "is only read with --from (tune --from RUN... --out DIR)"
        )
    if values["from_runs"]:
        _tune_from(values, channels, rule)
    elif values["verify"] is not None:
        _verify(values)
    else:
        _launch(values, channels, rule)


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _tune_from(values: dict[str, Any], channels: int | None, rule: SelectRule) -> None:
    from collbench.core.errors import SpecError
    from collbench.render.tune import render_tune
    from collbench.run.tune_from import tune_from

    if values["out"] is None:
        raise SpecError("--out", "", "is required: the new directory to write the result in")
    result = tune_from(values["runs"] or [], values["out"], channels, rule)
    for warning in result.warnings:
        _say(f"collbench: warning: {warning}")
    print(render_tune(result, as_json=values["json_out"]), flush=True)


def _launch(values: dict[str, Any], channels: int | None, rule: SelectRule) -> None:
    from collbench.cli.measure import command_line, sink_factory
    from collbench.core.errors import SpecError
    from collbench.core.tune_grid import parse_knobs
    from collbench.core.units import parse_duration
    from collbench.render.tune import render_tune
    from collbench.run.tune import TunePlan, run_tune

    if not values["knob"]:
        raise SpecError(
            "--knob",
            "",
            "is required: the knobs to try, e.g. --knob NCCL_ALGO=Ring,Tree "
            "(or --from RUN... to tune from runs already measured)",
        )
    if values["out"] is None:
        raise SpecError("--out", "", "is required: the new directory to write the result in")
    # One pass per process: tune's own --repeats starts fresh processes for each repeat.
    spec = SweepSpec(**given_fields(SweepSpec, MEASURE_OPTIONS, values), repeats=1)
    options = _run_options(values)
    axes, warnings = parse_knobs(values["knob"], spec.backend)
    budget = values["budget"]
    repeats = {"repeats": values["repeats"]} if values["repeats"] is not None else {}
    plan = TunePlan(
        axes,
        values["out"],
        search=values["search"],
        budget_s=None if budget is None else parse_duration(budget, "--budget"),
        max_settings=values["max_settings"],
        channels=channels,
        rule=rule,
        record_choices=not values["no_choices"],
        **repeats,
    )
    if options.launcher == "slurm":
        raise typer.Exit(_tune_in_allocation(values, spec, plan, options))
    result, code = run_tune(
        spec, options, plan, command_line(), sink_factory("quiet"), _say, warnings
    )
    if result is not None:
        print(render_tune(result, as_json=values["json_out"]), flush=True)
    raise typer.Exit(code)


def _tune_in_allocation(values: dict[str, Any], spec: SweepSpec, plan: Any, options: Any) -> int:
    """--launcher slurm: submit this tune as a driver that runs `tune --launcher srun` once
    in one allocation (an srun step per setting), and follow it."""
    from collbench.core.tune_grid import build_grid
    from collbench.run.tune_slurm import tune_in_allocation

    build_grid(plan.axes, plan.max_settings, exhaustive=plan.search == "grid")  # refuse early
    argv = [sys.executable, "-m", "collbench", "tune", "--launcher", "srun"]
    argv += [f"--knob={text}" for text in values["knob"]]
    argv += ["--search", plan.search, "--max-settings", str(plan.max_settings)]
    argv += ["--repeats", str(plan.repeats)]
    argv += ["--ranges", values["ranges"]]
    if values["budget"] is not None:
        argv += ["--budget", values["budget"]]
    if plan.channels is not None:
        argv += ["--channels", str(plan.channels)]
    if values["no_choices"]:
        argv.append("--no-choices")
    if values["json_out"]:
        argv.append("--json")
    argv += _without_repeats(spec.to_args())  # tune's --repeats is its own (above)
    if spec.topology is not None:
        argv += ["--topology", spec.topology]
    argv += ["--out", str(Path(plan.out).absolute())]
    return tune_in_allocation(argv, options.extra, plan.out, _say)


def _without_repeats(args: list[str]) -> list[str]:
    """A sweep's options less its --repeats (runs in the same processes, which tune never
    asks for: tune's --repeats starts fresh ones)."""
    if "--repeats" not in args:
        return args
    at = args.index("--repeats")
    return args[:at] + args[at + 2 :]


def _run_options(values: dict[str, Any]) -> RunOptions:
    from collbench.cli.measure import _LAUNCHER_SETTINGS
    from collbench.core.errors import SpecError

    extra = {}
    for settings in _LAUNCHER_SETTINGS:
        extra.update(given_fields(settings, MEASURE_OPTIONS, values))
    given = given_fields(RunOptions, MEASURE_OPTIONS, values)
    if given.get("launcher") == "none":
        raise SpecError(
            "--launcher",
            "none",
            "does not apply to tune: it starts fresh ranks for every setting",
        )
    return RunOptions(**given, output="quiet", extra=extra)


def _verify(values: dict[str, Any]) -> None:
    from collbench.cli.measure import command_line, sink_factory
    from collbench.render.tune import render_verify
    from collbench.run.tune_verify import run_verify

    result, code = run_verify(
        values["verify"],
        values["out"],
        _run_options(values),
        given_fields(SweepSpec, MEASURE_OPTIONS, values),
        command_line(),
        sink_factory("quiet"),
        _say,
        values["repeats"],
    )
    if result is not None:
        print(render_verify(result, as_json=values["json_out"]), flush=True)
    raise typer.Exit(code)


tune = _build()
