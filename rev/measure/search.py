"""The one search the memory searches share: the largest n that fits, by doubling then bisection, or galloping
from a guess. `fits` is any monotone test (true up to some n, false after); `rev.measure.maxbatch` measures a
batch or a depth with it, `rev.measure.slicing` a slice size."""
from __future__ import annotations

from typing import Callable


def largest_fitting(fits: Callable[[int], bool], start: int, limit: int, gallop: bool = False,
                    max_probes: int | None = None) -> int:
    """Largest n in [1, limit] with fits(n), assuming fits is monotone (true up to some n, false after):
    double from `start` until a miss (or bisect below `start` if it already misses), then bisect.

    With `gallop`, `start` is a guess thought to be close (a memory line's prediction): steps of 1, 2, 4, ...
    away from it, up while probes fit or down while they miss, then bisection; two probes when the guess is
    right, about 2 log2(error) when it is off.

    With `max_probes`, `fits` is called at most that many times: once they are spent, every further size counts
    as a miss without being tried, so the answer is the largest size that fitted (never one that was not tried)."""
    if max_probes is not None:
        fits = _at_most(fits, max_probes)
    lo, hi = 0, limit + 1          # invariant: lo fits (0 = none known), hi does not
    n = min(start, limit)
    if gallop:
        lo, hi = _gallop(fits, n, limit)
    elif not fits(n):
        hi = n
    else:
        lo = n
        while lo < limit:
            n = min(2 * lo, limit)
            if not fits(n):
                hi = n
                break
            lo = n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


def _gallop(fits: Callable[[int], bool], n: int, limit: int) -> tuple[int, int]:
    """(lo, hi) with fits(lo) (or lo = 0) and not fits(hi) (or hi = limit + 1), found by steps of 1, 2, 4, ... from n."""
    step = 1
    if fits(n):
        lo = n
        while lo < limit:
            nxt = min(lo + step, limit)
            if not fits(nxt):
                return lo, nxt
            lo, step = nxt, 2 * step
        return lo, limit + 1
    hi = n
    while hi > 1:
        nxt = max(hi - step, 1)
        if fits(nxt):
            return nxt, hi
        hi, step = nxt, 2 * step
    return 0, hi


def _at_most(fits: Callable[[int], bool], probes: int) -> Callable[[int], bool]:
    """`fits` for its first `probes` calls, then False without calling it."""
    if probes < 1:
        raise ValueError(f"max_probes must be >= 1, got {probes}")
    left = [probes]

    def bounded(n: int) -> bool:
        if left[0] == 0:
            return False
        left[0] -= 1
        return fits(n)

    return bounded
