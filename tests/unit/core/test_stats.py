import numpy as np
import pytest

from collbench.core.stats import combine_ranks


def test_rank_statistics_combine_batch_and_samples():
    batch = np.array([1e-3, 3e-3])
    samples = np.array([[1e-3, 2e-3, 3e-3, 4e-3], [3e-3, 4e-3, 5e-3, 6e-3]])
    avg = combine_ranks(batch, samples, "avg")
    assert avg.time_us == pytest.approx(2000)
    assert avg.time_us_min == pytest.approx(2000) and avg.time_us_max == pytest.approx(5000)
    assert avg.time_us_p50 == pytest.approx(3500)
    assert avg.samples_us == pytest.approx((2000, 3000, 4000, 5000))
    series = np.array([2000, 3000, 4000, 5000])
    assert avg.time_cv == pytest.approx(series.std() / series.mean())
    assert combine_ranks(batch, samples, "max").time_us == pytest.approx(3000)
    assert combine_ranks(batch, samples, "min").time_us == pytest.approx(1000)
    rank0 = combine_ranks(batch, samples, "rank0")
    assert rank0.time_us == pytest.approx(1000) and rank0.time_us_max == pytest.approx(4000)


def test_p95_and_single_sample():
    samples = np.arange(1, 101, dtype=float)[None, :] * 1e-6
    stats = combine_ranks(np.array([50e-6]), samples, "avg")
    assert stats.time_us_p95 == pytest.approx(np.percentile(np.arange(1, 101), 95))
    one = combine_ranks(np.array([1e-6]), np.array([[1e-6]]), "avg")
    assert one.time_cv == 0.0 and one.time_us_p50 == pytest.approx(1.0)


def test_geomean_of_the_positive_finite_values():
    import math

    from collbench.core.stats import geomean

    assert geomean([1.0, 4.0]) == pytest.approx(2.0)
    assert geomean([2.0, 0.0, -1.0, math.nan, math.inf, 8.0]) == pytest.approx(4.0)
    assert math.isnan(geomean([])) and math.isnan(geomean([0.0]))
