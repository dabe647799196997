"""Notebook 10 (fine-tune trace and rollback): the notebook's experiments. Branches of the run that break a
condition on purpose (`rerun_from`, `switch_branch`), each assessed three ways (`scenario`: the exact trace,
bf16 differences, float differences alone), one table row per scenario, and the takeaways.
"""
from __future__ import annotations

import math
from dataclasses import replace as dataclasses_replace
from typing import Any, Mapping, Sequence

import torch
from torch import nn

from .verdict import DEFAULT_SCORE_THRESHOLD, assess
from .finetune import FinetuneConfig, PrefixData, finetune_with_trace
from .lossy import degrade_traces, prune_trace
from .records import BF16DIFF, F32DIFF, Trace
from .walk import replay, rollback
from ...base.units import MIB


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


def takeaways(*, logp_before: float, logp_after: float, rate_before: float, rate_after: float, steps: int,
              bit_identical: bool, samples_restored: bool, f32_lost: int, storage: Mapping[str, float],
              scenarios: Sequence[dict], prune_every: int, threshold: float, seconds: float,
              file_bytes: int | None = None) -> str:
    """The notebook's closing bullets (Markdown), every number from the run: `storage` is `storage_report`'s,
    `scenarios` the `scenario` results named intact, pruned, lr changed and huge step, `file_bytes` the size of
    the saved trace file."""
    sc = {s["scenario"]: s for s in scenarios}
    pruned, lr_changed, huge, intact = (sc[k] for k in ("pruned", "lr changed", "huge step", "intact"))
    ckpt_bpp = storage["checkpoint_bytes_per_step"] / storage["n_params"]
    lines = [
        f"* The fine-tuning moved P(prefix) from {math.exp(logp_before):.2g} to {math.exp(logp_after):.2g}; "
        f"{rate_after:.0%} of samples opened with it (before: {rate_before:.0%}).",
        f"* Walking the {steps}-step trace back ended on weights "
        + ("**bit-identical** to the start" if bit_identical else "that are **not** bit-identical to the start")
        + (", and the samples came back as they were before the fine-tuning." if samples_restored else
           ", and the samples did **not** come back as they were."),
        _corrections_line(f32_lost, steps * storage["n_params"]),
        f"* Cost: {storage['weights_bytes_per_param_compressed']:.2f} bytes/parameter/step for the weights "
        f"(compression {storage['weights_compression_ratio']:.2f}x), "
        f"{storage['total_bytes_per_param_compressed']:.2f} with the optimizer state, against "
        f"{ckpt_bpp:.2f} for a full checkpoint per step ({storage['fraction_of_checkpoint']:.0%} of it)"
        + (f"; the file for {steps} steps of {storage['n_params']:,} parameters: {file_bytes / MIB:.1f} MiB, "
           f"steps x parameters x bytes per parameter per step." if file_bytes is not None else "."),
        _alternatives_line(storage, steps),
        f"* Dropping every {prune_every}th step left {1 - pruned['exact'].score.score:.0%} of the fine-tuning "
        f"in the weights: score {pruned['exact'].score.score:.3f}, "
        + ("flagged irreversible." if pruned['exact'].irreversible else "**not** flagged irreversible."),
        _breaks_line(lr_changed, huge),
        _cheap_traces_line(intact, huge, threshold),
        f"* Notebook time: {seconds:.0f} s on this machine.",
    ]
    return "\n".join(lines)


def _corrections_line(f32_lost: int, element_steps: int) -> str:
    """How many element-steps the float difference alone gets wrong, and whether the corrections are sparse."""
    share = f32_lost / max(1, element_steps)
    return (f"* The float difference alone would have restored {f32_lost:,} of {element_steps:,} element-steps "
            f"wrongly ({share:.1e}; counted per element and step, so one weight can count at several steps, and "
            f"errors can cancel on the way: this is not how many weights end wrong, which the cheap traces' "
            f"scores count): the corrections that fix them are "
            + ("sparse." if share < 0.1 else "not sparse here, and storing them as positions and values costs more "
                                             "than it saves.")
            + (" This float difference is the research note's recipe (deltas applied in reverse order, with "
               "negative signs): on this run it is not exact, which is where the note is contradicted."
               if f32_lost else " The research note's recipe (this float difference) was exact on this run."))


def _breaks_line(lr_changed: Mapping, huge: Mapping) -> str:
    """Did a changed lr and a huge step leave the exact trace exact, and did their checks catch them?"""
    scores = (lr_changed["exact"].score.score, huge["exact"].score.score)
    exact = all(sc.score.exact for sc in (lr_changed["exact"], huge["exact"]))
    caught = (not lr_changed["exact"].passed["lr recoverable"], not huge["exact"].passed["updates bounded"])
    what = ("left the exact trace exact" if exact else "did not leave the exact trace exact")
    found = {(True, True): "the checks caught both", (False, False): "the checks caught neither",
             (True, False): "the lr check caught the changed lr, the update check missed the huge step",
             (False, True): "the update check caught the huge step, the lr check missed the changed lr"}[caught]
    note = (" An exact trace stores what each step's float difference loses, so it undoes any step by construction: "
            "this tests the checks, not the research note's conditions, which concern the float-difference recipe "
            "(the cheap traces, next line)." if exact else "")
    return f"* A changed lr and a huge step {what} (scores {scores[0]:.6f} and {scores[1]:.6f}); {found}.{note}"


def _alternatives_line(storage: Mapping[str, float], steps: int) -> str:
    """The trace's cost against the two obvious alternatives: the starting checkpoint alone (rolls back to the start
    only) and the starting checkpoint plus the deterministic recipe (any step, by recomputing from the start)."""
    per_step = storage["total_bytes_per_param_compressed"]
    ckpt = storage["checkpoint_bytes_per_step"] / storage["n_params"]
    even = ckpt / per_step if per_step else float("inf")
    return (f"* Against the alternatives: the starting checkpoint alone costs {ckpt:.2f} bytes/parameter once and "
            f"rolls back to the start only; {steps} steps of trace cost {per_step * steps:.1f}, more than that "
            f"checkpoint after {even:.1f} steps. The checkpoint plus the deterministic recipe (this project's "
            f"bit-exact resume) reaches any step for no more storage, at the price of recomputing up to it and of "
            f"keeping the data and the code. The trace buys going back to any step without recomputing, without the "
            f"data, and with a check that the walk is exact.")


def _cheap_traces_line(intact: Mapping, huge: Mapping, threshold: float) -> str:
    """What the huge step did to the cheap traces: more elements a float-difference trace gets wrong, and more of
    the run a bf16 trace cannot undo -- or not."""
    f32 = (intact[F32DIFF].score.n_wrong, huge[F32DIFF].score.n_wrong)
    bf16 = (1 - intact[BF16DIFF].score.score, 1 - huge[BF16DIFF].score.score)
    hurt = f32[1] > f32[0] or bf16[1] > bf16[0]
    return (f"* The huge step {'hurt' if hurt else 'did not hurt'} the cheap traces: elements a float-difference "
            f"trace gets wrong went from {f32[0]:,} to {f32[1]:,}, and the share of the run a bf16 trace cannot "
            f"undo from {bf16[0]:.1e} to {bf16[1]:.1e} (threshold {1 - threshold:.0e}).")
