"""Notebook 09b (adaptive rank): training the low-rank Neural ODE classifier with gradients through the reverse map,
one arm at a time -- a fixed rank and spacing, or the controller deciding both as the weights change.

Both arms of a paired seed start from the same weights and see the same minibatches, so their differences come
from the rank, the spacing and the gradients those give. Per step the log keeps the loss, the rank and spacing in
use, kept states and reloads; every `fidelity_every` steps also the defect and the gradient against the dense
reference on that step's batch. The arm's peak memory is the largest measured peak over the layouts it used.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch
from torch import Tensor

from ...core.optim import adamw
from .controller import RankController, reversal_gradients
from .experiment import LowRankSizes, agreement, make_digits, new_model
from .splitting import initial_state

TEST_OFFSET = 5000  # test samples come from seeds far from every training and calibration seed


def seed_data(sz: LowRankSizes, seed: int) -> tuple[list[tuple[Tensor, Tensor]], tuple[Tensor, Tensor]]:
    """`train_steps` minibatches and a held-out test set for one seed."""
    x, y = make_digits(sz.train_steps * sz.batch, seed, sz.side)
    batches = list(zip(x.split(sz.batch), y.split(sz.batch)))
    return batches, make_digits(sz.test_size, TEST_OFFSET + seed, sz.side)


def train_arm(sz: LowRankSizes, seed: int, rank: int, spacing: int, tau_grad: float,
              peak: Callable[[int, int, float], int], controller: RankController | None = None) -> dict:
    """Train a fresh model for seed `seed` at (rank, spacing) -- or, with `controller`, at whatever it decides:
    it probes (delta, rho) on the current weights before training for `sz.rounds` rounds, then every
    `sz.probe_every` steps. `peak(rank, spacing, tau_grad)` gives a layout's measured peak bytes.
    Returns the arm's summary and its per-step log."""
    model = new_model(sz, seed)
    batches, (x_test, y_test) = seed_data(sz, seed)
    opt = adamw(model, lr=sz.lr)
    params = [model.A, model.C, *model.head.parameters()]
    if controller is not None:
        for _ in range(sz.rounds):
            controller.decide(*model.probe(batches[0][0], controller.rank))
    log = []
    for step, (x, y) in enumerate(batches):
        if controller is not None:
            if step > 0 and step % sz.probe_every == 0:
                controller.decide(*model.probe(x, controller.rank))
            rank, spacing = controller.rank, controller.spacing
        st0 = initial_state(x.shape[0], sz.m, sz.m, rank, model.alpha)
        out = reversal_gradients(st0, x, model.A, model.C, model.h, spacing, tau_grad, model.loss_fn(y),
                                 list(model.head.parameters()))
        grads = [out["dA"], out["dC"], *out["d_head"]]
        row = {"step": step, "loss": out["loss"], "rank": rank, "spacing": spacing, "kept": out["kept"],
               "reloads": out["reloads"], "peak_bytes": peak(rank, spacing, tau_grad)}
        if step % sz.fidelity_every == 0 or step == len(batches) - 1:
            row |= agreement(torch.cat([g.flatten() for g in grads]), model.dense_gradients(x, y, rank))
            row["defect"] = model.probe(x, rank)[0]
        log.append(row)
        for p, g in zip(params, grads):
            p.grad = g
        opt.step()
        opt.zero_grad(set_to_none=True)
    return {"summary": summarise(log, model.accuracy(x_test, y_test, rank)), "log": log}


def summarise(log: list[dict], accuracy: float) -> dict:
    """One arm's figures: mean rank and kept states over the steps, the largest peak, reloads, the mean defect and
    gradient agreement over the checks, the loss at the end (mean of the last quarter), the variance of the loss
    over the second half, and the held-out accuracy."""
    col = lambda k: np.array([r[k] for r in log if k in r], dtype=float)  # noqa: E731
    loss = col("loss")
    return {"rank": col("rank").mean(), "final_rank": log[-1]["rank"], "spacing": log[-1]["spacing"],
            "kept": col("kept").mean(), "reloads": int(col("reloads").sum()), "peak_bytes": int(col("peak_bytes").max()),
            "defect": col("defect").mean(), "grad_cos": col("grad_cos").mean(),
            "grad_rel_err": col("grad_rel_err").mean(), "final_loss": loss[-max(1, len(loss) // 4):].mean(),
            "loss_var": loss[len(loss) // 2:].var(), "accuracy": accuracy}
