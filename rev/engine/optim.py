"""The one optimizer builder and the one learning-rate schedule every training loop uses.

`rev.engine.train`, the trace chapter and the adaptive chapter all build AdamW here, so a change of betas or of
which parameters decay happens in one place. Steps are counted from 0: `lr_at(0)` is the first update's rate.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Iterable

import torch
from torch import nn

BETAS = (0.9, 0.95)        # GPT-style AdamW: a shorter second-moment memory than Adam's default 0.999
SCHEDULE_KINDS = ("cosine", "constant")


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
