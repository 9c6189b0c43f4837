"""`mfu --skew-from`: a synchronous step waits for its slowest accelerator, whose rate is the
expected slowest of the job's accelerators drawn from the doctor burn-ins' normal (Blom's
top order statistic: mean - sd x Phi^-1((N - 0.375) / (N + 0.25)))."""

from __future__ import annotations

import pytest

from collbench.analysis.mfu.estimate import EstimateOptions, Skew, _bubble_s, estimate
from collbench.analysis.mfu.fabrics import Fabric, Inputs, estimate_fabric
from collbench.analysis.mfu.search import search
from collbench.core.errors import SpecError
from collbench.render.mfu_explain import explain_rows
from collbench.topologies.loader import load_topology
from tests.unit.analysis.mfu.test_mfu import flat_pricer, make_topology, workload

H100 = "NVIDIA H100 80GB HBM3"
# mean 100, sd sqrt((0 + 4 + 4 + 0) / 3) = 1.632993 TFLOP/s
RATES = (100.0, 98.0, 102.0, 100.0)
SD = (8 / 3) ** 0.5
# Phi^-1((N - 0.375) / (N + 0.25)) by hand (a normal table): N = 8, 512 (more than measured)
Z = {8: 1.434200, 512: 3.030658}
SKEWED = EstimateOptions(skew=Skew(RATES, H100, "r"))


def h100(nodes: int = 64):
    return load_topology("dgx-h100").with_nodes(nodes)


@pytest.mark.parametrize("accelerators", sorted(Z))
def test_the_slowest_rate_is_blom_s_top_order_statistic(accelerators):
    slowest, mean, sd = Skew(RATES, H100, "r").slowest(accelerators)
    assert (mean, sd) == (pytest.approx(100.0), pytest.approx(SD))
    assert slowest == pytest.approx(100.0 - SD * Z[accelerators], abs=1e-5)


@pytest.mark.parametrize(("accelerators", "slowest"), [(1, 100.0), (2, 99.0), (3, 98.5), (4, 98.0)])
def test_up_to_as_many_as_measured_the_slowest_is_that_of_a_random_draw_of_them(
    accelerators, slowest
):
    """By hand over the subsets of (98, 100, 100, 102): 2 of them, 6 pairs, 3 hold the 98,
    (3 x 98 + 3 x 100) / 6 = 99; 3 of them, 4 triples, 3 hold it, (3 x 98 + 100) / 4 = 98.5;
    all 4: the measured least, 98."""
    assert Skew(RATES, H100, "r").slowest(accelerators)[0] == pytest.approx(slowest)
    load = workload("llama3-8b", tp=1, pp=1, dp=accelerators, global_batch=12)
    said = estimate(load, h100(1), flat_pricer(), SKEWED).assumptions
    assert any("4 gemm burn-ins, r; as many drawn from them)" in text for text in said)


def test_the_step_stretches_compute_and_the_bare_bubble_by_mean_over_slowest():
    load = workload(tp=8, pp=8, dp=8)  # 512 accelerators
    plain = estimate(load, h100(), flat_pricer())
    skewed = estimate(load, h100(), flat_pricer(), SKEWED)
    stretch = 100.0 / (100.0 - SD * Z[512]) - 1  # 0.05202
    # the bubble without the TP and PP time it idles for: communication is not stretched
    bare = _bubble_s(load, plain.micro, plain.micro.total_s)
    assert bare < plain.bubble_s
    assert skewed.straggler_s == pytest.approx((plain.compute_s + bare) * stretch)
    assert skewed.step_time_s == pytest.approx(plain.step_time_s + skewed.straggler_s)
    assert plain.straggler_s is None

    # a straggler is not communication: the exposed collectives' seconds stay put
    def comm_s(result):
        return result.step_time_s * (1 - result.mfu / result.what_if["perfect_overlap"])

    assert comm_s(skewed) == pytest.approx(comm_s(plain))
    said = [text for text in skewed.assumptions if text.startswith("stragglers:")]
    assert "expected slowest of 512 accelerators at 95.1 TFLOP/s" in said[0]
    assert "4 gemm burn-ins, r" in said[0] and "x1.052" in said[0]
    # 4 rates know their sd to 1 / sqrt(2 x 3) = 41%: 100 - 4.949 x (1 +- 0.408) TFLOP/s
    assert "a normal tail; sd +-41% by 4 rates: 93.0 to 97.1 TFLOP/s)" in said[0]
    assert "the validated band was measured without this term" in said[0]
    explained = {row["name"]: row["step_s"] for row in explain_rows(skewed)}
    assert explained["waits for the slowest accelerator"] == skewed.straggler_s


def test_the_term_grows_with_the_fleet():
    shares = []
    for dp in (1, 8, 64):
        result = estimate(workload(tp=8, pp=1, dp=dp), h100(), flat_pricer(), SKEWED)
        shares.append(result.straggler_s / result.compute_s)
    assert shares[0] < shares[1] < shares[2]


def test_burn_ins_apply_only_on_their_accelerator_model():
    load = workload(tp=8, pp=1, dp=8)
    mi300x = load_topology("mi300x").with_nodes(8)
    other = estimate(load, mi300x, flat_pricer(), SKEWED)
    assert other.straggler_s is None
    assert "stragglers: none priced (no --skew-from burn-ins of this accelerator)" in (
        other.assumptions
    )
    assert estimate(load, h100(8), flat_pricer(), SKEWED).straggler_s > 0
    # a device without a known model number matches nothing, not every unknown accelerator
    unknown = EstimateOptions(skew=Skew(RATES, "X", "r"))  # make_topology's accelerator: "X"
    assert estimate(load, make_topology(), flat_pricer(), unknown).straggler_s is None


def test_the_what_ifs_and_the_search_wait_for_the_slowest_too():
    load = workload(tp=8, pp=8, dp=8)
    fabric = Fabric(h100())
    result = estimate_fabric(load, fabric, Inputs(SKEWED))
    plain = estimate_fabric(load, fabric, Inputs())
    assert result.what_if["scale_out_2x"] < plain.what_if["scale_out_2x"]
    small = workload("llama3-8b", tp=8, pp=1, dp=8, global_batch=64)
    ranked = search(small, [Fabric(h100(8))], Inputs(SKEWED))[0]
    assert ranked and all(result.straggler_s > 0 for _, result in ranked)


def test_a_spread_too_wide_to_extrapolate_is_refused():
    with pytest.raises(SpecError, match="spread too wide .* to 512 accelerators"):
        Skew((100.0, 10.0, 190.0), H100, "r").slowest(512)
    assert Skew((100.0, 100.0), H100, "r").slowest(512)[0] == 100.0
