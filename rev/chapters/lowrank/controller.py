"""Notebook 09b (adaptive rank): the controller and the backward walk that rebuilds states by the reverse map.

`RankController.decide(delta, rho)` applies the idea's four rules, in the open:
halve the checkpoint spacing when delta > tau_warn, lengthen it by one step when delta < tau_safe (the idea's own
rule: cautious growth, fast retreat), enrich the rank when
delta > tau_rank or rho < tau_svd (`rule="specified"`). The rho clause fights enrichment: a fresh direction enters
S with a small alpha, so right after enriching rho ~ alpha / sigma_max is small and the clause fires again, up to
the maximum rank; and a small rho means the last direction carries almost nothing, i.e. the rank is too *high*.
`rule="corrected"` enriches when delta > tau_rank and rho >= tau_svd (no new direction while one is still empty).
`enrichment_trace` shows both on one state. `reversal_gradients` is the memory-light backward: forward keeps the state
every `spacing` steps and the final one; backward rebuilds each state with `reverse_step` from the one above,
and reloads from the kept checkpoint below (recomputing forward) when the local defect exceeds tau_grad.
"""
from __future__ import annotations

from dataclasses import dataclass, field as dc_field

import torch
from torch import Tensor

from .splitting import LowRank, rel_error, transposed, at_step, defect, enrich, field, ksl_step, reverse_step, rho


@dataclass
class RankController:
    tau_warn: float
    tau_safe: float
    tau_rank: float
    tau_svd: float
    tau_grad: float
    spacing: int
    rank: int
    max_rank: int
    rank_step: int = 4
    min_spacing: int = 1
    max_spacing: int = 64
    rule: str = "specified"  # or "corrected": see the module docstring
    log: list = dc_field(default_factory=list)

    def wants_rank(self, delta: float, rho: float) -> bool:
        if self.rule == "specified":
            return delta > self.tau_rank or rho < self.tau_svd
        if self.rule == "corrected":
            return delta > self.tau_rank and rho >= self.tau_svd
        raise ValueError(f"unknown rule {self.rule!r}: 'specified' or 'corrected'")

    def decide(self, delta: float, rho: float) -> dict:
        """Update spacing and rank from one measured defect and rank-deficiency ratio; returns the decision."""
        d = {"delta": delta, "rho": rho, "halve": delta > self.tau_warn, "lengthen": delta < self.tau_safe,
             "enrich": self.wants_rank(delta, rho) and self.rank < self.max_rank}
        if d["halve"]:
            self.spacing = max(self.min_spacing, self.spacing // 2)
        elif d["lengthen"]:
            self.spacing = min(self.max_spacing, self.spacing + 1)
        if d["enrich"]:
            self.rank = min(self.max_rank, self.rank + self.rank_step)
        d.update(spacing=self.spacing, rank=self.rank)
        self.log.append(d)
        return d


def enrichment_trace(st: LowRank, p: Tensor, A: Tensor, C: Tensor, h: float, ctl: RankController, alpha: float,
                     steps: int, gen: torch.Generator | None = None) -> list[dict]:
    """Let `ctl` decide once per step along `steps` steps of the stream (enriching one direction at a time from the
    tangent-space residual, then stepping): per step the rank, the mean defect, the median rho, the decision."""
    out = []
    for _ in range(steps):
        delta, r = float(defect(st, p, A, C, h).mean()), float(rho(st).median())
        d = ctl.decide(delta, r)
        out.append({"rank": st.rank, "delta": delta, "rho": r, "enrich": d["enrich"]})
        if d["enrich"]:
            st = enrich(st, field(st.dense(), p, A, C), 1, alpha, gen)
        st = ksl_step(st, p, A, C, h)
    return out


def kept_steps(n_steps: int, spacing: int) -> list[int]:
    """Steps whose input state forward keeps: 0, spacing, 2 spacing, ..."""
    return list(range(0, n_steps, spacing))


def forward_keep(st: LowRank, seq: Tensor, A: Tensor, C: Tensor, h: float, spacing: int
                 ) -> tuple[LowRank, dict[int, LowRank]]:
    """Run the sequence (seq: (B, T)) without a graph; keep the input state of every `spacing`-th step.
    A and C are one layer's (m x m) or stacked by layer (see `splitting.at_step`)."""
    kept, T = {}, seq.shape[1]
    with torch.no_grad():
        for t in range(T):
            if t % spacing == 0:
                kept[t] = st
            st = ksl_step(st, seq[:, t], at_step(A, t, T), at_step(C, t, T), h)
    return st, kept


def _gauge(a: LowRank, b: LowRank) -> tuple[Tensor, Tensor]:
    """Orthogonal matrices (up to the reconstruction error) with b ~ (a.X Qx, Qx^T a.S Qv, a.V Qv): two factor
    triples of one F differ by a rotation inside each subspace, and cotangents must be carried across it."""
    return (transposed(a.X) @ b.X).detach(), (transposed(a.V) @ b.V).detach()


def reversal_gradients(st0: LowRank, seq: Tensor, A: Tensor, C: Tensor, h: float, spacing: int, tau_grad: float,
                       loss_fn, head_params: list[Tensor]) -> dict:
    """Loss and gradients of `loss_fn(F_T)` (a scalar) w.r.t. A, C and `head_params` (what loss_fn uses), with the
    states rebuilt by the reverse map. Returns loss, grads (dA, dC, d_head), reloads, kept, and the largest local
    defect."""
    T = seq.shape[1]
    final, kept = forward_keep(st0, seq, A, C, h, spacing)
    Xf, Sf, Vf = (t.detach().requires_grad_() for t in final)
    loss = loss_fn(LowRank(Xf, Sf, Vf).dense())
    gX, gS, gV, *d_head = torch.autograd.grad(loss, (Xf, Sf, Vf, *head_params))
    dA, dC = torch.zeros_like(A), torch.zeros_like(C)
    above, reloads, worst = final, 0, 0.0
    for t in range(T - 1, -1, -1):
        p, At, Ct = seq[:, t], at_step(A, t, T), at_step(C, t, T)
        with torch.no_grad():
            if t in kept:
                cur = kept[t]
            else:
                cur = reverse_step(above, p, At, Ct, h)
                local = float(rel_error(ksl_step(cur, p, At, Ct, h).dense(), above.dense()).max())
                worst = max(worst, local)
                if local > tau_grad:  # reload: recompute from the checkpoint below instead of trusting the reverse
                    base = t - t % spacing
                    cur = kept[base]
                    for s in range(base, t):
                        cur = ksl_step(cur, seq[:, s], at_step(A, s, T), at_step(C, s, T), h)
                    reloads += 1
        with torch.enable_grad():
            Xi, Si, Vi = (u.detach().requires_grad_() for u in cur)
            Ad, Cd = A.detach().requires_grad_(), C.detach().requires_grad_()
            out = ksl_step(LowRank(Xi, Si, Vi), p, at_step(Ad, t, T), at_step(Cd, t, T), h)
            Qx, Qv = _gauge(out, above)
            outs = (out.X @ Qx, transposed(Qx) @ out.S @ Qv, out.V @ Qv)
            gX, gS, gV, a, c = torch.autograd.grad(outs, (Xi, Si, Vi, Ad, Cd), (gX, gS, gV))
        dA += a
        dC += c
        above = cur
    return {"loss": float(loss.detach()), "dA": dA, "dC": dC, "d_head": d_head, "reloads": reloads, "kept": len(kept),
            "local_defect": worst}
