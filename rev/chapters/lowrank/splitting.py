"""Notebook 09b (adaptive rank): the low-rank matrix-ODE step by projector splitting, its reverse, the defect, the
rank-deficiency ratio and rank enrichment.

The matrix ODE is affine in the state, `dF/dt = G(F) = A F + p C` (A: m x m, C: m x n, p: one input value per
sample), so that every substep has an *exact* flow, computed with one matrix exponential: the only errors left
are the ones the chapter is about (the rank, and rounding). A rank-r state is `F = X S V^T` (X: m x r, V: n x r
orthonormal, S: r x r), batched as (B, m, r), (B, r, r), (B, n, r).

One step of size h (Lubich & Oseledets' projector splitting, first order):

* K-step: `K = X S` follows `dK/dt = G(K V^T) V` for +h, then `K = X1 S^` (QR);
* S-step: `dS/dt = -X1^T G(X1 S V^T) V` for +h (the S-step runs *backward* in time);
* L-step: `L = V S^T` follows `dL/dt = G(X1 L^T)^T X1` for +h, then `L = V1 S1^T` (QR).

`reverse_step` applies the L, S and K substeps in that order with step -h. Because each substep is an exact flow,
the reverse inverts the low-rank step at *any* rank (up to rounding). What the rank changes is how far the step
leaves the dense flow: `defect` measures the round trip forward at rank r, back with the reverse at full rank
(the dense flow), which is `h ||(I - P_F) G(F)|| / ||F||` to first order -- the tangent-space residual.
"""
from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

EPS = 1e-12


class LowRank(NamedTuple):
    X: Tensor  # (B, m, r), orthonormal columns
    S: Tensor  # (B, r, r)
    V: Tensor  # (B, n, r), orthonormal columns

    @property
    def rank(self) -> int:
        return self.S.shape[-1]

    def dense(self) -> Tensor:
        return self.X @ self.S @ self.V.transpose(-1, -2)


def transposed(M: Tensor) -> Tensor:
    return M.transpose(-1, -2)


def affine_flow(M: Tensor, Y: Tensor, b: Tensor, h: float) -> Tensor:
    """The exact flow of `dY/dt = M Y + b` for time h: `e^{hM} Y + (int_0^h e^{uM} du) b`, both factors read off
    one exponential of the block matrix [[hM, hI], [0, 0]]. Negative h runs it backward, exactly."""
    k = M.shape[-1]
    aug = torch.zeros(*M.shape[:-2], 2 * k, 2 * k, dtype=M.dtype, device=M.device)
    aug[..., :k, :k] = h * M
    aug[..., :k, k:] = h * torch.eye(k, dtype=M.dtype, device=M.device)
    E = torch.linalg.matrix_exp(aug)
    return E[..., :k, :k] @ Y + E[..., :k, k:] @ b


def at_step(P: Tensor, t: int, n_steps: int) -> Tensor:
    """The parameter step `t` of `n_steps` uses: P itself (m x m, one layer), or, for P stacked by layer
    (L x m x m), the layer whose equal share of the steps holds t -- a depth-L network whose layers each
    integrate a span of the sequence."""
    return P if P.dim() == 2 else P[t * P.shape[0] // n_steps]


def field(F: Tensor, p: Tensor, A: Tensor, C: Tensor) -> Tensor:
    """G(F) = A F + p C, batched over F's first dimension (p: (B,))."""
    return A @ F + p[:, None, None] * C


def dense_step(F: Tensor, p: Tensor, A: Tensor, C: Tensor, h: float) -> Tensor:
    """The exact dense flow of G for time h (negative h: backward)."""
    return affine_flow(A, F, p[:, None, None] * C.expand_as(F), h)


def _qr(M: Tensor) -> tuple[Tensor, Tensor]:
    Q, R = torch.linalg.qr(M)
    return Q, R


def k_substep(st: LowRank, p: Tensor, A: Tensor, C: Tensor, h: float) -> LowRank:
    pc = p[:, None, None] * C
    K = affine_flow(A, st.X @ st.S, pc @ st.V, h)
    X1, S = _qr(K)
    return LowRank(X1, S, st.V)


def s_substep(st: LowRank, p: Tensor, A: Tensor, C: Tensor, h: float) -> LowRank:
    """Backward in time: dS/dt = -(M S + b) with M = X^T A X, b = p X^T C V."""
    M = transposed(st.X) @ A @ st.X
    b = transposed(st.X) @ (p[:, None, None] * C) @ st.V
    return LowRank(st.X, affine_flow(-M, st.S, -b, h), st.V)


def l_substep(st: LowRank, p: Tensor, A: Tensor, C: Tensor, h: float) -> LowRank:
    """dL^T/dt = M L^T + p X^T C with L^T = S V^T (r x n), then L = V1 S1^T by QR."""
    M = transposed(st.X) @ A @ st.X
    Lt = affine_flow(M, st.S @ transposed(st.V), transposed(st.X) @ (p[:, None, None] * C), h)
    V1, R = _qr(transposed(Lt))
    return LowRank(st.X, transposed(R), V1)


def ksl_step(st: LowRank, p: Tensor, A: Tensor, C: Tensor, h: float) -> LowRank:
    """One projector-splitting step of size h: K, S, L substeps."""
    return l_substep(s_substep(k_substep(st, p, A, C, h), p, A, C, h), p, A, C, h)


def reverse_step(st: LowRank, p: Tensor, A: Tensor, C: Tensor, h: float) -> LowRank:
    """The reverse map: the L, S and K substeps in reverse order, each with step -h."""
    return k_substep(s_substep(l_substep(st, p, A, C, -h), p, A, C, -h), p, A, C, -h)


def from_dense(F: Tensor, rank: int) -> LowRank:
    """The best rank-`rank` approximation of F (truncated SVD) as factors."""
    U, s, Vh = torch.linalg.svd(F, full_matrices=False)
    return LowRank(U[..., :rank], torch.diag_embed(s[..., :rank]), transposed(Vh)[..., :rank])


def initial_state(batch: int, m: int, n: int, rank: int, alpha: float, dtype=torch.float32) -> LowRank:
    """F0 = alpha X0 V0^T with X0, V0 the first `rank` unit vectors: a small state of full numerical rank r (its
    diagonal is alpha, never exact zeros, so the QR steps stay well defined)."""
    eye_m, eye_n = torch.eye(m, dtype=dtype)[:, :rank], torch.eye(n, dtype=dtype)[:, :rank]
    S = alpha * torch.eye(rank, dtype=dtype).expand(batch, rank, rank).clone()
    return LowRank(eye_m.expand(batch, m, rank).clone(), S, eye_n.expand(batch, n, rank).clone())


def rel_error(a: Tensor, b: Tensor) -> Tensor:
    """Per-sample |a - b|_F / (|b|_F + eps)."""
    return (a - b).flatten(1).norm(dim=1) / (b.flatten(1).norm(dim=1) + EPS)


def defect(st: LowRank, p: Tensor, A: Tensor, C: Tensor, h: float) -> Tensor:
    """delta = |Phi_rev(-h)(Phi(h)(F)) - F| / (|F| + eps) per sample: forward at the state's rank, back with the
    reverse map at full rank (= the dense flow, see the module docstring)."""
    F1 = ksl_step(st, p, A, C, h).dense()
    return rel_error(dense_step(F1, p, A, C, -h), st.dense())


def roundtrip_defect(st: LowRank, p: Tensor, A: Tensor, C: Tensor, h: float) -> Tensor:
    """The same round trip with the reverse at the state's own rank: it inverts the step at any rank."""
    return rel_error(reverse_step(ksl_step(st, p, A, C, h), p, A, C, h).dense(), st.dense())


def rho(st: LowRank, eps: float = EPS) -> Tensor:
    """sigma_min(S) / (sigma_max(S) + eps) per sample."""
    s = torch.linalg.svdvals(st.S)
    return s[..., -1] / (s[..., 0] + eps)


def tangent_residual(st: LowRank, G: Tensor) -> Tensor:
    """R = G - P_F G, with P_F G = X X^T G + G V V^T - X X^T G V V^T (the tangent space at F)."""
    XXt, VVt = st.X @ transposed(st.X), st.V @ transposed(st.V)
    return G - XXt @ G - G @ VVt + XXt @ G @ VVt


def _new_directions(basis: Tensor, Y: Tensor) -> Tensor:
    for _ in range(2):  # twice: one Gram-Schmidt pass loses orthogonality when Y is nearly inside the basis
        Y = Y - basis @ (transposed(basis) @ Y)
    return _qr(Y)[0]


def enrich(st: LowRank, G: Tensor, k: int, alpha: float, gen: torch.Generator | None = None) -> LowRank:
    """Add k directions to each factor from a randomised range basis of the tangent-space residual of G, with
    new diagonal entries alpha in S (small and positive: F moves by alpha Q_X Q_V^T, and S stays invertible)."""
    R = tangent_residual(st, G)
    B, m, n = R.shape
    om_v = torch.randn(n, k, generator=gen, dtype=R.dtype).to(R.device)
    om_x = torch.randn(m, k, generator=gen, dtype=R.dtype).to(R.device)
    Qx, Qv = _new_directions(st.X, R @ om_v), _new_directions(st.V, transposed(R) @ om_x)
    r = st.rank
    S = torch.zeros(B, r + k, r + k, dtype=st.S.dtype, device=st.S.device)
    S[:, :r, :r] = st.S
    S[:, r:, r:] = alpha * torch.eye(k, dtype=st.S.dtype, device=st.S.device)
    return LowRank(torch.cat([st.X, Qx], -1), S, torch.cat([st.V, Qv], -1))
