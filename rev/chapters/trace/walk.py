"""Notebook 10 (fine-tune trace and rollback): walking a trace. `rollback` to any recorded step, `replay`
forward again, weights and (if asked) optimizer state, bit for bit.

A walk undoes (or redoes) the kept changes step by step. While it is on the recorded states the ulp
corrections apply and every step lands exactly; once it crosses a lossy or missing step (a non-strict walk
only) it continues with the float differences alone, which move a value by the same amount whatever the state.
Optimizer state comes back too: a rollback to step k leaves the optimizer as it was after step k, so training
resumed from there reproduces the rest of the run bit for bit. Hyper-parameters in `param_groups` are not
state: the lr is set back to the value recorded for the step reached, everything else is left alone.
"""
from __future__ import annotations

import copy
from typing import Any, Callable, Mapping

import torch
from torch import Tensor, nn

from .codec import dtype_from, apply_exact
from .records import DROPPED, EXACT, StepRecord, Trace, flat_state, check_model, hash_tensors, locate, weights_hash

class _OptimizerView:
    """Flat read/write access to an optimizer's state by '<param name>::<key>'."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        self.optimizer = optimizer
        self.params = dict(model.named_parameters())
        self.names = {id(p): n for n, p in self.params.items()}

    def _split(self, key: str) -> tuple[Tensor, str]:
        name, sub = key.split("::", 1)
        return self.params[name], sub

    def get(self, key: str) -> Any:
        p, sub = self._split(key)
        return self.optimizer.state[p][sub]

    def set(self, key: str, value: Any) -> None:
        p, sub = self._split(key)
        self.optimizer.state[p][sub] = value

    def delete(self, key: str) -> None:
        p, sub = self._split(key)
        del self.optimizer.state[p][sub]
        if not self.optimizer.state[p]:
            del self.optimizer.state[p]

    def flat(self) -> dict[str, Any]:
        return flat_state(self.optimizer, self.names)


def undo_step(params: Mapping[str, Tensor], rec: StepRecord, opt: _OptimizerView | None,
          corrections: bool = True) -> None:
    for name, blob in rec.params.items():
        apply_exact(params[name], blob, -1, corrections)
    if opt is None:
        return
    for key, blob in rec.state.items():
        if key not in rec.state_created:
            apply_exact(opt.get(key), blob, -1)
    for key in rec.state_created:
        opt.delete(key)
    for key, (before, _after) in rec.state_scalars.items():
        opt.delete(key) if before is None else opt.set(key, before)


def _redo(params: Mapping[str, Tensor], rec: StepRecord, opt: _OptimizerView | None,
          corrections: bool = True) -> None:
    for name, blob in rec.params.items():
        apply_exact(params[name], blob, +1, corrections)
    if opt is None:
        return
    for key, (dtype, shape) in rec.state_created.items():
        opt.set(key, torch.zeros(shape, dtype=dtype_from(dtype), device=params[key.split("::")[0]].device))
    for key, blob in rec.state.items():
        apply_exact(opt.get(key), blob, +1)
    for key, (_before, after) in rec.state_scalars.items():
        opt.set(key, after)


def walk_steps(model: nn.Module, trace: Trace, from_step: int, to_step: int,
          optimizer: torch.optim.Optimizer | None, strict: bool,
          on_step: Callable[[int, nn.Module], None] | None) -> None:
    params = dict(model.named_parameters())
    opt = _OptimizerView(model, optimizer) if optimizer is not None else None
    by_step = {r.step: r for r in trace.records}
    backward = to_step < from_step
    path = range(from_step, to_step, -1) if backward else range(from_step + 1, to_step + 1)
    on_track = True     # still on the recorded states: corrections apply; off them, float differences alone
    with torch.no_grad():
        for n in path:
            rec = by_step.get(n)
            if rec is None or rec.kind == DROPPED:
                if strict:
                    raise ValueError(f"step {n} has no kept update: revert to a checkpoint")
                on_track = False
            else:
                if strict and rec.kind != EXACT:
                    raise ValueError(f"step {n} is lossy ({rec.kind}): walk with strict=False")
                if opt is not None and not rec.has_state:
                    raise ValueError(f"step {n} keeps no optimizer state: pass optimizer=None")
                (undo_step if backward else _redo)(params, rec, opt, on_track)
                on_track = on_track and rec.kind == EXACT
            if on_step is not None:
                on_step(n - 1 if backward else n, model)


def _set_lrs(optimizer: torch.optim.Optimizer, trace: Trace, step: int) -> None:
    rec = trace.record(step)
    lrs = trace.header["initial_lrs"] if step == 0 or rec is None else rec.lrs
    for g, lr in zip(optimizer.param_groups, lrs):
        g["lr"] = lr


def _move(model: nn.Module, trace: Trace, to_step: int, optimizer: torch.optim.Optimizer | None,
          from_step: int | None, verify: bool, on_step: Callable | None, forward: bool) -> int:
    check_model(model, trace)
    if not 0 <= to_step <= trace.final_step:
        raise ValueError(f"to_step={to_step} is outside the trace (steps 0..{trace.final_step})")
    start = locate(model, trace) if from_step is None else from_step
    if forward and to_step < start or not forward and to_step > start:
        raise ValueError(f"model at step {start}, to_step={to_step}: use {'rollback' if forward else 'replay'}")
    if optimizer is not None and not trace.header.get("optimizer_state_kept", False):
        raise ValueError("this trace keeps no optimizer state: pass optimizer=None")
    if optimizer is not None:
        want = trace.header["start_state_hash"] if start == 0 else trace.record(start).meta["state_hash_after"]
        have = hash_tensors(flat_state(optimizer, {id(p): n for n, p in model.named_parameters()}))
        if have != want:
            raise ValueError(f"the optimizer's state is not the one recorded at step {start}")
    walk_steps(model, trace, start, to_step, optimizer, strict=verify, on_step=on_step)
    if optimizer is not None:
        _set_lrs(optimizer, trace, to_step)
    if verify and weights_hash(model) != trace.hash_at(to_step):
        raise ValueError(f"weights at step {to_step} do not match the recorded hash: revert to a checkpoint")
    return to_step


def rollback(model: nn.Module, trace: Trace, to_step: int, optimizer: torch.optim.Optimizer | None = None,
             *, from_step: int | None = None, verify: bool = True,
             on_step: Callable[[int, nn.Module], None] | None = None) -> int:
    """Walk the model (and optimizer state, if given) back to the state after `to_step` (0 = the start).

    The current step is found from the weights hash unless `from_step` is given. With `verify` every step
    must be kept exactly and the weights must hash to the recorded value at the end; `on_step(step, model)`
    is called after each step undone (e.g. to measure something along the way).
    """
    return _move(model, trace, to_step, optimizer, from_step, verify, on_step, forward=False)


def replay(model: nn.Module, trace: Trace, to_step: int, optimizer: torch.optim.Optimizer | None = None,
           *, from_step: int | None = None, verify: bool = True,
           on_step: Callable[[int, nn.Module], None] | None = None) -> int:
    """Walk forward again along the trace to the state after `to_step` (the inverse of `rollback`)."""
    return _move(model, trace, to_step, optimizer, from_step, verify, on_step, forward=True)


def walk_back_measuring(model: nn.Module, trace: Trace, measure: Callable[[nn.Module], float],
                        optimizer: torch.optim.Optimizer | None = None, exact: bool = True,
                        from_step: int | None = None) -> list[tuple[int, float]]:
    """Walk back to step 0 one step at a time, measuring the model at every step: [(step, value), ...].

    `exact=True` rolls `model` itself back (strictly: every step must be kept exactly). `exact=False` walks
    a copy through whatever the trace keeps (lossy or missing steps included) and leaves `model` alone.
    """
    if not exact:
        model = copy.deepcopy(model)
        check_model(model, trace)
    start = locate(model, trace) if from_step is None else from_step
    rows = [(start, measure(model))]

    def probe(step: int, m: nn.Module) -> None:
        rows.append((step, measure(m)))

    if exact:
        rollback(model, trace, 0, optimizer, from_step=from_step, on_step=probe)
    else:
        walk_steps(model, trace, start, 0, None, strict=False, on_step=probe)
    return rows
