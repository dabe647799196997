"""One memory-free autograd Function for any reversible integrator on any stream.

Forward runs the trunk without a graph and keeps only the final state. Backward walks the layers in
reverse. For layer l it

1. inverts the layer (`integrator.inverse`) to rebuild its input state. Every block evaluation the
   inversion needs is made *with* a graph, on a detached leaf, and recorded;
2. replays the layer's forward step (`integrator.step`) on differentiable stand-ins of the rebuilt input,
   where each block call returns the recorded evaluation through `_Graft` instead of running the block
   again; autograd through that replay gives the input-state and parameter gradients.

So each block is recomputed exactly once per backward, and the same recomputed output serves both to
invert and to backpropagate. The autocast state (device type, dtype, enabled) seen in forward is
re-entered around every block recomputation in backward, so bf16/fp16 autocast or none, on CPU or CUDA,
gives the gradients the stored trunk would.

`keep` lists layer boundaries whose state forward also stores: backward restarts from those exact copies,
so reconstruction error cannot accumulate past one span (used by the adaptive checkpoint chapter).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Sequence

import torch
from torch import Tensor, nn

from .integrators import Integrator, State
from .streams import Stream


@dataclass
class AutocastState:
    device_type: str
    enabled: bool
    dtype: torch.dtype

    @classmethod
    def capture(cls, device_type: str) -> "AutocastState":
        return cls(device_type, torch.is_autocast_enabled(device_type), torch.get_autocast_dtype(device_type))

    def context(self) -> contextlib.AbstractContextManager:
        return torch.autocast(self.device_type, dtype=self.dtype, enabled=self.enabled)


def block_call(block: nn.Module, stream: Stream, dtype: torch.dtype):
    """`call(name, s)` for integrators: evaluate block component `name` at stream value `s`."""
    def call(name: str, s: Tensor) -> Tensor:
        return block.component(name)(stream.decode(s, dtype))
    return call


@torch.no_grad()
def run_forward(integrator: Integrator, blocks: Sequence[nn.Module], state: State, h: float, stream: Stream,
                dtype: torch.dtype, start: int = 0, keep: Sequence[int] = ()) -> tuple[State, dict[int, State]]:
    """Steps layers start..start+len(blocks)-1 on stream storage; returns the final state and kept states."""
    kept: dict[int, State] = {}
    for i, block in enumerate(blocks):
        layer = start + i
        if layer in keep:
            kept[layer] = state
        state = integrator.step(state, block_call(block, stream, dtype), h, layer, stream.add)
    return state, kept


@torch.no_grad()
def run_inverse(integrator: Integrator, blocks: Sequence[nn.Module], state: State, h: float, stream: Stream,
                dtype: torch.dtype, start: int = 0) -> State:
    """Inverts layers start+len(blocks)-1 down to start; returns the rebuilt input state."""
    for i in reversed(range(len(blocks))):
        state = integrator.inverse(state, block_call(blocks[i], stream, dtype), h, start + i, stream.sub)
    return state


@dataclass
class _Record:
    """A block evaluation made during inversion: its leaf input, its output (with graph), its parameters."""
    inp: Tensor
    out: Tensor
    params: tuple[Tensor, ...]


class _Graft(torch.autograd.Function):
    """Stands for `block(x)` in the replayed step: the value is the recorded output, and the backward
    pulls gradients through the recorded graph, so the block is not evaluated a second time."""

    @staticmethod
    def forward(ctx, x: Tensor, rec: _Record, *params: Tensor) -> Tensor:
        ctx.rec, ctx.x_dtype = rec, x.dtype
        return rec.out.detach()

    @staticmethod
    def backward(ctx, grad: Tensor):
        rec = ctx.rec
        grads = torch.autograd.grad(rec.out, (rec.inp, *rec.params), grad.to(rec.out.dtype), allow_unused=True)
        return (grads[0].to(ctx.x_dtype), None, *grads[1:])


@dataclass
class TrunkSpec:
    integrator: Integrator
    blocks: Sequence[nn.Module]
    h: float
    stream: Stream
    keep: frozenset[int] = field(default_factory=frozenset)


class ReversibleFunction(torch.autograd.Function):
    """apply(spec, *state_in, *params) -> final state (decoded to the input's dtype)."""

    @staticmethod
    def forward(ctx, spec: TrunkSpec, *inputs: Tensor):
        n_state = len(inputs) - sum(1 for b in spec.blocks for _ in b.parameters())
        state_in, params = inputs[:n_state], inputs[n_state:]
        dtype = state_in[0].dtype
        stream = spec.stream
        state = tuple(stream.encode(s) for s in state_in)
        final, kept = run_forward(spec.integrator, spec.blocks, state, spec.h, stream, dtype, keep=spec.keep)
        ctx.spec, ctx.state, ctx.kept, ctx.dtype, ctx.n_params = spec, final, kept, dtype, len(params)
        ctx.autocast = AutocastState.capture(state_in[0].device.type)
        return tuple(stream.decode(s, dtype) for s in final)

    @staticmethod
    def backward(ctx, *grads_out: Tensor):
        spec, stream = ctx.spec, ctx.spec.stream
        state, kept = ctx.state, ctx.kept
        del ctx.state, ctx.kept  # free as we go
        carrier = stream.carrier_dtype
        grads = [g.to(carrier) if g is not None else torch.zeros_like(stream.decode(s, carrier))
                 for g, s in zip(grads_out, state)]
        param_grads: list[Tensor] = []
        with torch.enable_grad():
            for layer in reversed(range(len(spec.blocks))):
                if layer + 1 in kept:  # restart from an exact copy of this boundary
                    state = kept.pop(layer + 1)
                block = spec.blocks[layer]
                state, grads, pg = _layer_backward(spec, block, layer, state, grads, ctx.dtype, ctx.autocast)
                param_grads = pg + param_grads
        return (None, *(g.to(ctx.dtype) for g in grads), *param_grads)


def _layer_backward(spec: TrunkSpec, block: nn.Module, layer: int, state: State, grads: list[Tensor],
                    dtype: torch.dtype, autocast: AutocastState) -> tuple[State, list[Tensor], list[Tensor]]:
    stream, integ = spec.stream, spec.integrator
    params = tuple(block.parameters())
    records: dict[str, _Record] = {}

    def record(name: str, s: Tensor) -> Tensor:
        inp = stream.decode(s, dtype).detach().requires_grad_(True)
        with autocast.context():
            out = block.component(name)(inp)
        records[name] = _Record(inp, out, params)
        return out.detach()

    state_in = integ.inverse(state, record, spec.h, layer, stream.sub)

    # Replay the step on float stand-ins of the rebuilt input; block calls come from the records.
    leaves = tuple(stream.decode(s, stream.carrier_dtype).detach().requires_grad_(True) for s in state_in)

    def replayed(name: str, x: Tensor) -> Tensor:
        if name in records:
            return _Graft.apply(x, records[name], *params)
        # The inversion did not need this evaluation (leapfrog's Euler starter): compute it once here.
        with autocast.context():
            return block.component(name)(x.to(dtype))

    replay = integ.step(leaves, replayed, spec.h, layer, stream.add_diff)
    got = torch.autograd.grad(replay, leaves + params, grads, allow_unused=True)
    in_grads = [g if g is not None else torch.zeros_like(x) for g, x in zip(got[:len(leaves)], leaves)]
    param_grads = [g if g is not None else torch.zeros_like(p) for g, p in zip(got[len(leaves):], params)]
    return state_in, in_grads, param_grads


def reversible_trunk(integrator: Integrator, blocks: Sequence[nn.Module], x: Tensor, h: float, stream: Stream,
                     keep: Sequence[int] = ()) -> Tensor:
    """Memory-free trunk output for input `x` (the integrator's `output` of the final state)."""
    spec = TrunkSpec(integrator, blocks, h, stream, frozenset(keep))
    params = [p for b in blocks for p in b.parameters()]
    final = ReversibleFunction.apply(spec, *integrator.init(x), *params)
    return integrator.output(final)


def state_error(a: State, b: State, stream: Stream) -> float:
    """Relative L2 distance between two stream states, computed in float64."""
    num = sum(((stream.decode(x, torch.float64) - stream.decode(y, torch.float64)) ** 2).sum() for x, y in zip(a, b))
    den = sum((stream.decode(x, torch.float64) ** 2).sum() for x in a)
    return float(torch.sqrt(num / den.clamp_min(1e-300)))


@torch.no_grad()
def reconstruction_error(model: nn.Module, idx: Tensor) -> float:
    """Run the model's trunk forward on `idx`, invert it, and return the relative error on its input state(s).

    0.0 exactly means every element came back bit for bit (the `fixed` stream's promise)."""
    trunk = model.trunk
    integ, stream = trunk.integrator, trunk.stream
    if not integ.reversible:
        raise ValueError(f"trunk integrator {integ.name!r} has no exact inverse; use a midpoint or reveuler trunk")
    x = model.embed(idx)
    start = tuple(stream.encode(s) for s in integ.init(x))
    final, _ = run_forward(integ, trunk.blocks, start, trunk.h, stream, x.dtype)
    back = run_inverse(integ, trunk.blocks, final, trunk.h, stream, x.dtype)
    return state_error(start, back, stream)
