"""Notebook 01b (build the memory-free backward): a tiny two-stream trunk, the reference memory-free
autograd Function the learner rebuilds, its stored twin, and the studies and checks the notebook runs.

The trunk is reversible Euler on two streams (y, z), one `TwoStreamBlock` per layer:

    y' = y + h F(z),   z' = z + h G(y')      inverse:  z = z' - h G(y'),   y = y' - h F(z)

with F and G small tanh MLPs. `ReversibleEulerFunction` is the instructor's answer to exercise 01b.1: its
forward keeps only the final state; its backward walks the layers in reverse, undoing one layer at a time
(`undo_layer`) and backpropagating each update at the moment it is undone (`undo_update`). `stored_trunk` is
the twin that plain autograd differentiates, driven by the very `step` of `rev.core.integrators` that the GPT
trunks use; `rev.core.reversible` is the general version of the Function (any integrator, any stream) that
the notebook's last section reads. Reconstruction and memory are measured with `rev.core.reversible` and
`rev.measure.memory`.
"""
from __future__ import annotations

from typing import Callable, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn

from ...core.integrators import Integrator, RevEuler
from ...core.reversible import reversible_trunk, run_forward, run_inverse, state_error
from ...core.streams import STREAMS, get_stream
from ...measure.memory import saved_tensors_seen, training_step_memory
from ..shared import palette
from ...base.units import MIB

GRAD_RTOL = 1e-6     # float64 gradients of the memory-free Function vs the stored twin
COLORS = {**palette.STREAMS, "memory-free Function": palette.BACKWARDS["rebuilt"],
          "stored twin": palette.BACKWARDS["stored"]}   # the book's colours (`rev.chapters.shared.palette`)


# --- the tiny two-stream trunk ---------------------------------------------------------------------------

class TwoStreamBlock(nn.Module):
    """One layer: F and G, each a tanh MLP dim -> hidden -> dim. `f` is the whole block as one field
    (F, then G on the updated stream, like a pre-LN GPT block), so one-stream integrators can run it too."""

    def __init__(self, dim: int, hidden: int, gain: float = 1.0):
        super().__init__()
        self.F, self.G = self._mlp(dim, hidden, gain), self._mlp(dim, hidden, gain)

    @staticmethod
    def _mlp(dim: int, hidden: int, gain: float) -> nn.Sequential:
        net = nn.Sequential(nn.Linear(dim, hidden), nn.Tanh(), nn.Linear(hidden, dim))
        with torch.no_grad():
            net[0].weight.mul_(gain)  # gain > 1 makes the field expand, so rounding errors grow with depth
        return net

    def f(self, x: Tensor) -> Tensor:
        a = self.F(x)
        return a + self.G(x + a)

    def component(self, name: str) -> nn.Module | Callable[[Tensor], Tensor]:
        """Block component by name, the interface `rev.core` integrators call: "F", "G" or "f"."""
        return {"F": self.F, "G": self.G, "f": self.f}[name]


def make_blocks(depth: int, dim: int = 8, hidden: int = 16, gain: float = 1.0, seed: int = 0,
                dtype: torch.dtype = torch.float64) -> nn.ModuleList:
    """`depth` freshly initialised blocks (the same seed gives the same blocks)."""
    torch.manual_seed(seed)
    return nn.ModuleList(TwoStreamBlock(dim, hidden, gain) for _ in range(depth)).to(dtype)


def make_input(batch: int, dim: int, seed: int = 0, dtype: torch.dtype = torch.float64) -> Tensor:
    return torch.randn(batch, dim, generator=torch.Generator().manual_seed(seed + 1), dtype=dtype)


def block_params(blocks: Sequence[nn.Module]) -> list[Tensor]:
    """All parameters, block by block, F before G: the order the Function's backward returns them in."""
    return [p for b in blocks for p in b.parameters()]


# --- the reference memory-free Function (the instructor's answer to exercise 01b.1) ----------------------

def pull_back(net: nn.Module, s: Tensor, grad_out: Tensor) -> tuple[Tensor, Tensor, list[Tensor]]:
    """Evaluate `net(s)` once, with a graph on a detached leaf, and backpropagate `grad_out` through it.

    Returns the value `net(s)` (detached), the gradient for `s` and those for `net`'s parameters. The graph
    lives only inside this call: at any moment of backward, one MLP's activations are alive."""
    leaf = s.detach().requires_grad_(True)
    with torch.enable_grad():
        out = net(leaf)
    grad_s, *grad_params = torch.autograd.grad(out, (leaf, *net.parameters()), grad_out)
    return out.detach(), grad_s, grad_params


def undo_update(net: nn.Module, h: float, t: Tensor, s: Tensor, g_t: Tensor, g_s: Tensor):
    """Undo one update `t' = t + h net(s)` and backpropagate it.

    `t` inherits the gradient `g_t` of `t'` unchanged; `h * g_t` pulled back through `net` is added to the
    gradient `g_s` of `s` and gives `net`'s parameter gradients. Returns (t, g_s, parameter gradients)."""
    value, grad_s, grad_params = pull_back(net, s, h * g_t)
    return t - h * value, g_s + grad_s, grad_params


def undo_layer(block: TwoStreamBlock, h: float, y: Tensor, z: Tensor, gy: Tensor, gz: Tensor):
    """Invert one layer, (y', z') -> (y, z), and backpropagate it, (dL/dy', dL/dz') -> (dL/dy, dL/dz),
    undoing its two updates in reverse order."""
    # z' = z + h G(y'): needs y', which we have; y' collects G's share of dL/dz'.
    z, gy, g_params = undo_update(block.G, h, z, y, gz, gy)
    # y' = y + h F(z): needs z, rebuilt just above; dL/dy' is complete now (all uses of y' undone).
    y, gz, f_params = undo_update(block.F, h, y, z, gy, gz)
    return y, z, gy, gz, f_params + g_params


def walk_back(blocks: Sequence[TwoStreamBlock], h: float, y: Tensor, z: Tensor, gy: Tensor, gz: Tensor,
              undo=undo_layer) -> tuple[Tensor, ...]:
    """Undo the layers from the last to the first; returns (dL/dy0, dL/dz0, *parameter gradients)."""
    param_grads: list[Tensor] = []
    for block in reversed(blocks):
        y, z, gy, gz, grads = undo(block, h, y, z, gy, gz)
        param_grads = grads + param_grads
    return (gy, gz, *param_grads)


class ReversibleEulerFunction(torch.autograd.Function):
    """apply(blocks, h, y0, z0, *params) -> (y_L, z_L), keeping nothing but the final state for backward."""

    @staticmethod
    def forward(ctx, blocks, h, y, z, *params):
        with torch.no_grad():  # (a Function's forward runs without a graph anyway; this says it out loud)
            for block in blocks:
                y = y + h * block.F(z)
                z = z + h * block.G(y)
        ctx.blocks, ctx.h = blocks, h
        ctx.save_for_backward(y, z)  # the outputs: the only tensors kept, whatever the depth
        return y, z

    @staticmethod
    def backward(ctx, gy, gz):
        y, z = ctx.saved_tensors
        return (None, None, *walk_back(ctx.blocks, ctx.h, y, z, gy, gz))


def run_function(function: type[torch.autograd.Function], blocks: Sequence[nn.Module], x: Tensor,
                 h: float) -> Tensor:
    """The trunk's output (y_L + z_L) / 2 from y0 = z0 = x, computed by `function` (any Function with the
    signature of `ReversibleEulerFunction`: the learner's or the reference)."""
    y, z = function.apply(blocks, h, x, x, *block_params(blocks))
    return 0.5 * (y + z)


# --- broken variants (exercise 01b.4): each breaks one property -------------------------------------------

def _undo_layer_swapped(block: TwoStreamBlock, h: float, y: Tensor, z: Tensor, gy: Tensor, gz: Tensor):
    """`undo_layer` with its two updates in the wrong order: F is evaluated at z' instead of z."""
    y, gz, f_params = undo_update(block.F, h, y, z, gy, gz)
    z, gy, g_params = undo_update(block.G, h, z, y, gz, gy)
    return y, z, gy, gz, f_params + g_params


class SwappedInverse(ReversibleEulerFunction):
    """Break: undo y' before z'. Keeps the memory promise, gets the numbers wrong."""

    @staticmethod
    def backward(ctx, gy, gz):
        y, z = ctx.saved_tensors
        return (None, None, *walk_back(ctx.blocks, ctx.h, y, z, gy, gz, undo=_undo_layer_swapped))


class KeepsStates(ReversibleEulerFunction):
    """Break: save every layer's state and restart each layer's backward from it (what a stored trunk
    does). Gets the numbers right, breaks the memory promise."""

    @staticmethod
    def forward(ctx, blocks, h, y, z, *params):
        states = [y, z]
        for block in blocks:
            y = y + h * block.F(z)
            z = z + h * block.G(y)
            states += [y, z]
        ctx.blocks, ctx.h = blocks, h
        ctx.save_for_backward(*states)
        return y, z

    @staticmethod
    def backward(ctx, gy, gz):
        states, param_grads = ctx.saved_tensors, []
        for layer in reversed(range(len(ctx.blocks))):
            y, z = states[2 * layer + 2], states[2 * layer + 3]
            _, _, gy, gz, grads = undo_layer(ctx.blocks[layer], ctx.h, y, z, gy, gz)
            param_grads = grads + param_grads
        return (None, None, gy, gz, *param_grads)


BREAKS: dict[str, type[torch.autograd.Function]] = {"reference": ReversibleEulerFunction,
                                                      "swap the inverse updates": SwappedInverse,
                                                      "keep every state": KeepsStates}


# --- the stored twin and the general Function ------------------------------------------------------------

def stored_trunk(blocks: Sequence[nn.Module], x: Tensor, h: float, integrator: Integrator | None = None) -> Tensor:
    """The same trunk under plain autograd (every activation kept): `rev.core.integrators`' own `step`,
    with the stream add written as a differentiable `s + c * out`."""
    integ = integrator or RevEuler()
    state = integ.init(x)
    for layer, block in enumerate(blocks):
        call = lambda name, s, block=block: block.component(name)(s)  # noqa: E731
        state = integ.step(state, call, h, layer, lambda s, out, c: s + c * out)
    return integ.output(state)


def core_trunk(blocks: Sequence[nn.Module], x: Tensor, h: float, integrator: Integrator | None = None,
               stream: str = "fp64") -> Tensor:
    """The same trunk through `rev.core.reversible`, the memory-free Function for any integrator."""
    return reversible_trunk(integrator or RevEuler(), blocks, x, h, get_stream(stream))


def function_trunk(function: type[torch.autograd.Function]) -> Callable[[Sequence[nn.Module], Tensor, float], Tensor]:
    """`trunk(blocks, x, h)` computed by `function`, so Functions and trunks compare the same way."""
    return lambda blocks, x, h: run_function(function, blocks, x, h)


# the two trunks the notebook compares, by the names its plots and tables use
TRUNKS: dict[str, Callable] = {"memory-free Function": function_trunk(ReversibleEulerFunction),
                               "stored twin": stored_trunk}


# --- gradients: the learner's (or any) trunk against the stored twin -------------------------------------

def _gradients(trunk: Callable, blocks: Sequence[nn.Module], x: Tensor, h: float) -> tuple[Tensor, list[Tensor]]:
    x = x.detach().clone().requires_grad_(True)
    params = block_params(blocks)
    out = trunk(blocks, x, h)
    # a loss whose gradient differs per element, so a transposed or misplaced gradient cannot pass
    weights = torch.linspace(-1.0, 2.0, out.numel(), dtype=out.dtype).view_as(out)
    grads = torch.autograd.grad((out * weights).sum() + 0.5 * (out ** 2).sum(), (x, *params))
    return out.detach(), list(grads)


def relative_error(a: Tensor, ref: Tensor) -> float:
    """|a - ref| / |ref| in L2 norm: sensitive to scale, unlike the cosine between them."""
    return float((a - ref).norm() / ref.norm().clamp_min(1e-300))


def gradient_errors(trunk: Callable, blocks: Sequence[nn.Module], x: Tensor, h: float,
                    reference: Callable = stored_trunk) -> pd.DataFrame:
    """Relative errors of `trunk`'s output, input gradient and parameter gradients against `reference`
    (the stored twin): one row per tensor, columns `tensor`, `rel_error`, `cosine`."""
    out, grads = _gradients(trunk, blocks, x, h)
    ref_out, ref_grads = _gradients(reference, blocks, x, h)
    names = ["output", "input x"] + [f"block {i}: {n}" for i, b in enumerate(blocks) for n, _ in b.named_parameters()]
    rows = []
    for name, a, r in zip(names, [out, *grads], [ref_out, *ref_grads]):
        cos = float(torch.nn.functional.cosine_similarity(a.flatten(), r.flatten(), dim=0))
        rows.append({"tensor": name, "rel_error": relative_error(a, r), "cosine": cos})
    return pd.DataFrame(rows)


def summarise_errors(errors: pd.DataFrame) -> dict[str, float]:
    """Worst relative error of the output, the input gradient and the parameter gradients."""
    params = errors[errors.tensor.str.startswith("block")]
    return {"output": float(errors.rel_error[errors.tensor == "output"].max()),
            "input grad": float(errors.rel_error[errors.tensor == "input x"].max()),
            "param grads": float(params.rel_error.max())}


def saved_tensor_bytes(trunk: Callable, blocks: Sequence[nn.Module], x: Tensor, h: float) -> int:
    """Bytes autograd keeps for backward after `trunk`'s forward, seen through saved-tensor hooks
    (parameters, which every trunk holds anyway, not counted)."""
    params = {p.untyped_storage().data_ptr() for p in block_params(blocks)}
    saved: dict[int, int] = {}

    def pack(t: Tensor) -> None:
        ptr = t.untyped_storage().data_ptr()
        if ptr not in params:
            saved[ptr] = t.untyped_storage().nbytes()

    # (`saved_tensors_seen` keeps nothing of the forward alive once it is dropped: no backward runs here)
    with saved_tensors_seen(on_pack=pack):
        trunk(blocks, x, h)
    return sum(saved.values())


# --- what the exercise checks (`exercises`) and the break table run on ------------------------------------------------

def exercise_trunk(depth: int) -> tuple[nn.ModuleList, Tensor]:
    """The float64 blocks and input the checks run on (a fixed seed: a failure can be reproduced)."""
    return make_blocks(depth, gain=1.5, seed=11), make_input(5, 8, seed=11)


def saved_bytes_at(function: type[torch.autograd.Function], depths: Sequence[int], h: float) -> list[int]:
    """Bytes `function`'s forward keeps for backward, at each of `depths` (flat when it is memory-free)."""
    return [saved_tensor_bytes(function_trunk(function), *exercise_trunk(d), h) for d in depths]


def check_fixed_inverse(depth: int = 32, seed: int = 0) -> bool:
    """True when the fixed-point stream rebuilds the trunk's input bit for bit after `depth` layers."""
    blocks, x = make_blocks(depth, gain=4.0, seed=seed), make_input(16, 8, seed)
    return rebuild_error(blocks, x, 1.0, "fixed") == 0.0


# --- drift: forward, then inverse, on each stream --------------------------------------------------------

@torch.no_grad()
def rebuild_error(blocks: Sequence[nn.Module], x: Tensor, h: float, stream: str) -> float:
    """Forward through `blocks` with `rev.core`'s reversible Euler on `stream`, invert, return the relative
    error of the rebuilt input (0.0: bit for bit)."""
    integ, st = RevEuler(), get_stream(stream)
    start = tuple(st.encode(s) for s in integ.init(x))
    final, _ = run_forward(integ, blocks, start, h, st, x.dtype)
    return state_error(start, run_inverse(integ, blocks, final, h, st, x.dtype), st)


def drift_study(depths: Sequence[int], h: float = 1.0, batch: int = 64, dim: int = 8, hidden: int = 16,
                gain: float = 4.0, seed: int = 0, streams: Sequence[str] = STREAMS,
                dtype: torch.dtype = torch.float64) -> pd.DataFrame:
    """Reconstruction error against depth for each stream: columns `depth`, `stream`, `error`.

    The stream only decides how the running sum is held; the blocks compute in `dtype`. (float64 by
    default, so that the fp64 stream's own rounding shows: with float32 blocks, an fp64 stream adds float32
    increments exactly until the magnitudes in the sum spread over 2^29.) A gain of 4 makes the field
    expansive, so errors grow with depth the way they do in a trained trunk. Depth d uses the first d blocks
    of one deep trunk, so depths differ only in how far they walk."""
    blocks = make_blocks(max(depths), dim, hidden, gain, seed, dtype)
    x = make_input(batch, dim, seed, dtype)
    rows = [{"depth": d, "stream": s, "error": rebuild_error(blocks[:d], x, h, s)}
            for s in streams for d in depths]
    return pd.DataFrame(rows)


def plot_drift(df: pd.DataFrame, ax=None, limit: float | None = None):
    """Error vs depth per stream on log axes; exact zeros (the fixed stream) sit on the floor."""
    ax = ax or plt.subplots(figsize=(6.5, 4.2))[1]
    floor = 0.3 * df.error[df.error > 0].min() if (df.error > 0).any() else 1e-18
    for s, g in df.groupby("stream", sort=False):
        ax.plot(g.depth, np.maximum(g.error, floor), "o-", color=COLORS.get(s), label=s)
    if limit is not None:
        ax.axhline(limit, color="k", ls=":", lw=1, label=f"trust limit {limit:g}")
    ax.axhline(floor, color="gray", lw=0.6)
    ax.text(df.depth.max(), floor * 1.6, "exactly 0 (drawn on the floor)", fontsize=8, color="gray", ha="right")
    ax.set(xscale="log", yscale="log", xlabel="depth L", ylabel="relative rebuild error",
           title="there and back")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return ax


# --- memory: activation bytes against depth ---------------------------------------------------------------

def step_activation_bytes(trunk: Callable, blocks: nn.ModuleList, x: Tensor, h: float) -> int:
    """Activation bytes of one forward + backward of `trunk`, as `rev.measure.memory.training_step_memory`
    counts them for every run of the workbook: what the step adds above parameters and gradients, with the
    gradients held throughout (a stored trunk peaks at the end of forward, before any gradient exists)."""
    def step() -> None:
        trunk(blocks, x, h).square().mean().backward()
    return training_step_memory(blocks, None, step, x.device).activation_bytes


def memory_study(depths: Sequence[int], h: float = 0.5, batch: int = 256, dim: int = 64, hidden: int = 256,
                 seed: int = 0, trunks: dict[str, Callable] | None = None) -> pd.DataFrame:
    """Activation memory against depth, float32 on CPU, two ways: `saved_bytes` (what autograd keeps for
    backward, exact) and `activation_bytes` (peak of a forward + backward, measured). Columns `depth`,
    `trunk`, `saved_bytes`, `activation_bytes`."""
    trunks = trunks or TRUNKS
    x = make_input(batch, dim, seed, torch.float32)
    rows = []
    for d in depths:
        blocks = make_blocks(d, dim, hidden, 1.0, seed, torch.float32)
        rows += [{"depth": d, "trunk": name, "saved_bytes": saved_tensor_bytes(fn, blocks, x, h),
                  "activation_bytes": step_activation_bytes(fn, blocks, x, h)} for name, fn in trunks.items()]
    return pd.DataFrame(rows)


def memory_slopes(df: pd.DataFrame, column: str = "activation_bytes") -> pd.DataFrame:
    """Per trunk: bytes per extra layer (least-squares slope of `column`) and the bytes at the shallowest depth."""
    rows = []
    for name, g in df.groupby("trunk", sort=False):
        slope = np.polyfit(g.depth, g[column], 1)[0] if len(g) > 1 else float("nan")
        slope = float(np.round(slope)) + 0.0  # whole bytes; "+ 0.0" turns a flat line's -0.0 into 0.0
        rows.append({"trunk": name, "bytes_per_layer": slope, "bytes_at_min_depth": int(g[column].iloc[0])})
    return pd.DataFrame(rows).set_index("trunk")


def plot_memory(df: pd.DataFrame):
    """Two panels against depth: bytes kept for backward, and the measured peak of a forward + backward."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    titles = {"saved_bytes": "kept for backward",
              "activation_bytes": "one step's peak"}
    for ax, (column, title) in zip(axes, titles.items()):
        for name, g in df.groupby("trunk", sort=False):
            ax.plot(g.depth, g[column] / MIB, "o-", color=COLORS.get(name), label=name)
        ax.set(xlabel="depth L", ylabel="MiB", title=title)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return fig


# --- cost: how many block evaluations each trunk makes ----------------------------------------------------

def count_evaluations(trunk: Callable, blocks: Sequence[TwoStreamBlock], x: Tensor, h: float) -> int:
    """MLP evaluations (F or G calls) in one forward + backward of `trunk`."""
    calls = [0]
    hooks = [net.register_forward_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
             for b in blocks for net in (b.F, b.G)]
    try:
        trunk(blocks, x, h).square().mean().backward()
    finally:
        for hk in hooks:
            hk.remove()
    return calls[0]


def evaluations_per_layer(blocks: Sequence[TwoStreamBlock], x: Tensor, h: float) -> dict[str, float]:
    """MLP evaluations per layer in one forward + backward, for the memory-free Function and the stored twin."""
    return {name: count_evaluations(fn, blocks, x, h) / len(blocks) for name, fn in TRUNKS.items()}


# --- break it: which check catches which break ------------------------------------------------------------

def break_table(depth: int = 6, h: float = 0.5) -> pd.DataFrame:
    """For the reference and each broken variant: the worst gradient error against the stored twin in
    float64, and the bytes forward saves at depth 2 and at 3 * depth."""
    rows = []
    for name, fn in BREAKS.items():
        worst = max(summarise_errors(gradient_errors(function_trunk(fn), *exercise_trunk(depth), h)).values())
        shallow, deep = saved_bytes_at(fn, (2, 3 * depth), h)
        rows.append({"variant": name, "worst gradient error": worst, "gradient check": worst <= GRAD_RTOL,
                     "saved bytes, depth 2": shallow, f"saved bytes, depth {3 * depth}": deep})
    df = pd.DataFrame(rows).set_index("variant")
    df["memory check"] = df.iloc[:, 2] >= df.iloc[:, 3]
    return df
