"""`mfu` shows the MFU with the EP all-to-alls' overlap taken away (analysis.mfu.fabrics.
without_overlap): the published per-step MoE run with an EP overlap ran nearer it than the
overlapped estimate, so a buyer sees both."""

from __future__ import annotations

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


def _moe(ep_overlap: str, pp: int = 1) -> Workload:
    return Workload(
        preset("mixtral-8x7b"),
        Training(seq=4096, global_batch=256),
        Parallelism(tp=1, pp=pp, dp=64 // pp, ep=8, zero=1, ep_overlap=ep_overlap),
    )


def _estimate(workload: Workload, inputs: Inputs | None = None):
    topology = sized_for(workload, load_topology("dgx-h100"))
    return estimate_fabric(workload, Fabric(topology), inputs or Inputs())


def test_nothing_to_take_away_without_an_ep_overlap():
    assert without_overlap(_moe("none")) == {}
    result = _estimate(_moe("none"))
    assert "no_ep_overlap" not in result.what_if
    assert "what if: no EP overlap" not in render_table(_moe("none"), [result])


def test_tp_overlap_is_not_taken_away():
    """With the sustained clock priced, the TP-overlapped published runs land on the
    overlapped estimate: no what-if for it."""
    dense = Workload(
        preset("llama3-70b"),
        Training(seq=8192, global_batch=128),
        Parallelism(tp=4, pp=8, dp=2, sequence_parallel=True, zero=1),
    )
    assert without_overlap(dense) == {}


def test_ep_overlap_taken_away_is_the_estimate_with_ep_overlap_none():
    workload = _moe("1f1b", pp=4)
    overlapped = _estimate(workload)
    plain = _estimate(_moe("none", pp=4))
    assert overlapped.what_if["no_ep_overlap"] == plain.mfu
    assert plain.mfu < overlapped.mfu  # 1F1B hides some of the all-to-alls here
    table = render_table(workload, [overlapped])
    assert "what if: no EP overlap" in table and f"{plain.mfu:.1%}" in table
    assert "ran nearer it than the overlapped estimate" in table
    figures = to_json(workload, [overlapped])["fabrics"][0]["what_if_mfu"]
    assert figures["no_ep_overlap"] == plain.mfu
