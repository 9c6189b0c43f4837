"""TP communication overlap as Transformer Engine's userbuffers run it
(analysis/mfu/tp_overlap.py): each pair of a GEMM and its collective, hand-computed, then a
whole layer, then the estimator."""

from __future__ import annotations

from dataclasses import replace

import pytest

from collbench.analysis.mfu.estimate import EstimateOptions, estimate
from collbench.analysis.mfu.tp_overlap import (
    Overlapped,
    PairMethod,
    TpOverlapSettings,
    async_backward,
    bulk,
    overlapped_tp,
    pairs_from_config,
    pipelined,
    ring_exchange,
    sm_share,
)
from collbench.analysis.mfu.workload import Model, Parallelism, Training, Workload
from collbench.analysis.model.gemm_model import Gemm
from collbench.core.errors import SpecError
from tests.unit.analysis.mfu.test_mfu import flat_pricer, make_topology


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
    with pytest.raises(SpecError, match="--tp-overlap"):
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
    Ring exchanges (2 chunks of 512 us, sends of 1 us), the bulk reduce-scatters beside the
    1024-row weight gradients and the bulk re-gathers beside the 1024-row input gradients
    hide; each of the forward's 2 pipelined reduce-scatters leaves its last 1 us piece. Per
    layer and micro-batch: 6 all-gathers + 4 reduce-scatters = 10 us of collectives, 2 us
    exposed; 2 layers x 4 micro-batches."""
    result = overlapped_tp(_layer_workload(), _per_row, _one_us, TpOverlapSettings(), None)
    assert result.comm_s == pytest.approx(8 * 10e-6)
    assert result.exposed_s == pytest.approx(8 * 2e-6)
    assert result.slowdown_s == pytest.approx(0.0)
    # full recompute repeats the forward's 2 all-gathers and 2 reduce-scatters
    full = overlapped_tp(_layer_workload("full"), _per_row, _one_us, TpOverlapSettings(), None)
    assert full.comm_s == pytest.approx(8 * 14e-6)
    assert full.exposed_s == pytest.approx(8 * 4e-6)


def test_a_layer_pays_the_sms_the_communication_takes():
    """100 SMs, 20 for the reduce-scatters, 1 for the ring exchange's sync kernel.
    Per layer (ms): 4 ring exchanges, 2 chunks of 0.512 on 99% of the SMs:
    4 x (1.024 / 0.99 - 1.024); 2 pipelined, 4 chunks of 0.256 on 80%: 2 x (1.28 - 1.024);
    4 bulk, 1 us beside the weight or the input gradient: 4 x 0.001 x 0.2 / 0.8."""
    settings = TpOverlapSettings(chunks=4, sms=20)
    result = overlapped_tp(_layer_workload(layers=1), _per_row, _one_us, settings, 100)
    per_layer_ms = 4 * (1.024 / 0.99 - 1.024) + 2 * (1.28 - 1.024) + 4 * 0.001 * 0.25
    assert result.slowdown_s == pytest.approx(4 * per_layer_ms * 1e-3)  # 4 micro-batches
    assert result.exposed_s == pytest.approx(4 * 2e-6)


def test_the_estimator_prices_the_mechanism_not_a_share():
    load = Workload(
        Model("gpt-ish", layers=8, hidden=4096, heads=32, vocab=32000),
        Training(seq=2048, global_batch=8),
        Parallelism(tp=8, pp=1, dp=1, sequence_parallel=True),
    )
    synchronous = replace(load, parallelism=replace(load.parallelism, tp_async_backward=False))
    exposed = estimate(synchronous, make_topology(), flat_pricer())
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


def _async(sequence_parallel: bool, asynchronous: bool = True, recompute: str = "none"):
    model = Model("small", layers=2, hidden=1024, heads=8, vocab=1024)
    return Workload(
        model,
        Training(seq=1024, global_batch=4, recompute=recompute),
        Parallelism(
            tp=2, pp=1, dp=1, sequence_parallel=sequence_parallel, tp_async_backward=asynchronous
        ),
    )


def test_megatron_s_async_backward_hides_the_column_parallel_reductions():
    """Hand-computed, every collective 1 us, every GEMM 1 us per row (1024 rows): with
    sequence parallelism a layer issues 6 all-gathers + 4 reduce-scatters; qkv's and
    mlp_up's input-gradient reduce-scatters hide beside their weight gradients and their
    re-gathers beside their input gradients: 6 us exposed of 10. Without it 4 all-reduces,
    the 2 input-gradient ones hidden: 2 of 4. Per micro-batch, 2 layers."""
    sp = async_backward(_async(True), _per_row, _one_us)
    assert sp.comm_s == pytest.approx(2 * 10e-6) and sp.exposed_s == pytest.approx(2 * 6e-6)
    plain = async_backward(_async(False), _per_row, _one_us)
    assert plain.comm_s == pytest.approx(2 * 4e-6)
    assert plain.exposed_s == pytest.approx(2 * 2e-6)
    # full recompute: the recomputed forward's 2 + 2 are exposed too
    full = async_backward(_async(True, recompute="full"), _per_row, _one_us)
    assert full.comm_s == pytest.approx(2 * 14e-6)
    assert full.exposed_s == pytest.approx(2 * 10e-6)


def test_a_collective_longer_than_its_gemm_leaves_the_rest_exposed():
    """1 ms collectives beside 1024 us GEMMs: each hidden one leaves 1000 - 1024 < 0, i.e.
    nothing; at 2 ms each leaves 2000 - 1024 = 976 us."""

    def two_ms(collective: str, size_bytes: float, ranks: int, stride: int) -> float:
        return 2e-3

    sp = async_backward(_async(True), _per_row, two_ms)
    hidden_each = 2e-3 - (2e-3 - 1024e-6)
    assert sp.exposed_s == pytest.approx(2 * (10 * 2e-3 - 4 * hidden_each))


def test_without_the_async_backward_every_collective_is_exposed():
    sync = async_backward(_async(True, asynchronous=False), _per_row, _one_us)
    assert sync.exposed_s == pytest.approx(sync.comm_s) and sync.comm_s == pytest.approx(2e-5)


def test_a_recipe_s_configuration_is_read_as_te_writes_it():
    """NeMo's yaml and Megatron-Bridge's dataclasses use TE's ub_cfg keys; a wrapping
    ub_tp_comm_overlap_cfg key is accepted, keys the estimate does not price are ignored."""
    pairs = dict(
        pairs_from_config(
            {
                "ub_tp_comm_overlap_cfg": {
                    "proj_fprop": {"method": "pipeline", "num_sm": 24, "num_splits": 4,
                                   "cga_size": 2, "set_sm_margin": 1},
                    "fc2_dgrad": {"method": "ring_exchange", "aggregate": 1},
                    "qkv_wgrad": {"method": "bulk", "num_sm": 8},
                }
            }
        )
    )  # fmt: skip
    assert pairs["proj_fprop"] == PairMethod("pipeline", 24, 4)
    assert pairs["fc2_dgrad"] == PairMethod("ring_exchange", 1, 4, aggregate=True)
    assert pairs["qkv_wgrad"] == PairMethod("bulk", 8)
    settings = TpOverlapSettings(pairs=tuple(pairs.items()))
    assert settings.pair("fc1_wgrad") == PairMethod("bulk", 16)  # not given: TE's default
    assert settings.pair("qkv_fprop") == PairMethod("ring_exchange", 1)


@pytest.mark.parametrize(
    ("config", "needle"),
    [
        ({"qkv_fporp": {"method": "bulk"}}, "is not one of"),
        ({"proj_fprop": {"method": "bulk"}}, "takes pipeline or ring_exchange"),
        ({"qkv_dgrad": {"num_sm": 2}}, "needs a method"),
        ({"qkv_dgrad": {"method": "bulk", "num_sm": "many"}}, "must be numbers"),
        ({"fc2_fprop": {"method": "pipeline", "num_splits": 0}}, "num_splits >= 1"),
        ([], "must map TE's pair names"),
    ],
)
def test_a_configuration_the_estimate_cannot_price_is_refused(config, needle):
    with pytest.raises(SpecError, match=needle):
        pairs_from_config(config)


def test_reduce_scatters_by_ring_exchange_and_their_own_sms():
    """Hand-computed on 100 SMs, every collective 1 us, GEMMs 1 us per row (1024 rows, tp
    2). The forward's reduce-scatters by ring exchange on 1 SM: 2 chunks of 512 us, sends
    of 1 us hidden, each GEMM 1.024 / 0.99 - 1.024 ms slower; no last piece exposed. The
    bulk pairs on their own SMs: 2 on 10 (0.001 x 10/90 ms each), 2 on 50 (0.001 x 1 ms)."""
    settings = TpOverlapSettings(
        pairs=pairs_from_config(
            {
                "proj_fprop": {"method": "ring_exchange", "num_sm": 1},
                "fc2_fprop": {"method": "ring_exchange", "num_sm": 1},
                "qkv_dgrad": {"method": "bulk", "num_sm": 10},
                "fc1_dgrad": {"method": "bulk", "num_sm": 10},
                "qkv_wgrad": {"method": "bulk", "num_sm": 50},
                "fc1_wgrad": {"method": "bulk", "num_sm": 50},
            }
        )
    )
    result = overlapped_tp(_layer_workload(layers=1), _per_row, _one_us, settings, 100)
    ring_ms = 1.024 / 0.99 - 1.024
    per_layer_ms = 6 * ring_ms + 2 * 0.001 * 10 / 90 + 2 * 0.001 * 50 / 50
    assert result.exposed_s == pytest.approx(0.0, abs=1e-12)
    assert result.slowdown_s == pytest.approx(4 * per_layer_ms * 1e-3)


def test_an_aggregated_ring_exchange_runs_half_the_steps_on_double_chunks():
    """tp 4, 1024 rows; every GEMM 1 us per row plus 100 us per call, every send 1 us.
    fc2_dgrad by plain ring exchange: 4 chunks of 256 rows, 4 x 356 = 1424 us against 1124
    unchunked, 300 us slower. Aggregated: 2 chunks of 512 rows (each waiting for 2 sends),
    2 x 612 = 1224 us, 100 us slower. Nothing exposed either way; no SM share."""

    def per_row_and_call(gemm: Gemm) -> float:
        return (gemm.m + 100) * 1e-6

    load = Workload(
        Model("small", layers=1, hidden=1024, heads=8, vocab=1024),
        Training(seq=1024, global_batch=1),
        Parallelism(tp=4, pp=1, dp=1, sequence_parallel=True),
    )
    aggregated = TpOverlapSettings(
        pairs=pairs_from_config({"fc2_dgrad": {"method": "ring_exchange", "aggregate": 1}})
    )
    plain = overlapped_tp(load, per_row_and_call, _one_us, TpOverlapSettings(), None)
    result = overlapped_tp(load, per_row_and_call, _one_us, aggregated, None)
    assert result.exposed_s == pytest.approx(plain.exposed_s)
    assert plain.slowdown_s - result.slowdown_s == pytest.approx(200e-6)


def test_the_recipes_configurations_move_their_runs():
    """Entered with its own userbuffer configuration (ring-exchange reduce-scatters on 1 SM,
    bulk pairs on 2-24 SMs) the 405B CP 2 run is priced faster than with TE's defaults."""
    from tests.published_runs import PUBLISHED

    run = next(run for run in PUBLISHED if run.run == "llama31-405b-fp8-cp2")
    assert run.options["tp_overlap_pairs"]
    defaults = replace(run, options={"tp_overlap": 1.0})
    assert run.predicted() > defaults.predicted()
