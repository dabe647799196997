"""The gradient noise scale: up to what batch a larger batch still buys a cleaner step.

McCandlish et al. 2018 ("An Empirical Model of Large-Batch Training") define the simple noise scale

    B_simple = tr(Sigma) / |G|^2,

with G the true gradient and Sigma the covariance of one example's gradient (here one sequence is one example, so
batch sizes are in sequences). A step at batch B sees G plus noise of size tr(Sigma) / B: below B_simple the noise
dominates and doubling the batch nearly halves the steps a loss needs; far above it the step is already clean and
a larger batch only spends tokens. Their model of the trade-off, for the steps S and examples E that reach a loss:

    S = S_min (1 + B_noise / B),        E = E_min (1 + B / B_noise).

Neither |G|^2 nor tr(Sigma) can be read off one gradient: the squared norm of a batch gradient is biased upwards by
the noise. Their unbiased estimator uses squared norms at two batch sizes b < B_big:

    |G|^2    ~ (B_big |G_big|^2 - b |G_b|^2) / (B_big - b),
    tr Sigma ~ (|G_b|^2 - |G_big|^2) / (1/b - 1/B_big).

Here the big batch is the mean of `n_small` small batches' gradients (what data-parallel workers all-reduce), so one
set of gradient evaluations gives both norms. Each estimate is averaged over all groups before the ratio is taken,
since a ratio of noisy estimates is biased; the groups are independent draws, so resampling them (`NoiseScale.interval`,
a percentile bootstrap over groups) says how far one measurement can be trusted. The model is not updated: this is
gradient evaluations only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

Batch = tuple[torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class NoiseScale:
    """One measurement: the estimates, the batch sizes they came from and the loss where they were taken."""

    b_small: int          # sequences per small batch
    b_big: int            # sequences per big batch (n_small small ones)
    groups: int           # big batches averaged over
    grad_sq: float        # |G|^2, estimated
    trace: float          # tr(Sigma) per sequence, estimated
    loss: float           # mean training loss over the batches used
    group_small_sq: tuple[float, ...] = ()   # per group: the mean squared norm of its small batches' gradients
    group_big_sq: tuple[float, ...] = ()     # per group: the squared norm of its big batch's gradient

    @property
    def b_simple(self) -> float:
        """tr(Sigma) / |G|^2 in sequences; inf when the estimated |G|^2 is not positive (noise swamps the signal:
        measure with more groups)."""
        return _b_simple(sum(self.group_small_sq) / len(self.group_small_sq),
                         sum(self.group_big_sq) / len(self.group_big_sq), self.b_small, self.b_big) \
            if self.group_small_sq else (self.trace / self.grad_sq if self.grad_sq > 0 else float("inf"))

    def interval(self, level: float = 0.95, resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
        """Percentile bootstrap interval of `b_simple` over the groups (each group one independent draw: its small
        batches' mean squared norm and its big batch's), the ratio recomputed from each resample's averages. A
        resample whose |G|^2 is not positive counts as inf (no signal seen). (nan, nan) with fewer than 2 groups."""
        import numpy as np

        small, big = np.asarray(self.group_small_sq, float), np.asarray(self.group_big_sq, float)
        if len(small) < 2:
            return float("nan"), float("nan")
        idx = np.random.default_rng(seed).integers(0, len(small), (resamples, len(small)))
        draws = [_b_simple(small[i].mean(), big[i].mean(), self.b_small, self.b_big) for i in idx]
        tail = (1 - level) / 2
        draws = np.array(draws)
        # between an infinite draw and its neighbour there is nothing to interpolate (inf - inf is nan): with any
        # infinite draw the ends are order statistics, draws themselves
        method = "inverted_cdf" if np.isinf(draws).any() else "linear"
        lo, hi = np.quantile(draws, [tail, 1 - tail], method=method)
        return float(lo), float(hi)


def _b_simple(g_small: float, g_big: float, b_small: int, b_big: int) -> float:
    """The unbiased estimator's ratio from the two mean squared norms (inf when |G|^2 is not positive)."""
    grad_sq = (b_big * g_big - b_small * g_small) / (b_big - b_small)
    trace = (g_small - g_big) / (1 / b_small - 1 / b_big)
    return trace / grad_sq if grad_sq > 0 else float("inf")


def _flat_grad(model: nn.Module, batch: Batch) -> tuple[torch.Tensor, float]:
    params = [p for p in model.parameters() if p.requires_grad]
    x, y = batch
    loss = model(x, y)
    grads = torch.autograd.grad(loss, params)
    return torch.cat([g.reshape(-1).double() for g in grads]), float(loss.detach())


def gradient_noise_scale(model: nn.Module, get_batch: Callable[[int, torch.Generator], Batch], b_small: int,
                         n_small: int = 8, groups: int = 4, seed: int = 0) -> NoiseScale:
    """B_simple of `model` at its current weights, from `groups` x `n_small` gradients at `b_small` sequences each
    (`get_batch(b, generator)` draws b sequences). The model's weights and gradients are left as they were."""
    if b_small < 1 or n_small < 2 or groups < 1:
        raise ValueError(f"need b_small >= 1, n_small >= 2 and groups >= 1, got {b_small}, {n_small}, {groups}")
    gen = torch.Generator().manual_seed(seed)
    was_training = model.training
    model.train()
    small_sq, big_sq, losses = [], [], []
    try:
        for _ in range(groups):
            total, group_small = None, 0.0
            for _ in range(n_small):
                g, loss = _flat_grad(model, get_batch(b_small, gen))
                group_small += float(g @ g)
                total = g if total is None else total + g
                losses.append(loss)
            mean = total / n_small
            small_sq.append(group_small / n_small)
            big_sq.append(float(mean @ mean))
    finally:
        model.train(was_training)
    g_small, g_big = sum(small_sq) / groups, sum(big_sq) / groups
    b_big = b_small * n_small
    grad_sq = (b_big * g_big - b_small * g_small) / (b_big - b_small)
    trace = (g_small - g_big) / (1 / b_small - 1 / b_big)
    return NoiseScale(b_small, b_big, groups, grad_sq, trace, sum(losses) / len(losses), tuple(small_sq),
                      tuple(big_sq))


def steps_ratio(batch: float, base_batch: float, noise_scale: float) -> float:
    """S(batch) / S(base_batch): how many times the steps at `base_batch` the larger batch needs for the same loss."""
    return (1 + noise_scale / batch) / (1 + noise_scale / base_batch)


def tokens_ratio(batch: float, base_batch: float, noise_scale: float) -> float:
    """E(batch) / E(base_batch): how many times the examples (tokens) at `base_batch` the batch needs."""
    return (1 + batch / noise_scale) / (1 + base_batch / noise_scale)
