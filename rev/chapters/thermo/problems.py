"""Notebook 08 (training irreversibility): the small float64 test problems and the input checks.

A problem is a loss L(theta) on one flat float64 parameter vector, with U = grad L and the J U products
(Hessian-vector products by double backward) that every potential is compared through.
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

DTYPE = torch.float64
Field = Callable[[Tensor], Tensor]

# ----------------------------------------------------------------------------------------------------------
# input checks: fail early, and say what to do
# ----------------------------------------------------------------------------------------------------------

def check_eta(eta: float, name: str = "eta") -> float:
    if not isinstance(eta, (int, float)) or not math.isfinite(eta) or eta <= 0:
        raise ValueError(f"{name} must be a positive finite step size, got {eta!r}; the sign of the step is "
                         "the arrow of time, so pass a positive eta and use the reverse-step functions for -eta")
    return float(eta)


def check_vector(x: Tensor, name: str) -> Tensor:
    if not isinstance(x, Tensor) or x.dim() != 1:
        raise ValueError(f"{name} must be a 1-D tensor (flatten the parameters first), got "
                         f"{type(x).__name__} with shape {getattr(x, 'shape', None)}")
    return x


def check_same_shape(**tensors: Tensor) -> None:
    shapes = {k: tuple(v.shape) for k, v in tensors.items()}
    if len(set(shapes.values())) != 1:
        raise ValueError(f"shapes must match, got {shapes}: all states and update vectors live in the same "
                         "parameter space")


def check_positive_int(n: int, name: str, minimum: int = 1) -> int:
    if not isinstance(n, (int, np.integer)) or n < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {n!r}")
    return int(n)


@contextlib.contextmanager
def torch_threads(n: int):
    """Run a block with n intra-op threads. The float64 problems here are tiny: extra threads only add
    synchronisation cost (badly so on a shared CPU), so the measurements run single-threaded."""
    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


# ----------------------------------------------------------------------------------------------------------
# test problems: a loss of one flat float64 parameter vector
# ----------------------------------------------------------------------------------------------------------

def grad_and_value(loss: Callable[[Tensor], Tensor], theta: Tensor) -> tuple[Tensor, Tensor]:
    # plain autograd, not torch.func: no first-use set-up (seconds on a small CPU) for a tiny problem
    with torch.enable_grad():
        th = theta.detach().requires_grad_(True)
        value = loss(th)
        (g,) = torch.autograd.grad(value, th)
    return g, value.detach()


@dataclass
class Problem:
    """A loss L(theta) on a flat float64 vector, with U = grad L and J U = Hessian . grad L."""

    name: str
    loss: Callable[[Tensor], Tensor]
    theta0: Tensor
    hessian: Tensor | None = None            # known exactly only for the quadratic
    n_samples: int = 0                       # data points the loss averages over (0: no data, no minibatches)
    rows_loss: Callable[[Tensor, Tensor], Tensor] | None = None   # (theta, row indices) -> loss on those rows

    def minibatch(self, rows: Tensor) -> "Problem":
        """The same problem with the loss averaged over `rows` only: one SGD step's field."""
        if self.rows_loss is None:
            raise ValueError(f"the {self.name} problem has no data to draw minibatches from")
        rows_loss = self.rows_loss
        return Problem(f"{self.name}[{len(rows)}]", lambda th: rows_loss(th, rows), self.theta0)

    def update(self, theta: Tensor) -> Tensor:
        return grad_and_value(self.loss, theta)[0]

    def update_and_loss(self, theta: Tensor) -> tuple[Tensor, Tensor]:
        return grad_and_value(self.loss, theta)

    def hvp(self, theta: Tensor, v: Tensor) -> Tensor:
        """Hessian . v by double backward (the Hessian of a scalar is symmetric, so J v = H v)."""
        with torch.enable_grad():
            th = theta.detach().requires_grad_(True)
            (g,) = torch.autograd.grad(self.loss(th), th, create_graph=True)
            (hv,) = torch.autograd.grad(g, th, v)
        return hv

    def ju(self, theta: Tensor, u: Tensor | None = None) -> Tensor:
        """J U at theta."""
        u = self.update(theta) if u is None else u
        return self.hvp(theta, u)

    def phi(self, theta: Tensor, eta: float) -> float:
        """The predicted potential (eta/4) |U|^2."""
        return float(check_eta(eta) / 4 * self.update(theta).pow(2).sum())


def quadratic_problem(dim: int = 8, seed: int = 0, spectrum: tuple[float, float] = (0.2, 1.0)) -> Problem:
    """L = theta.A.theta/2 with A symmetric positive definite, eigenvalues spread over `spectrum`."""
    check_positive_int(dim, "dim")
    g = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(dim, dim, generator=g, dtype=DTYPE))
    lam = torch.linspace(spectrum[0], spectrum[1], dim, dtype=DTYPE)
    a = (q * lam) @ q.T
    a = (a + a.T) / 2
    theta0 = torch.randn(dim, generator=g, dtype=DTYPE)
    return Problem("quadratic", lambda th: 0.5 * th @ (a @ th), theta0, hessian=a)


def logistic_problem(n: int = 64, dim: int = 4, seed: int = 0, weight_decay: float = 1e-2) -> Problem:
    """Logistic regression on a noisy linear teacher, with a little L2 so the minimum is finite."""
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(n, dim, generator=g, dtype=DTYPE)
    w_star = 1.5 * torch.randn(dim, generator=g, dtype=DTYPE)
    y = torch.bernoulli(torch.sigmoid(x @ w_star), generator=g)
    theta0 = 0.5 * torch.randn(dim, generator=g, dtype=DTYPE)

    def rows_loss(w: Tensor, rows: Tensor) -> Tensor:
        z = x[rows] @ w
        return (F.softplus(z) - y[rows] * z).mean() + 0.5 * weight_decay * w @ w

    every = torch.arange(n)
    return Problem("logistic", lambda w: rows_loss(w, every), theta0, n_samples=n, rows_loss=rows_loss)


def mlp_problem(n: int = 48, hidden: int = 8, seed: int = 0) -> Problem:
    """A 2 -> hidden -> 1 tanh network regressing a smooth function (non-convex, non-quadratic)."""
    g = torch.Generator().manual_seed(seed + 2)
    x = 4 * torch.rand(n, 2, generator=g, dtype=DTYPE) - 2
    y = torch.sin(x[:, 0]) * torch.cos(0.5 * x[:, 1])
    sizes = [hidden * 2, hidden, hidden, 1]
    theta0 = torch.cat([torch.randn(hidden * 2, generator=g, dtype=DTYPE) / math.sqrt(2),
                        torch.zeros(hidden, dtype=DTYPE),
                        torch.randn(hidden, generator=g, dtype=DTYPE) / math.sqrt(hidden),
                        torch.zeros(1, dtype=DTYPE)])

    def rows_loss(th: Tensor, rows: Tensor) -> Tensor:
        w1, b1, w2, b2 = torch.split(th, sizes)
        h = torch.tanh(x[rows] @ w1.view(hidden, 2).T + b1)
        return 0.5 * ((h @ w2 + b2) - y[rows]).pow(2).mean()

    every = torch.arange(n)
    return Problem("mlp", lambda th: rows_loss(th, every), theta0, n_samples=n, rows_loss=rows_loss)


def standard_problems(seed: int = 0) -> list[Problem]:
    """The three problems of the chapter: quadratic, logistic regression, tiny MLP."""
    return [quadratic_problem(seed=seed), logistic_problem(seed=seed), mlp_problem(seed=seed)]


def top_curvature(problem: Problem, theta: Tensor | None = None, iters: int = 60) -> float:
    """Largest |eigenvalue| of the Hessian at theta, by power iteration on Hessian-vector products."""
    theta = problem.theta0 if theta is None else theta
    v = torch.ones_like(theta) / math.sqrt(theta.numel())
    lam = 0.0
    for _ in range(iters):
        hv = problem.hvp(theta, v)
        lam = float(hv.norm())
        if lam == 0.0:
            return 0.0
        v = hv / lam
    return lam
