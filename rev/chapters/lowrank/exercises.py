"""Notebook 09b (adaptive rank): the checks of exercises 09b.1 (the tangent projection) and 09b.2 (break the
reverse order), each on its own small float64 problem in well under a second; and the measurement of exercise
09b.3 (what checkpoints buy) with the verdict computed from it."""
from __future__ import annotations

import math
from typing import Callable

import torch

from .experiment import MatrixODE, rebuild_drift, step_peak_bytes
from .controller import reversal_gradients
from .splitting import LowRank, field, from_dense, initial_state, ksl_step, tangent_residual

# exercise 09b.3: checkpoints buy gradient accuracy only where they move the gradient by more than this share of
# the rank's own error against the dense gradient (below it, the rank decides the gradient, not the checkpoints)
CHECKPOINT_SHARE = 0.01


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
    assert PG.shape == G.shape, f"P_F G has shape {tuple(PG.shape)}, not G's"
    twice = project(st.X, st.V, PG)
    assert torch.allclose(twice, PG, atol=1e-10), "P_F applied twice must equal P_F once"
    assert torch.allclose(G - PG, tangent_residual(st, G), atol=1e-10), (
        "G - P_F G is not the residual: count the part in both spaces once")
    return "P_F G idempotent, equal to rev's split at rank 3"


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
    assert full_miss < 1e-10, f"at full rank it misses by {full_miss:.2g}: use -h in every substep"
    assert low_miss > 1e-6, f"at rank 3 it misses by only {low_miss:.2g}: apply K, then S, then L"
    return f"forward-order reverse: misses by {full_miss:.1e} at full rank, {low_miss:.1e} at rank 3"


def _reversal_gradient(model: MatrixODE, x: torch.Tensor, y: torch.Tensor, rank: int, spacing: int) -> dict:
    st0 = initial_state(x.shape[0], model.m, model.m, rank, model.alpha)
    out = reversal_gradients(st0, x, model.A, model.C, model.h, spacing, math.inf, model.loss_fn(y),
                             list(model.head.parameters()))
    flat = torch.cat([t.flatten() for t in [out["dA"], out["dC"], *out["d_head"]]]).double()
    return {"grad": flat, "local_defect": out["local_defect"]}


def checkpoint_measurement(model: MatrixODE, x: torch.Tensor, y: torch.Tensor, ranks) -> dict:
    """Exercise 09b.3: per rank (`rows`), the reversal gradient with every state kept (spacing 1) and with only the
    first (spacing T): each one's relative error against the dense gradient, how far the checkpoints move the
    gradient (|g_T - g_1| / |g_1|), the local forward check the backward makes, and the rebuilt-state drift
    without checkpoints (one step back and at step 1); and (`peaks`) the measured peak of both layouts at the first
    rank (a peak runs a whole gradient under the profiler: once per layout is enough to see the memory)."""
    T, rows = x.shape[1], []
    for r in ranks:
        dense = model.dense_gradients(x, y, r).double()
        g = {s: _reversal_gradient(model, x, y, r, s) for s in (1, T)}
        err = {s: float((g[s]["grad"] - dense).norm() / dense.norm()) for s in (1, T)}
        drift = rebuild_drift(model, x, r)
        rows.append({"rank": r, "spacing": T, "grad_err_all_kept": err[1], "grad_err_first_kept": err[T],
                     "checkpoint_effect": float((g[T]["grad"] - g[1]["grad"]).norm() / g[1]["grad"].norm()),
                     "local_check": g[T]["local_defect"], "drift_one_back": drift[-1], "drift_at_step_1": drift[1]})
    r0 = rows[0]["rank"]
    peaks = {"rank": r0, "spacing": T, "all_kept": step_peak_bytes(model, x, y, r0, 1, math.inf),
             "first_kept": step_peak_bytes(model, x, y, r0, T, math.inf)}
    return {"rows": rows, "peaks": peaks}
