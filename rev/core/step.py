"""One training step, the same for every trunk: what `rev.training.loop` and the chapters' own loops run.

Forward and the loss under autocast (when asked), backward outside it, gradients unscaled and clipped, the
optimizer's update, gradients cleared. A reversible trunk needs nothing different here: its memory-free backward
hides inside `loss.backward()` (rev.core.reversible), which re-enters the autocast state forward saw.
"""
from __future__ import annotations

import contextlib
from typing import Callable

import torch
from torch import Tensor, nn


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, x: Tensor, y: Tensor, *,
               clip: float | None = 1.0, amp: contextlib.AbstractContextManager | None = None,
               scaler: torch.amp.GradScaler | None = None,
               before_update: Callable[[Tensor], None] | None = None) -> tuple[Tensor, Tensor | None]:
    """One optimizer step on batch (x, y); returns the loss and the gradient norm before clipping (None without
    clipping), both still on the device, so nothing waits for the GPU here.

    `amp`: the autocast context for forward and loss (e.g. `rev.base.device.autocast(device, dtype)`). `scaler`:
    a GradScaler for fp16: the loss is scaled before backward so small gradients do not underflow, the gradients
    are unscaled before clipping (so `clip` means the true norm), and the scaler skips the update when a gradient
    is inf/NaN. `before_update(loss)` runs after clipping, just before the update (a trace recorder's note)."""
    with amp or contextlib.nullcontext():
        loss = model(x, y)
    # backward outside autocast: the reversible backward replays the autocast state it saved in forward
    (scaler.scale(loss) if scaler is not None else loss).backward()
    if scaler is not None:
        scaler.unscale_(optimizer)
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip) if clip else None
    if before_update is not None:
        before_update(loss.detach())
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach(), norm
