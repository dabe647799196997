"""Integrators, written once: the rule that turns a stack of blocks into a trunk.

A trunk of depth L is an ODE solver taking L steps of size h through the vector field the blocks define.
Each integrator has

* `init(x)`      -- the state tuple the trunk starts from (one or two streams),
* `step(...)`    -- layer l: state_l -> state_{l+1},
* `inverse(...)` -- layer l: state_{l+1} -> state_l, algebraically (for the reversible ones),
* `output(...)`  -- the trunk's output from the final state.

`step` and `inverse` never do arithmetic on the stream themselves: they call `add(s, c, coef)` /
`sub(s, c, coef)` (how the stream adds `coef * c`, see `rev.core.streams`) and `call(name, s)` (evaluate block
component `name` -- `"f"` the whole block, `"F"` attention, `"G"` MLP -- at stream value `s`). The same code
therefore runs toy dynamics in float64, a GPT trunk under autograd, and the memory-free reversible trunk
on an integer stream.

The contract a reversible integrator keeps: `step` is a sequence of additive updates `t' = add(t, call(name,
s), c)`, and `inverse` undoes them in reverse order, each as `sub(t', call(name, s), c)` with the same block
input `s` and coefficient `c`. The memory-free backward (`rev.core.reversible`) backpropagates each update at
the moment `inverse` undoes it, so it needs nothing else from the integrator.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch
from torch import Tensor

from .streams import get_stream

State = tuple[Tensor, ...]
Call = Callable[[str, Tensor], Tensor]
AddSub = Callable[[Tensor, Tensor, float], Tensor]


class Integrator:
    name: str = ""
    reversible: bool = False
    components: tuple[str, ...] = ()

    def init(self, x: Tensor) -> State:
        raise NotImplementedError

    def step(self, state: State, call: Call, h: float, layer: int, add: AddSub) -> State:
        raise NotImplementedError

    def inverse(self, state: State, call: Call, h: float, layer: int, sub: AddSub) -> State:
        raise NotImplementedError

    def output(self, state: State) -> Tensor:
        raise NotImplementedError


class Euler(Integrator):
    """Forward Euler, i.e. the ordinary residual trunk: x' = x + h f(x).

    It has no algebraic inverse: x = x' - h f(x) is implicit in x. `inverse` solves it by fixed-point
    iteration, which converges only when h * Lip(f) < 1 and is never exact -- the contrast with the two
    reversible integrators below is the point.
    """

    name = "euler"
    components = ("f",)

    def __init__(self, fixed_point_iters: int = 50):
        self.fixed_point_iters = fixed_point_iters

    def init(self, x: Tensor) -> State:
        return (x,)

    def step(self, state: State, call: Call, h: float, layer: int, add: AddSub) -> State:
        (x,) = state
        return (add(x, call("f", x), h),)

    def inverse(self, state: State, call: Call, h: float, layer: int, sub: AddSub) -> State:
        (x_next,) = state
        x = x_next
        for _ in range(self.fixed_point_iters):
            x = sub(x_next, call("f", x), h)
        return (x,)

    def output(self, state: State) -> Tensor:
        return state[0]


class Leapfrog(Integrator):
    """Leapfrog / explicit midpoint: x[l+1] = x[l-1] + 2h f(x[l]), started with one Euler step.

    The state is the pair (x[l-1], x[l]). Given (x[l], x[l+1]) the previous pair is recovered exactly:
    x[l-1] = x[l+1] - 2h f(x[l]). Layer 0 is the Euler starter x[1] = x[0] + h f(x[0]), written as the same
    update from the state (x, x) with coefficient h instead of 2h, so every layer is one additive update
    that its inverse undoes. Two-step methods carry a parasitic mode that flips sign every layer;
    notebook 01 shows it.
    """

    name = "leapfrog"
    reversible = True
    components = ("f",)

    def init(self, x: Tensor) -> State:
        return (x, x)

    @staticmethod
    def coef(h: float, layer: int) -> float:
        return h if layer == 0 else 2 * h  # layer 0 starts from (x, x): a plain Euler step

    def step(self, state: State, call: Call, h: float, layer: int, add: AddSub) -> State:
        prev, cur = state
        return (cur, add(prev, call("f", cur), self.coef(h, layer)))

    def inverse(self, state: State, call: Call, h: float, layer: int, sub: AddSub) -> State:
        cur, nxt = state
        return (sub(nxt, call("f", cur), self.coef(h, layer)), cur)

    def output(self, state: State) -> Tensor:
        return state[1]


class RevEuler(Integrator):
    """Reversible Euler / RevNet coupling on two streams (y, z):

        y' = y + h F(z),   z' = z + h G(y'),   output (y + z) / 2.

    Inverse: z = z' - h G(y'), then y = y' - h F(z). In a GPT, F is attention and G the MLP.
    """

    name = "reveuler"
    reversible = True
    components = ("F", "G")

    def init(self, x: Tensor) -> State:
        return (x, x)

    def step(self, state: State, call: Call, h: float, layer: int, add: AddSub) -> State:
        y, z = state
        y = add(y, call("F", z), h)
        z = add(z, call("G", y), h)
        return (y, z)

    def inverse(self, state: State, call: Call, h: float, layer: int, sub: AddSub) -> State:
        y, z = state
        z = sub(z, call("G", y), h)
        y = sub(y, call("F", z), h)
        return (y, z)

    def output(self, state: State) -> Tensor:
        y, z = state
        return 0.5 * (y + z)


INTEGRATORS: dict[str, type[Integrator]] = {"euler": Euler, "leapfrog": Leapfrog, "reveuler": RevEuler}


def get_integrator(name: str) -> Integrator:
    """A fresh integrator by name: `euler`, `leapfrog` or `reveuler`."""
    if name not in INTEGRATORS:
        raise ValueError(f"unknown integrator {name!r}: choose one of {', '.join(INTEGRATORS)}")
    return INTEGRATORS[name]()


# --- toy dynamics: the same integrators on plain functions --------------------------------------------

def _toy_call(fields: dict[str, Callable[[Tensor], Tensor]], decode: Callable[[Tensor], Tensor]) -> Call:
    def call(name: str, s: Tensor) -> Tensor:
        return fields[name](decode(s))
    return call


def _fields(f: Callable[[Tensor], Tensor], F: Callable | None, G: Callable | None) -> dict:
    return {"f": f, "F": F or f, "G": G or f}


def integrate(integrator: Integrator, x0: Tensor, f: Callable[[Tensor], Tensor], h: float, n_steps: int,
              stream: str = "fp64", F: Callable | None = None, G: Callable | None = None) -> list[State]:
    """Run `n_steps` steps of the toy field `f` (or `F`, `G` for two streams) from `x0` on `stream`.

    Returns the list of stream states, from the initial one to the last (storage tensors of the stream;
    decode them with `rev.core.streams.get_stream(stream).decode`).
    """
    if h <= 0:
        raise ValueError(f"step size h must be > 0, got {h}")
    st = get_stream(stream)
    call = _toy_call(_fields(f, F, G), lambda s: st.decode(s, x0.dtype))
    states = [integrator.init(st.encode(x0))]
    for layer in range(n_steps):
        states.append(integrator.step(states[-1], call, h, layer, st.add))
    return states


def invert(integrator: Integrator, state: State, f: Callable[[Tensor], Tensor], h: float, n_steps: int,
           stream: str = "fp64", dtype: torch.dtype = torch.float64, F: Callable | None = None,
           G: Callable | None = None) -> list[State]:
    """Walk `n_steps` steps backward from `state` with `integrator.inverse`; returns states last-to-first."""
    st = get_stream(stream)
    call = _toy_call(_fields(f, F, G), lambda s: st.decode(s, dtype))
    states = [state]
    for layer in reversed(range(n_steps)):
        states.append(integrator.inverse(states[-1], call, h, layer, st.sub))
    return states


def decode_state(state: Sequence[Tensor], stream: str, dtype: torch.dtype = torch.float64) -> list[Tensor]:
    """Stream storage -> float tensors."""
    st = get_stream(stream)
    return [st.decode(s, dtype) for s in state]
