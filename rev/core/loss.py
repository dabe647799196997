"""The loss head: mean cross-entropy of the logits `h @ weight.T` (tied output weight) against `targets`.

Once the trunk keeps no activations, the (rows x vocab) logits are the largest thing a training step holds,
so the head is chosen by name (`GPTConfig.loss_head`):

  fused    (default) per chunk of rows, forward computes the logits, the loss and at once the gradients
           with respect to the hidden states and the weight; backward only scales them. No logits are
           kept and none are recomputed (the idea of Liger Kernel's fused linear-cross-entropy and Apple's
           Cut Cross-Entropy, written in plain torch).
  chunked  each chunk under torch.utils.checkpoint: backward recomputes the chunk's logits.
  plain    F.cross_entropy on all logits at once (the reference).

All three follow F.cross_entropy's conventions: targets equal to `IGNORE_INDEX` (-100) contribute nothing and
the mean runs over the other rows. Under autocast the logits are computed by the matmul in the autocast
dtype, then taken to fp32 for the softmax, as in the plain head.
"""
from __future__ import annotations

from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.utils.checkpoint import checkpoint

IGNORE_INDEX = -100


def _logits(h: Tensor, weight: Tensor) -> Tensor:
    """Logits in at least fp32 (fp64 stays fp64), whatever dtype the matmul ran in."""
    z = h @ weight.t()
    return z.to(torch.promote_types(z.dtype, torch.float32))


class FusedLinearCrossEntropy(torch.autograd.Function):
    """Mean cross-entropy of `h @ weight.T`, its gradients computed in forward, one chunk of rows at a time.

    Only one chunk's logits exist at a time (they become that chunk's softmax in place), and backward
    recomputes nothing: it multiplies the stored gradients by the incoming one."""

    @staticmethod
    def forward(ctx, h: Tensor, weight: Tensor, targets: Tensor, chunk: int) -> Tensor:
        valid = targets != IGNORE_INDEX
        n = valid.sum()                  # a tensor: no device sync; 0 gives nan, as F.cross_entropy does
        safe = targets.clamp_min(0)      # ignored rows index class 0, then are masked out
        acc = torch.promote_types(torch.promote_types(h.dtype, weight.dtype), torch.float32)
        grad_w = torch.zeros_like(weight, dtype=acc)  # sums over every chunk: accumulate in at least fp32
        grad_h = torch.empty_like(h)
        loss = torch.zeros((), dtype=acc, device=h.device)
        for i in range(0, h.size(0), chunk):
            hc, tc, vc = h[i:i + chunk], safe[i:i + chunk], valid[i:i + chunk]
            z = _logits(hc, weight)
            target_logit = z.gather(1, tc[:, None]).squeeze(1)
            # softmax in place, so this chunk's logits buffer is the only (rows x vocab) tensor alive
            m = z.amax(1, keepdim=True)
            s = z.sub_(m).exp_().sum(1, keepdim=True)
            loss += torch.where(vc, (m + s.log()).squeeze(1) - target_logit, 0.0).sum()
            # d(mean loss)/d logits = (softmax - onehot) / n on rows that count, 0 on ignored rows
            z.div_(s)
            z[torch.arange(z.size(0), device=z.device), tc] -= 1.0
            z.mul_((vc.to(z.dtype) / n)[:, None])
            g = z.to(hc.dtype)           # h's dtype, as the logits' matmul saw it; autocast casts as it did there
            grad_h[i:i + chunk] = g @ weight
            grad_w += g.t() @ hc
            del z, g                     # else they live on while the next chunk's logits are made
        ctx.grads, ctx.weight_dtype = (grad_h, grad_w), weight.dtype
        return loss / n

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        if ctx.grads is None:
            raise RuntimeError("the fused loss head scales its stored gradients in place and frees them, so it "
                               "cannot run backward twice; use GPTConfig(loss_head='chunked') for retain_graph")
        grad_h, grad_w = ctx.grads
        ctx.grads = None                 # scaled in place and released: no second copy of either
        return grad_h.mul_(grad_out), grad_w.mul_(grad_out).to(ctx.weight_dtype), None, None


def fused_cross_entropy(h: Tensor, weight: Tensor, targets: Tensor, chunk: int = 1024) -> Tensor:
    """Mean cross-entropy of `h @ weight.T` (rows of `h` against `targets`) by `FusedLinearCrossEntropy`."""
    h2, t = h.reshape(-1, h.size(-1)), targets.reshape(-1)
    if not (torch.is_grad_enabled() and (h2.requires_grad or weight.requires_grad)):
        with torch.no_grad():            # evaluation: the chunked head keeps nothing either
            return chunked_cross_entropy(h2, weight, t, chunk)
    return FusedLinearCrossEntropy.apply(h2, weight, t, chunk)


def _ce_sum(h: Tensor, weight: Tensor, targets: Tensor) -> Tensor:
    return F.cross_entropy(_logits(h, weight), targets, ignore_index=IGNORE_INDEX, reduction="sum")


def chunked_cross_entropy(h: Tensor, weight: Tensor, targets: Tensor, chunk: int = 1024) -> Tensor:
    """Mean cross-entropy of logits `h @ weight.T` against `targets`, `chunk` rows at a time, each chunk
    checkpointed: backward recomputes its logits instead of keeping them all."""
    h2, t = h.reshape(-1, h.size(-1)), targets.reshape(-1)
    ce = _ce_sum
    if t.numel() > chunk and torch.is_grad_enabled():
        ce = partial(checkpoint, _ce_sum, use_reentrant=False)
    total = sum(ce(h2[i:i + chunk], weight, t[i:i + chunk]) for i in range(0, t.numel(), chunk))
    return total / (t != IGNORE_INDEX).sum()


def plain_cross_entropy(h: Tensor, weight: Tensor, targets: Tensor, chunk: int = 0) -> Tensor:
    """Mean cross-entropy with all logits materialised at once (`chunk` is unused)."""
    return F.cross_entropy(_logits(h, weight).flatten(0, -2), targets.reshape(-1), ignore_index=IGNORE_INDEX)


HEADS = {"fused": fused_cross_entropy, "chunked": chunked_cross_entropy, "plain": plain_cross_entropy}
LOSS_HEADS = tuple(HEADS)


def cross_entropy(h: Tensor, weight: Tensor, targets: Tensor, head: str = "fused", chunk: int = 1024) -> Tensor:
    """Mean cross-entropy of `h @ weight.T` against `targets` by the head named `head` (see LOSS_HEADS)."""
    return HEADS[head](h, weight, targets, chunk)
