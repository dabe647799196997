"""The pieces a block is evaluated in, so that only one piece's activations are alive at a time: chunks of
positions for a position-wise component (`position_chunks`), parts whose sum a component is (`component_parts`,
attention head by head), both in one fixed order (`pieces`, which forward and backward add up alike, so an exact
stream inverts bit for bit), and slices of the batch (`sliced`, each slice its own graph). `rev.core.reversible`
evaluates and backpropagates blocks through these; `residual_ckpt`'s recompute slices its batch the same way.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor, nn

from .streams import Stream


def position_chunks(block: nn.Module, name: str, s: Tensor) -> list[tuple]:
    """Index tuples splitting `s` along dim -2 into the chunks block component `name` is evaluated on: chunks of
    `block.pos_chunk` positions when the block declares `name` position-wise, else one index for everything."""
    size, n = getattr(block, "pos_chunk", 0), s.shape[-2] if s.dim() >= 2 else 0
    if name not in getattr(block, "position_wise", ()) or not 0 < size < n:
        return [(...,)]
    return [(..., slice(i, min(i + size, n)), slice(None)) for i in range(0, n, size)]


def component_parts(block: nn.Module, name: str) -> list[Callable[[Tensor], Tensor]]:
    """Callables whose sum is block component `name`: the block's `parts(name)` if it declares them, else the
    component itself."""
    parts = getattr(block, "parts", None)
    return (parts(name) if parts is not None else None) or [block.component(name)]


def pieces(block: nn.Module, name: str, s: Tensor) -> list[tuple[tuple, Callable[[Tensor], Tensor]]]:
    """(positions, part) pairs that component `name` at `s` is evaluated by, in a fixed order: forward and
    backward add them up the same way, so an exact stream inverts bit for bit."""
    return [(ix, part) for ix in position_chunks(block, name, s) for part in component_parts(block, name)]


def block_call(block: nn.Module, stream: Stream, dtype: torch.dtype):
    """`call(name, s)` for integrators: evaluate block component `name` at stream value `s` (chunk by chunk
    and part by part where the block allows, so only one piece's intermediate activations exist at a time)."""
    def call(name: str, s: Tensor) -> Tensor:
        todo = pieces(block, name, s)
        if len(todo) == 1:
            return todo[0][1](stream.decode(s, dtype))
        out = None
        for ix, part in todo:
            value = part(stream.decode(s[ix], dtype))
            out = value.new_zeros(s.shape) if out is None else out
            out[ix] += value
            del value
        return out
    return call


def sliced(fn: Callable[[Tensor], Tensor], x: Tensor, rows: int) -> Tensor:
    """`fn(x)` for a `fn` that treats every row of dim 0 (every sequence) alone, computed over slices of `rows`
    rows and concatenated (0, or a batch no larger than `rows`: in one piece). Under autograd each slice is its own
    graph, so backward -- and any recompute in it -- holds one slice's activations at a time."""
    if not 0 < rows < x.shape[0]:
        return fn(x)
    return torch.cat([fn(part) for part in x.split(rows)])
