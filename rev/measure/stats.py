"""Is one set of timings faster than another? A bootstrap interval for the difference of their medians. And for a
handful of seeds, where a bootstrap is too narrow: Student's t interval of a mean (`mean_interval`).

Whether two spreads overlap is not a test of a difference: two sets of a few hundred steps each can have
overlapping quartiles and still medians that differ by far more than their uncertainty (a 3% shift under a 10%
step-to-step spread). The question is answered by an interval for the difference itself: resample each set with
replacement, take the difference of the resampled medians, and read the central `level` of those differences.
The verdicts drawn from these intervals live in `rev.chapters.shared.verdicts`.

The resampling treats steps as independent draws; steps timed in a row share the machine's slow drifts, so on a
loaded machine the interval is optimistic, which is why bench interleaves the trunks it compares.
"""
from __future__ import annotations

from typing import Sequence

import math
import statistics

import numpy as np

LEVEL = 0.95          # the interval's coverage
RESAMPLES = 2000      # bootstrap resamples: the interval's ends move by well under 1% of its width beyond this


def _samples(x: Sequence[float], what: str = "values") -> np.ndarray:
    """`x` as floats, refused when one is NaN or infinite: one unfinished run's NaN would make every interval and
    tie margin built on it NaN without a word."""
    x = np.asarray(x, float)
    bad = np.flatnonzero(~np.isfinite(x))
    if len(bad):
        raise ValueError(f"{what} must be finite numbers: value {bad[0] + 1} of {len(x)} is {x[bad[0]]} (an "
                         f"unfinished run's loss?); leave it out, or finish the run first")
    return x


def _median_draws(x: np.ndarray, rng: np.random.Generator, resamples: int) -> np.ndarray:
    """The medians of `resamples` resamples of `x` drawn with replacement."""
    return np.median(x[rng.integers(0, len(x), (resamples, len(x)))], axis=1)


def _central(draws: np.ndarray, level: float) -> tuple[float, float]:
    """The central `level` of bootstrap draws: the percentile interval."""
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    tail = (1 - level) / 2
    lo, hi = np.quantile(draws, [tail, 1 - tail])
    return float(lo), float(hi)


def _two_samples(a: Sequence[float], b: Sequence[float], resamples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Resampled medians of two independent sets of timings (a's drawn first: seeded, the same data give the same
    interval)."""
    a, b = _samples(a, "timings"), _samples(b, "timings")
    if len(a) < 2 or len(b) < 2:
        raise ValueError(f"need at least 2 timings on each side to bootstrap (got {len(a)} and {len(b)})")
    rng = np.random.default_rng(seed)
    return _median_draws(a, rng, resamples), _median_draws(b, rng, resamples)


def median_difference_interval(a: Sequence[float], b: Sequence[float], level: float = LEVEL,
                               resamples: int = RESAMPLES, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of median(a) - median(b) at `level` (seeded: the same data, the same interval)."""
    med_a, med_b = _two_samples(a, b, resamples, seed)
    return _central(med_a - med_b, level)


def median_ratio_interval(a: Sequence[float], b: Sequence[float], level: float = LEVEL,
                          resamples: int = RESAMPLES, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of median(a) / median(b) at `level` (positive timings or speeds; seeded)."""
    med_a, med_b = _two_samples(a, b, resamples, seed)
    return _central(med_a / med_b, level)


def median_interval(x: Sequence[float], level: float = LEVEL, resamples: int = RESAMPLES,
                    seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of median(x) at `level` (seeded). For paired measurements, such as the speed
    ratios of interleaved rounds, each round one draw: it tests the median itself, where the rounds' quartiles
    only describe their spread (a 3% shift of the median can hide inside a 10% interquartile range)."""
    x = _samples(x)
    if len(x) < 2:
        raise ValueError(f"need at least 2 values to bootstrap a median (got {len(x)})")
    return _central(_median_draws(x, np.random.default_rng(seed), resamples), level)


def t_quantile(p: float, df: int) -> float:
    """The `p` quantile of Student's t with `df` degrees of freedom (p in (0.5, 1)), by bisection on its CDF, the
    density integrated by Simpson's rule: exact to 1e-6, with no statistics library behind it."""
    if df < 1 or not 0.5 < p < 1:
        raise ValueError(f"need df >= 1 and p in (0.5, 1), got df={df}, p={p}")
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)

    def cdf(x: float, n: int = 2000) -> float:  # 0.5 + the integral of the density from 0 to x
        ts = np.linspace(0.0, x, n + 1)
        pdf = np.exp(log_c - (df + 1) / 2 * np.log1p(ts ** 2 / df))
        return 0.5 + x / (3 * n) * (pdf[0] + pdf[-1] + 4 * pdf[1:-1:2].sum() + 2 * pdf[2:-1:2].sum())

    lo, hi = 0.0, 1.0
    while cdf(hi) < p:
        hi *= 2
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < p else (lo, mid)
    return (lo + hi) / 2


def mean_interval(x: Sequence[float], level: float = LEVEL) -> tuple[float, float, float]:
    """(mean, low, high): Student's t interval of the mean of `x` at `level`, for a few independent draws such as
    per-seed losses or per-seed paired differences (at 3 draws the half-width is 2.48 standard deviations)."""
    x = _samples(x)
    if len(x) < 2:
        raise ValueError(f"need at least 2 values for an interval (got {len(x)}): run more seeds")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    m, half = float(x.mean()), t_quantile(0.5 + level / 2, len(x) - 1) * float(x.std(ddof=1)) / math.sqrt(len(x))
    return m, m - half, m + half


def quartiles(values: list[float]) -> tuple[float, float]:
    """The lower and upper quartiles of `values` (both the value itself for one value)."""
    if len(values) < 2:
        return (values[0], values[0]) if values else (float("nan"), float("nan"))
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]
