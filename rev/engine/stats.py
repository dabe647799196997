"""Is one set of timings faster than another? A bootstrap interval for the difference of their medians.

Whether two spreads overlap is not a test of a difference: two sets of a few hundred steps each can have
overlapping quartiles and still medians that differ by far more than their uncertainty (a 3% shift under a 10%
step-to-step spread). The question is answered by an interval for the difference itself: resample each set with
replacement, take the difference of the resampled medians, and read the central `level` of those differences.
A verdict is drawn only when the interval excludes 0.

The resampling treats steps as independent draws; steps timed in a row share the machine's slow drifts, so on a
loaded machine the interval is optimistic, which is why bench interleaves the trunks it compares.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

LEVEL = 0.95          # the interval's coverage
RESAMPLES = 2000      # bootstrap resamples: the interval's ends move by well under 1% of its width beyond this


def median_difference_interval(a: Sequence[float], b: Sequence[float], level: float = LEVEL,
                               resamples: int = RESAMPLES, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of median(a) - median(b) at `level` (seeded: the same data, the same interval)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if len(a) < 2 or len(b) < 2:
        raise ValueError(f"need at least 2 timings on each side to bootstrap (got {len(a)} and {len(b)})")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    rng = np.random.default_rng(seed)
    med_a = np.median(a[rng.integers(0, len(a), (resamples, len(a)))], axis=1)
    med_b = np.median(b[rng.integers(0, len(b), (resamples, len(b)))], axis=1)
    tail = (1 - level) / 2
    lo, hi = np.quantile(med_a - med_b, [tail, 1 - tail])
    return float(lo), float(hi)


def median_ratio_interval(a: Sequence[float], b: Sequence[float], level: float = LEVEL,
                          resamples: int = RESAMPLES, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of median(a) / median(b) at `level` (positive timings or speeds; seeded)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if len(a) < 2 or len(b) < 2:
        raise ValueError(f"need at least 2 timings on each side to bootstrap (got {len(a)} and {len(b)})")
    rng = np.random.default_rng(seed)
    med_a = np.median(a[rng.integers(0, len(a), (resamples, len(a)))], axis=1)
    med_b = np.median(b[rng.integers(0, len(b), (resamples, len(b)))], axis=1)
    tail = (1 - level) / 2
    lo, hi = np.quantile(med_a / med_b, [tail, 1 - tail])
    return float(lo), float(hi)


def difference_verdict(a: Sequence[float], b: Sequence[float], level: float = LEVEL) -> int:
    """+1 when a's median is higher beyond the bootstrap interval, -1 when lower, 0 when the interval holds 0."""
    lo, hi = median_difference_interval(a, b, level)
    return 1 if lo > 0 else -1 if hi < 0 else 0
