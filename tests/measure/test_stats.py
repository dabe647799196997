"""The intervals behind the workbook's verdicts: a t quantile against its printed tables, a t interval that covers
as often as it says, and a bootstrap that sees a 3% shift a quartile-overlap rule misses."""
import numpy as np
import pytest

from rev.measure.stats import mean_interval, median_difference_interval, t_quantile


@pytest.mark.parametrize("p, df, table", [(0.975, 1, 12.706), (0.975, 2, 4.303), (0.975, 7, 2.365),
                                          (0.95, 4, 2.132), (0.975, 1000, 1.962)])
def test_t_quantile_matches_the_printed_tables(p, df, table):
    assert t_quantile(p, df) == pytest.approx(table, abs=1e-3)


def test_mean_interval_covers_the_true_mean_about_as_often_as_it_says():
    rng = np.random.default_rng(0)
    hits = [lo <= 1.0 <= hi for lo, hi in (mean_interval(rng.normal(1.0, 0.3, 3))[1:] for _ in range(2000))]
    # three draws: the normal's 1.96 would cover only ~80%; t with 2 df covers 95%
    assert 0.93 < np.mean(hits) < 0.97


def test_mean_interval_refuses_one_value():
    with pytest.raises(ValueError, match="more seeds"):
        mean_interval([0.5])


def test_bootstrap_sees_a_three_percent_shift_under_a_ten_percent_spread():
    rng = np.random.default_rng(1)
    a, b = rng.normal(1.03, 0.10, 300), rng.normal(1.00, 0.10, 300)
    qa, qb = np.quantile(a, [0.25, 0.75]), np.quantile(b, [0.25, 0.75])
    assert qa[0] < qb[1]                      # the spreads overlap: an overlap rule says nothing
    assert median_difference_interval(a, b)[0] > 0


def test_the_median_of_paired_rounds_is_tested_by_its_interval_not_by_the_rounds_quartiles():
    """Interleaved rounds: 60 ratios around 0.97 with a 6% round-to-round spread. Their quartiles hold 1 (a
    quartile rule calls it noise, however many rounds there are); the bootstrap interval of their median, which
    narrows as rounds are added, lies below 1 (3% slower)."""
    from rev.chapters.shared.runs import round_ratio
    from rev.measure.stats import median_interval

    rng = np.random.default_rng(2)
    base = rng.uniform(0.9, 1.1, 60)                     # the load of each round, shared by its two steps
    ratio = 0.97 * (1 + rng.normal(0, 0.06, 60))
    times = base / ratio                                 # speed over base's is base_time / time = ratio
    lo, hi = median_interval(ratio)
    q1, q3 = np.quantile(ratio, [0.25, 0.75])
    assert q1 < 1 < q3 and lo < np.median(ratio) < hi < 1
    s = round_ratio(list(times), list(base))
    assert s.value == pytest.approx(np.median(ratio)) and (s.lo, s.hi) == pytest.approx((lo, hi))
    assert "bootstrap interval of the median over 60 interleaved rounds" in s.kind
    assert "quartiles over 3" in round_ratio([1.0, 1.1, 1.2], [1.0, 1.0, 1.0]).kind   # too few rounds to test
    with pytest.raises(ValueError, match="at least 2"):
        median_interval([1.0])


@pytest.mark.parametrize("which", ["median", "difference", "ratio"])
def test_a_95_percent_bootstrap_interval_leaves_2_5_percent_of_its_draws_on_each_side(which):
    """Each bootstrap interval against the very draws it is read from: its ends are their 2.5% and 97.5%
    quantiles. (A 90% interval labelled 95% leaves 5% on each side, and a test of a verdict's sign alone passes.)"""
    from rev.measure import stats

    rng = np.random.default_rng(5)
    a, b = rng.lognormal(0.0, 0.3, 100), rng.lognormal(0.1, 0.3, 100)
    if which == "median":
        draws = stats._median_draws(a, np.random.default_rng(0), stats.RESAMPLES)
        lo, hi = stats.median_interval(a)
    else:
        da, db = stats._two_samples(a, b, stats.RESAMPLES, 0)
        draws = da - db if which == "difference" else da / db
        lo, hi = (stats.median_difference_interval if which == "difference" else stats.median_ratio_interval)(a, b)
    # a quantile lies between the draws below it and those at or below it, whatever the ties
    assert np.mean(draws < lo) <= 0.025 <= np.mean(draws <= lo)
    assert np.mean(draws > hi) <= 0.025 <= np.mean(draws >= hi)
