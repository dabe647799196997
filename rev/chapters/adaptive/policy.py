"""Notebook 09 (adaptive checkpointing): the keep-state controller.

* `AdaptivePolicy` -- the rule: halve a span whose defect exceeds `tau_warn`, merge neighbouring spans whose
  defects stayed below `tau_safe` (up to `max_span` layers), never keep more states than `budget_bytes` holds.
  `FixedPolicy` is the comparison: a keep set that never changes. `make_policy("adaptive:...")` parses either.
* `AdaptiveCheckpointer.on_step(model, step, idx, targets)` -- the hook a training loop calls every step; it
  measures (with `measure`), updates the keep set and returns the fields to log. `train_callback` plugs it into
  `rev.training.loop.train`.
"""
from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from torch import Tensor

from ...core.model import GPT
from .measure import (REFERENCES, Span, apply_keep, fixed_spacing, gradient_cosine, keep_from_spans, kept_state_bytes,
                      reversal_defect, spans_from_keep, state_bytes)

# --------------------------------------------------------------------------------------------------------------
# Policies
# --------------------------------------------------------------------------------------------------------------


class FixedPolicy:
    """A keep set that never changes: every `span`-th boundary (span=None: keep nothing)."""

    def __init__(self, span: int | None = None):
        if span is not None and (int(span) != span or span < 1):
            raise ValueError(f"span {span!r}: need int >= 1")
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
            raise ValueError(f"{len(defects)} defects, {len(self.spans)} spans")
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
                raise ValueError(f"{name}={v!r}: need finite > 0")
        if self.tau_safe > self.tau_warn:
            raise ValueError(f"tau_safe={self.tau_safe} exceeds tau_warn={self.tau_warn}")
        for name in ("min_span", "max_span", "patience"):
            v = getattr(self, name)
            if isinstance(v, bool) or int(v) != v or v < 1:
                raise ValueError(f"{name}={v!r}: need int >= 1")
        if self.max_span < self.min_span:
            raise ValueError(f"max_span={self.max_span} is below min_span={self.min_span}; raise max_span")
        if self.budget_bytes is not None and self.budget_bytes < 0:
            raise ValueError(f"budget_bytes={self.budget_bytes} < 0")

    @property
    def name(self) -> str:
        return f"adaptive({self.tau_warn:g}/{self.tau_safe:g}, max_span={self.max_span})"

    @property
    def keep(self) -> tuple[int, ...]:
        return keep_from_spans(self.spans)

    def tighten(self, factor: float) -> None:
        """Divide both thresholds by `factor` (> 1): what a failed fidelity check asks for."""
        if not factor > 1:
            raise ValueError(f"tighten factor {factor!r} <= 1")
        self.tau_warn /= factor
        self.tau_safe /= factor

    def max_kept(self, state_bytes: int | None) -> int | None:
        """How many kept states the budget holds (None: no limit)."""
        if self.budget_bytes is None:
            return None
        if not state_bytes or state_bytes < 1:
            raise ValueError("pass state_bytes")
        return int(self.budget_bytes // state_bytes)

    def start(self, n_layer: int, state_bytes: int | None = None) -> tuple[int, ...]:
        """Reset to spans of `max_span` layers (the fewest kept states the rule allows) and return the keep set."""
        keep = fixed_spacing(n_layer, self.max_span)
        cap = self.max_kept(state_bytes)
        if cap is not None and len(keep) > cap:
            raise ValueError(f"budget: {cap} < {len(keep)} states; raise budget_bytes or max_span")
        self.spans = spans_from_keep(n_layer, keep)
        self.calm = [0] * len(self.spans)
        return keep

    def update(self, defects: Sequence[float], state_bytes: int | None = None) -> tuple[int, ...]:
        """Apply the rule to one defect per current span; returns the new keep set."""
        if not self.spans:
            raise ValueError("call start() first")
        if len(defects) != len(self.spans):
            raise ValueError(f"{len(defects)} defects, {len(self.spans)} spans")
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
            raise ValueError(f"{spec!r}: use fixed:N") from None
    if kind == "adaptive":
        kwargs: dict = {}
        types = {f.name: f.type for f in dataclasses.fields(AdaptivePolicy) if f.init}
        for item in filter(None, args.split(",")):
            key, _, value = item.partition("=")
            if key not in types:
                raise ValueError(f"unknown setting {key!r}; use {', '.join(types)}")
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
                raise ValueError(f"{name}={v!r}: need int >= 1")
        if fidelity_every is not None and (int(fidelity_every) != fidelity_every or fidelity_every < 1):
            raise ValueError(f"fidelity_every={fidelity_every!r} < 1")
        if reference not in REFERENCES:
            raise ValueError(f"unknown reference {reference!r}; use {', '.join(REFERENCES)}")
        self.policy, self.every, self.fidelity_every = policy, every, fidelity_every
        self.reference, self.probe_rows, self.fidelity_rows = reference, probe_rows, fidelity_rows
        self.settle_rounds = settle_rounds
        if target_cos is not None and not 0 < target_cos <= 1:
            raise ValueError(f"target_cos={target_cos!r} outside (0, 1]")
        if not tighten > 1:
            raise ValueError(f"tighten={tighten!r} <= 1")
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
        """An adapter for `rev.training.loop.TrainConfig(callback=...)`, which calls `callback(step, row, model)` after
        each step: the hook then measures on the fixed `probe` batch (x, y) and its keep set applies from the
        next step on. The fields land in `self.log`, not in the run's log.csv."""
        def callback(step: int, row: dict, model: GPT) -> None:
            x, y = probe
            self.on_step(model, step, x, y)
        return callback
