"""Notebook 10 (fine-tune trace and rollback): what a trace is. Its records, its ledger, and how a model and
its weights are recognised (fingerprint, hashes) so that a walk starts from the right step of the right model.

A `Trace` is a header (the model's fingerprint, the optimizer, the lr schedule) and one `StepRecord` per
optimizer step: the step's lrs, the kept change of every parameter tensor (`codec.Blob`), the change of the
optimizer state, and a ledger line of metadata (loss, update sizes, weights hash after the step).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Mapping

import torch
from torch import Tensor, nn

from .codec import Blob, bits_of, dtype_name

FORMAT = "revbook-trace"
VERSION = 1

# record kinds: how a step's weight update is kept
EXACT = "exact"          # float difference + sparse ulp corrections: lossless
F32DIFF = "f32diff"      # float difference in the parameter's own dtype (the naive trace)
BF16DIFF = "bf16diff"    # float difference rounded to bf16 (a cheap trace)
DROPPED = "dropped"      # the ledger line survives, the update does not


def hash_tensors(tensors: Mapping[str, Any]) -> str:
    """sha256 over names, dtypes, shapes and bit patterns (non-tensor values by their repr), in key order given."""
    h = hashlib.sha256()
    for name, t in tensors.items():
        h.update(name.encode())
        if isinstance(t, Tensor):
            h.update(f"{dtype_name(t.dtype)}{tuple(t.shape)}".encode())
            h.update(bits_of(t).tobytes())
        else:
            h.update(repr(t).encode())
    return h.hexdigest()


def weights_hash(model: nn.Module) -> str:
    """sha256 of a model's parameters, bit for bit (the fingerprint's `start_hash` is one of these)."""
    return hash_tensors(dict(model.named_parameters()))


def fingerprint(model: nn.Module) -> dict:
    """What identifies the model a trace belongs to: parameter names, shapes, dtypes and a weights hash."""
    named = list(model.named_parameters())
    return {"names": [n for n, _ in named],
            "shapes": [list(p.shape) for _, p in named],
            "dtypes": [dtype_name(p.dtype) for _, p in named],
            "n_params": int(sum(p.numel() for _, p in named)),
            "start_hash": hash_tensors(dict(named))}


def flat_state(optimizer: torch.optim.Optimizer | None, names: Mapping[int, str]) -> dict[str, Any]:
    """Optimizer state as {"<param name>::<key>": value}, sorted, so it can be differenced and hashed."""
    if optimizer is None:
        return {}
    out = {}
    for p, st in optimizer.state.items():
        if id(p) not in names:
            raise ValueError("the optimizer holds state for a tensor not in this model")
        for key, value in st.items():
            out[f"{names[id(p)]}::{key}"] = value
    return dict(sorted(out.items()))


def json_scalar(v: Any) -> Any:
    return v if isinstance(v, (bool, int, float, str, type(None))) else repr(v)


@dataclass
class StepRecord:
    """What step `step` did: its lr(s), the changes it made, and a ledger line of metadata.

    `meta` holds: loss (if annotated), update_norm (L2 of the weight update), rel_update_max and
    rel_update_param (largest ||dp|| / ||p|| over parameter tensors), f32diff_lossy (elements whose float
    difference would not undo the step exactly), dist_from_start (||theta_n - theta_0||), outside_change
    (weights changed between optimizer steps; folded into this record), hash_after and state_hash_after,
    and for lossy records err_norm (L2 error of undoing this step with what is kept).
    """
    step: int
    kind: str
    lrs: list[float]
    meta: dict
    params: dict[str, Blob] = field(default_factory=dict)
    state: dict[str, Blob] = field(default_factory=dict)          # optimizer-state tensors that changed
    state_created: dict[str, tuple[str, tuple[int, ...]]] = field(default_factory=dict)  # key -> dtype, shape
    state_scalars: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # key -> (before, after)

    @property
    def has_state(self) -> bool:
        return self.kind == EXACT and self.meta.get("state_kept", False)


@dataclass
class Trace:
    """A recorded run: `header` (fingerprint, optimizer, schedule, ...) and one record per step, in order."""

    header: dict
    records: list[StepRecord]

    @property
    def steps(self) -> list[int]:
        return [r.step for r in self.records]

    @property
    def final_step(self) -> int:
        return self.records[-1].step if self.records else 0

    def record(self, step: int) -> StepRecord | None:
        for r in self.records:
            if r.step == step:
                return r
        return None

    def hash_at(self, step: int) -> str | None:
        """The recorded weights hash after `step` (step 0: the starting weights)."""
        if step == 0:
            return self.header["fingerprint"]["start_hash"]
        r = self.record(step)
        return None if r is None else r.meta["hash_after"]

    def step_of_hash(self, h: str) -> int | None:
        if h == self.header["fingerprint"]["start_hash"]:
            return 0
        for r in reversed(self.records):
            if r.meta["hash_after"] == h:
                return r.step
        return None

    def ledger(self) -> list[dict]:
        """One row per step: step, kind, lr, and the recorded metadata (for a DataFrame)."""
        rows = []
        for r in self.records:
            row = {"step": r.step, "kind": r.kind, "lr": r.lrs[0] if r.lrs else float("nan")}
            row.update({k: v for k, v in r.meta.items() if not k.startswith("hash") and k != "state_hash_after"})
            rows.append(row)
        return rows


def check_model(model: nn.Module, trace: Trace) -> None:
    """Raise ValueError if `model` is not the architecture the trace was recorded on."""
    fp = trace.header["fingerprint"]
    named = list(model.named_parameters())
    names = [n for n, _ in named]
    if names != fp["names"]:
        missing = sorted(set(fp["names"]) - set(names))[:3]
        extra = sorted(set(names) - set(fp["names"]))[:3]
        raise ValueError(f"recorded on a different model (missing {missing}, extra {extra})")
    for (n, p), shape, dtype in zip(named, fp["shapes"], fp["dtypes"]):
        if list(p.shape) != shape or dtype_name(p.dtype) != dtype:
            raise ValueError(f"recorded on a different model: {n} is {dtype}{shape} in the trace")


def locate(model: nn.Module, trace: Trace) -> int:
    """The recorded step whose weights the model holds now (by hash); ValueError if none."""
    check_model(model, trace)
    step = trace.step_of_hash(weights_hash(model))
    if step is None:
        raise ValueError(f"the weights match no step of this trace (0..{trace.final_step}): pass from_step=...")
    return step
