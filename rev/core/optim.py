"""The one optimizer builder, the one learning-rate schedule every training loop uses, and the recipe that
follows the batch (`warmup_steps`, `peak_lr`).

`rev.training.loop`, the trace chapter and the adaptive chapter all build AdamW here, so a change of betas or of
which parameters decay happens in one place. Steps are counted from 0: `lr_at(0)` is the first update's rate.

The recipe, for a run at batch B where the profile's recipe was made for batch B0 (k = B / B0):

* warm-up: the profile's warm-up tokens, but never fewer than `WARMUP_FLOOR_STEPS` optimizer steps. Adam's
  second-moment estimate averages about 1 / (1 - beta2) steps (20 at beta2 = 0.95); before it has that many
  gradients each parameter's step size rests on a handful of them, and a warm-up counted in tokens alone lasts
  2 steps at k = 9, so the peak rate arrives while that estimate is still a guess.
* peak rate: Adam's square-root rule, lr = lr0 * sqrt(k) (the batch-size scaling that keeps Adam's stochastic
  dynamics the same while gradient noise dominates the step; Malladi et al. 2022). Noise stops dominating near
  the gradient noise scale B_noise (McCandlish et al. 2018), where a larger batch no longer buys a cleaner step;
  given a measured `noise_scale`, k becomes the ratio of the noise-limited step sizes, (1 + B_noise / B0) /
  (1 + B_noise / B), which equals B / B0 for small batches and stops growing beyond B_noise.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass
from typing import Iterable

import torch
from torch import nn

BETAS = (0.9, 0.95)        # GPT-style AdamW: a shorter second-moment memory than Adam's default 0.999
SCHEDULE_KINDS = ("cosine", "constant")
LR_SCALINGS = ("none", "sqrt", "linear")
WARMUP_FLOOR_STEPS = math.ceil(1 / (1 - BETAS[1]))   # the steps Adam's second moment averages over: 20


def adamw(model: nn.Module | Iterable[nn.Parameter], lr: float, weight_decay: float = 0.0,
          decay_matrices_only: bool = True) -> torch.optim.AdamW:
    """AdamW over `model`'s parameters. With `decay_matrices_only`, weight decay applies to matrices (dim >= 2)
    and not to biases, LayerNorm gains or other vectors, as nanoGPT does: decaying a gain towards 0 shrinks a
    whole channel, which is not the regularisation weight decay is for."""
    params = list(model.parameters() if isinstance(model, nn.Module) else model)
    if not decay_matrices_only or weight_decay == 0.0:
        return torch.optim.AdamW(params, lr=lr, betas=BETAS, weight_decay=weight_decay)
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=BETAS)


def lr_at(step: int, total_steps: int, warmup_steps: int, lr: float, min_lr: float,
          kind: str = "cosine") -> float:
    """Linear warm-up to `lr` over `warmup_steps` (step 0 already gets lr/warmup), then cosine decay to `min_lr`
    at `total_steps`, or `lr` held (`kind="constant"`)."""
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    if kind == "constant":
        return lr
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return min_lr + 0.5 * (lr - min_lr) * (1 + math.cos(math.pi * progress))


@dataclass(frozen=True)
class Schedule:
    """`lr_at` with its settings bound, for loops that carry the schedule around (and record it)."""

    peak_lr: float
    total_steps: int
    warmup_steps: int = 0
    min_lr: float = 0.0
    kind: str = "cosine"

    def __post_init__(self) -> None:
        if self.kind not in SCHEDULE_KINDS:
            raise ValueError(f"unknown schedule kind {self.kind!r}: use one of {', '.join(SCHEDULE_KINDS)}")
        if self.total_steps < 1 or not 0 <= self.warmup_steps <= self.total_steps:
            raise ValueError(f"need total_steps >= 1 and 0 <= warmup_steps <= total_steps, got "
                             f"{self.total_steps} and {self.warmup_steps}")

    def lr_at(self, step: int) -> float:
        return lr_at(step, self.total_steps, self.warmup_steps, self.peak_lr, self.min_lr, self.kind)

    def to_dict(self) -> dict:
        return asdict(self)


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr


# --- the recipe that follows the batch ------------------------------------------------------------------------

def warmup_steps(warmup_tokens: int, tokens_per_step: int, total_steps: int,
                 floor: int = WARMUP_FLOOR_STEPS) -> int:
    """The warm-up in optimizer steps: `warmup_tokens` worth of steps, at least `floor` of them, at most the run."""
    if tokens_per_step < 1 or total_steps < 1:
        raise ValueError(f"need tokens_per_step >= 1 and total_steps >= 1, got {tokens_per_step} and {total_steps}")
    return min(total_steps, max(floor, warmup_tokens // tokens_per_step, 1))


def batch_ratio(batch: int, base_batch: int, noise_scale: float | None = None) -> float:
    """k, how much larger a step the batch allows than the base batch: batch / base_batch, or, with a measured
    gradient noise scale, the ratio of the noise-limited step sizes (1 + B_noise/base) / (1 + B_noise/batch)."""
    if batch < 1 or base_batch < 1:
        raise ValueError(f"batch sizes must be >= 1, got {batch} and {base_batch}")
    if noise_scale is None:
        return batch / base_batch
    if not (math.isfinite(noise_scale) and noise_scale > 0):
        why = (": an infinite B_simple means the noise swamped the gradient estimate; measure it with more groups"
               if noise_scale == math.inf else "")
        raise ValueError(f"noise_scale must be a finite number > 0 (a measured B_noise in sequences), got "
                         f"{noise_scale}{why}; or give None for the rule without saturation")
    return (1 + noise_scale / base_batch) / (1 + noise_scale / batch)


def peak_lr(base_lr: float, batch: int, base_batch: int, rule: str = "sqrt",
            noise_scale: float | None = None) -> float:
    """The peak rate at `batch` for a recipe made at `base_batch`: `sqrt` scales `base_lr` by sqrt(k) (Adam's rule),
    `linear` by k (SGD's), `none` keeps it; k is `batch_ratio` (saturating beyond `noise_scale` when given)."""
    if rule not in LR_SCALINGS:
        raise ValueError(f"unknown lr_scaling {rule!r}: choose one of {', '.join(LR_SCALINGS)}")
    if not (isinstance(base_lr, numbers.Real) and math.isfinite(base_lr) and base_lr > 0):
        raise ValueError(f"lr must be a finite number > 0, got {base_lr!r}: a rate of 0 trains nothing (e.g. 1e-3)")
    k = batch_ratio(batch, base_batch, noise_scale)
    return base_lr * {"none": 1.0, "sqrt": math.sqrt(k), "linear": k}[rule]
