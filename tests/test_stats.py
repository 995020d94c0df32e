"""ios_core.measurement.stats: the one median, standard deviation, coefficient of variation, spread,
geometric mean and summary every figure uses."""

import math

import numpy as np
import pytest

from ios_core.measurement import stats


def test_median_of_an_even_count_averages_the_two_middle_values():
    assert stats.median([1.0, 2.0, 3.0, 10.0]) == 2.5
    assert stats.median([4.0, 1.0, 3.0]) == 3.0
    assert stats.median(np.array([1.0, 2.0])) == 1.5
    assert stats.median(v for v in (5.0, 1.0)) == 3.0  # any iterable
    with pytest.raises(ValueError):
        stats.median([])


def test_median_or_none_ignores_what_is_not_a_finite_number():
    assert stats.median_or_none([None, 1.0, float("nan"), 3.0, True]) == 2.0
    assert stats.median_or_none([None, "x"]) is None


def test_geomean_keeps_positive_finite_values_only():
    assert stats.geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert stats.geomean([2.0, None, 0.0, -1.0, 8.0, float("inf")]) == pytest.approx(4.0)
    assert stats.geomean([]) is None and stats.geomean([None]) is None


def test_robust_spread_ignores_one_outlier_and_uses_the_small_sample_factor():
    rng = np.random.default_rng(0)
    x = rng.normal(0.0, 1.0, 4001)
    assert stats.robust_spread(x) == pytest.approx(1.0, rel=0.08)
    assert stats.robust_spread([1.0, 1.0, 100.0]) == 0.0  # the median deviation is 0
    assert stats.robust_spread([1.0]) == 0.0
    a = [1.0, 2.0, 4.0]
    assert stats.robust_spread(a) == pytest.approx(1.495 * 1.4826 * 1.0)


def test_std_is_the_sample_one_and_cv_is_it_over_the_median():
    # 2, 4, 4, 4, 5, 5, 7, 9: squared deviations from the mean 5 sum to 32; over n - 1 = 7, not n = 8 (2.0)
    assert stats.std([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]) == pytest.approx(math.sqrt(32 / 7))
    assert stats.std([3.0]) == 0.0
    # 1, 2, 3, 10: deviations from the mean 4 squared sum to 50, std sqrt(50 / 3); the median is 2.5
    # (over the mean it would be 1.02, with n it would be 1.41)
    assert stats.cv([1.0, 2.0, 3.0, 10.0]) == pytest.approx(math.sqrt(50 / 3) / 2.5)
    assert stats.cv(np.array([10.0, 10.0])) == 0.0
    assert stats.cv([5.0]) is None and stats.cv([]) is None  # no spread from one value
    assert stats.cv([0.0, 0.0]) is None and stats.cv([-1.0, -2.0]) is None  # no figure to be relative to


def test_summary_is_one_rule_for_every_list_of_timings():
    s = stats.summary([1.0, 2.0, 3.0, 4.0])
    assert s["median_ms"] == 2.5 and s["mean_ms"] == 2.5 and s["min_ms"] == 1.0 and s["max_ms"] == 4.0
    assert s["p10_ms"] == pytest.approx(1.3) and s["p90_ms"] == pytest.approx(3.7) and s["calls"] == 4
    assert s["std_ms"] == pytest.approx(np.std([1, 2, 3, 4], ddof=1))
    assert stats.summary([1.0, 2.0], spread_of=[5.0, 5.0])["std_ms"] == 0.0
    assert stats.summary([]) == {}
    assert stats.summary([7.0])["std_ms"] == 0.0


def test_measurement_summary_is_the_stats_summary():
    from ios_core.measurement.measure import Measurement

    m = Measurement(samples_ms=[1.0, 2.0, 3.0, 10.0], number=1, warmup=0)
    s = m.summary()
    assert s["median_ms"] == m.median == 2.5
    assert {k: s[k] for k in stats.summary(m.samples_ms)} == stats.summary(m.samples_ms)
    assert s["percentiles_over"] == "samples" and s["repeat"] == 4
    assert math.isclose(m.std, stats.std(m.samples_ms))
