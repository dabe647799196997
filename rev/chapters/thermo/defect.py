"""Notebook 08 (training irreversibility): the finite step and its defect, and the theory as functions.

Steps, flows and round trips (a step forward then one with -eta), the first-order modified field of backward
error analysis, the renormalised coupling g(k), and the entropy production of a noisy step with its exact
identity. Every function here is a formula; `measure` compares them with trajectories.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch
from torch import Tensor

from .problems import (Field, Problem, check_eta, check_positive_int, check_same_shape, check_vector,
                       grad_and_value)

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
    eta = check_eta(eta)
    n_steps = check_positive_int(n_steps, "n_steps", 0)
    theta = check_vector(problem.theta0 if theta0 is None else theta0, "theta0")
    out = [theta]
    for _ in range(n_steps):
        theta = gd_step(problem.update, theta, eta)
        out.append(theta)
    return torch.stack(out)


def flow_rk4(update: Field, theta: Tensor, time: float, n_sub: int = 16) -> Tensor:
    """Gradient flow d theta/dt = -U(theta) integrated for `time` with n_sub classical RK4 steps."""
    time = check_eta(time, "time")
    n_sub = check_positive_int(n_sub, "n_sub")
    h = time / n_sub
    for _ in range(n_sub):
        k1 = -update(theta)
        k2 = -update(theta + 0.5 * h * k1)
        k3 = -update(theta + 0.5 * h * k2)
        k4 = -update(theta + h * k3)
        theta = theta + (h / 6) * (k1 + 2 * k2 + 2 * k3 + k4)
    return theta


def reverse_step(update: Field, theta: Tensor, eta: float) -> Tensor:
    """The time-reversed step theta + eta U(theta): a step with -eta."""
    return gd_step(update, theta, -check_eta(eta))


def round_trip(update: Field, theta: Tensor, eta: float) -> Tensor:
    """A step with +eta, then a step with -eta from the new point. Gradient flow would come back exactly."""
    eta = check_eta(eta)
    return reverse_step(update, gd_step(update, theta, eta), eta)


def quadratic_round_trip_prediction(a: Tensor, theta: Tensor, eta: float) -> Tensor:
    """For L = theta.A.theta/2 the round trip is exactly theta - eta^2 A^2 theta."""
    eta = check_eta(eta)
    if a.dim() != 2 or a.shape[0] != a.shape[1] or a.shape[1] != theta.shape[-1]:
        raise ValueError(f"A must be square and match theta: A {tuple(a.shape)}, theta {tuple(theta.shape)}")
    return theta - eta ** 2 * (a @ (a @ theta))


def fine_steps(update: Field, theta: Tensor, eta: float, k: int) -> Tensor:
    """Cover a time eta * max(1, 2^-k) with steps of eta * 2^-k of the bare field U.

    k >= 0: 2^k steps of eta/2^k (the step halved k times). k < 0: one step of eta * 2^|k|.
    """
    eta = check_eta(eta)
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
    return check_eta(eta) / 2 * problem.ju(theta)


def modified_update(problem: Problem, eta: float) -> Field:
    """U_hat = U + (eta/2) J U, the first-order modified field of backward error analysis."""
    eta = check_eta(eta)
    return lambda th: problem.update(th) + eta / 2 * problem.ju(th)


def coupling(k: int | float) -> float:
    """Closed form of the renormalised coupling g(k) = (1 - 2^-k)/4 (k may be negative: coarse-graining)."""
    return (1.0 - 2.0 ** (-k)) / 4.0


def coupling_recursion(k: int) -> float:
    """g(k) by iterating the renormalisation map from g(0) = 0.

    Finer (k -> k+1): two steps of eta_k/2 must equal one of eta_k, so U_{k+1} = U_k + (eta_k/4) J_k U_k, i.e.
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
    eta = check_eta(eta)
    k = check_positive_int(k, "k", 0)
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
    return lambda theta: grad_and_value(potential, theta)[0]


def entropy_production(theta: Tensor, theta_next: Tensor, u: Tensor, u_next: Tensor, eta: float,
                       temperature: float) -> Tensor:
    """Sigma = log p(theta'|theta) - log p(theta|theta'), from the Gaussian transition densities themselves.

    The forward kernel is N(theta - eta U(theta), 2 eta T); the backward one starts at theta'. Works on batches
    (leading dimensions) and sums over the last one.
    """
    eta = check_eta(eta)
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0 for the densities to exist, got {temperature!r}; "
                         "use entropy_production_identity for the T -> 0 limit of T * Sigma")
    check_same_shape(theta=theta, theta_next=theta_next, u=u, u_next=u_next)
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
    eta = check_eta(eta)
    check_same_shape(theta=theta, theta_next=theta_next, u=u, u_next=u_next)
    delta = theta_next - theta
    heat = -(delta * (u + u_next)).sum(-1) / 2
    return heat + eta / 4 * (u_next.pow(2).sum(-1) - u.pow(2).sum(-1))
