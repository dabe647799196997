"""Notebooks 01 and 01b: the checks of their exercises (conventions: `rev.chapters.shared.exercises`).

* `check_euler_there_and_back` -- exercise 01.1: the learner's +h-then--h Euler step has an O(h^2) defect;
* `check_leapfrog_inverse`     -- exercise 01.2: the learner's leapfrog inverse undoes `rev`'s forward step
                                  bit for bit on the fixed stream;
* `check_function`             -- exercise 01b.1: the learner's memory-free Function gives the stored twin's
                                  gradients in float64 and keeps nothing per layer.

Each check raises `AssertionError` with a short message that says what to look at (the exercise's text and its
answer say why), and returns one line saying what it verified.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import torch
from torch import Tensor

from ...core.streams import get_stream
from .buildit import GRAD_RTOL, exercise_trunk, function_trunk, gradient_errors, saved_bytes_at, summarise_errors
from .toy import euler_defect, fit_loglog_slope, initial_points, make_tanh_field, walk_forward

# The checks run on a small field of their own (not the notebook's), so that they need nothing but the learner's
# function and stay well under a second.
_DIM, _POINTS, _SEED = 6, 32, 3


def _check_field():
    return make_tanh_field(dim=_DIM, expansion=0.1, seed=_SEED), initial_points(_POINTS, _DIM, seed=_SEED)


def _rms(t: Tensor) -> float:
    return float(t.double().pow(2).mean().sqrt())


# --- exercise 01.1 ----------------------------------------------------------------------------------------

def check_euler_there_and_back(there_and_back: Callable[[Tensor, Callable, float], Tensor],
                               hs: Sequence[float] = tuple(np.geomspace(1e-4, 1e-1, 8))) -> str:
    """`there_and_back(x, f, h)` must return x_back = x1 - h f(x1) with x1 = x + h f(x), in float64: its
    defect must fall off with log-log slope 2 and agree with `rev`'s Euler stepped +h then -h."""
    field, x = _check_field()
    hs = np.asarray(hs, dtype=float)
    defects = []
    for h in hs:
        back = there_and_back(x.clone(), field, float(h))
        assert isinstance(back, Tensor) and back.shape == x.shape, f"return x_back shaped like x {tuple(x.shape)}"
        defects.append(_rms(back - x))
    defects = np.array(defects)
    # rounding alone stays far below 1e-10: an exact x_back used f(x), which a backward step does not know
    assert defects.max() > 1e-10, "x_back equals x: step back from x1 = x + h f(x) with -h, evaluating f at x1"
    slope = fit_loglog_slope(hs, defects)[0]
    assert abs(slope - 2) < 0.1, f"defect slope {slope:.2f}, not 2: return x1 - h f(x1), with x1 = x + h f(x)"
    reference = euler_defect(field, x, hs, "fp64").defect
    assert np.allclose(defects, reference, rtol=1e-6), f"slope 2, but {np.max(defects / reference):.3g}x rev's defect"
    return f"defect slope {slope:.2f} for h from {hs[0]:g} to {hs[-1]:g}, equal to rev's Euler stepped +h then -h"


# --- exercise 01.2 ----------------------------------------------------------------------------------------

LeapfrogInverse = Callable[[Tensor, Tensor, Callable, float, Callable], tuple[Tensor, Tensor]]


def _leapfrog_hint(got: Tensor, cur: Tensor, nxt: Tensor, f: Callable, h: float) -> str:
    """Name the usual mistake, by comparing the learner's x_prev with what each mistake would give."""
    st = get_stream("fixed")
    mistakes = [(st.sub(nxt, f(cur), h), "the coefficient: after layer 0 it is 2h"),
                (st.add(nxt, f(cur), 2 * h), "the sign: subtract the update"),
                (st.sub(nxt, f(nxt), 2 * h), "where f is evaluated: at x_curr")]
    for wrong, why in mistakes:
        if torch.equal(got, wrong):
            return "Look at " + why + "."
    return "Undo x_next = x_prev + 2h f(x_curr) with sub(x_next, f(x_curr), 2 * h)."


def check_leapfrog_inverse(leapfrog_inverse: LeapfrogInverse, depth: int = 16, h: float = 0.1) -> str:
    """`leapfrog_inverse(x_curr, x_next, f, h, sub)` must return (x_prev, x_curr) equal, bit for bit, to the
    state `rev.core.integrators.Leapfrog` stepped from, at every layer of a forward walk on the fixed stream."""
    field, x0 = _check_field()
    st = get_stream("fixed")
    states = walk_forward("leapfrog", field, x0, h, depth, "fixed")

    def f(s: Tensor) -> Tensor:  # the field at a stream value, as the trunk evaluates it
        return field(st.decode(s, torch.float64))

    for layer in reversed(range(1, depth)):  # layer 0 is the Euler starter, with coefficient h
        (cur, nxt), (want_prev, _) = states[layer + 1], states[layer]
        got = leapfrog_inverse(cur, nxt, f, h, st.sub)
        assert isinstance(got, tuple) and len(got) == 2, "return the pair (x_prev, x_curr)"
        prev, same = got
        assert prev.dtype == torch.int64, f"x_prev is {prev.dtype}, not the fixed stream's int64: subtract with sub"
        assert torch.equal(same, cur), "hand x_curr back unchanged"
        if not torch.equal(prev, want_prev):
            off = _rms(st.decode(prev, torch.float64) - st.decode(want_prev, torch.float64))
            raise AssertionError(f"at layer {layer}, x_prev is off by RMS {off:.3g}. "
                                 + _leapfrog_hint(prev, cur, nxt, f, h))
    state = states[-1]
    for _ in range(depth - 1):  # and chained: the whole walk down to layer 1, each step on the last one's output
        state = leapfrog_inverse(*state, f, h, st.sub)
    assert all(torch.equal(a, b) for a, b in zip(state, states[1])), "chained, the walk drifts"
    return f"undid {depth - 1} leapfrog layers of rev's forward walk on the fixed stream bit for bit"


# --- exercise 01b.1 ---------------------------------------------------------------------------------------

def check_function(function: type[torch.autograd.Function], depth: int = 6, h: float = 0.5) -> str:
    """Exercise 01b.1: `function` gives the stored twin's output and gradients in float64 (rtol
    `GRAD_RTOL`) and keeps only the final state, whatever the depth. Raises AssertionError with a hint."""
    worst = summarise_errors(gradient_errors(function_trunk(function), *exercise_trunk(depth), h))
    hints = {"output": "z' = z + h G(y') uses the new y",
             "input grad": "undo z' before y'",
             "param grads": "block by block, F's before G's"}
    for what, err in worst.items():
        assert err <= GRAD_RTOL, f"{what} off by {err:.2e} (allowed {GRAD_RTOL:g}): {hints[what]}"
    shallow, deep = saved_bytes_at(function, (2, 3 * depth), h)
    assert deep <= shallow, f"{deep:,} bytes saved at depth {3 * depth}, {shallow:,} at 2: save only (y, z)"
    return (f"output, input and parameter gradients match the stored twin to {max(worst.values()):.1e} "
            f"(float64); forward keeps {shallow} bytes at depth 2 and {deep} at depth {3 * depth}.")
