"""One memory-free autograd Function for any reversible integrator on any stream.

Forward runs the trunk without a graph and keeps only the final state. Backward walks the layers in
reverse and, for layer l, lets `integrator.inverse` rebuild the layer's input state. Every update the
inverse undoes, `t = t' - c * block(s)`, is backpropagated at that moment (`_LayerTape`): the rebuilt `t`
inherits the gradient of `t'`, and the block is evaluated *with* a graph on a detached leaf so that one
backward pass through it gives the gradient of its input `s` and of its parameters. That pass frees the
graph, so at any time only one block component's activations (attention or MLP, for reversible Euler)
are alive, and each component is evaluated exactly once per backward.

This works for any integrator that keeps the contract in `rev.core.integrators`: its inverse undoes the
step's additive updates one by one, in reverse order. When an update is undone, every later use of its
result has already been undone too, so the gradient it hands on is complete.

The autocast state (device type, dtype, enabled) seen in forward is re-entered around every block
recomputation in backward, so bf16/fp16 autocast or none, on CPU or CUDA, gives the gradients the stored
trunk would.

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
        for layer in reversed(range(len(spec.blocks))):
            if layer + 1 in kept:  # restart from an exact copy of this boundary
                state = kept.pop(layer + 1)
            tape = _LayerTape(spec.blocks[layer], stream, ctx.dtype, ctx.autocast, state, grads)
            state = spec.integrator.inverse(state, tape.call, spec.h, layer, tape.sub)
            grads = tape.input_grads(state)
            param_grads = tape.param_grads() + param_grads
        return (None, *(g.to(ctx.dtype) for g in grads), *param_grads)


class _LayerTape:
    """The `call` and `sub` that `integrator.inverse` runs with in backward: undo one layer and
    backpropagate it, update by update.

    Forward made `t' = t + c * block(s)`. When the inverse undoes it, `t` inherits the gradient of `t'`,
    and `s` and the block's parameters receive `c * grad(t')` pulled back through the block. Gradients of
    stream tensors are looked up by identity: the inverse hands state tensors around unchanged.
    """

    def __init__(self, block: nn.Module, stream: Stream, dtype: torch.dtype, autocast: AutocastState,
                 state: State, grads: Sequence[Tensor]):
        self.block, self.stream, self.dtype, self.autocast = block, stream, dtype, autocast
        self.params = tuple(block.parameters())
        self._param_grads: list[Tensor | None] = [None] * len(self.params)
        self._grads: dict[int, tuple[Tensor, Tensor]] = {}     # id(stream tensor) -> (tensor, gradient)
        self._calls: dict[int, tuple[Tensor, Tensor, Tensor, Tensor]] = {}  # id(value) -> (value, s, leaf, out)
        for s, g in zip(state, grads):
            self._accumulate(s, g)

    def call(self, name: str, s: Tensor) -> Tensor:
        leaf = self.stream.decode(s, self.dtype).detach().requires_grad_(True)
        with torch.enable_grad(), self.autocast.context():
            out = self.block.component(name)(leaf)
        value = out.detach()
        self._calls[id(value)] = (value, s, leaf, out)
        return value

    def sub(self, t: Tensor, c: Tensor, coef: float) -> Tensor:
        if id(c) not in self._calls or id(t) not in self._grads:
            raise RuntimeError("a reversible integrator's inverse must subtract block outputs from state tensors "
                               "(see the contract in rev.core.integrators)")
        _, s, leaf, out = self._calls.pop(id(c))
        _, g = self._grads.pop(id(t))
        rebuilt = self.stream.sub(t, c, coef)
        self._accumulate(rebuilt, g)
        # One backward pass through this block evaluation, which frees its graph.
        got = torch.autograd.grad(out, (leaf, *self.params), (g * coef).to(out.dtype), allow_unused=True)
        self._accumulate(s, got[0])
        for i, pg in enumerate(got[1:]):
            if pg is not None:
                old = self._param_grads[i]
                self._param_grads[i] = pg if old is None else old + pg
        return rebuilt

    def _accumulate(self, s: Tensor, g: Tensor) -> None:
        g = g.to(self.stream.carrier_dtype)
        if id(s) in self._grads:
            g = self._grads[id(s)][1] + g  # out of place: `g` may be shared with another entry
        self._grads[id(s)] = (s, g)

    def input_grads(self, state: State) -> list[Tensor]:
        if self._calls:
            raise RuntimeError("a reversible integrator's inverse evaluated a block it did not subtract "
                               "(see the contract in rev.core.integrators)")
        out = []
        for s in state:  # a tensor listed twice gets its gradient once
            _, g = self._grads.pop(id(s), (None, None))
            out.append(g if g is not None else torch.zeros_like(self.stream.decode(s, self.stream.carrier_dtype)))
        return out

    def param_grads(self) -> list[Tensor]:
        return [g if g is not None else torch.zeros_like(p) for g, p in zip(self._param_grads, self.params)]


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


# Above this relative reconstruction error a reversible trunk's gradients are no longer trusted: the training loop
# warns, the screening rejects the candidate and the report draws the line.
RECON_LIMIT = 1e-2


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
