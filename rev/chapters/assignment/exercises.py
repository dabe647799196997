"""Notebooks 04-06: the small models their exercises derive (a step's cost, a step's memory) and the checks of
the learners' code (see `rev.chapters.shared.exercises` for the conventions).

Each `check_*` takes the learner's function, compares it with `rev`'s own answer on a few cases chosen to
catch the usual mistakes, and raises AssertionError with what went wrong and what to try; it returns one line
saying what it verified. Every check runs in well under a second on a CPU.
"""
from __future__ import annotations

import math
import random
from types import SimpleNamespace
from typing import Callable, Sequence

import numpy as np

from ...core.model import GPTConfig
from ...data.tokens import TokenData
from ...measure.maxbatch import MemoryLine, largest_fitting, static_bytes
from ..shared.exercises import recorded_against
from .baseline import FASTER, SLOWER, TOO_NOISY, compare_speeds
from ...base.units import MIB


# --- 04: the context-free line ----------------------------------------------------------------------------

def check_unigram_loss(unigram_loss: Callable[[np.ndarray, np.ndarray, int], float]) -> str:
    """04.3: `unigram_loss(train_ids, val_ids, vocab)` must equal `TokenData.unigram_loss` (add-one smoothing)."""
    rng = np.random.default_rng(0)
    cases = [(rng.integers(0, 50, 5000), rng.integers(0, 50, 800), 50),
             (np.array([0, 0, 0, 1]), np.array([1, 2]), 4),                  # token 2 never seen in training
             (rng.zipf(1.5, 4000) % 30, rng.zipf(1.5, 500) % 30, 30)]
    for train_ids, val_ids, vocab in cases:
        # TokenData.unigram_loss reads only the vocabulary and the two splits; hand it exactly those
        split = {"train": train_ids, "val": val_ids}
        want = TokenData.unigram_loss(SimpleNamespace(vocab_size=vocab, array=split.__getitem__))
        got = float(unigram_loss(train_ids.copy(), val_ids.copy(), vocab))
        assert math.isfinite(got), (f"got {got} for vocab {vocab}: a validation token never seen in training "
                                    f"must still cost a finite loss; add one to every count")
        assert abs(got - want) < 1e-9, (f"got {got:.6f}, expected {want:.6f} (vocab {vocab}): the loss is the mean "
                                         f"of -ln p(token) over the validation tokens, with p = (count + 1) / "
                                         f"(train tokens + vocab)")
    return "your context-free loss matches TokenData.unigram_loss, including a token unseen in training."


# --- 04: a verdict from timings that respects their spread -------------------------------------------------

def _shifted(n: int = 200, shift: float = 1.03, seed: int = 4) -> tuple[list[float], list[float]]:
    """Two sets of `n` step speeds around 1000 tokens/s with a 6% step-to-step spread, `a` higher by `shift`."""
    rng = random.Random(seed)
    return ([1000 * shift + rng.gauss(0, 60) for _ in range(n)], [1000 + rng.gauss(0, 60) for _ in range(n)])


_SHIFTED = _shifted()

# (what the case tests, a, b, a hint when the learner's verdict differs)
COMPARE_CASES: list[tuple[str, list[float], list[float], str]] = [
    ("clearly faster", [1000, 1010, 990, 1005, 995], [800, 810, 790, 805, 795],
     "a's slowest middle step beats b's fastest middle step: that is 'faster'"),
    ("clearly slower", [800, 810, 790, 805, 795], [1000, 1010, 990, 1005, 995],
     "the same two sets the other way round: 'slower'"),
    ("medians apart, five wide steps each", [900, 1100, 1000, 700, 1300], [800, 1000, 900, 600, 1200],
     "a's median is higher, but five steps this spread cannot pin a median down: resampled, the difference of "
     "the medians takes either sign"),
    ("one outlier", [100] * 9 + [100_000], [110] * 10,
     "one very fast step makes a's mean larger, but nine of ten are slower than all of b's: compare medians, "
     "which one step cannot move, not the mean or the maximum"),
    ("a 3% shift over 200 steps", _SHIFTED[0], _SHIFTED[1],
     "the quartiles overlap (single steps vary by 6%), but 200 steps pin each median down to well under 1%: "
     "test the difference of the medians (a bootstrap interval that excludes 0), not whether the spreads overlap"),
    ("identical sets", [500, 520, 480, 510, 490], [500, 520, 480, 510, 490],
     "the same timings can be neither faster nor slower"),
    ("different lengths", [2000, 2100, 1900], [1000, 1100, 900, 1050, 950, 1020, 980],
     "the sets need not be the same size: each one's own quartiles"),
]


def check_compare_speeds(compare: Callable[[Sequence[float], Sequence[float]], str]) -> str:
    """Exercise 04.2: `compare(a, b)` must say "faster", "slower" or "too noisy to tell" as `compare_speeds` does, on
    cases built to catch a comparison of raw medians, means or maxima, and of whether the quartiles overlap
    (each case's verdict is the same for any seed of a bootstrap of a thousand resamples or more)."""
    for what, a, b, hint in COMPARE_CASES:
        got = compare(list(a), list(b))
        want = compare_speeds(a, b)
        assert got in (FASTER, SLOWER, TOO_NOISY), (
            f"return one of {FASTER!r}, {SLOWER!r} or {TOO_NOISY!r}, got {got!r}")
        assert got == want, f"case '{what}': you say {got!r}, the bootstrap interval says {want!r}. Hint: {hint}."
    return f"your verdict agrees with rev.chapters.assignment.baseline.compare_speeds on {len(COMPARE_CASES)} cases."


# --- 05: the cost of rebuilding activations ---------------------------------------------------------------

def predicted_speed_ratio(trunk_share: float) -> float:
    """Reversible / stored tokens-per-second when a forward pass costs 1 (the trunk `trunk_share` of it), a
    backward costs 2, and the reversible backward rebuilds the trunk once more: 3 / (3 + trunk_share)."""
    return 3 / (3 + trunk_share)


def trunk_flop_share(cfg: GPTConfig) -> float:
    """The trunk's share of a forward pass's FLOPs per token: per layer 24 d^2 (the attention and MLP matrices,
    12 d^2 multiply-adds) plus 2 T d (scores and weighted values over T/2 keys on average, causal); the
    output head 2 d V. Embedding lookups and norms are too small to count."""
    d, t, v = cfg.d_model, cfg.seq_len, cfg.vocab_size
    trunk = cfg.n_layer * (24 * d * d + 2 * t * d)
    return trunk / (trunk + 2 * d * v)


def check_speed_ratio(speed_ratio: Callable[[float], float]) -> str:
    """05.1: `speed_ratio(trunk_share)` must follow the cost model of `predicted_speed_ratio`."""
    for share in (1.0, 0.0, 0.5, 0.8):
        got, want = float(speed_ratio(share)), predicted_speed_ratio(share)
        assert abs(got - want) < 1e-9, (
            f"speed_ratio({share}) = {got:.4f}, expected {want:.4f}. Count a step in forward-pass units: "
            f"stored = forward 1 + backward 2; reversible adds one more forward of the trunk only (share "
            f"{share}). Speed is tokens per second, the inverse of the cost.")
    return "a stored step costs 3 forward passes, a reversible one 3 + the trunk's share: ratio 3 / (3 + share)."


def predictions_against(guesses: dict[str, float | None], measured: dict[str, float]) -> str:
    """Exercise 05.2's reading: each recorded prediction beside what was measured (`recorded_against`)."""
    return recorded_against(guesses, measured)


def memory_split(summary: dict) -> dict[str, float]:
    """A run's step peak split into the static part (parameters, gradients, Adam state) and the rest
    (activations, temporaries, logits), in MiB."""
    mc = summary["model_config"]
    static = static_bytes(GPTConfig.from_dict(mc))
    return {"peak_MiB": summary["peak_memory_bytes"] / MIB, "static_MiB": static / MIB,
            "activations_MiB": (summary["peak_memory_bytes"] - static) / MIB}


# --- 06: predicting the max batch, and the search that finds it ----------------------------------------------

LINE_CASES = [  # (b1, peak1, b2, peak2, budget): an exact fit, a fraction, a budget below the static part
    (2, 1000, 4, 1600, 3400), (1, 5_000_000, 8, 12_000_000, 16 * MIB), (1, 500, 2, 600, 300),
    (4, 2000, 8, 3000, 2999),
]


def check_max_batch_from_line(max_batch: Callable[[int, int, int, int, int], int]) -> str:
    """06.1: `max_batch(b1, peak1, b2, peak2, budget)` must equal `MemoryLine.through(...).max_batch(budget)`."""
    for b1, p1, b2, p2, budget in LINE_CASES:
        got, want = max_batch(b1, p1, b2, p2, budget), MemoryLine.through(b1, p1, b2, p2).max_batch(budget)
        line = MemoryLine.through(b1, p1, b2, p2)
        assert got == want, (
            f"max_batch{(b1, p1, b2, p2, budget)} = {got}, expected {want}: the line has slope {line.bytes_per_sequence:g} "
            f"bytes per sequence and {line.static_bytes:g} static bytes; the largest batch b with static + slope * b "
            f"<= budget is a floor (a budget exactly at a batch's peak still fits it), and never below 0.")
    return f"your memory-line prediction agrees with rev.measure.maxbatch.MemoryLine on {len(LINE_CASES)} cases."


SEARCH_CASES = [  # (start, limit, largest n that fits): inside, at and around start, none, all, tiny ranges
    (8, 100, 37), (8, 100, 8), (8, 100, 9), (8, 100, 7), (8, 100, 0), (8, 100, 100), (1, 1, 1), (1, 1, 0),
    (16, 1000, 1), (3, 64, 64), (5, 5, 4), (1, 1 << 16, 1234),
]


def check_bisection(search: Callable[[Callable[[int], bool], int, int], int]) -> str:
    """06.3: `search(fits, start, limit)` must return what `largest_fitting` returns, probe only inside
    [1, limit], and take a logarithmic number of probes."""
    for start, limit, top in SEARCH_CASES:
        probes: list[int] = []
        budget = 4 * (limit.bit_length() + 2)   # doubling + bisection need about 2 log2(limit)

        def fits(n: int) -> bool:
            assert 1 <= n <= limit, (f"search(fits, start={start}, limit={limit}) probed n={n}, outside [1, {limit}]: "
                                     f"check the ends of your bracket (lo starts below 1 as 'none known', hi above limit)")
            probes.append(n)
            assert len(probes) <= budget, (f"search(fits, start={start}, limit={limit}) probed {len(probes)} times "
                                           f"({probes[-6:]} last): it does not converge. With lo fitting and hi not, "
                                           f"stop when hi - lo == 1; lo = mid makes no progress if mid can equal lo")
            return n <= top

        got = search(fits, start, limit)
        want = largest_fitting(lambda n: n <= top, start, limit)
        assert got == want, (f"search(fits, start={start}, limit={limit}) returned {got}, but everything up to {want} "
                             f"fits and {want + 1} does not. Off by one? Keep the invariant 'lo fits, hi does not' "
                             f"and return lo.")
    return f"your search agrees with rev.measure.maxbatch.largest_fitting on {len(SEARCH_CASES)} cases, in few probes."
