"""TP communication overlap as Transformer Engine's userbuffers run it
(analysis/mfu/tp_overlap.py): each pair of a GEMM and its collective, hand-computed, then a
whole layer, then the estimator."""

from __future__ import annotations

import pytest

from collbench.analysis.mfu.estimate import EstimateOptions, estimate
from collbench.analysis.mfu.tp_overlap import (
    Overlapped,
    TpOverlapSettings,
    bulk,
    overlapped_tp,
    pipelined,
    ring_exchange,
    sm_share,
)
from collbench.analysis.mfu.workload import Model, Parallelism, Training, Workload
from collbench.analysis.model.gemm_model import Gemm
from collbench.core.errors import SpecError
from tests.unit.test_mfu import flat_pricer, make_topology


def test_ring_exchange_hides_the_sends_behind_longer_chunks():
    # 4 chunks of 1 s; sends of 0.5 s each run beside the chunk before: nothing exposed
    assert ring_exchange(4.0, 1.0, 0.5, 4, 0.0) == Overlapped(0.0, 0.0, 0.0)
    # sends of 2 s: chunk 0 is local (1 s), then 3 steps of 2 s -> 7 s for 4 s of GEMM
    assert ring_exchange(4.0, 1.0, 2.0, 4, 0.0) == Overlapped(0.0, 3.0, 0.0)


def test_ring_exchange_pays_for_smaller_chunks_and_the_sm_it_takes():
    # 4 chunks of 1.25 s where the whole GEMM took 4 s; 1 of 100 SMs taken
    result = ring_exchange(4.0, 1.25, 0.5, 4, 0.01)
    assert result.exposed_s == pytest.approx(0.0)
    assert result.slowdown_s == pytest.approx(4 * 1.25 / 0.99 - 4.0)


def test_pipelined_reduce_scatter_exposes_its_last_chunk():
    # chunks of 1 s on 80% of the SMs: 1.25 s each; pieces of 0.5 s: 4 x 1.25 + 0.5
    result = pipelined(4.0, 1.0, 0.5, 4, 0.2)
    assert result.exposed_s == pytest.approx(0.5)
    assert result.slowdown_s == pytest.approx(1.0)
    # pieces longer than the chunks: the communication is the critical path
    # 1 + 3 x 2 + 2 = 9 s for 4 s of GEMM
    assert pipelined(4.0, 1.0, 2.0, 4, 0.0).exposed_s == pytest.approx(5.0)


def test_bulk_overlap_slows_the_gemm_only_while_the_collective_runs():
    # 1 s of collective beside a 2 s GEMM on 80% of the SMs: 1 s x 0.2 / 0.8 slower
    assert bulk(2.0, 1.0, 0.2) == Overlapped(0.0, 0.0, pytest.approx(0.25))
    # 3 s beside a 1 s GEMM on half the SMs: the GEMM takes 2 s, 1 s left exposed
    assert bulk(1.0, 3.0, 0.5) == Overlapped(0.0, pytest.approx(1.0), pytest.approx(1.0))


def test_sm_share():
    assert sm_share(16, 132) == pytest.approx(16 / 132)
    assert sm_share(16, None) == 0.0  # the topology gives no SM count: not priced
    with pytest.raises(SpecError, match="--tp-overlap-sms"):
        sm_share(132, 132)


def _layer_workload(recompute: str = "none", layers: int = 2) -> Workload:
    model = Model("small", layers=layers, hidden=1024, heads=8, vocab=1024)
    return Workload(
        model,
        Training(seq=1024, global_batch=4, recompute=recompute),
        Parallelism(tp=2, pp=1, dp=1, sequence_parallel=True),
    )


def _per_row(gemm: Gemm) -> float:
    """1 us per row of M: a chunk of M/n rows takes 1/n of the GEMM (no chunking loss)."""
    return gemm.m * 1e-6


def _one_us(collective: str, size_bytes: float, ranks: int, stride: int) -> float:
    return 1e-6


def test_a_layer_hides_all_but_the_last_reduce_scatter_pieces():
    """Hand-computed: 1024 tokens on tp 2, every collective 1 us, every GEMM 1 us per row.
    Ring exchanges (2 chunks of 512 us, sends of 1 us) and the bulk reduce-scatters beside
    the 1024-row weight gradients hide; each of the forward's 2 pipelined reduce-scatters
    leaves its last 1 us piece. Per layer and micro-batch: 4 all-gathers + 4
    reduce-scatters = 8 us of collectives, 2 us exposed; 2 layers x 4 micro-batches."""
    result = overlapped_tp(_layer_workload(), _per_row, _one_us, TpOverlapSettings(), None)
    assert result.comm_s == pytest.approx(8 * 8e-6)
    assert result.exposed_s == pytest.approx(8 * 2e-6)
    assert result.slowdown_s == pytest.approx(0.0)
    # full recompute repeats the forward's 2 all-gathers and 2 reduce-scatters
    full = overlapped_tp(_layer_workload("full"), _per_row, _one_us, TpOverlapSettings(), None)
    assert full.comm_s == pytest.approx(8 * 12e-6)
    assert full.exposed_s == pytest.approx(8 * 4e-6)


def test_a_layer_pays_the_sms_the_communication_takes():
    """100 SMs, 20 for the reduce-scatters, 1 for the ring exchange's sync kernel.
    Per layer (ms): 4 ring exchanges, 2 chunks of 0.512 on 99% of the SMs:
    4 x (1.024 / 0.99 - 1.024); 2 pipelined, 4 chunks of 0.256 on 80%: 2 x (1.28 - 1.024);
    2 bulk, 1 us beside the weight gradient: 2 x 0.001 x 0.2 / 0.8."""
    settings = TpOverlapSettings(chunks=4, sms=20)
    result = overlapped_tp(_layer_workload(layers=1), _per_row, _one_us, settings, 100)
    per_layer_ms = 4 * (1.024 / 0.99 - 1.024) + 2 * (1.28 - 1.024) + 2 * 0.001 * 0.25
    assert result.slowdown_s == pytest.approx(4 * per_layer_ms * 1e-3)  # 4 micro-batches
    assert result.exposed_s == pytest.approx(4 * 2e-6)


def test_the_estimator_prices_the_mechanism_not_a_share():
    load = Workload(
        Model("gpt-ish", layers=8, hidden=4096, heads=32, vocab=32000),
        Training(seq=2048, global_batch=8),
        Parallelism(tp=8, pp=1, dp=1, sequence_parallel=True),
    )
    exposed = estimate(load, make_topology(), flat_pricer())
    overlapped = estimate(load, make_topology(), flat_pricer(), EstimateOptions(tp_overlap=1))
    tp_exposed, tp_overlapped = (result.comm[0] for result in (exposed, overlapped))
    assert tp_exposed.exposed_s == tp_exposed.total_s > 0
    assert tp_overlapped.total_s == pytest.approx(tp_exposed.total_s)
    assert 0 < tp_overlapped.exposed_s < tp_exposed.exposed_s  # the last pieces stay
    # the test GPU gives no SM count: no SM share, no wave quantization of the chunks
    assert tp_overlapped.slowdown_s == pytest.approx(0.0, abs=1e-12)
    parts = (
        overlapped.compute_s
        + overlapped.bubble_s
        + overlapped.exposed_comm_s
        + overlapped.slowdown_s
    )
    assert overlapped.step_time_s == pytest.approx(parts)
    assert overlapped.mfu < overlapped.what_if["perfect_overlap"]


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"tp_overlap": 0.5}, "is 0 .* or 1"),
        ({"tp_overlap_chunks": 0}, "--tp-overlap-chunks"),
        ({"tp_overlap_sms": -1}, "--tp-overlap-sms"),
    ],
)
def test_bad_options_are_refused(options, match):
    with pytest.raises(SpecError, match=match):
        EstimateOptions(**options)


def test_overlap_needs_sequence_parallelism():
    load = Workload(
        Model("gpt-ish", layers=8, hidden=4096, heads=32, vocab=32000),
        Training(seq=2048, global_batch=8),
        Parallelism(tp=8, pp=1, dp=1),
    )
    with pytest.raises(SpecError, match="--sequence-parallel"):
        estimate(load, make_topology(), flat_pricer(), EstimateOptions(tp_overlap=1))
