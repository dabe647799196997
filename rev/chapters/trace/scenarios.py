"""Notebook 10 (fine-tune trace and rollback): the notebook's experiments. Branches of the run that break a
condition on purpose (`rerun_from`, `switch_branch`), each assessed three ways (`scenario`: the exact trace,
bf16 differences, float differences alone), one table row per scenario.
"""
from __future__ import annotations

from dataclasses import replace as dataclasses_replace
from typing import Any, Mapping, Sequence

import torch
from torch import nn

from .verdict import DEFAULT_SCORE_THRESHOLD, assess
from .finetune import FinetuneConfig, PrefixData, finetune_with_trace
from .lossy import degrade_traces, prune_trace
from .records import BF16DIFF, F32DIFF, Trace
from .walk import replay, rollback


def rerun_from(model: nn.Module, optimizer: torch.optim.Optimizer, trace: Trace, ft: PrefixData,
               cfg: FinetuneConfig, from_step: int, lr_override: Mapping[int, float]) -> tuple[Trace, list[dict]]:
    """Roll model and optimizer back to `from_step`, then run the remaining steps again with some lrs
    changed by hand: a branch of the run, recorded as its own trace (steps 1..from_step shared)."""
    rollback(model, trace, from_step, optimizer)
    branch_cfg = dataclasses_replace(cfg, lr_override=dict(lr_override))
    branch, _, history = finetune_with_trace(model, ft, branch_cfg, optimizer=optimizer, resume=trace)
    return branch, history


def switch_branch(model: nn.Module, optimizer: torch.optim.Optimizer | None, current: Trace, target: Trace) -> int:
    """Move from the end of one branch to the end of another: back to the last step they share, then
    forward along the other. Returns the shared step."""
    shared = 0
    for n in range(1, min(current.final_step, target.final_step) + 1):
        if current.hash_at(n) != target.hash_at(n):
            break
        shared = n
    rollback(model, current, shared, optimizer)
    replay(model, target, target.final_step, optimizer)
    return shared


def scenario(name: str, model: nn.Module, trace: Trace, reference: nn.Module, prune_every: int | None = None,
             lossy: Mapping[str, Trace] | None = None, threshold: float = DEFAULT_SCORE_THRESHOLD,
             keep_traces: bool = True) -> dict:
    """Assess one run three ways: its exact trace, the same run kept as bf16 differences, and as float
    differences alone (each pruned too if `prune_every`). `model` is at the trace's last step; `lossy`
    reuses bf16diff/f32diff copies of this same run made earlier; `keep_traces=False` drops the traces
    from the result once assessed (they take memory)."""
    if lossy is None:
        # level 0: the lossy copies are only scored here, not stored, so compressing them would be wasted time
        lossy = degrade_traces(model, trace, (BF16DIFF, F32DIFF), level=0)
    kept = {"exact": trace, BF16DIFF: lossy[BF16DIFF], F32DIFF: lossy[F32DIFF]}
    if prune_every:
        kept = {k: prune_trace(t, every=prune_every) for k, t in kept.items()}
    out: dict[str, Any] = {"scenario": name, "traces": kept}
    for kind, t in kept.items():
        out[kind] = assess(model, t, reference=reference, score_threshold=threshold)
    if not keep_traces:
        del out["traces"]
    return out


def scenario_rows(scenarios: Sequence[dict]) -> list[dict]:
    """One table row per scenario: the checks, and score and verdict per way of keeping the trace."""
    rows = []
    for s in scenarios:
        a = s["exact"]
        row = {"scenario": s["scenario"], **{c.name: c.passed for c in a.checks}}
        for kind in ("exact", "bf16diff", "f32diff"):
            row[f"score ({kind})"] = s[kind].score.score
            row[f"verdict ({kind})"] = s[kind].verdict
        row["elements off (f32diff)"] = s["f32diff"].score.n_wrong
        rows.append(row)
    return rows
