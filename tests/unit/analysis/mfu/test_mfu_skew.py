"""`mfu --skew-from`: a synchronous step waits for its slowest accelerator, whose rate is the
expected slowest of the job's accelerators drawn from the doctor burn-ins' normal (Blom's
top order statistic: mean - sd x Phi^-1((N - 0.375) / (N + 0.25)))."""

from __future__ import annotations

from dataclasses import replace

import pytest

from collbench.analysis.mfu.estimate import EstimateOptions, Skew, estimate
from collbench.core.errors import SpecError
from collbench.topologies.loader import load_topology
from tests.unit.analysis.mfu.test_mfu import flat_pricer, make_topology, workload

# mean 100, sd sqrt((0 + 4 + 4 + 0) / 3) = 1.632993 TFLOP/s
RATES = (100.0, 98.0, 102.0, 100.0)
SD = (8 / 3) ** 0.5
# Phi^-1((N - 0.375) / (N + 0.25)) by hand (a normal table): N = 1, 8, 512
Z = {1: 0.0, 8: 1.434200, 512: 3.030658}


@pytest.mark.parametrize("accelerators", sorted(Z))
def test_the_slowest_rate_is_blom_s_top_order_statistic(accelerators):
    slowest, mean, sd = Skew(RATES, "X", "r").slowest(accelerators)
    assert (mean, sd) == (pytest.approx(100.0), pytest.approx(SD))
    assert slowest == pytest.approx(100.0 - SD * Z[accelerators], abs=1e-5)


def test_the_step_stretches_compute_and_bubble_by_mean_over_slowest():
    load = workload(tp=8, pp=8, dp=8)  # 512 accelerators
    plain = estimate(load, make_topology(), flat_pricer())
    skewed = estimate(
        load, make_topology(), flat_pricer(), EstimateOptions(skew=Skew(RATES, "X", "r"))
    )
    stretch = 100.0 / (100.0 - SD * Z[512]) - 1  # 0.05202
    assert skewed.straggler_s == pytest.approx((plain.compute_s + plain.bubble_s) * stretch)
    assert skewed.step_time_s == pytest.approx(plain.step_time_s + skewed.straggler_s)
    assert plain.straggler_s == 0.0

    # a straggler is not communication: the exposed collectives' seconds stay put
    def comm_s(result):
        return result.step_time_s * (1 - result.mfu / result.what_if["perfect_overlap"])

    assert comm_s(skewed) == pytest.approx(comm_s(plain))
    said = [text for text in skewed.assumptions if text.startswith("stragglers:")]
    assert said and "slowest of 512 accelerators at 95.1 TFLOP/s" in said[0]
    assert "4 gemm burn-ins, r" in said[0] and "x1.052" in said[0]


def test_the_term_grows_with_the_fleet():
    skew = EstimateOptions(skew=Skew(RATES, "X", "r"))
    shares = []
    for dp in (1, 8, 64):
        result = estimate(workload(tp=8, pp=1, dp=dp), make_topology(), flat_pricer(), skew)
        shares.append(result.straggler_s / result.compute_s)
    assert shares[0] < shares[1] < shares[2]


def test_burn_ins_of_another_accelerator_do_not_apply():
    options = EstimateOptions(skew=Skew(RATES, "NVIDIA H100 80GB HBM3", "r"))
    assert options.on(load_topology("dgx-h100")).skew is not None
    assert options.on(load_topology("mi300x")).skew is None
    said = estimate(workload(tp=8, pp=1, dp=1), make_topology(), flat_pricer()).assumptions
    assert "stragglers: none priced (no --skew-from burn-ins of this accelerator)" in said


def test_a_spread_too_wide_to_extrapolate_is_refused():
    with pytest.raises(SpecError, match="spread too wide .* to 512 accelerators"):
        Skew((100.0, 10.0, 190.0), "X", "r").slowest(512)
    assert replace(Skew(RATES, "X", "r"), tflops=(100.0, 100.0)).slowest(512)[0] == 100.0
