"""Notebook 10 (fine-tune trace and rollback): what people keep instead of an exact trace, for comparison.

`degrade_trace` keeps the same run as float differences alone (`f32diff`, the naive trace) or rounded to bf16
(`bf16diff`); `prune_trace` drops the updates of some steps. Each lossy record notes `err_norm`, the L2 error
of undoing that step with what is kept; `assess` scores what the walk back then reaches.
"""
from __future__ import annotations

import copy
import math
from typing import Iterable, Sequence

import torch
from torch import Tensor, nn

from .codec import Blob, bits_of, dtype_name, pack_bits
from .records import BF16DIFF, DROPPED, EXACT, F32DIFF, StepRecord, Trace, locate
from .walk import undo_step


def _encode_lossy(before: Tensor, after: Tensor, kind: str, level: int) -> tuple[Blob | None, float]:
    """A float difference as a cheaper trace keeps it, and the error of undoing the step with it (L2)."""
    before, after = before.detach(), after.detach()
    if kind == F32DIFF:
        diff = after - before                                     # in the parameter's own dtype
    elif kind == BF16DIFF:
        diff = (after.float() - before.float()).to(torch.bfloat16)
    else:
        raise ValueError(f"unknown lossy kind {kind!r}: choose {F32DIFF!r} or {BF16DIFF!r}")
    restored = after - diff.to(after.dtype)
    err = float((restored.double() - before.double()).norm())
    if not torch.any(diff != 0):
        return None, err
    bits = bits_of(diff)
    return Blob("diff", dtype_name(diff.dtype), tuple(diff.shape), pack_bits(bits, level), bits.nbytes), err


def _header_derived(trace: Trace, note: str) -> dict:
    header = copy.deepcopy(trace.header)
    header["derived"] = note if not header.get("derived") else f"{header['derived']}; {note}"
    return header


def degrade_trace(model: nn.Module, trace: Trace, kind: str, level: int = 1) -> Trace:
    """The same run kept as float differences alone (`f32diff`, the naive trace) or rounded to bf16
    (`bf16diff`).

    `model` must hold the weights at the trace's last step; it is not modified. Each record gets
    `err_norm`, the L2 error of undoing that step with the lossy difference. Optimizer state is not kept.
    """
    return degrade_traces(model, trace, (kind,), level)[kind]


def degrade_traces(model: nn.Module, trace: Trace, kinds: Sequence[str] = (BF16DIFF, F32DIFF),
                   level: int = 1) -> dict[str, Trace]:
    """`degrade_trace` for several kinds in one walk back."""
    bad = [k for k in kinds if k not in (F32DIFF, BF16DIFF)]
    if bad:
        raise ValueError(f"kinds must be {F32DIFF!r} or {BF16DIFF!r}, got {bad}")
    work = copy.deepcopy(model)
    if locate(work, trace) != trace.final_step:
        raise ValueError("degrade_trace needs the model at the trace's last step")
    params = dict(work.named_parameters())
    out: dict[str, list[StepRecord]] = {k: [] for k in kinds}
    with torch.no_grad():
        for rec in reversed(trace.records):
            if rec.kind != EXACT:
                raise ValueError(f"step {rec.step} is already {rec.kind!r}: degrade an exact trace")
            after = {n: params[n].detach().clone() for n in rec.params}
            undo_step(params, rec, None)
            for kind in kinds:
                new = StepRecord(rec.step, kind, list(rec.lrs), dict(rec.meta, state_kept=False))
                err_sq = 0.0
                for n in rec.params:
                    blob, err = _encode_lossy(params[n], after[n], kind, level)
                    err_sq += err * err
                    if blob is not None:
                        new.params[n] = blob
                new.meta["err_norm"] = math.sqrt(err_sq)
                out[kind].append(new)
    return {k: Trace(_header_derived(trace, f"kept as {k}"), list(reversed(recs))) for k, recs in out.items()}


def prune_trace(trace: Trace, every: int | None = None, steps: Iterable[int] = (), forget: bool = False) -> Trace:
    """Drop the updates of every `every`-th step (and of `steps`).

    The ledger lines stay (kind 'dropped', err_norm = the update lost) unless `forget`, which removes the
    records altogether, as a trace with missing entries would look.
    """
    drop = set(steps)
    if every:
        drop |= {r.step for r in trace.records if r.step % every == 0}
    out = []
    for r in trace.records:
        if r.step not in drop:
            out.append(r)
        elif not forget:
            out.append(StepRecord(r.step, DROPPED, list(r.lrs),
                                  dict(r.meta, err_norm=r.meta["update_norm"], state_kept=False)))
    note = f"{len(drop)} dropped" + (", removed" if forget else "")
    return Trace(_header_derived(trace, note), out)
