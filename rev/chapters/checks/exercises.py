"""Notebook 02 (tests): the checks of its break-it exercises (conventions: `rev.chapters.shared.exercises`).

* `check_swapped_inverse`   -- exercise 02.1: the learner's reversible Euler with its inverse in the wrong order
                               no longer inverts, and the gradient tests catch it;
* `check_autocast_sabotage` -- exercise 02.3: the learner's autocast context that forgets the saved state, and
                               which bf16 tests catch it.

Each runs the relevant tests of the project's own suite on the learner's sabotage (`measure.forgetting_autocast`,
`measure.replacing_integrator`), shows which of them caught it and how (`measure.caught_table`), and returns a
count for the check's line.
"""
from __future__ import annotations

import contextlib
import math
from collections.abc import Callable

import torch

from ...core.integrators import Integrator
from ...core.reversible import AutocastState
from ..shared.tables import tidy
from .measure import (AUTOCAST_TESTS, SABOTAGE_FILE, SWAP_TESTS, caught_table, forgetting_autocast,
                      replacing_integrator)
from .suite import run_tests


def check_autocast_sabotage(context: Callable[[AutocastState], contextlib.AbstractContextManager]) -> str:
    """Exercise 02.3: `context(saved)`, standing in for `AutocastState.context`, must ignore the saved autocast
    state; then the bf16 tests run with it, and at least one of them must catch it."""
    saved = AutocastState("cpu", True, torch.bfloat16)
    ctx = context(saved)  # the student edition's stub raises here, before any test runs
    assert hasattr(ctx, "__enter__"), f"return a context manager (something for `with`), got {type(ctx).__name__}"
    with ctx:
        still_on = torch.is_autocast_enabled("cpu")
    assert not still_on, ("inside your context autocast is on, as the saved state says: that is the correct "
                          "backward. The sabotage must ignore `self`, e.g. return contextlib.nullcontext().")
    with forgetting_autocast(context):
        df = run_tests(SABOTAGE_FILE, keyword=AUTOCAST_TESTS)
    assert (df["outcome"] == "failed").any(), "no test failed: is your context really entered in backward?"
    return _shown(df)


def check_swapped_inverse(integrator: type[Integrator]) -> str:
    """Exercise 02.1: `integrator` (a reversible Euler whose inverse undoes its updates in the wrong order) must
    no longer invert its step; then the gradient tests run on it, and at least one of them must catch it."""
    from ..integrators.toy import initial_points, make_tanh_field, roundtrip_error

    field, x0 = make_tanh_field(dim=4, seed=1), initial_points(8, 4, seed=1)
    errors = {h: roundtrip_error(integrator(), field, x0, h, 1, "fp64") for h in (0.1, 0.2)}
    assert errors[0.2] > 1e-10, (
        f"one layer forward and back still returns the input (error {errors[0.2]:.1e}): your inverse is the "
        f"correct one. Swap the order: undo y's update first, then z's, each with `sub`.")
    order = math.log2(errors[0.2] / errors[0.1])
    with replacing_integrator("reveuler", integrator):
        df = run_tests(SABOTAGE_FILE, keyword=SWAP_TESTS)
    assert (df["outcome"].isin(["failed", "error"])).any(), "no test failed: did the trunk use your integrator?"
    return f"one layer misses by O(h^{order:.1f}); " + _shown(df)


def _shown(df) -> str:
    """Display which tests caught the sabotage (`caught_table`), and count them for the check's line."""
    from IPython.display import display

    display(tidy(caught_table(df)))
    return f"{int(df['outcome'].isin(['failed', 'error']).sum())} of {len(df)} tests caught it"
