"""`collbench tune`: the best setting of communication knobs per collective and size range.

Three subcommands, each with the options it uses:
- `tune run --knob NAME=V1,V2 ... [sweep options] [launcher options] --out DIR` measures
  every setting in fresh rank processes (run/tune/launch.py);
- `tune from RUN... --out DIR` chooses from runs already measured (run/tune/from_runs.py);
- `tune verify DIR` measures the default and the chosen setting side by side
  (run/tune/verify.py).
run and from write tune.json and best.env, and nccl_tuner.conf where the tuner plugin can
say it; `--workload FILE` chooses for a training job described as `collbench mfu` options
are (cli/workload.py).

app.py registers it. Imports stay light (typer, the option tables): the work loads only when
the command runs.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import typer

from collbench.analysis.tune.select import SelectRule
from collbench.analysis.tune.tuner_conf import DEFAULT_TUNER_SHAPE, parse_tuner_shape
from collbench.cli.launch_options import launcher_settings
from collbench.cli.measure import FOLDED_PANELS, MEASUREMENT_PANEL, SWEEP_OPTIONS, one_at_a_time
from collbench.cli.options import (
    FROM_OWNER,
    Argument,
    Option,
    add_command,
    given_fields,
    group,
    json_option,
    say,
    warn,
)
from collbench.core.errors import SpecError
from collbench.core.spec import SweepSpec
from collbench.core.tune_grid import DEFAULT_TUNE_REPEATS, parse_knobs
from collbench.core.units import parse_duration
from collbench.run.sweep import RunOptions
from collbench.run.tune.from_runs import TunerConfRequest, tune_from
from collbench.run.tune.plan import DEFAULT_RANGES, TunePlan, TuneRequest, parse_ranges

# tune's own options come first (the main panel); its rarer panels (folded by -h, with the
# sweep's rarer ones):
_SEARCH = "Search"
_CONF = "nccl_tuner.conf"
# The sweep's options that do not apply to tune: it names its own output and runs its own
# ranks (--knob is tune's own, with value lists).
_NOT_FOR_TUNE = {
    "--out",
    "--csv",
    "--nccl-json",
    "--force",
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
# The sweep's common options tune keeps on its common path; -f -d -o -w -n go to Measurement.
_COMMON_SWEEP = {"--collective", "--min-bytes", "--max-bytes", "--nproc"}
MEASURE_OPTIONS = one_at_a_time(
    tuple(
        option
        if option.panel or option.flag in _COMMON_SWEEP
        else replace(option, panel=MEASUREMENT_PANEL)
        for option in SWEEP_OPTIONS
        if option.flag not in _NOT_FOR_TUNE
    ),
    "a tune judges",
)

KNOB = Option(
    ("--knob",),
    "A knob and the values to try, e.g. NCCL_ALGO=Ring,Tree (repeatable; `\\,` is a "
    "comma inside one value). The baseline, the environment as given, always runs too.",
    TuneRequest,
    kind=list[str],
    metavar="NAME=V1,V2",
)

REPEATS = Option(
    ("--repeats",),
    "Measure every setting R times in fresh processes, interleaved (A B C A B C ...) so "
    "drift cancels; the winner's confidence comes from them (3 or more: a test; fewer: "
    "the noise floor).",
    TunePlan,
    default_text=str(DEFAULT_TUNE_REPEATS),
    metavar="R",
)

OUT = Option(
    ("--out",),
    "A new directory for tune.json, best.env and nccl_tuner.conf.",
    TuneRequest,
    metavar="DIR",
)

JSON = json_option("Print tune.json as JSON.")

WORKLOAD = Option(
    ("--workload",),
    "Choose best.env for a training job: the setting that makes its modelled step fastest "
    "(the MFU model, its collectives priced from each setting's measured busbw). FILE: the "
    "job as `collbench mfu ... --print-config` writes it; it trains on the file's first "
    "topology unless --topology names one.",
    TuneRequest,
    metavar="FILE",
)


_search = partial(Option, owner=TunePlan, panel=_SEARCH)
_conf = partial(Option, panel=_CONF)

SEARCH_OPTIONS = (
    _search(
        ("--search",),
        "grid: every setting; halving: probe a few sizes, drop the clearly worse, then full "
        "sweeps; coordinate: numeric knobs one at a time (AutoCCL).",
        metavar="NAME",
    ),
    _search(
        ("--budget",),
        "Wall-clock limit (90s, 10m, 1h): no setting starts that would not fit, at the mean "
        "time of those measured so far.",
        field="budget_s",
        parse=parse_duration,
        name="budget",
        metavar="DURATION",
    ),
    _search(
        ("--max-settings",),
        "Refuse a grid of more settings than this (the baseline not counted); the most a "
        "coordinate search measures.",
        metavar="N",
    ),
    _search(
        ("--choices/--no-choices",),
        "NCCL/RCCL: after each setting, a 1-iteration pass with NCCL's debug output on that "
        "records the algorithm, protocol and channels NCCL used (choices.jsonl).",
        field="record_choices",
        default=FROM_OWNER,
    ),
)
CONF_OPTIONS = (
    _conf(
        ("--channels",),
        "nccl_tuner.conf's channel count where the setting pins none (0: NCCL's own); "
        "needed for imported logs, which record no environment.",
        TunePlan,
        metavar="N",
    ),
    _conf(
        ("--tuner-shape",),
        "nccl_tuner.conf's nNodes/nRanks. tuned: the tuned communicator's, so its rules "
        "match only that shape (NCCL's example plugin runs any other communicator's calls "
        "on 1 channel); any: -1, the tuned pairs for every communicator, untested there.",
        TunerConfRequest,
        field="shape",
        parse=parse_tuner_shape,
        default_text=DEFAULT_TUNER_SHAPE,
        metavar="NAME",
    ),
    _conf(
        ("--nccl-log",),
        "An NCCL debug log of the baseline or of the job, with NCCL_DEBUG=INFO and "
        "NCCL_DEBUG_SUBSYS=COLL,TUNING (repeatable): what NCCL chose, written into nccl_tuner.conf where the "
        "default wins, where the winner names no algorithm/protocol, and for collectives "
        "not tuned.",
        TunerConfRequest,
        field="nccl_logs",
        kind=list[Path],
        metavar="FILE",
    ),
    _conf(
        ("--ranges",),
        "crossovers: a range ends where the winner changes; bands: small, medium and "
        "large; sizes: one per measured size.",
        SelectRule,
        field="granularity",
        default_text=DEFAULT_RANGES,
        parse=parse_ranges,
        metavar="RULE",
    ),
)
TOPOLOGY = next(option for option in MEASURE_OPTIONS if option.flag == "--topology")
RUNS = Argument(
    "runs",
    "Run directories (sweeps, imported logs), each measured under one setting.",
    TuneRequest,
    kind=list[Path],
    metavar="RUN...",
)
TUNE_DIR = Argument(
    "tune_dir", "A tune directory (tune run or tune from).", kind=Path, metavar="DIR"
)
RUN_OPTIONS = (
    KNOB,
    REPEATS,
    *SEARCH_OPTIONS,
    replace(OUT, help=f"{OUT.help[:-1]}, and one run directory per setting."),
    *CONF_OPTIONS,
    WORKLOAD,
    JSON,
    *MEASURE_OPTIONS,
)
FROM_OPTIONS = (
    RUNS,
    OUT,
    *CONF_OPTIONS,
    WORKLOAD,
    replace(
        TOPOLOGY,
        help="The fabric the --workload job trains on: a catalog name or file.",
        panel=None,
    ),
    JSON,
)
VERIFY_OPTIONS = (
    TUNE_DIR,
    replace(REPEATS, default_text="the tune's own"),
    replace(
        OUT,
        help="A new directory for verify.json and the sweeps.",
        default_text="DIR/verify-<time>",
    ),
    replace(JSON, help="Print verify.json as JSON."),
    *MEASURE_OPTIONS,
)


def _plan_fields(values: dict[str, Any]) -> dict[str, Any]:
    """TunePlan's fields the command line gave, the selection rule (--ranges) among them."""
    options = (*SEARCH_OPTIONS, *CONF_OPTIONS, REPEATS)
    rule = SelectRule(**given_fields(SelectRule, options, values))
    conf = TunerConfRequest(**given_fields(TunerConfRequest, options, values))
    return {**given_fields(TunePlan, options, values), "rule": rule, "tuner_conf": conf}


def _check(values: dict[str, Any]) -> None:
    """What --print-config checks of a tune line: the parts it gives (--knob, --out and the
    arguments may come from the command line that reads the file)."""
    spec = SweepSpec(**given_fields(SweepSpec, MEASURE_OPTIONS, values))
    _run_options(values)
    axes, _ = parse_knobs(values.get("knob") or [], spec.backend)
    TunePlan(axes, Path(), **_plan_fields(values))


def _required_out(values: dict[str, Any]) -> Path:
    if values["out"] is None:
        raise SpecError("--out", "", "is required: the new directory to write the result in")
    return values["out"]


def _tune_from(values: dict[str, Any]) -> None:
    from collbench.render.tune import render_tune

    out = _required_out(values)
    plan = _plan_fields(values)
    result = tune_from(
        values["runs"],
        out,
        plan.get("channels"),
        plan["rule"],
        workload=_workload(values),
        conf_request=plan["tuner_conf"],
    )
    warn(result.warnings)
    print(render_tune(result, as_json=values["json_out"]), flush=True)


def _launch(values: dict[str, Any]) -> None:
    from collbench.bench.provenance import library_version
    from collbench.cli.measure import command_line, sink_factory
    from collbench.render.tune import render_tune
    from collbench.run.tune.launch import run_tune
    from collbench.run.tune.slurm import tune_in_allocation

    if not values["knob"]:
        raise SpecError(
            "--knob",
            "",
            "is required: the knobs to try, e.g. --knob NCCL_ALGO=Ring,Tree "
            "(or tune from RUN... to tune from runs already measured)",
        )
    out = _required_out(values)
    # One pass per process: tune's own --repeats starts fresh processes for each repeat.
    spec = SweepSpec(**given_fields(SweepSpec, MEASURE_OPTIONS, values), repeats=1)
    options = _run_options(values)
    axes, warnings = parse_knobs(values["knob"], spec.backend, library_version(spec.backend))
    plan = TunePlan(axes, out, **_plan_fields(values), workload=_workload(values))
    if options.launcher == "slurm":
        if plan.workload is not None:
            raise SpecError(
                "--workload",
                str(values["workload"]),
                "does not reach the driver of --launcher slurm yet: tune without it, then "
                "run tune from DIR/settings/* --workload FILE on the settings' runs",
            )
        code = tune_in_allocation(spec, plan, values["knob"], values["json_out"], options, say)
        raise typer.Exit(code)
    result, code = run_tune(
        spec, options, plan, command_line(), sink_factory("quiet"), say, warnings
    )
    if result is not None:
        print(render_tune(result, as_json=values["json_out"]), flush=True)
    raise typer.Exit(code)


def _workload(values: dict[str, Any]) -> Any:
    """The training job of --workload FILE (run/tune/workload.py's TuneWorkload), or None."""
    if values["workload"] is None:
        return None
    from collbench.cli.workload import read_workload, workload_parts
    from collbench.run.tune.workload import tune_workload

    job = read_workload(values["workload"])
    named = job.pop("topology", None) or [None]  # the file's fabric, unless -T names one
    workload = tune_workload(*workload_parts(job), values["topology"] or named[0])
    warn(list(workload.warnings))
    return workload


def _run_options(values: dict[str, Any]) -> RunOptions:
    extra = launcher_settings(values)
    given = given_fields(RunOptions, MEASURE_OPTIONS, values)
    if given.get("launcher") == "none":
        raise SpecError(
            "--launcher", "none", "does not apply to tune: it starts fresh ranks for every setting"
        )
    return RunOptions(**given, output="quiet", extra=extra)


def _verify(values: dict[str, Any]) -> None:
    from collbench.cli.measure import command_line, sink_factory
    from collbench.render.tune import render_verify
    from collbench.run.tune.verify import run_verify

    result, code = run_verify(
        values["tune_dir"],
        values["out"],
        _run_options(values),
        given_fields(SweepSpec, MEASURE_OPTIONS, values),
        command_line(),
        sink_factory("quiet"),
        say,
        values["repeats"],
    )
    if result is not None:
        print(render_verify(result, as_json=values["json_out"]), flush=True)
    raise typer.Exit(code)


tune_app = group(
    "Find the best setting of communication knobs (NCCL_ALGO, NCCL_PROTO, channels, "
    "GLOO_SOCKET_IFNAME ...) per collective and size range: run measures each setting in "
    "fresh processes, from chooses from runs already measured, verify checks a result."
)
for name, doc, options, run in (
    (
        "run",
        "Measure every setting of the --knob values in fresh rank processes and choose the "
        "best per collective and size range. Writes tune.json, best.env and nccl_tuner.conf.",
        RUN_OPTIONS,
        _launch,
    ),
    (
        "from",
        "Choose the best setting from runs already measured (sweeps, imported logs), "
        "launching nothing. Writes tune.json, best.env and nccl_tuner.conf.",
        FROM_OPTIONS,
        _tune_from,
    ),
    (
        "verify",
        "Measure a tune's default and its best.env setting side by side, in fresh processes, "
        "and report the realised gain.",
        VERIFY_OPTIONS,
        _verify,
    ),
):
    folded = (_SEARCH, _CONF, *FOLDED_PANELS)
    add_command(tune_app, name, doc, options, run, folded, config=True, check=_check)
