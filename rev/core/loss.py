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
dtype, then taken to fp32 for the softmax, as in the plain head. Where the matmuls run in fp16 (fp16 autocast,
a `.half()` model), the fused head's gradient matmuls are scaled by powers of two into fp16's range and
divided back in fp32, so the per-row gradient (softmax - onehot) / n does not underflow before a GradScaler's
loss scale reaches it in backward: its gradients are then as accurate as the plain head's (tests/core/test_loss.py).
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


def _matmul_dtype(h: Tensor, weight: Tensor) -> torch.dtype:
    """The dtype `h @ weight.T` runs in: autocast's where it is on for h's device, else the promoted one."""
    device_type = h.device.type
    if device_type in ("cpu", "cuda") and torch.is_autocast_enabled(device_type):
        return torch.get_autocast_dtype(device_type)
    return torch.promote_types(h.dtype, weight.dtype)


_FP16_TARGET = 2.0 ** 14   # a quarter of fp16's largest finite value (65504): headroom for the matmul's rounding


def _pow2_scale(bound: Tensor) -> Tensor:
    """The largest power of two S (at most 2^14) with S * bound <= 2^14, as a device tensor (no host sync)."""
    return torch.exp2(torch.floor(torch.log2(_FP16_TARGET / bound.float().clamp_min(1e-30))).clamp(max=14.0))


def _fp16_scales(h: Tensor, weight: Tensor, chunk: int) -> tuple[Tensor, Tensor]:
    """Powers of two (s_h, s_w) that `_fp16_cotangent` scales the gradient matmuls by, from bounds on their outputs:
    |g @ weight| <= sum_v |g_v| max|w| <= 2 max|w| per row (a row of softmax - onehot sums to at most 2 in
    absolute value), and |g.T @ h_chunk| <= the largest column sum of |h_chunk| (|g| <= 1). Read from the
    tensors without copying them."""
    lo, hi = weight.detach().aminmax()
    cols = [torch.linalg.vector_norm(h[i:i + chunk].detach(), 1, dim=0, dtype=torch.float32).amax()
            for i in range(0, h.size(0), chunk)]
    return _pow2_scale(2 * torch.maximum(-lo, hi)), _pow2_scale(torch.stack(cols).amax())


def _fp16_cotangent(z: Tensor, valid: Tensor, s_h: Tensor) -> Tensor:
    """One chunk's d loss / d logits for fp16 matmuls, from `z` = softmax - onehot (fp32, |z| <= 1), consumed.

    Divided by the row count n, as the mean loss wants, its entries (of order 1/vocab) would fall below fp16's
    smallest normal number (6e-5) and underflow; the plain head never rounds them that small, because autograd
    hands its matmul backward the loss scale's cotangent. So the fp16 cotangent is z times the power of two s_h
    from `_fp16_scales` instead (large enough for small entries to keep their bits, small enough for nothing to
    overflow), and the products are divided by s * n in fp32 (the caller does it once for all chunks). Scaling
    by a power of two is exact, so only fp16's rounding remains, as in the plain head."""
    return z.mul_(valid.to(z.dtype)[:, None] * s_h).to(torch.float16)  # ignored rows contribute nothing


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
        fp16 = _matmul_dtype(h, weight) == torch.float16
        # fp16: h's gradient is kept in fp32 until backward has scaled it (divided by n, its entries could
        # underflow fp16 before a GradScaler's loss scale reaches them)
        grad_h = torch.empty_like(h, dtype=acc if fp16 else h.dtype)
        scales = _fp16_scales(h, weight, chunk) if fp16 else None
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
            if fp16:
                g = z = _fp16_cotangent(z, vc, scales[0])   # the fp32 chunk is freed here
                grad_h[i:i + chunk] = g @ weight            # into fp32, still scaled by s_h
                # to s_w for the weight's gradient (powers of two; scaling down rounds once more, and only the
                # entries that s_w alone would put among fp16's subnormals)
                g.mul_(scales[1] / scales[0])
                grad_w += g.t() @ hc
                del g
            else:
                z.mul_((vc.to(z.dtype) / n)[:, None])
                g = z.to(hc.dtype)       # h's dtype, as the logits' matmul saw it; autocast casts as it did there
                grad_h[i:i + chunk] = g @ weight
                grad_w += g.t() @ hc
                del g
            del z                        # else it lives on while the next chunk's logits are made
        if fp16:
            grad_h.div_(scales[0] * n)
            grad_w.div_(scales[1] * n)
        ctx.grads, ctx.dtypes = (grad_h, grad_w), (h.dtype, weight.dtype)
        return loss / n

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        if ctx.grads is None:
            raise RuntimeError("the fused loss head scales its stored gradients in place and frees them, so it "
                               "cannot run backward twice; use GPTConfig(loss_head='chunked') for retain_graph")
        grad_h, grad_w = ctx.grads
        ctx.grads = None                 # scaled in place and released: no second copy of either
        h_dtype, w_dtype = ctx.dtypes
        return grad_h.mul_(grad_out).to(h_dtype), grad_w.mul_(grad_out).to(w_dtype), None, None


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
