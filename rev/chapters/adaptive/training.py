"""Notebook 09 (adaptive checkpointing): the policies while the weights move.

`train_with_checkpointer` is the chapter's compact loop (the experiment needs the hook between batch and forward
and per-step timing of it); it builds its optimizer with `rev.core.optim.adamw`, at a constant learning rate.
`pretrain` gives the trained weights the chapter measures on; `compare_training` continues training copies of
them under one memory budget (fixed spacing, adaptive, fp64 and fixed-point streams, nothing kept) and
`training_verdict` says, from the numbers, whether adaptive placement beat fixed spacing.
"""
from __future__ import annotations

import math
import time
from typing import Callable, Sequence

import numpy as np
import torch
from torch import Tensor
from ...base.progress import tqdm

from ...core.model import GPT
from ...core.optim import adamw
from ...core.step import train_step
from .measure import clone_model, fixed_spacing, state_bytes, stored_twin
from .placement import grad_error
from .policy import AdaptiveCheckpointer, AdaptivePolicy, FixedPolicy
from .sizes import ChapterSizes, model_config
from ..shared.verdicts import ratio_side


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
    if steps < 1:
        raise ValueError(f"steps={steps} < 1")
    # every parameter decays, as this loop always did (the chapter's numbers stay comparable across versions)
    opt = adamw(model, lr, weight_decay, decay_matrices_only=False)
    model.train()
    rows: list[dict] = []
    for step in tqdm(range(steps), desc=desc, disable=not progress, leave=False):
        x, y = get_batch(step)
        t0 = time.perf_counter()
        fields = checkpointer.on_step(model, step, x, y) if checkpointer is not None else {}
        t1 = time.perf_counter()
        loss, _ = train_step(model, opt, x, y, clip=grad_clip)
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
           # the spread of the per-step rate (quartiles over the timed steps): what a speed verdict must clear
           **{f"tokens_per_s_{q}": v for q, v in zip(("q1", "median", "q3"), np.quantile(
               [r["tokens"] / max(1e-12, r["step_s"]) for r in timed], [0.25, 0.5, 0.75]).tolist())},
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


def pretrain(sizes: ChapterSizes, trunk: str, vocab_size: int, get_batch: Callable[[int], tuple], seed: int = 0,
             progress: bool = False, device: str | torch.device = "cpu") -> tuple[GPT, list[dict]]:
    """Train the stored twin of `trunk` (same integrator, same fp32 forward, no recomputation in backward) and
    return a `trunk` model on the trained weights, with the training rows."""
    torch.manual_seed(seed)
    stored = GPT(model_config(sizes, vocab_size, stored_twin(trunk))).to(device)
    rows, _ = train_with_checkpointer(stored, get_batch, sizes.pretrain_steps, sizes.pretrain_lr,
                                      progress=progress, desc=f"pretrain {stored_twin(trunk)}")
    return clone_model(stored, trunk=trunk), rows


def compare_training(base: GPT, make_source: Callable[[], Callable[[int], tuple]], sizes: ChapterSizes,
                     tau_warn: float = 3e-3, tau_safe: float = 3e-4, eval_batches: Sequence[tuple] = (),
                     include_none: bool = True, target_cos: float | None = 0.999, budget_states: int | None = None,
                     progress: bool = False, policies_only: bool = False) -> tuple[list[dict], dict[str, list[dict]]]:
    """Continue training copies of `base` (an fp32 reversible model) under one memory budget.

    The budget counts the trunk state held from forward to backward: the final state plus kept states. By
    default it is what the fp64 stream holds (its final state is twice the fp32 one), so the fp32 variants
    may spend the difference on kept states; `budget_states` instead allows that many fp32 kept states (it
    must leave room for the fp64 stream too). Variants: fp32 with
    fixed spacing (the tightest spacing that fits), fp32 adaptive (same budget), fp64 stream, fixed-point
    stream, and (if `include_none`) fp32 with no kept states; `policies_only` keeps the two fp32 policies alone
    (what a replication over data orders compares). Every variant sees the same batches
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
        raise ValueError(f"budget_states={budget_states} < {math.ceil((s64 - s32) / s32)}: fp64 holds {s64} bytes")
    span = next(s for s in range(1, n + 1) if len(fixed_spacing(n, s)) * s32 <= budget)
    variants: list[tuple[str, str, FixedPolicy | AdaptivePolicy]] = [
        (f"fp32 fixed (span {span})", "fp32", FixedPolicy(span)),
        ("fp32 adaptive", "fp32", AdaptivePolicy(tau_warn, tau_safe, max_span=n, budget_bytes=budget)),
        ("fp64 stream", "fp64", FixedPolicy(None)),
        ("fixed-point stream", "fixed", FixedPolicy(None)),
    ]
    if include_none and not policies_only:
        variants.append(("fp32, no kept states", "fp32", FixedPolicy(None)))
    if policies_only:
        variants = variants[:2]
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
    it *beats* fixed spacing if it meets the cosine `target` and has a gradient error (1 - cos_min) `margin` times
    smaller while keeping at most as many states at its peak. Fewer kept states *on average* is reported
    (`fewer_kept_states`) but wins nothing: the memory a run needs is set by its peak."""
    by = {s["variant"]: s for s in summaries}
    a = by["fp32 adaptive"]
    f = next(s for s in summaries if s["variant"].startswith("fp32 fixed"))
    err_a, err_f = grad_error(a["grad_cos_min"], floor), grad_error(f["grad_cos_min"], floor)
    fewer = a["kept_mean"] < f["kept_mean"] - 1e-9
    side = ratio_side(err_a, err_f, margin)
    better, worse = side < 0, side > 0
    meets = a["grad_cos_min"] >= target
    return {"adaptive_meets_target": meets, "fixed_meets_target": f["grad_cos_min"] >= target,
            "fewer_kept_states": fewer, "better_fidelity": better, "worse_fidelity": worse,
            "adaptive_beats_fixed": bool(meets and better and a["kept_max"] <= f["kept_max"]),
            "kept_mean": (a["kept_mean"], f["kept_mean"]), "kept_max": (a["kept_max"], f["kept_max"]),
            "speed_ratio": a["tokens_per_s"] / f["tokens_per_s"],
            # as deployed, fixed spacing needs no probes while the adaptive policy does
            "speed_ratio_with_probes": a["tokens_per_s"] / (1 + a["probe_overhead"]) / f["tokens_per_s"]}


def replicate_training(base: GPT, source_for: Callable[[int], Callable[[int], tuple]], sizes: ChapterSizes,
                       seeds: Sequence[int], first: Sequence[dict] | None = None, **kwargs) -> list[dict]:
    """The training comparison's two fp32 arms (fixed spacing, adaptive) on more data orders: `source_for(seed)`
    makes a seed's batch source, `compare_training(..., policies_only=True, **kwargs)` trains both arms on it, and
    `training_verdict` reads them. `first`: summaries already measured (seed 0, the chapter's own comparison), put
    first. One row per seed: each arm's gradient error (1 - cos_min, floored as the verdict floors it), its peak
    kept states, and whether the verdict puts adaptive ahead or its gradients `margin` times further off."""
    runs = ([(None, list(first))] if first is not None else []) + [
        (seed, compare_training(base, lambda seed=seed: source_for(seed), sizes, policies_only=True, **kwargs)[0])
        for seed in seeds]
    rows = []
    for seed, summaries in runs:
        target = kwargs.get("target_cos") or 0.999
        v = training_verdict(summaries, target)
        a = next(s for s in summaries if s["variant"] == "fp32 adaptive")
        f = next(s for s in summaries if s["variant"].startswith("fp32 fixed"))
        rows.append({"seed": "the comparison above" if seed is None else seed,
                     "adaptive error": grad_error(a["grad_cos_min"], 1e-6),
                     "fixed error": grad_error(f["grad_cos_min"], 1e-6), "adaptive peak kept": a["kept_max"],
                     "fixed peak kept": f["kept_max"], "adaptive ahead": v["adaptive_beats_fixed"],
                     "adaptive worse": v["worse_fidelity"]})
    return rows

