"""Notebook 09b (adaptive rank): the checks of exercises 09b.1 (the tangent projection) and 09b.2 (break the
reverse order). Each builds its own small float64 problem and runs in well under a second."""
from __future__ import annotations

import math
from typing import Callable

import torch

from .splitting import LowRank, field, from_dense, ksl_step, tangent_residual


def _problem(m: int = 10, rank: int = 3):
    g = torch.Generator().manual_seed(0)
    A = -0.5 * torch.eye(m, dtype=torch.float64) + torch.randn(m, m, generator=g, dtype=torch.float64) / math.sqrt(m)
    C = torch.randn(m, m, generator=g, dtype=torch.float64) / math.sqrt(m)
    F = torch.randn(2, m, m, generator=g, dtype=torch.float64)
    p = torch.randn(2, generator=g, dtype=torch.float64)
    return from_dense(F, rank), p, A, C


def check_projection(project: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]) -> str:
    """Exercise 09b.1: `project(X, V, G)` returns P_F G, the projection onto the tangent space at F = X S V^T."""
    st, p, A, C = _problem()
    G = field(st.dense(), p, A, C)
    PG = project(st.X, st.V, G)
    assert PG.shape == G.shape, f"P_F G should have G's shape {tuple(G.shape)}, got {tuple(PG.shape)}"
    twice = project(st.X, st.V, PG)
    assert torch.allclose(twice, PG, atol=1e-10), "P_F is a projection: applying it twice must change nothing"
    assert torch.allclose(G - PG, tangent_residual(st, G), atol=1e-10), (
        "G - P_F G is not the tangent-space residual: P_F G keeps everything in the column space of X *or* the "
        "row space of V, and counts the part in both only once (X X^T G + G V V^T - X X^T G V V^T)")
    return "P_F G idempotent and equal to rev's residual split on a rank-3 state"


def check_reverse_order(bad_reverse: Callable) -> str:
    """Exercise 09b.2: `bad_reverse(state, p, A, C, h)` applies K, S, L with -h in the *forward* order. At full
    rank it must still invert (the substeps then commute: all are the dense flow); at rank 3 it must not."""
    full, p, A, C = _problem(rank=10)
    low = _problem(rank=3)[0]
    h = 0.1

    def miss(st: LowRank) -> float:
        back = bad_reverse(ksl_step(st, p, A, C, h), p, A, C, h)
        return float((back.dense() - st.dense()).norm() / st.dense().norm())

    full_miss, low_miss = miss(full), miss(low)
    assert full_miss < 1e-10, (f"at full rank your map misses by {full_miss:.2g}: use step -h in every substep "
                               f"(only the order should differ from rev's reverse_step)")
    assert low_miss > 1e-6, (f"at rank 3 your map misses by only {low_miss:.2g}: did you keep the reverse order "
                             f"L, S, K? Apply K first, then S, then L, each with -h")
    return f"forward-order reverse: misses by {full_miss:.1e} at full rank, {low_miss:.1e} at rank 3"
