"""Notebook 08 (training irreversibility): the checks of its exercises, and the measurement 08.2 predicts.

Each `check_*` takes the learner's function (or prediction), runs it against `rev`'s own measurement and raises
`AssertionError` with a message that says what is wrong and what to try (see `rev.chapters.shared.exercises`). All run
in well under a second on a CPU.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import pandas as pd
import torch
from torch import Tensor

from .defect import gd_step, reverse_step, round_trip
from .measure import POTENTIALS, loglog_slope, measure_potentials
from .problems import Field, Problem, logistic_problem, quadratic_problem, top_curvature, torch_threads


def check_round_trip_defect(predict: Callable[[Problem, Tensor, float], Tensor]) -> str:
    """Exercise 08.1: `predict(problem, theta, eta)` is the round-trip defect to second order, -eta^2 J U."""
    with torch_threads(1):
        quad, eta = quadratic_problem(dim=6, seed=3), 0.1
        theta = quad.theta0
        got = predict(quad, theta, eta)
        assert isinstance(got, Tensor) and got.shape == theta.shape, f"shape: return {tuple(theta.shape)}"
        true = round_trip(quad.update, theta, eta) - theta
        ratio = float((got * true).sum() / true.pow(2).sum())
        assert ratio > 0, "wrong sign"
        assert abs(ratio - 1) < 1e-6 and float((got - true).norm()) < 1e-9 * float(true.norm()) + 1e-15, (
            f"quadratic: {ratio:.3g} x true")
        lg = logistic_problem()
        etas = [0.4, 0.2, 0.1]
        miss = [float((predict(lg, lg.theta0, e) - (round_trip(lg.update, lg.theta0, e) - lg.theta0)).norm())
                for e in etas]
    slope = loglog_slope(etas, miss)
    assert slope is None or slope > 2.6, f"remainder O(eta^{slope:.1f})"
    return "exact" if slope is None else f"remainder O(eta^{slope:.1f})"


def defect_scaling(problem: Problem, etas: Sequence[float]) -> pd.DataFrame:
    """The round-trip defect |theta~ - theta| and the TA relative error against (eta/4)|U|^2, at theta0, per eta."""
    rows = []
    with torch_threads(1):
        for eta in etas:
            defect = float((round_trip(problem.update, problem.theta0, eta) - problem.theta0).norm())
            # one step over a time eta: TA is measured at theta0 only
            ta = measure_potentials(problem, eta, eta, n_points=1, potentials=("TA",))["TA"]
            rows.append(dict(eta=eta, defect=defect, ta_error=ta.error))
    return pd.DataFrame(rows)


def scaling_problem() -> tuple[Problem, list[float]]:
    """Exercise 08.2's problem and step sizes: logistic regression, eta from a quarter of the stability limit."""
    pb = logistic_problem()
    eta0 = 0.5 / top_curvature(pb)
    return pb, [eta0 / 2 ** j for j in range(4)]


SLOPE_MARGIN = 0.25   # how far a predicted log-log slope may lie from the measured one
SLOPE_KEYS = ("defect", "ta_error")


def check_defect_slopes(predicted: dict[str, float]) -> str:
    """Exercise 08.2: the predicted log-log slopes of the defect and of the TA error against eta, measured."""
    assert isinstance(predicted, dict) and set(predicted) == set(SLOPE_KEYS), f"keys {SLOPE_KEYS}"
    pb, etas = scaling_problem()
    df = defect_scaling(pb, etas)
    measured = {k: loglog_slope(df.eta, df[k]) for k in SLOPE_KEYS}
    for k, m in measured.items():
        # the answers are orders (integers); the measured TA slope (~0.84) sits below its order 1 before the
        # asymptote, so the margin is what keeps 1 and rejects 0.5 or 2
        assert abs(float(predicted[k]) - m) < SLOPE_MARGIN, f"{k}: slope {predicted[k]} predicted, {m:.2f} measured"
    return ", ".join(f"{k} {m:.2f}" for k, m in measured.items())


def check_backward_sign_break(broken: Callable[[Field, Tensor, float], Tensor], noticed: set[str]) -> str:
    """Exercise 08.3: a backward step with the wrong sign, and which potentials' measurements notice it."""
    with torch_threads(1):
        pb = logistic_problem()
        eta = 0.5 / top_curvature(pb)
        theta = pb.theta0
        step = broken(pb.update, theta, eta)
        assert isinstance(step, Tensor) and step.shape == theta.shape, "return a point"
        assert not torch.allclose(step, reverse_step(pb.update, theta, eta)), "flip the sign"
        assert torch.allclose(step, gd_step(pb.update, theta, eta)), "one forward step"
        unknown = set(noticed) - set(POTENTIALS)
        assert not unknown, f"unknown: {sorted(unknown)}"
        kw = dict(n_points=2, k_tr=3, n_sub=4)
        good = measure_potentials(pb, eta, 4 * eta, **kw)
        bad = measure_potentials(pb, eta, 4 * eta, reverse=broken, **kw)
    actual = {p for p in POTENTIALS if not math.isclose(bad[p].error, good[p].error, rel_tol=1e-9)}
    assert set(noticed) == actual, f"notice: {sorted(actual)}, not {sorted(noticed)}"
    return ", ".join(f"{p} error {good[p].error:.2g} -> {bad[p].error:.2g}" for p in POTENTIALS)
