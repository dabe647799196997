"""Reversal defect as a reliability signal: checkpoints of the stream kept only where they are needed.

A reversible trunk on a float stream rounds on every add and subtract, so walking it backward does not land
exactly on the states the forward pass went through; on expanding blocks the error grows layer after layer.
Two remedies change the stream (`fp64`, `fixed`). This module builds the third: *measure* how far a round trip
misses, and keep an exact copy of the stream state at the layer boundaries where it misses too much.

* `reversal_defect(model, idx, spans)` -- per span of blocks, delta = |inverse(forward(x)) - x| / (|x| + eps),
  measured without autograd on a (probe) batch.
* `AdaptivePolicy` -- the rule: halve a span whose defect exceeds `tau_warn`, merge neighbouring spans whose
  defects stayed below `tau_safe` (up to `max_span` layers), never keep more states than `budget_bytes` holds.
  `FixedPolicy` is the comparison: a keep set that never changes.
* `apply_keep(model, keep)` -- the trunk stores the state at those boundaries in forward and its backward
  restarts from those exact copies, so reconstruction error cannot accumulate past one span.
* `kept_state_bytes`, `state_bytes` -- memory of kept states, measured from the tensors actually stored.
* `gradient_cosine(model, idx, targets, reference)` -- the fidelity check against a dense reference on the
  same weights: the stored twin (ordinary autograd) or the same trunk on an fp64 stream.
* `AdaptiveCheckpointer.on_step(model, step, idx, targets)` -- the hook a training loop calls every step; it
  measures, updates the keep set and returns the fields to log. `train_with_checkpointer` is a compact loop
  for the chapter's comparison; `AdaptiveCheckpointer.train_callback` plugs the hook into `rev.engine.train.train`.

Boundaries: boundary k is the state entering layer k (0 = the trunk input, n_layer = the final state, which
the trunk always holds). Keepable boundaries are 1..n_layer-1. A keep set splits the layers into spans
[k_i, k_{i+1}); backward inverts each span starting from an exact state.
"""
from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import torch
from torch import Tensor, nn

from ..core.model import GPT, GPTConfig, TRUNKS
from ..core.reversible import State, run_forward, run_inverse
from ..core.streams import Stream

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
        raise ValueError(f"keep boundaries must lie in 1..{n_layer - 1} for a {n_layer}-layer trunk, got {bad}: "
                         f"boundary 0 is the input and {n_layer} the final state, which the trunk holds anyway")
    return out


def fixed_spacing(n_layer: int, span: int) -> tuple[int, ...]:
    """Keep every `span`-th boundary: span, 2*span, ... below n_layer (span >= n_layer keeps nothing)."""
    if int(span) != span or span < 1:
        raise ValueError(f"span must be a whole number of layers >= 1, got {span!r}")
    if n_layer < 1:
        raise ValueError(f"n_layer must be >= 1, got {n_layer}")
    return tuple(range(int(span), n_layer, int(span)))


def spans_from_keep(n_layer: int, keep: Iterable[int]) -> list[Span]:
    """The spans of layers between consecutive boundaries of {0} + keep + {n_layer}."""
    cuts = (0, *validate_keep(n_layer, keep), n_layer)
    return list(zip(cuts[:-1], cuts[1:]))


def keep_from_spans(spans: Sequence[Span]) -> tuple[int, ...]:
    """Inverse of `spans_from_keep`: the inner boundaries of contiguous spans."""
    for (a, b), (c, _) in zip(spans[:-1], spans[1:]):
        if b != c:
            raise ValueError(f"spans must be contiguous, got {(a, b)} followed by one starting at {c}")
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
        raise ValueError(f"trunk {model.cfg.trunk!r} has no exact inverse, so it has no reversal defect; "
                         f"use a midpoint or reveuler trunk")
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
            raise ValueError(f"span {(a, b)} is not a non-empty range of layers within 0..{n_layer}")
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


def stored_twin(trunk: str) -> str:
    """The stored (ordinary autograd) trunk running the same integrator: `reveuler_rev` -> `reveuler`."""
    integrator = TRUNKS[trunk][0]
    return next(name for name, (integ, mode) in TRUNKS.items() if integ == integrator and mode == "stored")


def reference_model(model: GPT, reference: str = "stored") -> GPT:
    """A model on the same weights whose gradients serve as the reference.

    `stored`: the stored twin on the same stream (activations kept by autograd, no reconstruction at all).
    `fp64`: the same trunk on an fp64 stream (reconstruction error ~2^-29 times smaller than fp32's)."""
    if reference not in REFERENCES:
        raise ValueError(f"unknown reference {reference!r}: choose one of {', '.join(REFERENCES)}")
    cfg = model.cfg
    if reference == "stored":
        cfg = dataclasses.replace(cfg, trunk=stored_twin(cfg.trunk), keep=())
    else:
        cfg = dataclasses.replace(cfg, stream="fp64", keep=())
    with torch.random.fork_rng(devices=[]):  # building a model draws init weights; leave the caller's RNG alone
        twin = GPT(cfg)
    twin.load_state_dict(model.state_dict())
    return twin.to(model.wte.weight.device).train(model.training)


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


# --------------------------------------------------------------------------------------------------------------
# Policies
# --------------------------------------------------------------------------------------------------------------


class FixedPolicy:
    """A keep set that never changes: every `span`-th boundary (span=None: keep nothing)."""

    def __init__(self, span: int | None = None):
        if span is not None and (int(span) != span or span < 1):
            raise ValueError(f"span must be a whole number of layers >= 1 (or None for no kept states), "
                             f"got {span!r}")
        self.span = span
        self.spans: list[Span] = []

    @property
    def name(self) -> str:
        return "none" if self.span is None else f"fixed:{self.span}"

    @property
    def keep(self) -> tuple[int, ...]:
        return keep_from_spans(self.spans)

    def start(self, n_layer: int, state_bytes: int | None = None) -> tuple[int, ...]:
        keep = () if self.span is None else fixed_spacing(n_layer, self.span)
        self.spans = spans_from_keep(n_layer, keep)
        return keep

    def update(self, defects: Sequence[float], state_bytes: int | None = None) -> tuple[int, ...]:
        if len(defects) != len(self.spans):
            raise ValueError(f"got {len(defects)} defects for {len(self.spans)} spans")
        return self.keep


@dataclass
class AdaptivePolicy:
    """Where the defect says so, keep more states; where it stays small, keep fewer.

    On each `update(defects)` (one defect per current span, from `reversal_defect`):

    * a span whose defect exceeds `tau_warn` is halved (a kept state at its middle), worst defect first,
      as long as both halves have at least `min_span` layers and the kept states fit `budget_bytes`;
    * two neighbouring spans whose defects stayed below `tau_safe` for `patience` consecutive updates are
      merged (their shared kept state dropped) if together they span at most `max_span` layers;
    * anything in between is left alone (the gap between the thresholds is the hysteresis that stops a
      merge from being undone at the next check);
    * a defect that is not finite counts as above `tau_warn`.

    `start(n_layer)` begins from the cheapest allowed layout, spans of `max_span`. The memory budget counts
    kept states only (the final state is held by every trunk); `state_bytes` (bytes of one state for the
    batch in use, see `state_bytes()`) converts it into a number of states.
    """

    tau_warn: float = 3e-3
    tau_safe: float = 3e-4
    max_span: int = 8
    min_span: int = 1
    budget_bytes: int | None = None
    patience: int = 2
    spans: list[Span] = field(default_factory=list, init=False)
    calm: list[int] = field(default_factory=list, init=False)   # consecutive updates below tau_safe, per span

    def __post_init__(self) -> None:
        for name in ("tau_warn", "tau_safe"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
        if self.tau_safe > self.tau_warn:
            raise ValueError(f"tau_safe={self.tau_safe} exceeds tau_warn={self.tau_warn}: the safe threshold "
                             f"must be the lower one (e.g. tau_safe = tau_warn / 10)")
        for name in ("min_span", "max_span", "patience"):
            v = getattr(self, name)
            if isinstance(v, bool) or int(v) != v or v < 1:
                raise ValueError(f"{name} must be a whole number >= 1, got {v!r}")
        if self.max_span < self.min_span:
            raise ValueError(f"max_span={self.max_span} is below min_span={self.min_span}; raise max_span")
        if self.budget_bytes is not None and self.budget_bytes < 0:
            raise ValueError(f"budget_bytes must be >= 0 (or None for no limit), got {self.budget_bytes}")

    @property
    def name(self) -> str:
        return f"adaptive({self.tau_warn:g}/{self.tau_safe:g}, max_span={self.max_span})"

    @property
    def keep(self) -> tuple[int, ...]:
        return keep_from_spans(self.spans)

    def tighten(self, factor: float) -> None:
        """Divide both thresholds by `factor` (> 1): what a failed fidelity check asks for."""
        if not factor > 1:
            raise ValueError(f"tighten factor must be > 1, got {factor!r}")
        self.tau_warn /= factor
        self.tau_safe /= factor

    def max_kept(self, state_bytes: int | None) -> int | None:
        """How many kept states the budget holds (None: no limit)."""
        if self.budget_bytes is None:
            return None
        if not state_bytes or state_bytes < 1:
            raise ValueError("a memory budget needs the bytes of one state: pass state_bytes (see state_bytes())")
        return int(self.budget_bytes // state_bytes)

    def start(self, n_layer: int, state_bytes: int | None = None) -> tuple[int, ...]:
        """Reset to spans of `max_span` layers (the fewest kept states the rule allows) and return the keep set."""
        keep = fixed_spacing(n_layer, self.max_span)
        cap = self.max_kept(state_bytes)
        if cap is not None and len(keep) > cap:
            raise ValueError(f"max_span={self.max_span} needs {len(keep)} kept states for {n_layer} layers but "
                             f"budget_bytes={self.budget_bytes} holds only {cap} of {state_bytes} bytes: raise "
                             f"budget_bytes or max_span")
        self.spans = spans_from_keep(n_layer, keep)
        self.calm = [0] * len(self.spans)
        return keep

    def update(self, defects: Sequence[float], state_bytes: int | None = None) -> tuple[int, ...]:
        """Apply the rule to one defect per current span; returns the new keep set."""
        if not self.spans:
            raise ValueError("call start(n_layer) before update()")
        if len(defects) != len(self.spans):
            raise ValueError(f"got {len(defects)} defects for {len(self.spans)} spans {self.spans}: measure "
                             f"reversal_defect(model, idx, policy.spans) with the policy's current spans")
        d = [float(x) if math.isfinite(float(x)) else math.inf for x in defects]
        calm = [c + 1 if x < self.tau_safe else 0 for c, x in zip(self.calm, d)]
        spans = list(self.spans)
        cap = self.max_kept(state_bytes)
        if cap is not None:
            spans, d, calm = _shrink_to(cap, spans, d, calm)
        room = math.inf if cap is None else cap - (len(spans) - 1)

        split: set[int] = set()
        for i in sorted(range(len(d)), key=lambda i: -d[i]):  # worst first, while the budget lasts
            a, b = spans[i]
            if d[i] > self.tau_warn and (b - a) // 2 >= self.min_span and room > 0:
                split.add(i)
                room -= 1

        new_spans, new_calm, i = [], [], 0
        while i < len(spans):
            a, b = spans[i]
            if i in split:
                mid = a + (b - a) // 2
                new_spans += [(a, mid), (mid, b)]
                new_calm += [0, 0]
            elif (i + 1 < len(spans) and i + 1 not in split and min(calm[i], calm[i + 1]) >= self.patience
                  and spans[i + 1][1] - a <= self.max_span):
                new_spans.append((a, spans[i + 1][1]))
                new_calm.append(0)  # the merged span must prove itself calm again before growing further
                i += 1
            else:
                new_spans.append((a, b))
                new_calm.append(calm[i])
            i += 1
        self.spans, self.calm = new_spans, new_calm
        return self.keep


def _shrink_to(cap: int, spans: list[Span], d: list[float], calm: list[int]
               ) -> tuple[list[Span], list[float], list[int]]:
    """Merge the neighbours with the smallest defects until at most `cap` states are kept (the budget can
    shrink below the current layout when the batch grows). A merged span's defect is estimated as the sum."""
    spans, d, calm = list(spans), list(d), list(calm)
    while len(spans) - 1 > cap:
        i = min(range(len(spans) - 1), key=lambda j: max(d[j], d[j + 1]))
        spans[i:i + 2] = [(spans[i][0], spans[i + 1][1])]
        d[i:i + 2] = [d[i] + d[i + 1]]
        calm[i:i + 2] = [0]
    return spans, d, calm


def make_policy(spec: str) -> FixedPolicy | AdaptivePolicy:
    """A policy from a short string, for configs and command lines:

    `none` | `fixed:SPAN` | `adaptive` | `adaptive:tau_warn=3e-3,tau_safe=3e-4,max_span=8,budget_bytes=...`."""
    kind, _, args = spec.partition(":")
    if kind == "none" and not args:
        return FixedPolicy(None)
    if kind == "fixed":
        try:
            return FixedPolicy(int(args))
        except ValueError:
            raise ValueError(f"policy {spec!r}: write fixed:SPAN with a whole number of layers, e.g. fixed:4") from None
    if kind == "adaptive":
        kwargs: dict = {}
        types = {f.name: f.type for f in dataclasses.fields(AdaptivePolicy) if f.init}
        for item in filter(None, args.split(",")):
            key, _, value = item.partition("=")
            if key not in types:
                raise ValueError(f"policy {spec!r}: unknown setting {key!r}; use {', '.join(types)}")
            kwargs[key] = float(value) if key.startswith("tau") else int(float(value))
        return AdaptivePolicy(**kwargs)
    raise ValueError(f"unknown checkpoint policy {spec!r}: use none, fixed:SPAN or adaptive[:key=value,...]")


# --------------------------------------------------------------------------------------------------------------
# The hook a training loop calls
# --------------------------------------------------------------------------------------------------------------


class AdaptiveCheckpointer:
    """Runs a checkpoint policy inside a training loop.

    Call `on_step(model, step, idx, targets)` before each step's forward. Every `every` steps it measures the
    defect of the policy's current spans on the first `probe_rows` rows of the batch, lets the policy move the
    keep set, applies it to the trunk, and returns the fields to log (`defect_max`, `defects`, `keep`,
    `n_kept`, `kept_bytes`). Every `fidelity_every` steps (if set) it also compares the gradient on the first
    `fidelity_rows` rows with a dense reference (`grad_cos_min`, `grad_cos_global`, `grad_worst`). On its
    first call an adaptive policy is settled: measured and updated until its layout stops moving, so training
    does not begin on a layout the defect already rules out. With `target_cos` set, a fidelity check whose
    cos_min misses it tightens an adaptive policy's thresholds by `tighten` (logged as `tau_warn`): the
    defect is only a proxy, and the check is what calibrates it. Every returned row is kept in `self.log`.
    """

    def __init__(self, policy: FixedPolicy | AdaptivePolicy, every: int = 25, fidelity_every: int | None = None,
                 reference: str = "stored", probe_rows: int = 4, fidelity_rows: int = 2, settle_rounds: int = 8,
                 target_cos: float | None = None, tighten: float = 3.0):
        for name, v in (("every", every), ("probe_rows", probe_rows), ("fidelity_rows", fidelity_rows)):
            if int(v) != v or v < 1:
                raise ValueError(f"{name} must be a whole number >= 1, got {v!r}")
        if fidelity_every is not None and (int(fidelity_every) != fidelity_every or fidelity_every < 1):
            raise ValueError(f"fidelity_every must be a whole number >= 1 or None, got {fidelity_every!r}")
        if reference not in REFERENCES:
            raise ValueError(f"unknown reference {reference!r}: choose one of {', '.join(REFERENCES)}")
        self.policy, self.every, self.fidelity_every = policy, every, fidelity_every
        self.reference, self.probe_rows, self.fidelity_rows = reference, probe_rows, fidelity_rows
        self.settle_rounds = settle_rounds
        if target_cos is not None and not 0 < target_cos <= 1:
            raise ValueError(f"target_cos must lie in (0, 1], got {target_cos!r}")
        if not tighten > 1:
            raise ValueError(f"tighten must be > 1, got {tighten!r}")
        self.target_cos, self.tighten = target_cos, tighten
        self.log: list[dict] = []
        self._state_bytes: int | None = None
        self._bytes_cache: dict[tuple, int] = {}

    def _measure(self, model: GPT, probe: Tensor) -> list[float]:
        return reversal_defect(model, probe, self.policy.spans)

    def _begin(self, model: GPT, idx: Tensor) -> None:
        self._state_bytes = state_bytes(model, idx)
        apply_keep(model, self.policy.start(model.cfg.n_layer, self._state_bytes))
        if isinstance(self.policy, AdaptivePolicy):
            probe = idx[: self.probe_rows]
            for _ in range(self.settle_rounds):
                before = self.policy.keep
                apply_keep(model, self.policy.update(self._measure(model, probe), self._state_bytes))
                if self.policy.keep == before:
                    break

    def kept_bytes(self, model: GPT, idx: Tensor) -> int:
        """Measured bytes of the current kept states for this batch shape (cached per keep set and shape)."""
        key = (tuple(model.trunk.keep), tuple(idx.shape))
        if key not in self._bytes_cache:
            self._bytes_cache[key] = kept_state_bytes(model, idx)
        return self._bytes_cache[key]

    def on_step(self, model: GPT, step: int, idx: Tensor, targets: Tensor | None = None) -> dict:
        """Measure, update and apply the keep set as scheduled; returns the fields to log (empty if none)."""
        if self._state_bytes is None:
            self._begin(model, idx)
        fields: dict = {}
        if step % self.every == 0:
            t0 = time.perf_counter()
            defects = self._measure(model, idx[: self.probe_rows])
            spans = list(self.policy.spans)
            keep = apply_keep(model, self.policy.update(defects, self._state_bytes))
            fields.update(step=step, defect_max=max(defects), defects=";".join(f"{d:.3g}" for d in defects),
                          spans=";".join(f"{a}-{b}" for a, b in spans), keep=",".join(map(str, keep)),
                          n_kept=len(keep), kept_bytes=self.kept_bytes(model, idx),
                          probe_s=time.perf_counter() - t0)
        if self.fidelity_every and targets is not None and step % self.fidelity_every == 0:
            t0 = time.perf_counter()
            rows = slice(0, self.fidelity_rows)
            cos = gradient_cosine(model, idx[rows], targets[rows], self.reference)
            fields.update(step=step, grad_cos_min=cos["min"], grad_cos_global=cos["global"], grad_worst=cos["worst"],
                          fidelity_s=time.perf_counter() - t0)
            if (self.target_cos is not None and cos["min"] < self.target_cos
                    and isinstance(self.policy, AdaptivePolicy)):
                self.policy.tighten(self.tighten)
                fields["tau_warn"] = self.policy.tau_warn
        if fields:
            self.log.append(fields)
        return fields

    def train_callback(self, probe: tuple[Tensor, Tensor]) -> Callable[[int, dict, GPT], None]:
        """An adapter for `rev.engine.train.TrainConfig(callback=...)`, which calls `callback(step, row, model)` after
        each step: the hook then measures on the fixed `probe` batch (x, y) and its keep set applies from the
        next step on. The fields land in `self.log`, not in the run's log.csv."""
        def callback(step: int, row: dict, model: GPT) -> None:
            x, y = probe
            self.on_step(model, step, x, y)
        return callback


# --------------------------------------------------------------------------------------------------------------
# A compact training loop for the chapter's comparison
# --------------------------------------------------------------------------------------------------------------


def train_with_checkpointer(model: GPT, get_batch: Callable[[int], tuple[Tensor, Tensor]], steps: int, lr: float,
                            checkpointer: AdaptiveCheckpointer | None = None, weight_decay: float = 0.1,
                            grad_clip: float = 1.0, eval_batches: Sequence[tuple[Tensor, Tensor]] = (),
                            progress: bool = False, desc: str | None = None) -> tuple[list[dict], dict]:
    """AdamW at a constant `lr` for `steps` steps on `get_batch(step) -> (x, y)`; the hook runs before each
    step's forward, so the keep set it chooses is the one that step's backward uses.

    Returns per-step rows (loss, step and hook seconds, kept states, the hook's fields) and a summary: final
    train loss (mean of the last fifth), `val_loss` on `eval_batches`, training tokens/s (hook time excluded,
    first step excluded as warm-up), the hook's overhead as a fraction of step time, kept states (mean, max),
    kept bytes (max), the worst gradient cosines and defect seen by the hook."""
    from tqdm.auto import tqdm  # imported here: the measuring functions above need no progress bars

    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=weight_decay)
    model.train()
    rows: list[dict] = []
    for step in tqdm(range(steps), desc=desc, disable=not progress, leave=False):
        x, y = get_batch(step)
        t0 = time.perf_counter()
        fields = checkpointer.on_step(model, step, x, y) if checkpointer is not None else {}
        t1 = time.perf_counter()
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        opt.step()
        t2 = time.perf_counter()
        loss_v = float(loss.detach())
        if not math.isfinite(loss_v):
            raise FloatingPointError(f"loss became {loss_v} at step {step}: lower the learning rate (now {lr:g})")
        rows.append({**fields, "step": step, "loss": loss_v, "tokens": x.numel(), "step_s": t2 - t1,
                     "hook_s": t1 - t0, "n_kept": len(model.trunk.keep) if hasattr(model.trunk, "keep") else 0})
    return rows, summarise_run(rows, model, eval_batches)


def summarise_run(rows: list[dict], model: GPT, eval_batches: Sequence[tuple[Tensor, Tensor]] = ()) -> dict:
    """The summary `train_with_checkpointer` returns (see there)."""
    timed = rows[1:] or rows
    tail = rows[-max(1, len(rows) // 5):]

    def col(key: str) -> list[float]:
        return [r[key] for r in rows if key in r]

    step_s = max(1e-12, sum(r["step_s"] for r in rows))
    out = {"steps": len(rows), "loss": sum(r["loss"] for r in tail) / len(tail),
           "tokens_per_s": sum(r["tokens"] for r in timed) / max(1e-12, sum(r["step_s"] for r in timed)),
           "hook_overhead": sum(r["hook_s"] for r in rows) / step_s,
           "probe_overhead": sum(col("probe_s")) / step_s, "fidelity_overhead": sum(col("fidelity_s")) / step_s,
           "kept_mean": sum(r["n_kept"] for r in rows) / len(rows), "kept_max": max(r["n_kept"] for r in rows),
           "kept_bytes_max": max(col("kept_bytes"), default=0),
           "grad_cos_min": min(col("grad_cos_min"), default=math.nan),
           "grad_cos_global_min": min(col("grad_cos_global"), default=math.nan),
           "defect_max": max(col("defect_max"), default=math.nan)}
    if eval_batches:
        model.eval()
        with torch.no_grad():
            out["val_loss"] = sum(float(model(x, y)) for x, y in eval_batches) / len(eval_batches)
        model.train()
    return out


# --------------------------------------------------------------------------------------------------------------
# Making the round trip degrade, on purpose and in the open
# --------------------------------------------------------------------------------------------------------------


@torch.no_grad()
def expand_blocks(model: GPT, gain: float) -> GPT:
    """Make every block more expanding, in place: scale the attention query and key weights and both output
    projections (attention and MLP) by `gain`. Attention logits grow by gain^2 (sharper, more input-sensitive
    attention) and each block writes gain times more into the stream -- the two things long training does to
    a trunk whose round trip degrades. Returns the model."""
    if not (math.isfinite(gain) and gain > 0):
        raise ValueError(f"gain must be a finite number > 0, got {gain!r}")
    d = model.cfg.d_model
    for block in model.trunk.blocks:
        block.attn.qkv.weight[: 2 * d].mul_(gain)  # rows of q and k; v is left alone
        block.attn.proj.weight.mul_(gain)
        block.mlp.proj.weight.mul_(gain)
    return model


# --------------------------------------------------------------------------------------------------------------
# The chapter's experiments (notebook 09), kept here so the notebook only calls and shows
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChapterSizes:
    """Geometry and budgets of notebook 09 for one profile. Deeper and narrower than the profile's own model:
    the defect is a matter of depth, and the chapter trains several variants."""
    d_model: int
    n_head: int
    n_layer: int
    seq_len: int
    batch: int
    pretrain_steps: int      # steps that produce the "trained weights" the measurements start from
    pretrain_lr: float
    finetune_steps: int      # steps of each variant in the training comparison
    finetune_lr: float
    every: int               # hook: defect probe every this many steps
    fidelity_every: int      # hook: gradient-cosine check every this many steps
    probe_rows: int
    fidelity_rows: int
    gains: tuple[float, ...]  # expansion gains scanned for the stress


CHAPTER_SIZES: dict[str, ChapterSizes] = {
    "smoke": ChapterSizes(d_model=32, n_head=2, n_layer=6, seq_len=32, batch=4, pretrain_steps=20, pretrain_lr=3e-3,
                          finetune_steps=6, finetune_lr=1e-3, every=2, fidelity_every=3, probe_rows=2,
                          fidelity_rows=2, gains=(1.0, 8.0, 16.0)),
    "cpu": ChapterSizes(d_model=64, n_head=2, n_layer=12, seq_len=64, batch=8, pretrain_steps=160, pretrain_lr=3e-3,
                        finetune_steps=32, finetune_lr=1e-3, every=4, fidelity_every=8, probe_rows=4,
                        fidelity_rows=4, gains=(1.0, 2.0, 4.0, 6.0, 8.0, 12.0, 16.0)),
    "t4": ChapterSizes(d_model=256, n_head=4, n_layer=16, seq_len=256, batch=16, pretrain_steps=2000,
                       pretrain_lr=1e-3, finetune_steps=300, finetune_lr=3e-4, every=10, fidelity_every=25,
                       probe_rows=4, fidelity_rows=4, gains=(1.0, 2.0, 4.0, 6.0, 8.0, 12.0, 16.0)),
}
CHAPTER_SIZES["full"] = dataclasses.replace(CHAPTER_SIZES["t4"], d_model=384, n_head=6, pretrain_steps=4000)


def chapter_sizes(profile: str) -> ChapterSizes:
    """Notebook 09's sizes for a resolved profile name (`smoke`, `cpu`, `t4`, `full`)."""
    if profile not in CHAPTER_SIZES:
        raise ValueError(f"no chapter sizes for profile {profile!r}: use one of {', '.join(CHAPTER_SIZES)} "
                         f"(resolve 'auto' with rev.engine.profiles.resolve_profile_name first)")
    return CHAPTER_SIZES[profile]


def model_config(sizes: ChapterSizes, vocab_size: int, trunk: str, stream: str = "fp32") -> GPTConfig:
    """The chapter's GPTConfig for `trunk` (h = 1 for reversible Euler, 0.5 for midpoint, as elsewhere)."""
    h = 0.5 if TRUNKS[trunk][0] == "leapfrog" else 1.0
    return GPTConfig(vocab_size=vocab_size, seq_len=sizes.seq_len, n_layer=sizes.n_layer, n_head=sizes.n_head,
                     d_model=sizes.d_model, trunk=trunk, h=h, stream=stream)


def batch_source(data, batch: int, seq_len: int, seed: int, split: str = "train",
                 device: str | torch.device | None = None) -> Callable[[int], tuple]:
    """`get_batch(step)` over a `rev.engine.data.TokenData`, drawn from its own seeded generator: two sources with the
    same seed hand out the same batches, so every variant of a comparison sees the same data."""
    gen = torch.Generator().manual_seed(seed)
    return lambda step: data.get_batch(split, batch, seq_len, gen, device=device)


def pretrain(sizes: ChapterSizes, trunk: str, vocab_size: int, get_batch: Callable[[int], tuple], seed: int = 0,
             progress: bool = False, device: str | torch.device = "cpu") -> tuple[GPT, list[dict]]:
    """Train the stored twin of `trunk` (same integrator, same fp32 forward, no recomputation in backward) and
    return a `trunk` model on the trained weights, with the training rows."""
    torch.manual_seed(seed)
    stored = GPT(model_config(sizes, vocab_size, stored_twin(trunk))).to(device)
    rows, _ = train_with_checkpointer(stored, get_batch, sizes.pretrain_steps, sizes.pretrain_lr,
                                      progress=progress, desc=f"pretrain {stored_twin(trunk)}")
    return clone_model(stored, trunk=trunk), rows


def clone_model(model: GPT, **changes) -> GPT:
    """A new model on a copy of `model`'s weights, with GPTConfig fields changed (e.g. stream="fp64")."""
    cfg = dataclasses.replace(model.cfg, **changes)
    with torch.random.fork_rng(devices=[]):
        twin = GPT(cfg)
    twin.load_state_dict(model.state_dict())
    return twin.to(model.wte.weight.device)


def stress_scan(model: GPT, idx: Tensor, targets: Tensor, gains: Sequence[float]) -> list[dict]:
    """For each gain: the no-checkpoint reconstruction error (input boundary) and gradient cosine of a copy of
    `model` made more expanding by `expand_blocks(gain)`."""
    out = []
    for gain in gains:
        m = expand_blocks(clone_model(model, keep=()), gain)
        cos = gradient_cosine(m, idx, targets)
        out.append({"gain": gain, "recon_error": backward_reconstruction_errors(m, idx, ())[0],
                    "grad_cos_min": cos["min"], "grad_cos_global": cos["global"]})
    return out


def pick_gain(scan: Sequence[dict], target: float = 0.999) -> float:
    """The smallest scanned gain at which the unprotected fp32 trunk misses the cosine target (the largest
    scanned gain if none does)."""
    for row in scan:
        if row["grad_cos_min"] < target:
            return row["gain"]
    return scan[-1]["gain"]


def settle(policy: AdaptivePolicy, model: GPT, idx: Tensor, state_bytes: int | None = None,
           rounds: int = 16) -> tuple[int, ...]:
    """Start `policy` and update it on fixed weights until its layout stops moving; returns the keep set."""
    policy.start(model.cfg.n_layer, state_bytes)
    for _ in range(rounds):
        before = policy.keep
        policy.update(reversal_defect(model, idx, policy.spans), state_bytes)
        if policy.keep == before:
            break
    return policy.keep


def layout_report(model: GPT, idx: Tensor, targets: Tensor, keep: Iterable[int], label: str) -> dict:
    """Everything the depth study shows for one keep set on fixed weights: reconstruction error per boundary,
    gradient cosine per layer and overall, kept states and their measured bytes."""
    keep = apply_keep(model, keep)
    cos = gradient_cosine(model, idx, targets)
    errors = backward_reconstruction_errors(model, idx, keep)
    return {"layout": label, "keep": keep, "n_kept": len(keep), "kept_bytes": kept_state_bytes(model, idx, keep),
            "state_bytes": state_bytes(model, idx), "recon_error": errors, "max_recon_error": max(errors),
            "grad_cos_per_layer": cos["per_layer"], "grad_cos_min": cos["min"], "grad_worst": cos["worst"],
            "grad_cos_global": cos["global"]}


def span_defect_matrix(model: GPT, idx: Tensor) -> list[list[float]]:
    """D[a][b] = defect of the span (a, b) for 0 <= a < b <= n_layer (NaN elsewhere)."""
    n = model.cfg.n_layer
    spans = [(a, b) for a in range(n) for b in range(a + 1, n + 1)]
    values = dict(zip(spans, reversal_defect(model, idx, spans)))
    return [[values.get((a, b), math.nan) for b in range(n + 1)] for a in range(n + 1)]


def frontier(model: GPT, idx: Tensor, targets: Tensor, taus: Sequence[float], safe_ratio: float = 10.0
             ) -> list[dict]:
    """Fidelity against kept states: every distinct fixed spacing, and the adaptive policy (no budget,
    max_span = n_layer, tau_safe = tau_warn / safe_ratio) settled for each tau_warn in `taus`."""
    n = model.cfg.n_layer
    rows, seen = [], set()
    for span in range(1, n + 1):
        keep = fixed_spacing(n, span)
        if keep not in seen:
            seen.add(keep)
            rows.append({"kind": "fixed", "setting": span, "n_layer": n,
                         **_brief(layout_report(model, idx, targets, keep, ""))})
    for tau in taus:
        keep = settle(AdaptivePolicy(tau_warn=tau, tau_safe=tau / safe_ratio, max_span=n), model, idx)
        rows.append({"kind": "adaptive", "setting": tau, "n_layer": n,
                     **_brief(layout_report(model, idx, targets, keep, ""))})
    return rows


def _brief(rep: dict) -> dict:
    return {k: rep[k] for k in ("keep", "n_kept", "kept_bytes", "max_recon_error", "grad_cos_min", "grad_cos_global")}


def _grad_error(cos: float, floor: float) -> float:
    # below `floor`, 1 - cos is fp32 noise of the reference itself, not a difference between layouts
    return max(1.0 - cos, floor)


def uniform_layout(n_layer: int, n_kept: int) -> tuple[int, ...]:
    """The tightest uniform spacing that keeps at most `n_kept` states: fixed spacing at equal memory."""
    return next(k for s in range(1, n_layer + 1) if len(k := fixed_spacing(n_layer, s)) <= n_kept)


def frontier_verdict(rows: Sequence[dict], margin: float = 1.5, floor: float = 1e-6) -> dict:
    """Compare each adaptive point with fixed spacing at equal memory (`uniform_layout` with the same number of
    kept states), on gradient error max(1 - cos_min, floor) and on the worst reconstruction error. Per metric
    the adaptive layout *wins* if its error is `margin` times smaller, *loses* if `margin` times larger, else
    ties. Returns the per-point comparisons and the counts per metric."""
    fixed = {r["keep"]: r for r in rows if r["kind"] == "fixed"}
    n_layer = rows[0]["n_layer"]

    def outcome(a: float, f: float) -> str:
        return "win" if f > margin * a else "loss" if a > margin * f else "tie"

    points = []
    for r in (r for r in rows if r["kind"] == "adaptive"):
        rival = fixed[uniform_layout(n_layer, r["n_kept"])]
        points.append({"tau_warn": r["setting"], "n_kept": r["n_kept"], "keep": r["keep"], "fixed_keep": rival["keep"],
                       "adaptive_cos": r["grad_cos_min"], "fixed_cos": rival["grad_cos_min"],
                       "adaptive_recon": r["max_recon_error"], "fixed_recon": rival["max_recon_error"],
                       "grad": outcome(_grad_error(r["grad_cos_min"], floor), _grad_error(rival["grad_cos_min"], floor)),
                       "recon": outcome(r["max_recon_error"], rival["max_recon_error"])})
    counts = {f"{m}_{k}": sum(p[m] == k for p in points) for m in ("grad", "recon") for k in ("win", "tie", "loss")}
    return {"points": points, **counts}


def calibrate(model: GPT, idx: Tensor, targets: Tensor, target: float = 0.999, tau_warn: float = 3e-3,
              safe_ratio: float = 10.0, tighten: float = 3.0, rounds: int = 8,
              budget_bytes: int | None = None) -> tuple[AdaptivePolicy, dict]:
    """Find a tau_warn for this trunk: settle the policy (max_span = n_layer), check the gradient cosine, and
    divide both thresholds by `tighten` until cos_min >= `target` (or `rounds` run out). The defect is a proxy
    whose relation to gradient error depends on the integrator, so the threshold is measured, not assumed.
    Returns the settled policy and the layout report of its keep set."""
    n = model.cfg.n_layer
    sb = state_bytes(model, idx) if budget_bytes is not None else None
    for _ in range(rounds):
        policy = AdaptivePolicy(tau_warn=tau_warn, tau_safe=tau_warn / safe_ratio, max_span=n,
                                budget_bytes=budget_bytes)
        rep = layout_report(model, idx, targets, settle(policy, model, idx, sb), f"adaptive {tau_warn:.2g}")
        if rep["grad_cos_min"] >= target:
            break
        tau_warn /= tighten
    return policy, rep


def compare_training(base: GPT, make_source: Callable[[], Callable[[int], tuple]], sizes: ChapterSizes,
                     tau_warn: float = 3e-3, tau_safe: float = 3e-4, eval_batches: Sequence[tuple] = (),
                     include_none: bool = True, target_cos: float | None = 0.999, budget_states: int | None = None,
                     progress: bool = False) -> tuple[list[dict], dict[str, list[dict]]]:
    """Continue training copies of `base` (an fp32 reversible model) under one memory budget.

    The budget counts the trunk state held from forward to backward: the final state plus kept states. By
    default it is what the fp64 stream holds (its final state is twice the fp32 one), so the fp32 variants
    may spend the difference on kept states; `budget_states` instead allows that many fp32 kept states (it
    must leave room for the fp64 stream too). Variants: fp32 with
    fixed spacing (the tightest spacing that fits), fp32 adaptive (same budget), fp64 stream, fixed-point
    stream, and (if `include_none`) fp32 with no kept states. Every variant sees the same batches
    (`make_source()` is called once per variant), runs the same hook schedule (defect probes and fidelity
    checks against the stored twin on the variant's own stream) and starts from the same weights. A missed
    `target_cos` tightens the adaptive policy's thresholds (see `AdaptiveCheckpointer`).

    Returns one summary row per variant and the hook/step rows of each."""
    n = base.cfg.n_layer
    x0, _ = make_source()(0)
    s32 = state_bytes(clone_model(base, stream="fp32"), x0)
    s64 = state_bytes(clone_model(base, stream="fp64"), x0)
    budget = s64 - s32 if budget_states is None else budget_states * s32
    if s32 + budget < s64:
        raise ValueError(f"budget_states={budget_states} gives a budget below what the fp64 stream holds "
                         f"({s64} bytes); allow at least {math.ceil((s64 - s32) / s32)} kept states")
    span = next(s for s in range(1, n + 1) if len(fixed_spacing(n, s)) * s32 <= budget)
    variants: list[tuple[str, str, FixedPolicy | AdaptivePolicy]] = [
        (f"fp32 fixed (span {span})", "fp32", FixedPolicy(span)),
        ("fp32 adaptive", "fp32", AdaptivePolicy(tau_warn, tau_safe, max_span=n, budget_bytes=budget)),
        ("fp64 stream", "fp64", FixedPolicy(None)),
        ("fixed-point stream", "fixed", FixedPolicy(None)),
    ]
    if include_none:
        variants.append(("fp32, no kept states", "fp32", FixedPolicy(None)))
    summaries, logs = [], {}
    for label, stream, policy in variants:
        model = clone_model(base, stream=stream, keep=())
        hook = AdaptiveCheckpointer(policy, every=sizes.every, fidelity_every=sizes.fidelity_every,
                                    probe_rows=sizes.probe_rows, fidelity_rows=sizes.fidelity_rows,
                                    target_cos=target_cos)
        torch.manual_seed(0)
        rows, summary = train_with_checkpointer(model, make_source(), sizes.finetune_steps, sizes.finetune_lr, hook,
                                                eval_batches=eval_batches, progress=progress, desc=label)
        final = state_bytes(model, x0)
        summaries.append({"variant": label, "stream": stream, "policy": policy.name, **summary,
                          "state_bytes": final, "trunk_state_bytes": final + summary["kept_bytes_max"],
                          "budget_bytes": s32 + budget})
        logs[label] = rows
    return summaries, logs


def training_verdict(summaries: Sequence[dict], target: float = 0.999, margin: float = 1.5,
                     floor: float = 1e-6) -> dict:
    """Does the adaptive policy beat fixed spacing in the training comparison? Computed, never asserted:
    it *beats* fixed spacing if it meets the cosine `target` and either keeps fewer states on average or has a
    gradient error (1 - cos_min) `margin` times smaller, without a gradient error `margin` times larger."""
    by = {s["variant"]: s for s in summaries}
    a = by["fp32 adaptive"]
    f = next(s for s in summaries if s["variant"].startswith("fp32 fixed"))
    err_a, err_f = _grad_error(a["grad_cos_min"], floor), _grad_error(f["grad_cos_min"], floor)
    fewer = a["kept_mean"] < f["kept_mean"] - 1e-9
    better, worse = err_f > margin * err_a, err_a > margin * err_f
    meets = a["grad_cos_min"] >= target
    return {"adaptive_meets_target": meets, "fixed_meets_target": f["grad_cos_min"] >= target,
            "fewer_kept_states": fewer, "better_fidelity": better, "worse_fidelity": worse,
            "adaptive_beats_fixed": bool(meets and (fewer or better) and not worse),
            "kept_mean": (a["kept_mean"], f["kept_mean"]),
            "speed_ratio": a["tokens_per_s"] / f["tokens_per_s"],
            # as deployed, fixed spacing needs no probes while the adaptive policy does
            "speed_ratio_with_probes": a["tokens_per_s"] / (1 + a["probe_overhead"]) / f["tokens_per_s"]}
