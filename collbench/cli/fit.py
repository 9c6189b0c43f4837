"""`collbench fit RUN...`: robust piecewise alpha-beta fits of runs' sweep rows. Imports
stay light: numpy and scipy load only when the command runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

# the measure's name and definition, written once (light: no numpy or scipy behind it)
from collbench.analysis.fit.vs_topology import MEASURE, MEASURE_DEFINITION, MODEL_WRONG_SPEEDUP
from collbench.cli.options import Argument, Option, command, json_option, request, warn
from collbench.run.fit import FitRequest, fit_runs

FIT_OPTIONS = (
    Argument(
        "runs",
        "Run directories; rows of the same collective, backend, world size, topology, "
        "placement, dtype and knobs are pooled.",
        FitRequest,
        kind=list[Path],
        metavar="RUN...",
    ),
    json_option("Print a JSON list of groups instead of tables."),
    Option(
        ("--predict",),
        "Comma list of sizes (K/M/G = powers of 1024) to predict time and busbw at, e.g. 3M,48M.",
        FitRequest,
        metavar="SIZES",
    ),
    Option(
        ("--topology",),
        f"A catalog name or a YAML/TOML file: report each group's {MEASURE} = "
        f"{MEASURE_DEFINITION} per size band; over {MODEL_WRONG_SPEEDUP:.0%} the model, not "
        "the fabric, is wrong.",
        FitRequest,
        default_text="the catalog topology the rows record, from sweep --topology",
        metavar="NAME|FILE",
    ),
)


def run_fit(values: dict[str, Any]) -> None:
    from collbench.render.fit import render_fits

    fitted = fit_runs(request(FitRequest, FIT_OPTIONS, values))
    warn(fitted.warnings)
    print(render_fits(fitted.fits, fitted.predict, as_json=values["json_out"]))


fit = command(
    "fit",
    "Fit t(S) = alpha + S/B per group, piecewise where the protocol changes.",
    FIT_OPTIONS,
    run_fit,
)
