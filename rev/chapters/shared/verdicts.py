"""Every verdict the workbook draws, in one place: notebooks 03-10 and REPORT.md read their "lower", "a tie",
"faster", "too noisy to tell" and "not comparable: timed apart" from here, so one rule holds everywhere.

**Losses.** A difference `d` between two losses (or any paired figure with a margin) is read against a tie
margin: a tie when |d| <= margin, lower when d < -margin, higher when d > margin (`side_of_tie`). The boundary
belongs to the tie: a gap exactly as large as the chance one is no evidence. A loss tie carries its value and
its source (`Tie`): the seed spread notebook 05 measured (`seed_tie`), or a stated fallback (`FALLBACK_TIE`,
0.02 nats, used where no seed spread exists: the screening, a profile that trains one seed).

**Speeds.** A speed verdict reads an interval (`Spread`) against a reference (1 for a ratio, 0 for a
difference): faster when the whole interval lies above it, slower when below, too noisy to tell when the
interval holds it (`interval_side`; touching counts as holding). Only timings a busy machine cannot fool give a
verdict: arms stepped in the same interleaved rounds (a bench, `Spread.interleaved`), where a slow moment hits
both. Two runs timed apart (one after the other, minutes apart) get none: a burst of load that covers part of one
run moves its whole distribution of steps, and a bootstrap over those steps stays tight and points the wrong
way. They read `TIMED_APART`.

**The machine's speed.** Within one run the same work is timed again and again, so a change in its speed is
the machine's (`machine_drift`): the run's steps split into consecutive windows, the fastest window's median
over the slowest's. Above `DRIFT_LIMIT` the machine's speed changed during the run.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Sequence

from ...measure.stats import median_difference_interval

# --- the words of a verdict (one definition each) -----------------------------------------------------------

FASTER, SLOWER = "faster", "slower"
TOO_NOISY = "too noisy to tell"
TIMED_APART = "not comparable: timed apart"
SPEED_CHANGED = "the machine's speed changed"
LOWER, HIGHER, TIED = "lower", "higher", "a tie"


# --- ties and losses -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Tie:
    """A tie margin (nats for a loss) and where it comes from: a measured seed spread, or a stated fallback."""
    nats: float
    source: str
    measured: bool

    def text(self) -> str:
        """`0.227 nats, the seed tie measured on runs 1 and 2 over 3 seeds`."""
        return f"{self.nats:.3g} nats, {self.source}"

    def wider_than(self, other: "Tie") -> bool:
        return self.nats > other.nats


FALLBACK_TIE = Tie(0.02, "a stated fallback: no seed spread measured", measured=False)


def seed_tie(spread: dict | None) -> Tie:
    """The tie for a comparison of two single-seed runs: the one notebook 05's seed spread implies (at least 2
    seeds, `rev.chapters.assignment.seeds.seed_spread`), else `FALLBACK_TIE`."""
    if isinstance(spread, dict) and spread.get("tie") is not None:
        return Tie(float(spread["tie"]), f"the seed tie measured on runs 1 and 2 over {spread['seeds']} seeds",
                   measured=True)
    return FALLBACK_TIE


def _margin(tie: Tie | float) -> float:
    margin = tie.nats if isinstance(tie, Tie) else float(tie)
    if not margin >= 0:
        raise ValueError(f"a tie margin must be a number >= 0, got {margin!r}")
    return margin


def side_of_tie(diff: float, tie: Tie | float) -> int:
    """-1 when `diff` lies below -tie, +1 above +tie, 0 within it, the boundary included (|diff| <= tie)."""
    margin = _margin(tie)
    return 0 if abs(diff) <= margin else -1 if diff < 0 else 1


def ratio_side(a: float, b: float, margin: float) -> int:
    """Two errors (lower is better, >= 0) against a ratio margin (> 1): -1 when `a` is more than `margin` times
    smaller than `b`, +1 when more than `margin` times larger, 0 otherwise (a ratio of exactly `margin` is a tie,
    as the boundary of `side_of_tie` is)."""
    if not margin > 1:
        raise ValueError(f"a ratio margin must be > 1, got {margin!r}")
    return -1 if b > margin * a else 1 if a > margin * b else 0


def inside_by(value: float, limit: float, factor: float) -> bool:
    """Whether `value` lies at least `factor` times inside `limit` (value * factor <= limit, the boundary inside):
    two errors both that far inside a target tie, since neither difference is one the target can see."""
    return value * factor <= limit


def within_tie(diff: float, tie: Tie | float) -> bool:
    """Whether two figures `diff` apart are a tie (`side_of_tie` is 0)."""
    return side_of_tie(diff, tie) == 0


def tied_with_best(values: Sequence[float], tie: Tie | float) -> list[bool]:
    """For each of `values` (lower is better), whether it is within the tie of the lowest."""
    best = min(values)
    return [within_tie(v - best, tie) for v in values]


def loss_side_word(diff: float, tie: Tie | float) -> str:
    """`LOWER`, `HIGHER` or `TIED` for a loss difference (a minus b)."""
    return {-1: LOWER, 0: TIED, 1: HIGHER}[side_of_tie(diff, tie)]


def loss_words(diff: float, a: str, b: str, tie: Tie | float) -> str:
    """`a`'s loss minus `b`'s (one seed each) in words: won or lost by so many nats, or a tie within the margin."""
    side = side_of_tie(diff, tie)
    if side == 0:
        return f"a tie, within {_margin(tie):.3g} nats (one seed cannot separate {a} from {b})"
    return f"{a} {'lost' if side > 0 else 'won'} by {abs(diff):.3f} nats"


# --- intervals and speeds ------------------------------------------------------------------------------------

def interval_side(lo: float, hi: float, x: float) -> int:
    """-1 when the whole interval [lo, hi] lies below `x`, +1 when above, 0 when it holds `x` (ends included)."""
    if lo > hi:
        raise ValueError(f"an interval's low end {lo} lies above its high end {hi}")
    return -1 if hi < x else 1 if lo > x else 0


@dataclass(frozen=True)
class Spread:
    """A timing (or a ratio of timings) with its spread: `value` the median, `lo`/`hi` the quartiles over `n`
    steps or an interval (`kind` says which). `interleaved`: the two arms of a ratio were stepped in the same
    rounds (a bench), the only timing a speed verdict is drawn from."""
    value: float
    lo: float
    hi: float
    n: int
    kind: str
    interleaved: bool = False

    def covers(self, x: float) -> bool:
        return self.lo <= x <= self.hi

    def text(self, fmt: str = "{:.2f}", unit: str = "") -> str:
        f = lambda v: fmt.format(v) + unit  # noqa: E731
        if math.isnan(self.lo) or math.isnan(self.hi):   # a figure with no interval (runs timed apart)
            return f"{f(self.value)} ({self.kind})"
        return f"{f(self.value)} ({self.kind} {f(self.lo)}-{f(self.hi)})"


MIN_ROUNDS = 5   # interleaved rounds a median's bootstrap needs; fewer are described by quartiles, never judged


def speed_verdict(ratio: Spread | None, x: float = 1.0) -> str:
    """The speed verdict on a ratio of tokens/s (a over b) against `x`: `FASTER` or `SLOWER` when its interval
    lies on one side, `TOO_NOISY` when it holds `x` or rests on fewer than `MIN_ROUNDS` rounds; `TIMED_APART`
    for anything not timed interleaved (or not timed at all)."""
    if ratio is None or not ratio.interleaved:
        return TIMED_APART
    if ratio.n < MIN_ROUNDS:
        return TOO_NOISY
    return {1: FASTER, -1: SLOWER, 0: TOO_NOISY}[interval_side(ratio.lo, ratio.hi, x)]


def compare_speeds(a: Sequence[float], b: Sequence[float]) -> str:
    """Two sets of per-step tokens/s of *the same work* (the halves of one run): `FASTER`, `SLOWER` or
    `TOO_NOISY` from the 95% bootstrap interval of the difference of their medians (`rev.measure.stats`). A
    difference here is the machine's, which is what it is for; between runs timed apart it is no verdict on the
    runs (`speed_verdict`)."""
    lo, hi = median_difference_interval(a, b)
    return {1: FASTER, -1: SLOWER, 0: TOO_NOISY}[interval_side(lo, hi, 0.0)]


# --- the machine's speed -------------------------------------------------------------------------------------

DRIFT_LIMIT = 0.15     # fastest window's median this far above the slowest's: the machine's speed changed
DRIFT_WINDOWS = 8      # consecutive windows a run's timings are split into (fewer for a short run)
DRIFT_MIN_STEPS = 10   # step timings per window, at least: a median of fewer moves with a few slow steps


@dataclass(frozen=True)
class Drift:
    """How far the machine's speed moved over one run: the medians of its consecutive windows of timings (the same
    work each), their fastest over their slowest, and whether the difference between those two windows is beyond
    their own noise (`significant`: the bootstrap interval of the difference of their medians excludes 0; a
    reference workload's timings, each already a median of repeats, count as significant)."""
    windows: tuple[float, ...]
    ratio: float
    significant: bool
    source: str

    @property
    def changed(self) -> bool:
        """`SPEED_CHANGED`: the fastest window more than `DRIFT_LIMIT` above the slowest, beyond their noise."""
        return self.significant and self.ratio > 1 + DRIFT_LIMIT

    def text(self) -> str:
        head = f"{SPEED_CHANGED} during the run" if self.changed else "the machine's speed held during the run"
        return (f"{head}: over {len(self.windows)} windows of its {self.source} the fastest median was "
                f"{self.ratio:.2f}x the slowest (limit {1 + DRIFT_LIMIT:.2f}x)")


def machine_drift(speeds: Sequence[float], per_window: int = DRIFT_MIN_STEPS, source: str = "steps") -> Drift | None:
    """`Drift` of a run from its speeds in time order (tokens/s of its steps; or, with `per_window=1`, the rates
    of a fixed reference workload timed now and then, each already a median); None with too few timings for two
    windows."""
    n = min(DRIFT_WINDOWS, len(speeds) // per_window)
    if n < 2:
        return None
    size = len(speeds) / n
    windows = [list(speeds[round(i * size):round((i + 1) * size)]) for i in range(n)]
    medians = tuple(statistics.median(w) for w in windows)
    fast, slow = max(range(n), key=medians.__getitem__), min(range(n), key=medians.__getitem__)
    if per_window > 1 and len(windows[fast]) > 1 and len(windows[slow]) > 1:
        significant = median_difference_interval(windows[fast], windows[slow])[0] > 0
    else:
        significant = True
    low = medians[slow]
    return Drift(medians, medians[fast] / low if low > 0 else math.inf, significant, source)
