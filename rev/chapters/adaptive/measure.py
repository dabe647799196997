"""Notebook 09 (adaptive checkpointing): keep sets, the reversal defect, kept-state memory and gradient fidelity.

Everything here *measures*; nothing decides (that is `policy`). Boundary k is the state entering layer k
(0 = the trunk input, n_layer = the final state, which the trunk always holds); keepable boundaries are
1..n_layer-1. A keep set splits the layers into spans [k_i, k_{i+1}); backward inverts each span starting from
an exact state.

* `reversal_defect(model, idx, spans)` -- per span, delta = |inverse(forward(x)) - x| / (|x| + eps), without
  autograd; `backward_reconstruction_errors` -- the error of every state the reversible backward rebuilds;
* `apply_keep(model, keep)` -- the trunk stores those boundaries in forward and its backward restarts there;
* `kept_state_bytes`, `state_bytes` -- memory of kept states, measured from the tensors actually stored;
* `gradient_cosine(model, idx, targets, reference)` -- the fidelity check against a dense reference on the same
  weights: the stored twin (ordinary autograd) or the same trunk on an fp64 stream.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Iterable, Sequence

import torch
from torch import Tensor, nn

from ...core.model import GPT, stored_twin
from ...core.reversible import State, run_forward, run_inverse
from ...core.streams import Stream


Span = tuple[int, int]   # layers [start, stop)
REFERENCES = ("stored", "fp64")
DEFECT_EPS = 1e-12

# --------------------------------------------------------------------------------------------------------------
# Keep sets and spans
# --------------------------------------------------------------------------------------------------------------


def validate_keep(n_layer: int, keep: Iterable[int]) -> tuple[int, ...]:
    """Sorted, de-duplicated keep boundaries; each must lie in 1..n_layer-1."""
    out = tuple(sorted({int(k) for k in keep}))
    bad = [k for k in out if not 0 < k < n_layer]
    if bad:
        raise ValueError(f"keep {bad}: outside 1..{n_layer - 1}")   # 0 is the input, n_layer the final state
    return out


def fixed_spacing(n_layer: int, span: int) -> tuple[int, ...]:
    """Keep every `span`-th boundary: span, 2*span, ... below n_layer (span >= n_layer keeps nothing)."""
    if int(span) != span or span < 1:
        raise ValueError(f"span {span!r}: need int >= 1")
    if n_layer < 1:
        raise ValueError(f"n_layer={n_layer} < 1")
    return tuple(range(int(span), n_layer, int(span)))


def spans_from_keep(n_layer: int, keep: Iterable[int]) -> list[Span]:
    """The spans of layers between consecutive boundaries of {0} + keep + {n_layer}."""
    cuts = (0, *validate_keep(n_layer, keep), n_layer)
    return list(zip(cuts[:-1], cuts[1:]))


def keep_from_spans(spans: Sequence[Span]) -> tuple[int, ...]:
    """Inverse of `spans_from_keep`: the inner boundaries of contiguous spans."""
    for (a, b), (c, _) in zip(spans[:-1], spans[1:]):
        if b != c:
            raise ValueError(f"{(a, b)} then {c}: not contiguous")
    return tuple(b for _, b in spans[:-1])


def apply_keep(model: GPT, keep: Iterable[int]) -> tuple[int, ...]:
    """Make the trunk store the stream state at `keep` from its next forward on. Returns the keep set.

    The trunk reads `keep` on every forward, so a policy can change it between steps. Only the trunk is changed:
    `model.cfg.keep` still records the keep set the model was built with."""
    keep = validate_keep(model.cfg.n_layer, keep)
    model.trunk.keep = keep
    return keep


# --------------------------------------------------------------------------------------------------------------
# Measuring the defect
# --------------------------------------------------------------------------------------------------------------


def _reversible_trunk(model: GPT) -> nn.Module:
    trunk = model.trunk
    if not trunk.integrator.reversible:
        raise ValueError(f"{model.cfg.trunk!r}: no exact inverse")
    return trunk


@torch.no_grad()
def boundary_states(model: GPT, idx: Tensor) -> list[State]:
    """Stream states at every boundary 0..n_layer for input tokens `idx` (stream storage, no autograd).

    Consecutive states may share tensors (leapfrog carries x[l] in both), exactly as in the trunk's forward."""
    trunk = _reversible_trunk(model)
    x = model.embed(idx)
    state = tuple(trunk.stream.encode(s) for s in trunk.integrator.init(x))
    states = [state]
    for layer, block in enumerate(trunk.blocks):
        state, _ = run_forward(trunk.integrator, [block], state, trunk.h, trunk.stream, x.dtype, start=layer)
        states.append(state)
    return states


def relative_error(ref: State, got: State, stream: Stream, eps: float = DEFECT_EPS) -> float:
    """|got - ref| / (|ref| + eps): Frobenius norms over all streams of the state, computed in float64."""
    num = den = 0.0
    for a, b in zip(ref, got):
        a64, b64 = stream.decode(a, torch.float64), stream.decode(b, torch.float64)
        num += float(((b64 - a64) ** 2).sum())
        den += float((a64 ** 2).sum())
    return math.sqrt(num) / (math.sqrt(den) + eps)


def _invert_span(model: GPT, state: State, span: Span, dtype: torch.dtype) -> State:
    trunk = model.trunk
    a, b = span
    return run_inverse(trunk.integrator, trunk.blocks[a:b], state, trunk.h, trunk.stream, dtype, start=a)


def _check_spans(n_layer: int, spans: Sequence[Span]) -> list[Span]:
    out = [(int(a), int(b)) for a, b in spans]
    for a, b in out:
        if not 0 <= a < b <= n_layer:
            raise ValueError(f"span {(a, b)} outside 0..{n_layer}")
    return out


@torch.no_grad()
def reversal_defect(model: GPT, idx: Tensor, spans: Sequence[Span] | None = None,
                    eps: float = DEFECT_EPS) -> list[float]:
    """Normalised round-trip defect of each span [a, b): run the trunk forward to boundary b, invert layers
    b-1..a, and compare with the state at boundary a. Default spans: every layer on its own.

    This is exactly the error the reversible backward makes at the bottom of a span when it restarts from an
    exact state at the top of it (a kept state or the final state). 0.0 means bit-exact."""
    n_layer = model.cfg.n_layer
    spans = [(l, l + 1) for l in range(n_layer)] if spans is None else _check_spans(n_layer, spans)
    states = boundary_states(model, idx)
    dtype = model.wte.weight.dtype
    stream = model.trunk.stream
    return [relative_error(states[a], _invert_span(model, states[b], (a, b), dtype), stream, eps)
            for a, b in spans]


@torch.no_grad()
def defect_vs_depth(model: GPT, idx: Tensor, eps: float = DEFECT_EPS) -> list[float]:
    """Defect of the span (0, d) for d = 1..n_layer: how a round trip degrades with the depth it spans."""
    return reversal_defect(model, idx, [(0, d) for d in range(1, model.cfg.n_layer + 1)], eps)


@torch.no_grad()
def backward_reconstruction_errors(model: GPT, idx: Tensor, keep: Iterable[int] | None = None,
                                   eps: float = DEFECT_EPS) -> list[float]:
    """Relative error of the state the reversible backward rebuilds at each boundary 0..n_layer, when it walks
    down from the final state and restarts from the states kept at `keep` (default: the trunk's keep set).

    This mirrors `ReversibleFunction.backward`: layer l's gradient is computed at the input it rebuilds by
    inverting layer l, and a kept copy of boundary k replaces the rebuilt state only for the layers below k.
    So entry k is the defect of the span starting at k, even when k is kept; entry n_layer is 0."""
    n_layer = model.cfg.n_layer
    keep = set(validate_keep(n_layer, model.trunk.keep if keep is None else keep))
    states = boundary_states(model, idx)
    dtype, stream = model.wte.weight.dtype, model.trunk.stream
    errors = [0.0] * (n_layer + 1)
    state = states[n_layer]
    for layer in reversed(range(n_layer)):
        if layer + 1 in keep:
            state = states[layer + 1]
        state = _invert_span(model, state, (layer, layer + 1), dtype)
        errors[layer] = relative_error(states[layer], state, stream, eps)
    return errors


# --------------------------------------------------------------------------------------------------------------
# Memory of kept states
# --------------------------------------------------------------------------------------------------------------


def _storage_bytes(tensors: Iterable[Tensor]) -> int:
    """Bytes of the distinct storages behind `tensors` (a tensor held twice is counted once)."""
    seen: dict[int, int] = {}
    for t in tensors:
        s = t.untyped_storage()
        seen[s.data_ptr()] = s.nbytes()
    return sum(seen.values())


@torch.no_grad()
def state_bytes(model: GPT, idx: Tensor) -> int:
    """Bytes of one stream state of the trunk for this batch (all its streams), measured after one layer."""
    trunk = _reversible_trunk(model)
    x = model.embed(idx)
    state = tuple(trunk.stream.encode(s) for s in trunk.integrator.init(x))
    state, _ = run_forward(trunk.integrator, trunk.blocks[:1], state, trunk.h, trunk.stream, x.dtype)
    return _storage_bytes(state)


@torch.no_grad()
def kept_state_bytes(model: GPT, idx: Tensor, keep: Iterable[int] | None = None) -> int:
    """Bytes the trunk's forward stores for `keep` (default: its keep set) on this batch, measured from the
    tensors `run_forward` actually keeps -- the same call the reversible trunk makes."""
    trunk = _reversible_trunk(model)
    keep = validate_keep(model.cfg.n_layer, trunk.keep if keep is None else keep)
    x = model.embed(idx)
    state = tuple(trunk.stream.encode(s) for s in trunk.integrator.init(x))
    _, kept = run_forward(trunk.integrator, trunk.blocks, state, trunk.h, trunk.stream, x.dtype, keep=keep)
    return _storage_bytes(t for st in kept.values() for t in st)


# --------------------------------------------------------------------------------------------------------------
# Fidelity: gradients against a dense reference on the same weights
# --------------------------------------------------------------------------------------------------------------


def clone_model(model: GPT, **changes) -> GPT:
    """A new model on a copy of `model`'s weights, with GPTConfig fields changed (e.g. stream="fp64")."""
    cfg = dataclasses.replace(model.cfg, **changes)
    with torch.random.fork_rng(devices=[]):  # building a model draws init weights; leave the caller's RNG alone
        twin = GPT(cfg)
    twin.load_state_dict(model.state_dict())
    return twin.to(model.wte.weight.device)


def reference_model(model: GPT, reference: str = "stored") -> GPT:
    """A model on the same weights whose gradients serve as the reference.

    `stored`: the stored twin on the same stream (activations kept by autograd, no reconstruction at all).
    `fp64`: the same trunk on an fp64 stream (reconstruction error ~2^-29 times smaller than fp32's)."""
    if reference not in REFERENCES:
        raise ValueError(f"unknown reference {reference!r}; use {', '.join(REFERENCES)}")
    changes = {"trunk": stored_twin(model.cfg.trunk)} if reference == "stored" else {"stream": "fp64"}
    return clone_model(model, keep=(), **changes).train(model.training)


def parameter_gradients(model: GPT, idx: Tensor, targets: Tensor) -> dict[str, Tensor]:
    """Gradients of the loss wrt every parameter, without touching the parameters' `.grad`."""
    names, params = zip(*model.named_parameters())
    with torch.enable_grad():
        loss = model(idx, targets)
        grads = torch.autograd.grad(loss, params, allow_unused=True)
    return {n: (g if g is not None else torch.zeros_like(p)).detach() for n, p, g in zip(names, params, grads)}


def _cosine(a: Tensor, b: Tensor) -> float | None:
    a, b = a.double().flatten(), b.double().flatten()
    na, nb = float(a.norm()), float(b.norm())
    if na == 0.0 and nb == 0.0:
        return None  # both zero (e.g. embedding rows of unused tokens): no direction to compare
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float(a @ b) / (na * nb)


def gradient_cosine(model: GPT, idx: Tensor, targets: Tensor, reference: str = "stored") -> dict:
    """Cosine between the model's gradient and the reference's (see `reference_model`) on the same batch.

    Returns `min` (the smallest per-parameter cosine) and `worst` (that parameter), `global` (all parameters
    as one vector), `rel_err` (|g - g_ref| / |g_ref|) and `per_layer` (cosine of each block's parameters)."""
    got = parameter_gradients(model, idx, targets)
    ref = parameter_gradients(reference_model(model, reference), idx, targets)
    per_param = {n: c for n in got if (c := _cosine(got[n], ref[n])) is not None}
    worst = min(per_param, key=per_param.get)
    g = torch.cat([t.double().flatten() for t in got.values()])
    r = torch.cat([t.double().flatten() for t in ref.values()])
    per_layer = []
    for l in range(model.cfg.n_layer):
        prefix = f"trunk.blocks.{l}."
        names = [n for n in got if n.startswith(prefix)]
        c = _cosine(torch.cat([got[n].flatten() for n in names]), torch.cat([ref[n].flatten() for n in names]))
        per_layer.append(1.0 if c is None else c)
    return {"min": per_param[worst], "worst": worst, "global": _cosine(g, r),
            "rel_err": float((g - r).norm() / r.norm().clamp_min(1e-300)), "per_layer": per_layer}
