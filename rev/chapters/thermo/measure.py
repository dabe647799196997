"""Notebook 08 (training irreversibility): the four potentials measured along real trajectories.

DE, TA and TR are compared through their *gradient*, a vector m measured from trajectories against
p = grad (eta/4)|U|^2 = (eta/2) J U; ST through its increment per step, m = T Sigma + Delta L against
p = Delta (eta/4)|U|^2. Two numbers summarise the match over a trajectory: the relative error
sqrt(sum |m - p|^2 / sum |p|^2) (O(eta)) and the projection ratio sum <m, p> / sum |p|^2 (-> 1). Also here:
the log-log slopes of those errors, the step-halving measurement of g(k), and the small tables the chapter prints.
"""
from __future__ import annotations

import math
from typing import Callable, Iterable, NamedTuple, Sequence

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from .defect import (coupling, coupling_recursion, entropy_production, entropy_production_identity, fine_steps,
                     flow_rk4, gd_step, quadratic_round_trip_prediction, renormalised_update, reverse_step,
                     round_trip)
from .problems import DTYPE, Field, Problem, check_eta, check_positive_int, top_curvature, torch_threads

POTENTIALS = ("DE", "TA", "TR", "ST")

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
                       potentials: Sequence[str] = POTENTIALS,
                       reverse: Callable[[Field, Tensor, float], Tensor] = reverse_step,
                       batches: Callable[[int], Problem] | None = None) -> dict[str, Measurement]:
    """measured vs predicted for the four potentials along one gradient-descent trajectory of step eta.

    The trajectory runs for `total_time` (so ~total_time/eta steps); the three vector potentials are
    measured at `n_points` points at fixed times along it, the stochastic one at every step.

    * DE: (flow_eta(theta) - GD(theta))/eta with the flow integrated by RK4, against (eta/2) J U.
    * TA: -(round_trip(theta) - theta)/(2 eta), against (eta/2) J U.
    * TR: (2^k steps of eta/2^k - one step of eta)/eta, against 4 g(k) (eta/2) J U.
    * ST: at every step, T Sigma + L(theta') - L(theta), against phi(theta') - phi(theta).

    `potentials` picks a subset (the vector ones cost extra gradient evaluations at each point). `reverse` is
    the time-reversed step TA uses, (update, theta, eta) -> theta + eta U(theta); exercise 08.3 swaps in a broken one.
    `batches(i)` is the problem of step i (an SGD path: the minibatch loss, see `minibatch_stream`); every
    potential of that step is then measured and predicted with its field U_B, so phi = (eta/4)|U_B|^2.
    """
    eta = check_eta(eta)
    total_time = check_eta(total_time, "total_time")
    n_points = check_positive_int(n_points, "n_points")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature!r}")
    unknown = set(potentials) - set(POTENTIALS)
    if unknown or not potentials:
        raise ValueError(f"potentials must be a non-empty subset of {POTENTIALS}, got {potentials!r}")
    if "TR" in potentials:
        check_positive_int(k_tr, "k_tr (step halvings; g(0) = 0 leaves nothing to compare)")
    n_steps = max(1, int(round(total_time / eta)))
    # fixed times j * total_time / n_points, the same for every eta when n_points divides n_steps
    points = {int(round(j * n_steps / n_points)) for j in range(n_points)}
    gen = torch.Generator().manual_seed(seed)
    m = {p: [] for p in POTENTIALS}
    pred = {p: [] for p in POTENTIALS}
    g_tr = coupling(k_tr)
    theta = problem.theta0.clone()
    pb = problem if batches is None else batches(0)
    u, loss = pb.update_and_loss(theta)
    for i in range(n_steps):
        gd = theta - eta * u
        if i in points and set(potentials) - {"ST"}:
            p = eta / 2 * pb.ju(theta, u)
            if "DE" in potentials:
                m["DE"].append((flow_rk4(pb.update, theta, eta, n_sub) - gd) / eta)
                pred["DE"].append(p)
            if "TA" in potentials:
                m["TA"].append(-(reverse(pb.update, gd, eta) - theta) / (2 * eta))
                pred["TA"].append(p)
            if "TR" in potentials:
                m["TR"].append((fine_steps(pb.update, theta, eta, k_tr) - gd) / eta)
                pred["TR"].append(4 * g_tr * p)
        nxt = gd if temperature == 0 else gd + math.sqrt(2 * eta * temperature) * torch.randn(
            theta.shape, generator=gen, dtype=theta.dtype)
        # the step's own field at both ends: the reversed transition is judged with the same minibatch
        u_next, loss_next = pb.update_and_loss(nxt)
        if temperature == 0:
            t_sigma = entropy_production_identity(theta, nxt, u, u_next, eta)
        else:
            t_sigma = temperature * entropy_production(theta, nxt, u, u_next, eta, temperature)
        # the measured increment of phi_ST: T Sigma minus the heat, which is -Delta L for U = grad L
        m["ST"].append((t_sigma + loss_next - loss).reshape(1))
        pred["ST"].append((eta / 4 * (u_next.pow(2).sum() - u.pow(2).sum())).reshape(1))
        theta, u, loss = nxt, u_next, loss_next
        if batches is not None:
            pb = batches(i + 1)
            u, loss = pb.update_and_loss(theta)
    return {p: compare(m[p], pred[p]) for p in potentials}


def minibatch_stream(problem: Problem, batch_size: int, seed: int = 0) -> Callable[[int], Problem]:
    """step -> the problem on that step's minibatch (rows drawn without replacement, reproducible per step)."""
    check_positive_int(batch_size, "batch_size")
    if not 0 < batch_size <= problem.n_samples:
        raise ValueError(f"batch_size must be in 1..{problem.n_samples} for {problem.name}, got {batch_size}")

    def batch(step: int) -> Problem:
        g = torch.Generator().manual_seed(1_000_003 * seed + step)
        return problem.minibatch(torch.randperm(problem.n_samples, generator=g)[:batch_size])
    return batch


def eta_grid(eta_max: float, n_etas: int) -> list[float]:
    """eta_max, eta_max/2, ... (n_etas values): each halving should halve the relative error."""
    eta_max = check_eta(eta_max, "eta_max")
    return [eta_max / 2 ** j for j in range(check_positive_int(n_etas, "n_etas"))]


def potential_sweep(problems: Iterable[Problem], n_etas: int = 6, stability: float = 0.5,
                    total_steps_at_max: int = 12, n_points: int = 6, k_tr: int = 6, n_sub: int = 16,
                    progress: Callable | None = None, batch_size: int | None = None,
                    seed: int = 0) -> pd.DataFrame:
    """measured/predicted of every potential, for every problem, over a halving grid of eta.

    eta_max = stability / (top Hessian eigenvalue at theta0); each trajectory runs for the same time
    total_steps_at_max * eta_max, so the points measured are (nearly) the same for every eta.
    With `batch_size` the trajectories are SGD paths (minibatch noise, the paper's Figure 1) and problems
    without data are left out. Returns one row per (problem, potential, eta) with the projection `ratio` and
    the relative `error`.
    """
    if batch_size is not None:
        problems = [pb for pb in problems if pb.n_samples]
    with torch_threads(1):
        return _potential_sweep(list(problems), n_etas, stability, total_steps_at_max, n_points, k_tr, n_sub,
                                progress, batch_size, seed)


def _potential_sweep(problems: list[Problem], n_etas: int, stability: float, total_steps_at_max: int,
                     n_points: int, k_tr: int, n_sub: int, progress: Callable | None, batch_size: int | None,
                     seed: int) -> pd.DataFrame:
    rows = []
    work = [(pb, eta) for pb in problems
            for eta in eta_grid(stability / top_curvature(pb), n_etas)]
    it = progress(work) if progress is not None else work
    t_total = {pb.name: stability / top_curvature(pb) * total_steps_at_max for pb in problems}
    for pb, eta in it:
        batches = None if batch_size is None else minibatch_stream(pb, batch_size, seed)
        ratios = measure_potentials(pb, eta, t_total[pb.name], n_points=n_points, k_tr=k_tr, n_sub=n_sub,
                                    batches=batches)
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
    eta = check_eta(eta)
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
    eta = check_eta(eta)
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
    eta = check_eta(eta)
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
