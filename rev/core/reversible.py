"""One memory-free autograd Function for any reversible integrator on any stream.

Forward runs the trunk without a graph and keeps only the final state. Backward walks the layers in
reverse and, for layer l, lets `integrator.inverse` rebuild the layer's input state. Every update the
inverse undoes, `t = t' - c * block(s)`, is backpropagated at that moment (`LayerTape`): the rebuilt `t`
inherits the gradient of `t'`, and the block is evaluated *with* a graph on a detached leaf so that one
backward pass through it gives the gradient of its input `s` and of its parameters. That pass frees the
graph, so at any time only one block component's activations (attention or MLP, for reversible Euler)
are alive, and each component is evaluated exactly once per backward.

Position-wise components go further. A block may declare, in `position_wise`, the components that act on
each position alone (a GPT's MLP with its LayerNorm), and in `pos_chunk` a number of positions. Such a
component is then evaluated over chunks of `pos_chunk` positions along dim -2, in forward and in backward
alike: backward evaluates a chunk with a graph, keeps its output, backpropagates it and frees its graph
before the next chunk, adding up the parameter gradients over chunks. Only one chunk's
activations are alive, and the gradients are those of the whole evaluation (each output position depends on
its own input position only). A block may also split a component into `parts(name)` whose sum it is (a GPT's
attention, head by head): each part is evaluated and backpropagated in turn, its output added to the
component's. To do this, `call` in backward defers the evaluation: it returns a shape-only token, and the
`sub` that consumes it evaluates and backpropagates the block at once. And a state this backward rebuilt is
overwritten in place when its own update is undone (no one reads it after that), so one layer's backward holds
the two streams, their gradients and one piece of one block.

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
import weakref
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

import torch
from torch import Tensor, nn

from .integrators import Integrator, State
from .pieces import block_call, pieces, sliced
from .streams import Stream


def has_autocast(device_type: str) -> bool:
    """Whether torch has an autocast for `device_type` (cpu, cuda, ... do; meta does not)."""
    try:
        torch.is_autocast_enabled(device_type)
    except RuntimeError:  # "unknown device type for autocast"
        return False
    return True


@dataclass
class AutocastState:
    """The autocast state (enabled, dtype) of one device type, as forward saw it; `available` is False for a
    device type without autocast (meta), whose state is then "off" and whose context does nothing."""

    device_type: str
    enabled: bool
    dtype: torch.dtype
    available: bool = True

    @classmethod
    def capture(cls, device_type: str) -> "AutocastState":
        if not has_autocast(device_type):
            return cls(device_type, False, torch.float32, available=False)
        return cls(device_type, torch.is_autocast_enabled(device_type), torch.get_autocast_dtype(device_type))

    def context(self) -> contextlib.AbstractContextManager:
        if not self.available:
            return contextlib.nullcontext()
        # enabled=False too is entered: a backward run inside someone's autocast region must not use it
        return torch.autocast(self.device_type, dtype=self.dtype, enabled=self.enabled)


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


@dataclass(frozen=True)
class ReversibleSpec:
    """What a memory-free trunk runs, the same for every call: the integrator, its blocks, step, stream and kept
    boundaries. It holds no state of any call (`SliceGradients` is one call's)."""

    integrator: Integrator
    blocks: Sequence[nn.Module]
    h: float
    stream: Stream
    keep: frozenset[int] = field(default_factory=frozenset)


class SliceGradients:
    """One trunk call's parameter gradients, summed over the Functions of its batch slices (see
    `reversible_trunk`): each slice's backward adds into the running sum, and the last of them returns it (the
    others return None for the parameters, which autograd reads as zero), so a step holds one set of parameter
    gradients, not one per slice. Made afresh by every call, so two calls never share a sum."""

    def __init__(self, blocks: Sequence[nn.Module], slices: int):
        self.slices, self.done = slices, 0
        self.sums: list[list[Tensor | None]] = [[None] * len(list(b.parameters())) for b in blocks]

    def take(self, sums: list[list[Tensor | None]], params: Sequence[Tensor]) -> list[Tensor | None]:
        """After one slice's backward: keep the running sums, or, after the last slice, hand them out (zeros for
        a parameter no block output depended on) and start over (a second backward sums again)."""
        self.done += 1
        if self.done < self.slices:
            self.sums = sums
            return [None] * len(params)
        self.sums, self.done = [[None] * len(layer) for layer in sums], 0
        flat = [g for layer in sums for g in layer]
        return [g if g is not None else torch.zeros_like(p) for g, p in zip(flat, params)]


def _check_parameters(params: Sequence[Tensor], versions: Sequence[int]) -> None:
    """The memory-free backward recomputes every block from the very tensors forward ran with, so they must be
    unchanged (autograd makes the same check on the tensors it saves; a version counter costs no device sync)."""
    if any(p._version != v for p, v in zip(params, versions)):
        raise RuntimeError("a parameter of the reversible trunk was modified in place between forward and backward "
                           "(an optimizer step before backward?); its backward recomputes the blocks with the "
                           "parameters as they are now, which would give wrong gradients: call backward first")


@contextlib.contextmanager
def blocks_with(spec: "ReversibleSpec", params: Sequence[Tensor]) -> Iterator[None]:
    """The blocks, for the length of the context, holding `params` (the tensors forward ran with) as their
    parameters. Where they hold them already, nothing changes. Where forward ran under a reparametrization that
    backward no longer sees (`torch.func.functional_call` swaps parameters for the call only), the blocks are
    reparametrized the same way again, so the recompute uses the tensors forward used and their gradients
    reach the caller's tensors."""
    now = [p for b in spec.blocks for p in b.parameters()]
    if len(now) != len(params):
        raise RuntimeError(f"the reversible trunk's blocks hold {len(now)} parameters in backward where forward "
                           f"ran with {len(params)}: do not add or remove parameters between forward and backward")
    if all(a is b for a, b in zip(now, params)):
        yield
        return
    from torch.nn.utils.stateless import _reparametrize_module  # what functional_call itself enters

    with contextlib.ExitStack() as stack:
        start = 0
        for block in spec.blocks:
            names = [name for name, _ in block.named_parameters()]
            given = dict(zip(names, params[start:start + len(names)]))
            start += len(names)
            stack.enter_context(_reparametrize_module(block, given))
        yield


class ReversibleFunction(torch.autograd.Function):
    """apply(spec, gradients, *state_in, *params) -> final state (decoded to the input's dtype); `gradients` is
    the call's `SliceGradients`, shared by the Functions of its batch slices.

    A second backward (`retain_graph=True`, as `torch.autograd.gradcheck` does) works: the first backward frees
    the final state as it goes, so that the trunk's backward holds no extra copy of it, and keeps the input
    state it rebuilt instead; a later backward runs the forward again from there (under the saved autocast
    state) to get the final state back. On the fixed stream that is the very same state; on a float stream it
    is one round trip's reconstruction error away. Without `retain_graph`, a second backward raises autograd's
    own error, as for any other function."""

    @staticmethod
    def forward(ctx, spec: ReversibleSpec, gradients: SliceGradients, *inputs: Tensor):
        n_state = len(inputs) - sum(1 for b in spec.blocks for _ in b.parameters())
        state_in, params = inputs[:n_state], inputs[n_state:]
        dtype = state_in[0].dtype
        stream = spec.stream
        state = tuple(stream.encode(s) for s in state_in)
        final, kept = run_forward(spec.integrator, spec.blocks, state, spec.h, stream, dtype, keep=spec.keep)
        ctx.spec, ctx.gradients, ctx.state, ctx.kept, ctx.dtype = spec, gradients, final, kept, dtype
        ctx.rebuilt_input = None
        ctx.params, ctx.versions = params, tuple(p._version for p in params)
        ctx.autocast = AutocastState.capture(state_in[0].device.type)
        ctx.save_for_backward()  # nothing saved, but autograd now refuses a second backward without retain_graph
        return tuple(stream.decode(s, dtype) for s in final)

    @staticmethod
    def backward(ctx, *grads_out: Tensor):
        ctx.saved_tensors  # noqa: B018 -- raises autograd's "backward through the graph a second time" error
        _check_parameters(ctx.params, ctx.versions)
        with blocks_with(ctx.spec, ctx.params):
            return ReversibleFunction._backward(ctx, grads_out)

    @staticmethod
    def _backward(ctx, grads_out: Sequence[Tensor]):
        spec, stream = ctx.spec, ctx.spec.stream
        if ctx.state is None:  # a second backward: the first freed the final state, rebuild it from the input
            with ctx.autocast.context():
                ctx.state, ctx.kept = run_forward(spec.integrator, spec.blocks, ctx.rebuilt_input, spec.h, stream,
                                                  ctx.dtype, keep=spec.keep)
        state, kept = ctx.state, ctx.kept
        ctx.state = ctx.kept = ctx.rebuilt_input = None  # free as we go
        carrier = stream.carrier_dtype
        grads = [g.to(carrier) if g is not None else torch.zeros_like(stream.decode(s, carrier))
                 for g, s in zip(grads_out, state)]
        # parameter gradients, layer by layer, added to what earlier slices' backwards summed
        sums = ctx.gradients.sums
        owned: dict[int, weakref.ref] = {}  # tensors this backward rebuilt: only those it may overwrite
        for layer in reversed(range(len(spec.blocks))):
            if layer + 1 in kept:  # restart from an exact copy of this boundary
                state = kept.pop(layer + 1)
            tape = LayerTape(spec.blocks[layer], stream, ctx.dtype, ctx.autocast, state, grads, owned, sums[layer])
            grads = None  # the tape holds them now, and drops each one as soon as it is replaced
            state = spec.integrator.inverse(state, tape.call, spec.h, layer, tape.sub)
            grads = tape.input_grads(state)
            sums[layer] = tape.param_sums()
        ctx.rebuilt_input = state  # what a second backward starts its forward from
        return (None, None, *(g.to(ctx.dtype) for g in grads), *ctx.gradients.take(sums, ctx.params))


class LayerTape:
    """The `call` and `sub` that `integrator.inverse` runs with in backward: undo one layer and
    backpropagate it, update by update.

    Forward made `t' = t + c * block(s)`. When the inverse undoes it, `t` inherits the gradient of `t'`,
    and `s` and the block's parameters receive `c * grad(t')` pulled back through the block. Gradients of
    stream tensors are looked up by identity: the inverse hands state tensors around unchanged.

    The block is evaluated when `sub` consumes its output, not when `call` asks for it: by then the gradient
    of `t'` is known, so a position-wise component can be evaluated, subtracted and backpropagated chunk by
    chunk (see the module docstring). `call` hands out a shape-only (meta) token in the meantime.
    """

    def __init__(self, block: nn.Module, stream: Stream, dtype: torch.dtype, autocast: AutocastState,
                 state: State, grads: Sequence[Tensor], owned: dict[int, weakref.ref] | None = None,
                 param_sums: Sequence[Tensor | None] | None = None):
        self.block, self.stream, self.dtype, self.autocast = block, stream, dtype, autocast
        self.owned = {} if owned is None else owned
        self.params = tuple(block.parameters())
        # parameter gradients start from what other batch slices summed (None: nothing yet)
        self._param_grads: list[Tensor | None] = list(param_sums) if param_sums is not None else [None] * len(self.params)
        self._grads: dict[int, tuple[Tensor, Tensor]] = {}     # id(stream tensor) -> (tensor, gradient)
        self._calls: dict[int, tuple[Tensor, str, Tensor]] = {}  # id(token) -> (token, component name, s)
        for s, g in zip(state, grads):
            self._accumulate(s, g)

    def call(self, name: str, s: Tensor) -> Tensor:
        token = torch.empty(s.shape, dtype=self.dtype, device="meta")
        self._calls[id(token)] = (token, name, s)
        return token

    def sub(self, t: Tensor, c: Tensor, coef: float) -> Tensor:
        if id(c) not in self._calls or id(t) not in self._grads:
            raise RuntimeError("a reversible integrator's inverse must subtract block outputs from state tensors "
                               "(see the contract in rev.core.integrators)")
        _, name, s = self._calls.pop(id(c))
        _, g = self._grads.pop(id(t))
        todo = pieces(self.block, name, s)
        if len(todo) == 1:
            out, grad_s = self._backprop(todo[0][1], s, g, coef)
        else:
            out, grad_s = None, torch.zeros(s.shape, dtype=self.stream.carrier_dtype, device=s.device)
            for ix, part in todo:
                value, grad = self._backprop(part, s[ix], g[ix], coef)
                out = value.new_zeros(s.shape) if out is None else out
                out[ix] += value
                grad_s[ix] += grad
                del value, grad  # not alive while the next piece runs
        rebuilt = self._subtract(t, out, coef)
        self._accumulate(rebuilt, g)
        self._accumulate(s, grad_s)
        return rebuilt

    def _subtract(self, t: Tensor, out: Tensor, coef: float) -> Tensor:
        """`stream.sub(t, out, coef)`, written over `t` when this backward rebuilt `t` itself: by the contract,
        nothing reads `t'` once its update is undone, so the rebuilt state needs no memory of its own. (States
        from forward -- the Function's outputs, kept copies -- are never overwritten.)"""
        ref = self.owned.get(id(t))
        if ref is not None and ref() is t:
            return self.stream.sub_(t, out, coef)  # what Stream.sub computes, in place
        rebuilt = self.stream.sub(t, out, coef)
        self.owned[id(rebuilt)] = weakref.ref(rebuilt)
        return rebuilt

    def _backprop(self, fn: Callable[[Tensor], Tensor], s: Tensor, g: Tensor, coef: float) -> tuple[Tensor, Tensor]:
        """Evaluate `fn` at `s` (a whole state or a chunk of one) with a graph and backpropagate `coef * g`
        through it once, which frees the graph. Returns the value and the gradient of `s`; parameter
        gradients are added to the layer's. The cotangent is `coef * g` rounded to the block's output dtype, as
        autograd rounds it through the stored trunk's `t + coef * block(s)`: scaling the results instead would
        differ by a rounding under fp16 autocast. (`g` is one chunk when the component is chunked.)"""
        leaf = self.stream.decode(s, self.dtype).detach().requires_grad_(True)
        with torch.enable_grad(), self.autocast.context():
            out = fn(leaf)
        cot = g.to(out.dtype) if coef == 1 else (g * coef).to(out.dtype)
        got = torch.autograd.grad(out, (leaf, *self.params), cot, allow_unused=True)
        del cot
        self._add_param_grads(list(got[1:]))
        return out.detach(), got[0].to(self.stream.carrier_dtype)

    def _add_param_grads(self, got: Sequence[Tensor | None]) -> None:
        """Add one evaluation's parameter gradients to the sums. In place: a sum is a tensor autograd.grad handed
        this backward (nothing else holds it), and adding out of place would allocate a parameter-sized tensor per
        piece and batch slice (hundreds of large allocations per step on a CPU)."""
        for i, pg in enumerate(got):
            if pg is not None:
                old = self._param_grads[i]
                if old is None:
                    self._param_grads[i] = pg
                elif old.is_contiguous() and old.dtype == pg.dtype:
                    old.add_(pg)
                else:
                    self._param_grads[i] = old + pg

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

    def param_sums(self) -> list[Tensor | None]:
        """The block's parameter gradients summed so far (None where no evaluation reached a parameter)."""
        return list(self._param_grads)


def reversible_trunk(integrator: Integrator, blocks: Sequence[nn.Module], x: Tensor, h: float, stream: Stream,
                     keep: Sequence[int] = (), batch_slice: int = 0) -> Tensor:
    """Memory-free trunk output for input `x` (the integrator's `output` of the final state). The stream stores
    its sums in no less than `x`'s dtype (`Stream.at_least`). With `batch_slice`, each slice of that many
    sequences runs through its own `ReversibleFunction` (see `sliced`): the backward's working set is one
    slice's, and the memory per sequence is the state and its gradient."""
    slices = -(-x.shape[0] // batch_slice) if 0 < batch_slice < x.shape[0] else 1  # as many as `sliced` makes
    spec = ReversibleSpec(integrator, blocks, h, stream.at_least(x.dtype), frozenset(keep))
    gradients = SliceGradients(blocks, slices)   # this call's, shared by its slices' Functions only
    params = [p for b in blocks for p in b.parameters()]
    run = lambda part: integrator.output(  # noqa: E731
        ReversibleFunction.apply(spec, gradients, *integrator.init(part), *params))
    return sliced(run, x, batch_slice)


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
    stream = stream.at_least(x.dtype)  # as the trunk itself runs
    start = tuple(stream.encode(s) for s in integ.init(x))
    final, _ = run_forward(integ, trunk.blocks, start, trunk.h, stream, x.dtype)
    back = run_inverse(integ, trunk.blocks, final, trunk.h, stream, x.dtype)
    return state_error(start, back, stream)
