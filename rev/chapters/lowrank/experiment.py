"""Notebook 09b (adaptive rank): the cheap experiment -- a low-rank matrix-ODE classifier reading small images one
pixel at a time (fixed permutation), its gradients through the reverse map, their memory and their fidelity.

The images are made here (offline, seeded): ten smooth random class templates, each sample a scaled template
plus noise (8x8, average-pooled to `side` x `side` to keep the sequence short on a CPU). The model, a
`layers`-layer low-rank Neural ODE: F_0 = alpha X0 V0^T (rank r), then one projector-splitting step of
`dF/dt = A_l F + p_t C_l` per pixel p_t, layer l integrating its equal share of the steps, and a linear read-out
of F_T. Gradients come from `reversal_gradients` (states rebuilt by the reverse map); the dense
reference is the same model integrated densely under ordinary autograd.
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as Fn
from torch import Tensor, nn

from ...measure.memory import peak_memory
from .sizes import LowRankSizes
from .controller import forward_keep, reversal_gradients
from .splitting import rel_error, at_step, dense_step, defect, initial_state, ksl_step, reverse_step, rho

SIDE, CLASSES = 8, 10


def new_model(sz: LowRankSizes, seed: int) -> MatrixODE:
    """The chapter's classifier for `seed` at sizes `sz`."""
    return MatrixODE(sz.m, seed, layers=sz.layers)


def make_digits(n: int, seed: int, side: int = SIDE, noise: float = 0.6) -> tuple[Tensor, Tensor]:
    """(n, side**2) pixel sequences (one fixed permutation) and labels; templates fixed, samples drawn from `seed`."""
    tg = torch.Generator().manual_seed(1234)
    raw = torch.randn(CLASSES, 1, SIDE, SIDE, generator=tg)
    blur = torch.tensor([[1., 2., 1.], [2., 4., 2.], [1., 2., 1.]]).div(16).view(1, 1, 3, 3)
    templates = Fn.conv2d(raw, blur, padding=1).flatten(1)
    templates = (templates - templates.mean(1, keepdim=True)) / templates.std(1, keepdim=True)
    templates = Fn.adaptive_avg_pool2d(templates.view(CLASSES, 1, SIDE, SIDE), side).flatten(1)
    perm = torch.randperm(side * side, generator=tg)
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, CLASSES, (n,), generator=g)
    scale = 0.7 + 0.6 * torch.rand(n, 1, generator=g)
    x = scale * templates[y] + noise * torch.randn(n, side * side, generator=g)
    return x[:, perm], y


class MatrixODE(nn.Module):
    """Parameters of the classifier: per layer A_l (m x m) and C_l (m x n), stacked (L, m, m), and a linear
    read-out of F_T."""

    def __init__(self, m: int, seed: int, h: float = 0.125, alpha: float = 1e-2, layers: int = 1):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.m, self.alpha = m, alpha
        self.h = h
        # dissipative on average (-0.5 I): the forward flow contracts, so the reverse map amplifies rounding --
        # what makes checkpoint spacing matter at all
        self.A = nn.Parameter(-0.5 * torch.eye(m) + torch.randn(layers, m, m, generator=g) / math.sqrt(m))
        self.C = nn.Parameter(torch.randn(layers, m, m, generator=g) / math.sqrt(m))
        self.head = nn.Linear(m * m, CLASSES)
        nn.init.normal_(self.head.weight, std=0.02, generator=g)
        nn.init.zeros_(self.head.bias)

    def loss_fn(self, y: Tensor):
        return lambda F: Fn.cross_entropy(self.head(F.flatten(1)), y)

    def at(self, t: int, n_steps: int) -> tuple[Tensor, Tensor]:
        """(A, C) of the layer step t belongs to."""
        return at_step(self.A, t, n_steps), at_step(self.C, t, n_steps)

    def dense_gradients(self, x: Tensor, y: Tensor, rank: int) -> Tensor:
        """Flat gradient of the dense model (same F_0, dense exact flow, ordinary autograd): the reference."""
        F = initial_state(x.shape[0], self.m, self.m, rank, self.alpha).dense()
        for t in range(x.shape[1]):
            F = dense_step(F, x[:, t], *self.at(t, x.shape[1]), self.h)
        grads = torch.autograd.grad(self.loss_fn(y)(F), [self.A, self.C, *self.head.parameters()])
        return torch.cat([g.flatten() for g in grads])

    def probe(self, x: Tensor, rank: int) -> tuple[float, float]:
        """Median over the steps of the per-step defect (mean over the rows), and rho of the final state.

        The median, not the largest: delta is relative to |F|, and F_0 = alpha X0 V0^T is tiny, so the first steps'
        defects are huge (h |R| / alpha) at every rank short of full -- a maximum would always say "enrich"."""
        with torch.no_grad():
            st, deltas, T = initial_state(x.shape[0], self.m, self.m, rank, self.alpha), [], x.shape[1]
            for t in range(T):
                deltas.append(float(defect(st, x[:, t], *self.at(t, T), self.h).mean()))
                st = ksl_step(st, x[:, t], *self.at(t, T), self.h)
            return float(np.median(deltas)), float(rho(st).median())

    def accuracy(self, x: Tensor, y: Tensor, rank: int) -> float:
        """Fraction of `x` classified right, integrating at `rank` (no graph)."""
        with torch.no_grad():
            final, _ = forward_keep(initial_state(x.shape[0], self.m, self.m, rank, self.alpha), x, self.A, self.C,
                                    self.h, x.shape[1])
            return float((self.head(final.dense().flatten(1)).argmax(1) == y).float().mean())


def step_peak_bytes(model: MatrixODE, x: Tensor, y: Tensor, rank: int, spacing: int, tau_grad: float) -> int:
    """Measured peak memory of one gradient computation (`rev.measure.memory.peak_memory`), parameters included."""
    st0 = initial_state(x.shape[0], model.m, model.m, rank, model.alpha)
    fn = lambda: reversal_gradients(st0, x, model.A, model.C, model.h, spacing, tau_grad, model.loss_fn(y),
                                    list(model.head.parameters()))
    return peak_memory(fn, list(model.parameters())).peak_bytes


def gradient_fidelity(model: MatrixODE, x: Tensor, y: Tensor, rank: int, spacing: int, tau_grad: float) -> dict:
    """Cosine and relative norm error of the reversal gradient against the dense reference."""
    st0 = initial_state(x.shape[0], model.m, model.m, rank, model.alpha)
    out = reversal_gradients(st0, x, model.A, model.C, model.h, spacing, tau_grad, model.loss_fn(y),
                             list(model.head.parameters()))
    got = torch.cat([t.flatten() for t in [out["dA"], out["dC"], *out["d_head"]]])
    return {"kept": out["kept"], "reloads": out["reloads"], "local_defect": out["local_defect"],
            **agreement(got, model.dense_gradients(x, y, rank))}


def agreement(got: Tensor, ref: Tensor) -> dict:
    """Cosine and relative norm error of a flat gradient against the dense reference (in float64)."""
    got, ref = got.double(), ref.double()
    return {"grad_cos": float(got @ ref / (got.norm() * ref.norm() + 1e-300)),
            "grad_rel_err": float((got - ref).norm() / (ref.norm() + 1e-300))}


def rebuild_drift(model: MatrixODE, x: Tensor, rank: int) -> list[float]:
    """Walk back from the final state with the reverse map alone (no checkpoint): per step t = 0..T-1 the largest
    relative error of the rebuilt state against the stored one. Small early states are rebuilt badly: a step that
    barely depends on its (small) start cannot be run backward without magnifying the later state's rounding."""
    st0 = initial_state(x.shape[0], model.m, model.m, rank, model.alpha)
    with torch.no_grad():
        cur, kept = forward_keep(st0, x, model.A, model.C, model.h, 1)
        drift = []
        for t in range(x.shape[1] - 1, -1, -1):
            cur = reverse_step(cur, x[:, t], *model.at(t, x.shape[1]), model.h)
            drift.append(float(rel_error(cur.dense(), kept[t].dense()).max()))
    return drift[::-1]
