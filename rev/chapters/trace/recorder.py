"""Notebook 10 (fine-tune trace and rollback): the recorder. `TraceRecorder` hooks any
`torch.optim.Optimizer` and keeps, for every `optimizer.step()`, what is needed to undo it bit for bit.

Weights are kept with `codec.encode_exact` (float difference + sparse ulp corrections), the optimizer state
(momentum buffers, Adam moments, step counts) as ulp differences. Module buffers are not traced (a model whose
buffers change in training, e.g. BatchNorm statistics, needs them kept separately); the GPT here has none
that change.
"""
from __future__ import annotations

import copy
import math
from typing import Any

import torch
from torch import Tensor, nn

from ...core.optim import Schedule
from .codec import INT_OF, bit_equal, dtype_name, encode_exact, encode_ulp
from .records import (EXACT, FORMAT, VERSION, StepRecord, Trace, flat_state, json_scalar, fingerprint,
                      hash_tensors, locate)
from .walk import rollback

class TraceRecorder:
    """Hooks an optimizer and records an exact trace of every `optimizer.step()`.

    >>> rec = TraceRecorder(model, opt, schedule=Schedule(1e-3, total_steps=100))
    >>> for n in range(1, 101):                  # trace steps count from 1, the schedule's from 0
    ...     for g in opt.param_groups: g["lr"] = rec.schedule.lr_at(n - 1)
    ...     loss = model(x, y); opt.zero_grad(); loss.backward()
    ...     rec.annotate(loss=loss.item()); opt.step()
    >>> trace = rec.close()

    The recorder keeps one copy of the weights (and optimizer state) as they were after the last step, and
    one of the starting weights; a step's record is the exact difference against that copy. Changes made
    to the weights between steps (outside the optimizer) are folded into the next step's record and flagged,
    so the walk back stays exact. `keep_optimizer_state=False` keeps the weights only (smaller traces; a
    rollback then restores weights, not the optimizer).
    """

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer,
                 schedule: Schedule | None = None, keep_optimizer_state: bool = True,
                 compress_level: int = 1, resume: Trace | None = None) -> None:
        self.model, self.optimizer, self.schedule = model, optimizer, schedule
        self.keep_state, self.level = keep_optimizer_state, compress_level
        self._params = dict(model.named_parameters())
        self._names = {id(p): n for n, p in self._params.items()}
        owned = {id(p) for g in optimizer.param_groups for p in g["params"]}
        if not owned <= set(self._names):
            raise ValueError("the optimizer updates tensors not in this model")
        self._prev = {n: p.detach().clone() for n, p in self._params.items()}
        self._prev_state = self._clone_state()
        self._pending: dict = {}
        self._outside = False
        if resume is None:
            self._start = {n: p.detach().clone() for n, p in self._params.items()}
            self.trace = Trace(self._header(), [])
        else:
            self.trace = self._resumed(resume)
        self._hooks = [optimizer.register_step_pre_hook(self._pre_step),
                       optimizer.register_step_post_hook(self._post_step)]

    def _resumed(self, trace: Trace) -> Trace:
        """Continue `trace` from the step the model is at (after a rollback): later records are dropped,
        new steps are numbered from there, as when a run is retried from step k."""
        k = locate(self.model, trace)
        header = copy.deepcopy(trace.header)
        if self.keep_state != header["optimizer_state_kept"]:
            raise ValueError(f"keep_optimizer_state must be {header['optimizer_state_kept']}, as recorded")
        if self.keep_state:
            want = header["start_state_hash"] if k == 0 else trace.record(k).meta["state_hash_after"]
            if hash_tensors(self._prev_state) != want:
                raise ValueError(f"the optimizer's state is not the one recorded at step {k}: roll it back too")
        if isinstance(self.schedule, Schedule):
            header["schedule"] = self.schedule.to_dict()
        elif header.get("schedule") and self.schedule is None:
            self.schedule = Schedule(**header["schedule"])
        header["resumed_at"] = header.get("resumed_at", []) + [k]
        start = copy.deepcopy(self.model)           # the starting weights, for the ledger's distance column
        rollback(start, trace, 0)
        self._start = {n: p.detach().clone() for n, p in start.named_parameters()}
        return Trace(header, [r for r in trace.records if r.step <= k])

    def _header(self) -> dict:
        defaults = {k: json_scalar(v) for k, v in self.optimizer.defaults.items()}
        return {"format": FORMAT, "version": VERSION, "fingerprint": fingerprint(self.model),
                "start_state_hash": hash_tensors(self._prev_state),
                "optimizer": {"class": type(self.optimizer).__name__, "defaults": defaults},
                "schedule": self.schedule.to_dict() if isinstance(self.schedule, Schedule) else None,
                "initial_lrs": [float(g["lr"]) for g in self.optimizer.param_groups],
                "optimizer_state_kept": self.keep_state, "compress_level": self.level,
                "encoding": "diff+ulp; zigzag ulp; zlib planes",
                "derived": None}

    def _clone_state(self) -> dict[str, Any]:
        if not self.keep_state:
            return {}
        flat = flat_state(self.optimizer, self._names)
        return {k: v.detach().clone() if isinstance(v, Tensor) else copy.deepcopy(v) for k, v in flat.items()}

    def annotate(self, **meta: Any) -> None:
        """Attach metadata (e.g. loss=...) to the next recorded step."""
        self._pending.update({k: json_scalar(v) for k, v in meta.items()})

    def _pre_step(self, optimizer, args, kwargs) -> None:
        # Weights edited since the last step (a manual change, a reload) are not lost: the next record
        # differences against the last recorded state anyway. Only note that it happened.
        self._outside = any(not bit_equal(p, self._prev[n]) for n, p in self._params.items())

    def _post_step(self, optimizer, args, kwargs) -> None:
        self.trace.records.append(self._record_step(self.trace.final_step + 1))

    def _record_step(self, step: int) -> StepRecord:
        rec = StepRecord(step, EXACT, [float(g["lr"]) for g in self.optimizer.param_groups], {})
        upd_sq = dist_sq = 0.0
        rel_max, rel_name, lossy = 0.0, "", 0
        for name, p in self._params.items():
            before, after = self._prev[name], p.detach()
            blob = encode_exact(before, after, self.level)
            if blob is None:
                continue
            rec.params[name] = blob
            delta = after.double() - before.double()
            dn, bn = float(delta.norm()), float(before.double().norm())
            upd_sq += dn * dn
            rel = dn / bn if bn > 0 else math.inf
            if rel > rel_max:
                rel_max, rel_name = rel, name
            if after.dtype.is_floating_point:     # what a float-difference trace would have lost here
                naive = after - (after - before)
                lossy += int((naive.view(INT_OF[after.dtype]) != before.view(INT_OF[after.dtype])).sum())
            before.copy_(after)
        for name, p in self._params.items():
            dist_sq += float((p.detach().double() - self._start[name].double()).pow(2).sum())
        rec.meta.update(self._pending, update_norm=math.sqrt(upd_sq), rel_update_max=rel_max,
                        rel_update_param=rel_name, f32diff_lossy=lossy, dist_from_start=math.sqrt(dist_sq),
                        outside_change=self._outside, hash_after=hash_tensors(self._params),
                        state_kept=self.keep_state)
        if self.keep_state:
            self._record_state(rec)
        rec.meta["state_hash_after"] = hash_tensors(self._prev_state)
        rec.meta["state_nbytes"] = sum(v.numel() * v.element_size() for v in self._prev_state.values()
                                       if isinstance(v, Tensor))
        self._pending, self._outside = {}, False
        return rec

    def _record_state(self, rec: StepRecord) -> None:
        now = flat_state(self.optimizer, self._names)
        gone = set(self._prev_state) - set(now)
        if gone:
            raise ValueError(f"optimizer state {sorted(gone)[:3]} disappeared: keep_optimizer_state=False")
        for key, value in now.items():
            old = self._prev_state.get(key)
            if isinstance(value, Tensor):
                if key not in self._prev_state:
                    rec.state_created[key] = (dtype_name(value.dtype), tuple(value.shape))
                    old = torch.zeros_like(value)
                blob = encode_ulp(old, value, self.level)
                if blob is not None:
                    rec.state[key] = blob
                self._prev_state[key] = value.detach().clone()
            elif key not in self._prev_state or old != value:
                rec.state_scalars[key] = (json_scalar(old), json_scalar(value))
                self._prev_state[key] = copy.deepcopy(value)

    def close(self) -> Trace:
        """Remove the hooks and return the trace."""
        for h in self._hooks:
            h.remove()
        self._hooks = []
        return self.trace

    def __enter__(self) -> "TraceRecorder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
