"""Training is irreversible: the four potentials of a finite step, measured.

A trunk can be run backwards exactly; the *training process* cannot. For an update

    theta' = theta - eta * U(theta),        J = dU/dtheta,

the finite step eta breaks time-reversal symmetry, and four different arguments all find the same price for it,
a potential phi = (eta/4) |U|^2 added to the loss:

* backward error analysis (DE): one step equals gradient flow on L + phi_DE for a time eta, to O(eta^3);
* the time-reversal defect (TA): a step forward then a step with -eta lands at theta - 2 eta grad(phi_TA);
* time renormalisation (TR): halving the step k times builds a coupling g(k) = (1 - 2^-k)/4, phi_TR = g eta |U|^2;
* stochastic thermodynamics (ST): with noise of temperature T, T * (entropy production) contains the increment
  of phi_ST = (eta/4) |U|^2, exactly.

This module holds the small test problems, the measurement of each potential on real trajectories (float64,
double backward for the J U products), the rescaling-symmetry drift, and the learning-rate shock experiment on a
tiny causal transformer and a linear perceptron. It depends only on torch, numpy and pandas.

Conventions: DE, TA and TR are compared through their *gradient*, a vector m measured from trajectories
against p = grad (eta/4)|U|^2 = (eta/2) J U (J is symmetric for U = grad L); ST through its increment per step,
m = T Sigma + Delta L against p = Delta (eta/4)|U|^2. Over the points of a trajectory two numbers summarise
the match: the relative error  sqrt(sum |m - p|^2 / sum |p|^2)  (the vector form of |measured/predicted - 1|,
O(eta)) and the projection ratio  sum <m, p> / sum |p|^2  (-> 1).
"""
from __future__ import annotations

import contextlib
import copy
import math
from dataclasses import dataclass, replace
from typing import Callable, Iterable, NamedTuple, Sequence

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import Tensor, nn

DTYPE = torch.float64
Field = Callable[[Tensor], Tensor]

POTENTIALS = ("DE", "TA", "TR", "ST")


# ----------------------------------------------------------------------------------------------------------
# input checks: fail early, and say what to do
# ----------------------------------------------------------------------------------------------------------

def _check_eta(eta: float, name: str = "eta") -> float:
    if not isinstance(eta, (int, float)) or not math.isfinite(eta) or eta <= 0:
        raise ValueError(f"{name} must be a positive finite step size, got {eta!r}; the sign of the step is "
                         "the arrow of time, so pass a positive eta and use the reverse-step functions for -eta")
    return float(eta)


def _check_vector(x: Tensor, name: str) -> Tensor:
    if not isinstance(x, Tensor) or x.dim() != 1:
        raise ValueError(f"{name} must be a 1-D tensor (flatten the parameters first), got "
                         f"{type(x).__name__} with shape {getattr(x, 'shape', None)}")
    return x


def _check_same_shape(**tensors: Tensor) -> None:
    shapes = {k: tuple(v.shape) for k, v in tensors.items()}
    if len(set(shapes.values())) != 1:
        raise ValueError(f"shapes must match, got {shapes}: all states and update vectors live in the same "
                         "parameter space")


def _check_positive_int(n: int, name: str, minimum: int = 1) -> int:
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

def _grad_and_value(loss: Callable[[Tensor], Tensor], theta: Tensor) -> tuple[Tensor, Tensor]:
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

    def update(self, theta: Tensor) -> Tensor:
        return _grad_and_value(self.loss, theta)[0]

    def update_and_loss(self, theta: Tensor) -> tuple[Tensor, Tensor]:
        return _grad_and_value(self.loss, theta)

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
        return float(_check_eta(eta) / 4 * self.update(theta).pow(2).sum())


def quadratic_problem(dim: int = 8, seed: int = 0, spectrum: tuple[float, float] = (0.2, 1.0)) -> Problem:
    """L = theta.A.theta/2 with A symmetric positive definite, eigenvalues spread over `spectrum`."""
    _check_positive_int(dim, "dim")
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

    def loss(w: Tensor) -> Tensor:
        z = x @ w
        return (F.softplus(z) - y * z).mean() + 0.5 * weight_decay * w @ w

    return Problem("logistic", loss, theta0)


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

    def loss(th: Tensor) -> Tensor:
        w1, b1, w2, b2 = torch.split(th, sizes)
        h = torch.tanh(x @ w1.view(hidden, 2).T + b1)
        return 0.5 * ((h @ w2 + b2) - y).pow(2).mean()

    return Problem("mlp", loss, theta0)


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


# ----------------------------------------------------------------------------------------------------------
# steps, flows and round trips
# ----------------------------------------------------------------------------------------------------------

def gd_step(update: Field, theta: Tensor, eta: float) -> Tensor:
    """One step theta - eta U(theta). `eta` may be negative here: that is the time-reversed step."""
    if not math.isfinite(eta):
        raise ValueError(f"eta must be finite, got {eta!r}")
    return theta - eta * update(theta)


def gd_trajectory(problem: Problem, eta: float, n_steps: int, theta0: Tensor | None = None) -> Tensor:
    """The visited points of plain gradient descent, shape (n_steps + 1, dim)."""
    eta = _check_eta(eta)
    n_steps = _check_positive_int(n_steps, "n_steps", 0)
    theta = _check_vector(problem.theta0 if theta0 is None else theta0, "theta0")
    out = [theta]
    for _ in range(n_steps):
        theta = gd_step(problem.update, theta, eta)
        out.append(theta)
    return torch.stack(out)


def flow_rk4(update: Field, theta: Tensor, time: float, n_sub: int = 16) -> Tensor:
    """Gradient flow d theta/dt = -U(theta) integrated for `time` with n_sub classical RK4 steps."""
    time = _check_eta(time, "time")
    n_sub = _check_positive_int(n_sub, "n_sub")
    h = time / n_sub
    for _ in range(n_sub):
        k1 = -update(theta)
        k2 = -update(theta + 0.5 * h * k1)
        k3 = -update(theta + 0.5 * h * k2)
        k4 = -update(theta + h * k3)
        theta = theta + (h / 6) * (k1 + 2 * k2 + 2 * k3 + k4)
    return theta


def round_trip(update: Field, theta: Tensor, eta: float) -> Tensor:
    """A step with +eta, then a step with -eta from the new point. Gradient flow would come back exactly."""
    eta = _check_eta(eta)
    return gd_step(update, gd_step(update, theta, eta), -eta)


def quadratic_round_trip_prediction(a: Tensor, theta: Tensor, eta: float) -> Tensor:
    """For L = theta.A.theta/2 the round trip is exactly theta - eta^2 A^2 theta."""
    eta = _check_eta(eta)
    if a.dim() != 2 or a.shape[0] != a.shape[1] or a.shape[1] != theta.shape[-1]:
        raise ValueError(f"A must be square and match theta: A {tuple(a.shape)}, theta {tuple(theta.shape)}")
    return theta - eta ** 2 * (a @ (a @ theta))


def fine_steps(update: Field, theta: Tensor, eta: float, k: int) -> Tensor:
    """Cover a time eta * max(1, 2^-k) with steps of eta * 2^-k of the bare field U.

    k >= 0: 2^k steps of eta/2^k (the step halved k times). k < 0: one step of eta * 2^|k|.
    """
    eta = _check_eta(eta)
    if k >= 0:
        h = eta / 2 ** k
        for _ in range(2 ** k):
            theta = gd_step(update, theta, h)
        return theta
    return gd_step(update, theta, eta * 2 ** (-k))


# ----------------------------------------------------------------------------------------------------------
# the theory, as functions
# ----------------------------------------------------------------------------------------------------------

def grad_phi(problem: Problem, theta: Tensor, eta: float) -> Tensor:
    """grad (eta/4)|U|^2 = (eta/2) J U, the vector every potential is compared against."""
    return _check_eta(eta) / 2 * problem.ju(theta)


def modified_update(problem: Problem, eta: float) -> Field:
    """U_hat = U + (eta/2) J U, the first-order modified field of backward error analysis."""
    eta = _check_eta(eta)
    return lambda th: problem.update(th) + eta / 2 * problem.ju(th)


def coupling(k: int | float) -> float:
    """Closed form of the renormalised coupling g(k) = (1 - 2^-k)/4 (k may be negative: coarse-graining)."""
    return (1.0 - 2.0 ** (-k)) / 4.0


def coupling_recursion(k: int) -> float:
    """g(k) by iterating the renormalisation map from g(0) = 0.

    Finer (k -> k+1): two steps of eta_k/2 must equal one of eta_k, so U_{k+1} = U_k + (eta_k/4) J U U, i.e.
    g <- (g + 1/4)/2, a contraction to the fixed point 1/4 (the continuum limit).
    Coarser (k -> k-1): the inverse map g <- 2 g - 1/4, which runs away from 1/4 (coarse-graining diverges).
    """
    if not isinstance(k, (int, np.integer)):
        raise ValueError(f"k must be an integer number of step halvings, got {k!r}")
    g = 0.0
    for _ in range(abs(int(k))):
        g = (g + 0.25) / 2 if k > 0 else 2 * g - 0.25
    return g


def renormalised_potential(loss: Callable[[Tensor], Tensor], eta: float, k: int) -> Callable[[Tensor], Tensor]:
    """F_k with U_k = grad F_k: 2^k steps of eta/2^k with U_k reproduce one step of eta with U = grad L.

    The recursion U_{j+1} = U_j + (eta_j/4) J_j U_j keeps U a gradient at every level, because
    J U = grad |U|^2 / 2 for a gradient field:  F_{j+1} = F_j + (eta_j/8) |grad F_j|^2,  eta_j = eta/2^j.
    To first order F_k = L + g(k) eta |U|^2. The returned function must see a theta that requires grad;
    every level adds a double backward, so keep k small.
    """
    eta = _check_eta(eta)
    k = _check_positive_int(k, "k", 0)
    potential = loss
    for level in range(k):
        def refined(theta: Tensor, prev: Callable[[Tensor], Tensor] = potential,
                    eta_j: float = eta / 2 ** level) -> Tensor:
            value = prev(theta)
            (g,) = torch.autograd.grad(value, theta, create_graph=True)
            return value + eta_j / 8 * g.pow(2).sum()

        potential = refined
    return potential


def renormalised_update(loss: Callable[[Tensor], Tensor], eta: float, k: int) -> Field:
    """U_k = grad F_k (see `renormalised_potential`), as a plain field theta -> U_k(theta)."""
    potential = renormalised_potential(loss, eta, k)
    return lambda theta: _grad_and_value(potential, theta)[0]


def entropy_production(theta: Tensor, theta_next: Tensor, u: Tensor, u_next: Tensor, eta: float,
                       temperature: float) -> Tensor:
    """Sigma = log p(theta'|theta) - log p(theta|theta'), from the Gaussian transition densities themselves.

    The forward kernel is N(theta - eta U(theta), 2 eta T); the backward one starts at theta'. Works on batches
    (leading dimensions) and sums over the last one.
    """
    eta = _check_eta(eta)
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0 for the densities to exist, got {temperature!r}; "
                         "use entropy_production_identity for the T -> 0 limit of T * Sigma")
    _check_same_shape(theta=theta, theta_next=theta_next, u=u, u_next=u_next)
    sigma = math.sqrt(2 * eta * temperature)
    fwd = torch.distributions.Normal(theta - eta * u, sigma).log_prob(theta_next).sum(-1)
    bwd = torch.distributions.Normal(theta_next - eta * u_next, sigma).log_prob(theta).sum(-1)
    return fwd - bwd


def entropy_production_identity(theta: Tensor, theta_next: Tensor, u: Tensor, u_next: Tensor,
                                eta: float) -> Tensor:
    """T Sigma = -Delta.(U + U')/2 + (eta/4)(|U'|^2 - |U|^2), exact for any field U and any noise.

    The first term is the trapezoid rule for the heat -int U.dtheta (= -Delta L for U = grad L, up to
    O(Delta^3)); the second is the increment of phi_ST = (eta/4)|U|^2.
    """
    eta = _check_eta(eta)
    _check_same_shape(theta=theta, theta_next=theta_next, u=u, u_next=u_next)
    delta = theta_next - theta
    heat = -(delta * (u + u_next)).sum(-1) / 2
    return heat + eta / 4 * (u_next.pow(2).sum(-1) - u.pow(2).sum(-1))


# ----------------------------------------------------------------------------------------------------------
# measuring the four potentials along real trajectories
# ----------------------------------------------------------------------------------------------------------

class Measurement(NamedTuple):
    """measured vs predicted for one potential: the projection ratio and the relative error."""

    ratio: float        # sum <m, p> / sum |p|^2            -> 1
    error: float        # sqrt(sum |m - p|^2 / sum |p|^2)    -> 0, the vector form of |measured/predicted - 1|


def compare(measured: Sequence[Tensor], predicted: Sequence[Tensor]) -> Measurement:
    """Both summaries of how well measured vectors match predicted ones."""
    ratio = projection_ratio(measured, predicted)
    num = sum(float((m - p).pow(2).sum()) for m, p in zip(measured, predicted))
    den = sum(float(p.pow(2).sum()) for p in predicted)
    return Measurement(ratio, math.sqrt(num / den))


def projection_ratio(measured: Sequence[Tensor], predicted: Sequence[Tensor]) -> float:
    """sum <m, p> / sum |p|^2: 1 when the measured vectors equal the predicted ones."""
    if len(measured) != len(predicted) or not measured:
        raise ValueError("need the same, non-zero number of measured and predicted vectors")
    num = sum(float((m * p).sum()) for m, p in zip(measured, predicted))
    den = sum(float(p.pow(2).sum()) for p in predicted)
    if den == 0.0:
        raise ValueError("the predicted vectors are all zero (the trajectory sits at a critical point)")
    return num / den


def measure_potentials(problem: Problem, eta: float, total_time: float, n_points: int = 6, k_tr: int = 6,
                       n_sub: int = 16, temperature: float = 0.0, seed: int = 0,
                       potentials: Sequence[str] = POTENTIALS) -> dict[str, Measurement]:
    """measured vs predicted for the four potentials along one gradient-descent trajectory of step eta.

    The trajectory runs for `total_time` (so ~total_time/eta steps); the three vector potentials are
    measured at `n_points` points at fixed times along it, the stochastic one at every step.

    * DE: (flow_eta(theta) - GD(theta))/eta with the flow integrated by RK4, against (eta/2) J U.
    * TA: -(round_trip(theta) - theta)/(2 eta), against (eta/2) J U.
    * TR: (2^k steps of eta/2^k - one step of eta)/eta, against 4 g(k) (eta/2) J U.
    * ST: at every step, T Sigma + L(theta') - L(theta), against phi(theta') - phi(theta).

    `potentials` picks a subset (the vector ones cost extra gradient evaluations at each point).
    """
    eta = _check_eta(eta)
    total_time = _check_eta(total_time, "total_time")
    n_points = _check_positive_int(n_points, "n_points")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature!r}")
    unknown = set(potentials) - set(POTENTIALS)
    if unknown or not potentials:
        raise ValueError(f"potentials must be a non-empty subset of {POTENTIALS}, got {potentials!r}")
    if "TR" in potentials:
        _check_positive_int(k_tr, "k_tr (step halvings; g(0) = 0 leaves nothing to compare)")
    n_steps = max(1, int(round(total_time / eta)))
    # fixed times j * total_time / n_points, the same for every eta when n_points divides n_steps
    points = {int(round(j * n_steps / n_points)) for j in range(n_points)}
    gen = torch.Generator().manual_seed(seed)
    m = {p: [] for p in POTENTIALS}
    pred = {p: [] for p in POTENTIALS}
    g_tr = coupling(k_tr)
    theta = problem.theta0.clone()
    u, loss = problem.update_and_loss(theta)
    for i in range(n_steps):
        gd = theta - eta * u
        if i in points and set(potentials) - {"ST"}:
            p = eta / 2 * problem.ju(theta, u)
            if "DE" in potentials:
                m["DE"].append((flow_rk4(problem.update, theta, eta, n_sub) - gd) / eta)
                pred["DE"].append(p)
            if "TA" in potentials:
                m["TA"].append(-(gd + eta * problem.update(gd) - theta) / (2 * eta))
                pred["TA"].append(p)
            if "TR" in potentials:
                m["TR"].append((fine_steps(problem.update, theta, eta, k_tr) - gd) / eta)
                pred["TR"].append(4 * g_tr * p)
        nxt = gd if temperature == 0 else gd + math.sqrt(2 * eta * temperature) * torch.randn(
            theta.shape, generator=gen, dtype=theta.dtype)
        u_next, loss_next = problem.update_and_loss(nxt)
        if temperature == 0:
            t_sigma = entropy_production_identity(theta, nxt, u, u_next, eta)
        else:
            t_sigma = temperature * entropy_production(theta, nxt, u, u_next, eta, temperature)
        # the measured increment of phi_ST: T Sigma minus the heat, which is -Delta L for U = grad L
        m["ST"].append((t_sigma + loss_next - loss).reshape(1))
        pred["ST"].append((eta / 4 * (u_next.pow(2).sum() - u.pow(2).sum())).reshape(1))
        theta, u, loss = nxt, u_next, loss_next
    return {p: compare(m[p], pred[p]) for p in potentials}


def eta_grid(eta_max: float, n_etas: int) -> list[float]:
    """eta_max, eta_max/2, ... (n_etas values): each halving should halve the relative error."""
    eta_max = _check_eta(eta_max, "eta_max")
    return [eta_max / 2 ** j for j in range(_check_positive_int(n_etas, "n_etas"))]


def potential_sweep(problems: Iterable[Problem], n_etas: int = 6, stability: float = 0.5,
                    total_steps_at_max: int = 12, n_points: int = 6, k_tr: int = 6, n_sub: int = 16,
                    progress: Callable | None = None) -> pd.DataFrame:
    """measured/predicted of every potential, for every problem, over a halving grid of eta.

    eta_max = stability / (top Hessian eigenvalue at theta0); each trajectory runs for the same time
    total_steps_at_max * eta_max, so the points measured are (nearly) the same for every eta.
    Returns one row per (problem, potential, eta) with the projection `ratio` and the relative `error`.
    """
    with torch_threads(1):
        return _potential_sweep(list(problems), n_etas, stability, total_steps_at_max, n_points, k_tr, n_sub,
                                progress)


def _potential_sweep(problems: list[Problem], n_etas: int, stability: float, total_steps_at_max: int,
                     n_points: int, k_tr: int, n_sub: int, progress: Callable | None) -> pd.DataFrame:
    rows = []
    work = [(pb, eta) for pb in problems
            for eta in eta_grid(stability / top_curvature(pb), n_etas)]
    it = progress(work) if progress is not None else work
    t_total = {pb.name: stability / top_curvature(pb) * total_steps_at_max for pb in problems}
    for pb, eta in it:
        ratios = measure_potentials(pb, eta, t_total[pb.name], n_points=n_points, k_tr=k_tr, n_sub=n_sub)
        for pot, r in ratios.items():
            rows.append(dict(problem=pb.name, potential=pot, eta=eta, ratio=r.ratio, error=r.error))
    return pd.DataFrame(rows)


ROUNDING = 1e-9   # a relative error below this is "exact to rounding": no power law to fit


def loglog_slope(etas: Sequence[float], errors: Sequence[float], tail: int | None = None) -> float | None:
    """Least-squares slope of log(error) against log eta; None when the errors are at rounding level.

    `tail` fits only the `tail` smallest etas: the O(eta) law is asymptotic, and at the largest steps the
    O(eta^2) terms can still compete with the leading one.
    """
    etas, errors = np.asarray(etas, float), np.asarray(errors, float)
    if etas.shape != errors.shape or etas.size < 2:
        raise ValueError(f"need at least two matching (eta, error) pairs, got {etas.shape} and {errors.shape}")
    if tail is not None:
        if tail < 2:
            raise ValueError(f"tail must keep at least two points, got {tail}")
        order = np.argsort(etas)[:tail]
        etas, errors = etas[order], errors[order]
    keep = errors >= ROUNDING
    if keep.sum() < 2:
        return None
    return float(np.polyfit(np.log(etas[keep]), np.log(errors[keep]), 1)[0])


def slope_table(sweep: pd.DataFrame, tail: int | None = None) -> pd.DataFrame:
    """One row per (problem, potential): fitted slope of the relative error (None where exact) and its levels.

    `slope` fits every eta; `slope_tail` only the smallest half (at least three), the asymptotic regime.
    """
    rows = []
    for (pb, pot), df in sweep.groupby(["problem", "potential"], sort=False):
        n_tail = tail if tail is not None else max(3, len(df) // 2)
        s_all = loglog_slope(df["eta"], df["error"])
        s_tail = loglog_slope(df["eta"], df["error"], tail=min(n_tail, len(df)))
        rows.append(dict(problem=pb, potential=pot, slope=s_all, slope_tail=s_tail,
                         exact=s_all is None and s_tail is None,
                         max_error=float(df["error"].max()),
                         error_at_smallest_eta=float(df.sort_values("eta")["error"].iloc[0])))
    return pd.DataFrame(rows)


def measure_coupling(problem: Problem, eta: float, ks: Sequence[int], theta: Tensor | None = None) -> list[float]:
    """g(k) measured by step-halving: project (level-k steps - level-0 steps)/T on 2 eta J U.

    Over a time T = eta * max(1, 2^-k), stepping with the bare U at step eta 2^-k differs from stepping at
    step eta by T (U_k - U) = T * 2 g(k) eta J U, to leading order.
    """
    eta = _check_eta(eta)
    theta = problem.theta0 if theta is None else theta
    ju = problem.ju(theta)
    out = []
    for k in ks:
        k = int(k)
        horizon = eta * max(1.0, 2.0 ** (-k))
        level0 = theta                      # the reference: steps of eta over the same horizon
        for _ in range(2 ** (-k) if k < 0 else 1):
            level0 = gd_step(problem.update, level0, eta)
        diff = fine_steps(problem.update, theta, eta, k) - level0
        out.append(float((diff / horizon * ju).sum()) / (2 * eta * float(ju.pow(2).sum())))
    return out


def renormalisation_mismatch(problem: Problem, eta: float, k: int, renormalised: bool) -> float:
    """|2^k steps of eta/2^k with U_k (or the bare U) - one step of eta with U| at theta0.

    With the renormalised field the mismatch is O(eta^3); with the bare field it is O(eta^2).
    """
    eta = _check_eta(eta)
    f = renormalised_update(problem.loss, eta, k) if renormalised else problem.update
    fine = fine_steps(f, problem.theta0, eta, k)
    return float((fine - gd_step(problem.update, problem.theta0, eta)).norm())


def stochastic_limit(problem: Problem, eta: float, total_time: float, temperatures: Sequence[float],
                     seed: int = 0) -> pd.DataFrame:
    """The ST ratio at decreasing temperature: the noise term dies out and the ratio tends to its T=0 value."""
    rows = []
    for t in temperatures:
        r = measure_potentials(problem, eta, total_time, temperature=t, seed=seed, potentials=("ST",))["ST"]
        rows.append(dict(temperature=t, ratio=r.ratio, error=r.error))
    return pd.DataFrame(rows)


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
    eta = _check_eta(eta)
    n_steps = _check_positive_int(n_steps, "n_steps")
    a0 = torch.as_tensor(a0, dtype=DTYPE)
    b0 = torch.as_tensor(b0, dtype=DTYPE)
    _check_same_shape(a0=a0, b0=b0)
    n = a0.numel()

    def update(th: Tensor) -> Tensor:
        return _grad_and_value(lambda t: product_loss(t[:n], t[n:]), th)[0]

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
    eta = _check_eta(eta)
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


# ----------------------------------------------------------------------------------------------------------
# anomalous fluctuations: a learning-rate shock on a tiny transformer and a linear perceptron
# ----------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class FluctuationSizes:
    """Geometry and schedule of the learning-rate shock experiment."""

    d_model: int = 128
    n_head: int = 4
    d_ff: int = 512
    n_layer: int = 2
    vocab_size: int = 64            # includes the separator token
    seq_len: int = 16               # tokens to reverse
    noise: float = 0.05             # label-noise rate on the reversed half
    batch_size: int = 64
    lr: float = 1e-3                # Adam, transformer
    linear_lr: float = 1e-2         # Adam, linear perceptron (it learns more slowly per step at equal LR)
    # extra base-LR multipliers, to see whether a verdict depends on where the model was trained
    linear_scan: tuple[float, ...] = (1 / 3, 3.0)
    transformer_scan: tuple[float, ...] = ()
    change_step: int = 1000         # the LR is multiplied by each factor here
    total_steps: int = 2000
    window: int = 200               # windowed variance of the update norm
    threads: int = 0                # intra-op threads for the run; 0 leaves torch's setting alone
    device: str = "cpu"             # "auto": CUDA when present

    def __post_init__(self) -> None:
        if self.d_model % self.n_head:
            raise ValueError(f"d_model={self.d_model} must be divisible by n_head={self.n_head}")
        if not 0 <= self.noise < 1:
            raise ValueError(f"noise must be a rate in [0, 1), got {self.noise}")
        if self.vocab_size < 3:
            raise ValueError("vocab_size must be >= 3 (two data tokens and a separator)")
        if self.device not in ("cpu", "cuda", "auto"):
            raise ValueError(f"device must be 'cpu', 'cuda' or 'auto', got {self.device!r}")
        if not 0 < self.change_step < self.total_steps:
            raise ValueError(f"need 0 < change_step < total_steps, got {self.change_step}, {self.total_steps}")
        if self.window < 3 or self.window > min(self.change_step, self.total_steps - self.change_step):
            raise ValueError(f"window={self.window} must be >= 3 and fit both before and after the change "
                             f"(<= {min(self.change_step, self.total_steps - self.change_step)})")

    def replace(self, **changes) -> "FluctuationSizes":
        return replace(self, **changes)


FLUCTUATION_SIZES: dict[str, FluctuationSizes] = {
    "smoke": FluctuationSizes(d_model=32, n_head=2, d_ff=64, vocab_size=16, seq_len=6, batch_size=16,
                              change_step=60, total_steps=120, window=30, threads=1),
    "cpu": FluctuationSizes(d_model=64, n_head=4, d_ff=256, vocab_size=32, seq_len=12, batch_size=32,
                            change_step=400, total_steps=800, window=150, threads=1),
    "t4": FluctuationSizes(transformer_scan=(1 / 3, 3.0), device="auto"),
    "full": FluctuationSizes(transformer_scan=(1 / 3, 3.0), device="auto"),
}


@dataclass(frozen=True)
class SweepSizes:
    """How much of the potential measurements a profile runs."""

    n_etas: int = 6
    total_steps_at_max: int = 12
    n_points: int = 6
    k_tr: int = 6
    n_sub: int = 16
    drift_steps: int = 400


SWEEP_SIZES: dict[str, SweepSizes] = {
    "smoke": SweepSizes(n_etas=4, total_steps_at_max=4, n_points=3, k_tr=4, n_sub=8, drift_steps=100),
    "cpu": SweepSizes(),
    "t4": SweepSizes(n_etas=7),
    "full": SweepSizes(n_etas=7),
}


def chapter_sizes(profile: str) -> tuple[SweepSizes, FluctuationSizes]:
    """The sizes this chapter runs at for a resolved profile name."""
    if profile not in FLUCTUATION_SIZES:
        raise ValueError(f"unknown profile {profile!r}: resolve 'auto' with rev.engine.profiles.resolve_profile_name "
                         f"first; known: {', '.join(FLUCTUATION_SIZES)}")
    return SWEEP_SIZES[profile], FLUCTUATION_SIZES[profile]


@dataclass
class ReversalBatch:
    inputs: Tensor          # (B, 2L)  source, separator, noisy reversed source (all but the last token)
    targets: Tensor         # (B, 2L)  next token; -100 (ignored) on the source half
    source: Tensor          # (B, L)
    labels: Tensor          # (B, L)   the noisy reversed source: what the loss asks for
    noise_mask: Tensor      # (B, L)   True where a label was corrupted


def reversal_batch(batch_size: int, seq_len: int, vocab_size: int, noise: float,
                   generator: torch.Generator | None = None) -> ReversalBatch:
    """Random sequences to be reversed; each label is replaced, with probability `noise`, by a different token.

    Data tokens are 0 .. vocab_size-2; vocab_size-1 is the separator. A corrupted label is drawn uniformly from
    the other data tokens, so exactly the chosen fraction of labels is wrong.
    """
    _check_positive_int(batch_size, "batch_size")
    _check_positive_int(seq_len, "seq_len")
    _check_positive_int(vocab_size, "vocab_size", 3)
    if not 0 <= noise < 1:
        raise ValueError(f"noise must be a rate in [0, 1), got {noise!r}")
    n_data = vocab_size - 1
    source = torch.randint(0, n_data, (batch_size, seq_len), generator=generator)
    clean = source.flip(1)
    mask = torch.rand(batch_size, seq_len, generator=generator) < noise
    shift = torch.randint(1, n_data, (batch_size, seq_len), generator=generator)
    labels = torch.where(mask, (clean + shift) % n_data, clean)
    sep = torch.full((batch_size, 1), n_data, dtype=source.dtype)
    seq = torch.cat([source, sep, labels], dim=1)
    targets = seq[:, 1:].clone()
    targets[:, :seq_len] = -100
    return ReversalBatch(seq[:, :-1], targets, source, labels, mask)


class _Block(nn.Module):
    def __init__(self, d_model: int, n_head: int, d_ff: int):
        super().__init__()
        self.n_head = n_head
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))

    def forward(self, x: Tensor) -> Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.n_head, d // self.n_head).permute(2, 0, 3, 1, 4)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.ff(self.ln2(x))


class TinyCausalTransformer(nn.Module):
    """A pre-LN causal transformer with learned positions; independent of the GPT module on purpose."""

    def __init__(self, sizes: FluctuationSizes):
        super().__init__()
        self.tok = nn.Embedding(sizes.vocab_size, sizes.d_model)
        self.pos = nn.Embedding(2 * sizes.seq_len, sizes.d_model)
        self.blocks = nn.ModuleList(_Block(sizes.d_model, sizes.n_head, sizes.d_ff) for _ in range(sizes.n_layer))
        self.ln = nn.LayerNorm(sizes.d_model)
        self.head = nn.Linear(sizes.d_model, sizes.vocab_size)

    def forward(self, idx: Tensor) -> Tensor:
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))

    def loss(self, batch: ReversalBatch) -> Tensor:
        logits = self(batch.inputs)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch.targets.reshape(-1), ignore_index=-100)


class LinearPerceptron(nn.Module):
    """One linear map from the one-hot source to the logits of every reversed position (softmax regression)."""

    def __init__(self, sizes: FluctuationSizes):
        super().__init__()
        self.seq_len, self.vocab = sizes.seq_len, sizes.vocab_size
        self.lin = nn.Linear(sizes.seq_len * sizes.vocab_size, sizes.seq_len * sizes.vocab_size)

    def loss(self, batch: ReversalBatch) -> Tensor:
        x = F.one_hot(batch.source, self.vocab).flatten(1).to(self.lin.weight.dtype)
        logits = self.lin(x).view(-1, self.seq_len, self.vocab)
        return F.cross_entropy(logits.reshape(-1, self.vocab), batch.labels.reshape(-1))


MODELS: dict[str, Callable[[FluctuationSizes], nn.Module]] = {
    "transformer": TinyCausalTransformer,
    "linear": LinearPerceptron,
}


def base_learning_rate(kind: str, sizes: FluctuationSizes) -> float:
    """The Adam learning rate a model trains at before the shock."""
    return sizes.linear_lr if kind == "linear" else sizes.lr


def _flat_params(model: nn.Module) -> Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def resolve_device(sizes: FluctuationSizes) -> torch.device:
    """Where the shock experiment runs ("auto": CUDA when present)."""
    if sizes.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if sizes.device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' but CUDA is not available; use device='auto' or 'cpu'")
    return torch.device(sizes.device)


def _to(batch: ReversalBatch, device: torch.device) -> ReversalBatch:
    return ReversalBatch(*(t.to(device) for t in (batch.inputs, batch.targets, batch.source, batch.labels,
                                                  batch.noise_mask)))


def _train(model: nn.Module, opt: torch.optim.Optimizer, sizes: FluctuationSizes, gen: torch.Generator,
           n_steps: int, log: dict[str, list], tick: Callable[[], None] | None) -> None:
    device = next(model.parameters()).device
    before = _flat_params(model)
    for _ in range(n_steps):
        # the data stream is drawn on the CPU, so it is the same sequence on every device
        batch = _to(reversal_batch(sizes.batch_size, sizes.seq_len, sizes.vocab_size, sizes.noise, gen), device)
        loss = model.loss(batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        after = _flat_params(model)
        log["update_norm"].append(float((after - before).norm()))
        log["loss"].append(loss.item())
        log["lr"].append(opt.param_groups[0]["lr"])
        before = after
        if tick is not None:
            tick()


def lr_shock_experiment(kind: str, sizes: FluctuationSizes, factors: Sequence[float] = (5.0, 0.2, 1.0),
                        seed: int = 0, progress: Callable | None = None) -> dict[float, pd.DataFrame]:
    """Train to `change_step` once, then continue with the LR multiplied by each factor (1.0 = control).

    The arms share the model, the Adam state and the data stream up to the change, so they are identical
    before it. Returns factor -> per-step log (step, loss, lr, update_norm).
    """
    if kind not in MODELS:
        raise ValueError(f"unknown model kind {kind!r}: choose one of {', '.join(MODELS)}")
    if not factors or any(not (f > 0 and math.isfinite(f)) for f in factors):
        raise ValueError(f"factors must be positive finite LR multipliers, got {factors!r}")
    with torch_threads(sizes.threads or torch.get_num_threads()):
        return _lr_shock(kind, sizes, factors, seed, progress)


def _lr_shock(kind: str, sizes: FluctuationSizes, factors: Sequence[float], seed: int,
              progress: Callable | None) -> dict[float, pd.DataFrame]:
    torch.manual_seed(seed)
    model = MODELS[kind](sizes).to(resolve_device(sizes))
    base_lr = base_learning_rate(kind, sizes)
    opt = torch.optim.Adam(model.parameters(), lr=base_lr)
    gen = torch.Generator().manual_seed(seed + 1)
    bar = progress(total=sizes.change_step + len(factors) * (sizes.total_steps - sizes.change_step),
                   desc=kind) if progress is not None else None
    tick = (lambda: bar.update(1)) if bar is not None else None
    shared: dict[str, list] = {"update_norm": [], "loss": [], "lr": []}
    _train(model, opt, sizes, gen, sizes.change_step, shared, tick)
    snapshot = (copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict()), gen.get_state())
    out = {}
    for f in factors:
        model.load_state_dict(snapshot[0])
        # a fresh copy every time: load_state_dict adopts the given moment tensors, which Adam then updates
        # in place, so reusing the snapshot would leak one arm's optimiser state into the next
        opt.load_state_dict(copy.deepcopy(snapshot[1]))
        gen.set_state(snapshot[2])
        for grp in opt.param_groups:
            grp["lr"] = base_lr * f
        log = {k: list(v) for k, v in shared.items()}
        _train(model, opt, sizes, gen, sizes.total_steps - sizes.change_step, log, tick)
        df = pd.DataFrame(log)
        df.insert(0, "step", np.arange(len(df)))
        out[float(f)] = df
    if bar is not None:
        bar.close()
    return out


def windowed_variance(x: Sequence[float], window: int, detrend: bool = True,
                      breaks: Sequence[int] = ()) -> np.ndarray:
    """Variance of x over the trailing `window` values (NaN until the window is full).

    With `detrend`, the variance is taken about the window's own least-squares line, so a slow drift of the
    update norm (training still settling) is not counted as fluctuation. `breaks` are indices where a new
    segment starts (the LR change): no window straddles one, so a jump in level is not read as variance.
    """
    window = _check_positive_int(window, "window", 3)
    x = np.asarray(x, float)
    edges = [0, *sorted(int(b) for b in breaks if 0 < b < len(x)), len(x)]
    out = np.full(len(x), np.nan)
    for lo, hi in zip(edges[:-1], edges[1:]):
        y = pd.Series(x[lo:hi])
        var = y.rolling(window).var()
        if detrend:
            t = pd.Series(np.arange(hi - lo, dtype=float))
            var = (var - y.rolling(window).cov(t) ** 2 / t.rolling(window).var()).clip(lower=0.0)
        out[lo:hi] = var.to_numpy()
    return out


def fluctuation_summary(runs: dict[float, pd.DataFrame], sizes: FluctuationSizes,
                        detrend: bool = True) -> pd.DataFrame:
    """Windowed variance of the update norm before and after the change, raw and / eta^2.

    `before` is the last full window before the change; `after` is the mean over every full window after
    it (windows restart at the change, so none straddles it). `response` is an arm's after/before ratio
    divided by the control's (factor 1), so slow drifts common to all arms cancel: > 1 means the arm
    fluctuates more than it would have at the old LR.
    """
    if 1.0 not in runs:
        raise ValueError("the runs need a control arm with factor 1.0")
    w, c = sizes.window, sizes.change_step
    rows = []
    for f, df in runs.items():
        u = df["update_norm"].to_numpy()
        un = u / df["lr"].to_numpy()
        raw = windowed_variance(u, w, detrend, breaks=(c,))
        norm = windowed_variance(un, w, detrend, breaks=(c,))
        after = slice(c + w - 1, None)
        rows.append(dict(factor=f, var_before=raw[c - 1], var_after=float(np.mean(raw[after])),
                         var_before_over_eta2=norm[c - 1], var_after_over_eta2=float(np.mean(norm[after])),
                         mean_step_over_eta_after=float(un[c:].mean()),
                         loss_before=float(df["loss"].to_numpy()[c - w:c].mean()),
                         loss_after=float(df["loss"].to_numpy()[-w:].mean())))
    out = pd.DataFrame(rows)
    out.insert(3, "ratio_raw", out["var_after"] / out["var_before"])
    out.insert(6, "ratio_over_eta2", out["var_after_over_eta2"] / out["var_before_over_eta2"])
    ctrl = out.set_index("factor").loc[1.0]
    out["response_raw"] = out["ratio_raw"] / ctrl["ratio_raw"]
    out["response_over_eta2"] = out["ratio_over_eta2"] / ctrl["ratio_over_eta2"]
    return out


def fluctuation_verdict(summary: pd.DataFrame, up: float = 5.0, down: float = 0.2,
                        column: str = "response_raw") -> str:
    """'ordinary' when the larger LR fluctuates more than the smaller one, 'anomalous' when less."""
    s = summary.set_index("factor")[column]
    if up not in s.index or down not in s.index:
        raise ValueError(f"the summary needs arms with factors {up} and {down}")
    return "ordinary" if s[up] > s[down] else "anomalous"


def noise_floor(sizes: FluctuationSizes) -> float:
    """The lowest expected loss on the answer half: the entropy of the noisy label given the clean one."""
    p, others = sizes.noise, sizes.vocab_size - 2
    return float(-(1 - p) * math.log(1 - p) - (p * math.log(p / others) if p > 0 else 0.0))


def response_row(summary: pd.DataFrame, base_lr: float) -> dict:
    """One line of a base-LR scan: the normalised responses to x5 and /5 and both verdicts."""
    by = summary.set_index("factor")
    return dict(base_lr=base_lr,
                response_x5_over_eta2=float(by.loc[5.0, "response_over_eta2"]),
                response_div5_over_eta2=float(by.loc[0.2, "response_over_eta2"]),
                loss_before=float(by.loc[1.0, "loss_before"]),
                loss_after_x5=float(by.loc[5.0, "loss_after"]),
                verdict_over_eta2=fluctuation_verdict(summary, column="response_over_eta2"),
                verdict_raw=fluctuation_verdict(summary, column="response_raw"))


def lr_scan(kind: str, sizes: FluctuationSizes, multipliers: Sequence[float] | None = None, seed: int = 0,
            progress: Callable | None = None, base_summary: pd.DataFrame | None = None) -> pd.DataFrame:
    """Shock responses of one model at several base learning rates (is its verdict robust?).

    Runs the model's base LR times each multiplier (default: the profile's `linear_scan` or
    `transformer_scan`); pass the summary of the run at the base LR itself as `base_summary` to include it
    without training it again. `converged` marks runs whose loss before the change was within 25% of the
    label-noise floor.
    """
    if multipliers is None:
        multipliers = sizes.linear_scan if kind == "linear" else sizes.transformer_scan
    base = base_learning_rate(kind, sizes)
    rows = [response_row(base_summary, base)] if base_summary is not None else []
    for mult in multipliers:
        s = sizes.replace(**{"linear_lr" if kind == "linear" else "lr": base * mult})
        summary = fluctuation_summary(lr_shock_experiment(kind, s, seed=seed, progress=progress), s)
        rows.append(response_row(summary, base * mult))
    if not rows:
        return pd.DataFrame(columns=["base_lr", "converged"])
    out = pd.DataFrame(rows).sort_values("base_lr").reset_index(drop=True)
    out.insert(1, "converged", out["loss_before"] < 1.25 * noise_floor(sizes))
    return out


# ----------------------------------------------------------------------------------------------------------
# small tables the chapter prints
# ----------------------------------------------------------------------------------------------------------

def round_trip_table(problem: Problem, etas: Sequence[float]) -> pd.DataFrame:
    """Quadratic round trip against theta - eta^2 A^2 theta; `miss_in_eps` is the miss in units of eps |theta|."""
    if problem.hessian is None:
        raise ValueError("the exact round-trip prediction needs a quadratic problem (problem.hessian)")
    rows = []
    for eta in etas:
        got = round_trip(problem.update, problem.theta0, eta)
        want = quadratic_round_trip_prediction(problem.hessian, problem.theta0, eta)
        defect = float((want - problem.theta0).norm())
        miss = float((got - want).norm())
        eps = torch.finfo(problem.theta0.dtype).eps * float(problem.theta0.norm())
        rows.append(dict(eta=eta, defect=defect, miss=miss, miss_in_eps=miss / eps))
    return pd.DataFrame(rows)


def entropy_identity_table(temperatures: Sequence[float], eta: float = 0.3, n: int = 1000, dim: int = 16,
                           seed: int = 0) -> pd.DataFrame:
    """T * Sigma from the Gaussian densities against the closed form, for random (non-gradient) fields U."""
    eta = _check_eta(eta)
    g = torch.Generator().manual_seed(seed)
    rows = []
    for t in temperatures:
        theta, u, u_next = (torch.randn(n, dim, generator=g, dtype=DTYPE) for _ in range(3))
        theta_next = theta - eta * u + math.sqrt(2 * eta * t) * torch.randn(n, dim, generator=g, dtype=DTYPE)
        lhs = t * entropy_production(theta, theta_next, u, u_next, eta, t)
        rhs = entropy_production_identity(theta, theta_next, u, u_next, eta)
        rows.append(dict(temperature=t, max_abs_T_sigma=float(rhs.abs().max()),
                         max_relative_miss=float(((lhs - rhs).abs() / rhs.abs().max()).max())))
    return pd.DataFrame(rows)


def coupling_table(problem: Problem, eta: float, ks: Sequence[int]) -> pd.DataFrame:
    """g(k): the recursion, the closed form and the step-halving measurement, side by side."""
    measured = measure_coupling(problem, eta, ks)
    return pd.DataFrame(dict(k=list(ks), g_recursion=[coupling_recursion(int(k)) for k in ks],
                             g_closed_form=[coupling(k) for k in ks], g_measured=measured))


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


def write_summary(path: str, summary: dict) -> None:
    """Write the chapter's measured numbers as JSON (for the report)."""
    import json
    from pathlib import Path

    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(summary, indent=2, default=float))
