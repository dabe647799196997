"""Notebook 08 (training irreversibility): phi = (eta/4)|U|^2 breaks rescaling symmetry and keeps rotations.

Gradient flow conserves the charge D = |a|^2 - |b|^2 of a rescaling-invariant loss l(a.b); gradient descent
shrinks it by (1 - eta^2 l'^2) per step, as the modified flow on L + phi predicts.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import Tensor

from .defect import flow_rk4, gd_step
from .problems import DTYPE, Problem, check_eta, check_positive_int, check_same_shape, grad_and_value

# ----------------------------------------------------------------------------------------------------------
# symmetry: phi_DE breaks rescaling, keeps rotations
# ----------------------------------------------------------------------------------------------------------

def product_loss(a: Tensor, b: Tensor) -> Tensor:
    """L(a, b) = l(a.b) with the logistic l(z) = log(1 + e^-z): invariant under a -> c a, b -> b / c."""
    return F.softplus(-(a * b).sum())


def balance_drift(eta: float, n_steps: int, a0: Sequence[float] = (2.0,), b0: Sequence[float] = (0.25,),
                  n_sub: int = 8, flow: bool = True) -> dict[str, np.ndarray]:
    """The charge D = |a|^2 - |b|^2 of the rescaling symmetry, under GD, gradient flow and the prediction.

    Gradient flow conserves D exactly. GD multiplies it by (1 - eta^2 l'^2) every step. The modified flow on
    L + phi_DE predicts dD/dt = -eta l'^2 D, i.e. log D drops by eta^2 l'(a.b)^2 per step, toward |a| = |b|.
    Returned arrays have n_steps + 1 entries (time = eta * index); `flow=False` skips the RK4 reference.
    """
    eta = check_eta(eta)
    n_steps = check_positive_int(n_steps, "n_steps")
    a0 = torch.as_tensor(a0, dtype=DTYPE)
    b0 = torch.as_tensor(b0, dtype=DTYPE)
    check_same_shape(a0=a0, b0=b0)
    n = a0.numel()

    def update(th: Tensor) -> Tensor:
        return grad_and_value(lambda t: product_loss(t[:n], t[n:]), th)[0]

    def charge(th: Tensor) -> float:
        return float(th[:n].pow(2).sum() - th[n:].pow(2).sum())

    def lprime(th: Tensor) -> float:
        return float(-torch.sigmoid(-(th[:n] * th[n:]).sum()))

    th_gd = th_flow = torch.cat([a0, b0])
    d_gd, d_flow, lp = [charge(th_gd)], [charge(th_flow)], [lprime(th_gd)]
    for _ in range(n_steps):
        th_gd = gd_step(update, th_gd, eta)
        if flow:
            th_flow = flow_rk4(update, th_flow, eta, n_sub)
        d_gd.append(charge(th_gd))
        d_flow.append(charge(th_flow))
        lp.append(lprime(th_gd))
    lp = np.asarray(lp)
    # prediction integrated along the GD trajectory: log D(t) = log D0 - eta * sum eta l'^2
    log_pred = np.concatenate([[0.0], -np.cumsum(eta ** 2 * lp[:-1] ** 2)])
    return dict(time=eta * np.arange(n_steps + 1), d_gd=np.asarray(d_gd),
                d_flow=np.asarray(d_flow) if flow else np.full(n_steps + 1, np.nan),
                d_pred=d_gd[0] * np.exp(log_pred), lprime=lp)


def drift_rate_ratio(eta: float, n_steps: int, **kw) -> float:
    """measured log(D_end/D_0) for GD over the modified-flow prediction; -> 1 as eta -> 0."""
    r = balance_drift(eta, n_steps, flow=False, **kw)
    return float(np.log(r["d_gd"][-1] / r["d_gd"][0]) / np.log(r["d_pred"][-1] / r["d_pred"][0]))


def symmetry_defects(eta: float, dim: int = 3, seed: int = 0) -> pd.DataFrame:
    """How a rotation and a rescaling act on phi_DE and on a GD step, for L = |W2 W1 - M|^2/2.

    Both maps leave L invariant (W1 -> R W1, W2 -> W2 R^T; W1 -> c W1, W2 -> W2/c). `phi_change` is the
    relative change of phi_DE under the map; `equivariance` is |GD(g theta) - g GD(theta)| / |eta U|.
    Rotations: both ~ rounding. Rescaling: both O(1).
    """
    eta = check_eta(eta)
    g = torch.Generator().manual_seed(seed)
    target = torch.randn(dim, dim, generator=g, dtype=DTYPE)
    w1 = torch.randn(dim, dim, generator=g, dtype=DTYPE)
    w2 = torch.randn(dim, dim, generator=g, dtype=DTYPE)
    rot, _ = torch.linalg.qr(torch.randn(dim, dim, generator=g, dtype=DTYPE))
    nn_ = dim * dim

    def loss(th: Tensor) -> Tensor:
        return 0.5 * (th[nn_:].view(dim, dim) @ th[:nn_].view(dim, dim) - target).pow(2).sum()

    pb = Problem("two-layer linear", loss, torch.cat([w1.flatten(), w2.flatten()]))
    maps = {
        "rotation": lambda th: torch.cat([(rot @ th[:nn_].view(dim, dim)).flatten(),
                                          (th[nn_:].view(dim, dim) @ rot.T).flatten()]),
        "rescaling (c=2)": lambda th: torch.cat([2.0 * th[:nn_], th[nn_:] / 2.0]),
    }
    th = pb.theta0
    rows = []
    for name, gmap in maps.items():
        step = eta * pb.update(th)
        rows.append(dict(
            map=name,
            loss_change=abs(float(pb.loss(gmap(th)) - pb.loss(th))) / float(pb.loss(th)),
            phi_change=abs(pb.phi(gmap(th), eta) - pb.phi(th, eta)) / pb.phi(th, eta),
            equivariance=float((gd_step(pb.update, gmap(th), eta) - gmap(gd_step(pb.update, th, eta))).norm())
            / float(step.norm()),
        ))
    return pd.DataFrame(rows)


def drift_table(etas: Sequence[float], total_time: float, **kw) -> pd.DataFrame:
    """measured log-drift of |a|^2 - |b|^2 over the modified-flow prediction, for several eta."""
    rows = []
    for eta in etas:
        n = max(1, int(round(total_time / eta)))
        r = balance_drift(eta, n, flow=False, **kw)
        measured = float(np.log(r["d_gd"][-1] / r["d_gd"][0]))
        predicted = float(np.log(r["d_pred"][-1] / r["d_pred"][0]))
        rows.append(dict(eta=eta, log_drift_measured=measured, log_drift_predicted=predicted,
                         ratio=measured / predicted, error=abs(measured / predicted - 1)))
    return pd.DataFrame(rows)
