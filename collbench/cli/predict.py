"""`collbench predict`: what two (or more) fabrics should give each collective, size by size,
side by side, before any is bought; a measured run can stand in for a fabric's model.

The method, in full: docs/architecture.md#collbench-cli-predict-py.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any

from collbench.cli.measure import SPEC_OPTIONS
from collbench.cli.options import (
    FROM_OWNER,
    REQUIRED,
    Option,
    command,
    force_option,
    json_option,
    request,
    warn,
)
from collbench.core.units import size_arg
from collbench.run.predict import PredictRequest, predict_fabrics

_SWEEP_FLAGS = ("--collective", "--min-bytes", "--max-bytes", "--factor", "--step-bytes")


def _sweep_option(option: Option) -> Option:
    """A sweep option filling PredictRequest's field of the same name (no panel)."""
    text = size_arg(PredictRequest.max_bytes) if option.flag == "--max-bytes" else None
    return replace(
        option, owner=PredictRequest, panel=None, default_text=text or option.default_text
    )


PREDICT_OPTIONS = (
    Option(
        ("--topology", "-T"),
        "Catalog name or topology file; repeat to compare fabrics side by side (the first is "
        "A, the reference of the ratios).",
        PredictRequest,
        "topology",
        kind=list[str],
        default=REQUIRED,
        metavar="NAME|FILE",
    ),
    *(_sweep_option(option) for option in SPEC_OPTIONS if option.flag in _SWEEP_FLAGS),
    Option(
        ("--nodes",),
        "Nodes of every fabric (default: each topology's own node count).",
        PredictRequest,
        metavar="N",
    ),
    Option(
        ("--curves",),
        "NAME=RUN: a measured run directory replaces fabric NAME's predictions (a plain RUN: "
        "the first fabric's); repeatable.",
        PredictRequest,
        kind=list[str],
        metavar="NAME=RUN",
    ),
    Option(
        ("--comm-efficiency",),
        "Share of the link rates predictions assume (1: the hardware bound).",
        PredictRequest,
        default=FROM_OWNER,
        metavar="X",
    ),
    json_option("Print JSON instead of the tables."),
    Option(
        ("--html",),
        "Also write the comparison as a self-contained HTML report (tables and busbw charts).",
        PredictRequest,
        metavar="FILE",
    ),
    force_option(PredictRequest),
)


def run_predict(values: dict[str, Any]) -> None:
    """Compare the fabrics (run/predict.py), print the tables (or JSON), write --html."""
    from collbench.render.predict import render_predict
    from collbench.store.outputs import check_output_file, write_output

    wanted: PredictRequest = request(PredictRequest, PREDICT_OPTIONS, values)
    html = wanted.html
    if html is not None:
        check_output_file("--html", html, force=wanted.force)
    prediction = predict_fabrics(wanted)
    warn(prediction.warnings)
    print(render_predict(prediction, as_json=values["json_out"]), flush=True)
    if html is not None:
        from collbench.render.predict import predict_html

        write_output("--html", html, predict_html(prediction))
        print(f"# Report: {html}", file=sys.stderr if values["json_out"] else sys.stdout)


predict = command(
    "predict",
    "Compare fabrics before buying: predicted time and busbw side by side.\n\n"
    "Per collective and size, the cost model's time and busbw on each fabric, the regime "
    "and bound each hits, and each fabric's time over the first's (a measured run can "
    "stand in for a fabric with --curves).",
    PREDICT_OPTIONS,
    run_predict,
)
