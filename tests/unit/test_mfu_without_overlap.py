"""`mfu` shows the MFU with each modelled overlap taken away (analysis.mfu.fabrics.
without_overlap): the published runs with TP userbuffer and EP 1F1B overlap ran nearer it
than the overlapped estimate, so a buyer sees both."""

from __future__ import annotations

from dataclasses import replace

from collbench.analysis.mfu.estimate import EstimateOptions
from collbench.analysis.mfu.fabrics import (
    Fabric,
    Inputs,
    estimate_fabric,
    sized_for,
    without_overlap,
)
from collbench.analysis.mfu.presets import preset
from collbench.analysis.mfu.workload import Parallelism, Training, Workload
from collbench.render.mfu import render_table, to_json
from collbench.topologies.loader import load_topology


def _dense(tp_overlap: float) -> tuple[Workload, Inputs]:
    workload = Workload(
        preset("llama3-70b"),
        Training(seq=8192, global_batch=128),
        Parallelism(tp=4, pp=8, dp=2, sequence_parallel=True, zero=1),
    )
    return workload, Inputs(options=EstimateOptions(tp_overlap=tp_overlap))


def _moe(ep_overlap: str) -> Workload:
    return Workload(
        preset("mixtral-8x7b"),
        Training(seq=4096, global_batch=256),
        Parallelism(tp=1, pp=1, dp=64, ep=8, zero=1, ep_overlap=ep_overlap),
    )


def _estimate(workload: Workload, inputs: Inputs | None = None):
    topology = sized_for(workload, load_topology("dgx-h100"))
    return estimate_fabric(workload, Fabric(topology), inputs or Inputs())


def test_nothing_to_take_away_without_an_overlap():
    workload, inputs = _dense(0.0)
    assert without_overlap(workload, inputs.options) == {}
    assert without_overlap(_moe("none"), EstimateOptions()) == {}
    result = _estimate(workload, inputs)
    assert "no_tp_overlap" not in result.what_if and "no_ep_overlap" not in result.what_if
    assert "what if: no" not in render_table(workload, [result])


def test_tp_overlap_taken_away_is_the_estimate_with_tp_overlap_0():
    workload, inputs = _dense(1.0)
    overlapped = _estimate(workload, inputs)
    plain = _estimate(workload, replace(inputs, options=EstimateOptions(tp_overlap=0.0)))
    assert overlapped.what_if["no_tp_overlap"] == plain.mfu
    assert plain.mfu < overlapped.mfu  # the overlap hides TP time on this workload
    table = render_table(workload, [overlapped])
    assert "what if: no TP overlap" in table and f"{plain.mfu:.1%}" in table
    assert "what if: no EP overlap" not in table
    assert "ran nearer it than the overlapped estimate" in table
    figures = to_json(workload, [overlapped])["fabrics"][0]["what_if_mfu"]
    assert figures["no_tp_overlap"] == plain.mfu


def test_ep_overlap_taken_away_is_the_estimate_with_ep_overlap_none():
    overlapped = _estimate(_moe("shared-expert"))
    plain = _estimate(_moe("none"))
    assert overlapped.what_if["no_ep_overlap"] == plain.mfu
    assert plain.mfu <= overlapped.mfu
    assert "what if: no EP overlap" in render_table(_moe("shared-expert"), [overlapped])
