"""Notebook 09 (adaptive checkpointing): where to keep states on fixed weights.

The round trip is made to degrade on purpose and in the open (`expand_blocks`, `stress_scan`), then kept-state
layouts are compared on the same weights: per layout (`layout_report`), over every fixed spacing and a range of
adaptive thresholds (`frontier`, judged at equal memory by `frontier_verdict`), and with a threshold calibrated
against the gradient check (`calibrate`).
"""
from __future__ import annotations

import math
from typing import Iterable, Sequence

import torch
from torch import Tensor

from ...core.model import GPT
from .measure import (apply_keep, backward_reconstruction_errors, clone_model, fixed_spacing, gradient_cosine,
                      kept_state_bytes, reversal_defect, state_bytes)
from .policy import AdaptivePolicy
from ..shared.verdicts import ratio_side


@torch.no_grad()
def expand_blocks(model: GPT, gain: float) -> GPT:
    """Make every block more expanding, in place: scale the attention query and key weights and both output
    projections (attention and MLP) by `gain`. Attention logits grow by gain^2 (sharper, more input-sensitive
    attention) and each block writes gain times more into the stream -- the two things long training does to
    a trunk whose round trip degrades. Returns the model."""
    if not (math.isfinite(gain) and gain > 0):
        raise ValueError(f"gain {gain!r}: need finite > 0")
    d = model.cfg.d_model
    for block in model.trunk.blocks:
        block.attn.qkv.weight[: 2 * d].mul_(gain)  # rows of q and k; v is left alone
        block.attn.proj.weight.mul_(gain)
        block.mlp.proj.weight.mul_(gain)
    return model


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


def frontier(model: GPT, idx: Tensor, targets: Tensor, taus: Sequence[float], safe_ratio: float = 10.0,
             held_out: tuple[Tensor, Tensor] | None = None) -> list[dict]:
    """Fidelity against kept states: every distinct fixed spacing, the adaptive policy (no budget, max_span =
    n_layer, tau_safe = tau_warn / safe_ratio) settled on the probe batch `idx` for each tau_warn in `taus`, and
    for each count of states an adaptive layout kept, the rival that keeps boundary 1 (`boundary_rival`: where a
    defect at layer 0 would put a state, uniform spacing after it). With `held_out` (another batch and its
    targets) every layout is scored there, not on the batch that chose it, so a win is not the probe's own
    (`scored_on` says which)."""
    n = model.cfg.n_layer
    score_x, score_y = held_out if held_out is not None else (idx, targets)
    scored_on = "held-out batch" if held_out is not None else "probe batch"
    rows, seen = [], set()

    def add(kind: str, setting, keep: tuple[int, ...]) -> None:
        rows.append({"kind": kind, "setting": setting, "n_layer": n, "scored_on": scored_on,
                     **_brief(layout_report(model, score_x, score_y, keep, ""))})

    for span in range(1, n + 1):
        keep = fixed_spacing(n, span)
        if keep not in seen:
            seen.add(keep)
            add("fixed", span, keep)
    for tau in taus:
        add("adaptive", tau, settle(AdaptivePolicy(tau_warn=tau, tau_safe=tau / safe_ratio, max_span=n), model, idx))
    for k in sorted({r["n_kept"] for r in rows if r["kind"] == "adaptive" and r["n_kept"] > 0}):
        keep = boundary_rival(n, k)
        if keep not in seen:
            seen.add(keep)
            add("boundary 1", k, keep)
    return rows


def boundary_rival(n_layer: int, n_kept: int) -> tuple[int, ...]:
    """`n_kept` states with boundary 1 among them, the others spaced uniformly over the layers after it: the
    fixed layout a defect concentrated at layer 0 (midpoint's Euler starter) calls for."""
    if not 1 <= n_kept < n_layer:
        raise ValueError(f"n_kept={n_kept} outside 1..{n_layer - 1}")
    rest = uniform_layout(n_layer - 1, n_kept - 1) if n_kept > 1 else ()
    return (1, *(1 + b for b in rest))


def _brief(rep: dict) -> dict:
    return {k: rep[k] for k in ("keep", "n_kept", "kept_bytes", "max_recon_error", "grad_cos_min", "grad_cos_global")}


def grad_error(cos: float, floor: float) -> float:
    """Gradient error of a cosine, 1 - cos, floored."""
    # below `floor`, 1 - cos is fp32 noise of the reference itself, not a difference between layouts
    return max(1.0 - cos, floor)


def uniform_layout(n_layer: int, n_kept: int) -> tuple[int, ...]:
    """The tightest uniform spacing that keeps at most `n_kept` states: fixed spacing at equal memory."""
    return next(k for s in range(1, n_layer + 1) if len(k := fixed_spacing(n_layer, s)) <= n_kept)


def frontier_verdict(rows: Sequence[dict], margin: float = 1.5, floor: float = 1e-6) -> dict:
    """Compare each adaptive point with the *best* fixed layout at equal memory (of the fixed spacings and the
    boundary-1 rivals measured with the same number of kept states, the one with the smallest gradient error, then
    reconstruction error; `uniform_layout` when none was measured), on gradient error max(1 - cos_min, floor) and
    on the worst reconstruction error. Per metric the adaptive layout *wins* if its error is `margin` times smaller, *loses*
    if `margin` times larger, else ties. Returns the per-point comparisons and the counts per metric."""
    fixed = {r["keep"]: r for r in rows if r["kind"] in ("fixed", "boundary 1")}
    n_layer = rows[0]["n_layer"]

    def best_fixed(n_kept: int) -> dict:
        same = [r for r in fixed.values() if r["n_kept"] == n_kept]
        if not same:
            return fixed[uniform_layout(n_layer, n_kept)]
        return min(same, key=lambda r: (grad_error(r["grad_cos_min"], floor), r["max_recon_error"]))

    def outcome(a: float, f: float) -> str:   # a win when adaptive's error is `margin` times smaller, a loss larger
        return {-1: "win", 0: "tie", 1: "loss"}[ratio_side(a, f, margin)]

    points = []
    for r in (r for r in rows if r["kind"] == "adaptive"):
        rival = best_fixed(r["n_kept"])
        points.append({"tau_warn": r["setting"], "n_kept": r["n_kept"], "keep": r["keep"], "fixed_keep": rival["keep"],
                       "adaptive_cos": r["grad_cos_min"], "fixed_cos": rival["grad_cos_min"],
                       "adaptive_recon": r["max_recon_error"], "fixed_recon": rival["max_recon_error"],
                       "grad": outcome(grad_error(r["grad_cos_min"], floor), grad_error(rival["grad_cos_min"], floor)),
                       "recon": outcome(r["max_recon_error"], rival["max_recon_error"])})
    counts = {f"{m}_{k}": sum(p[m] == k for p in points) for m in ("grad", "recon") for k in ("win", "tie", "loss")}
    layouts = distinct_layouts(points)
    layout_counts = {f"layout_{m}_{k}": sum(lay[m] == k for lay in layouts)
                     for m in ("grad", "recon") for k in ("win", "tie", "loss")}
    return {"points": points, **counts, "layouts": layouts, **layout_counts,
            "scored_on": rows[0].get("scored_on", "probe batch")}


def distinct_layouts(points: Sequence[dict]) -> list[dict]:
    """The adaptive points of `frontier_verdict` grouped by the layout they settled on, in order of appearance.
    Several thresholds often settle on one layout; counted per threshold, that one result would count as many
    times as there are thresholds. Each layout carries its thresholds, its equal-memory rival and the outcomes
    (the same for every threshold that chose it), and `same_as_fixed`: the rival is the same layout, so it ties by
    construction."""
    groups: dict[tuple, dict] = {}
    for p in points:   # `same_as_fixed`: the rival is the same layout
        lay = groups.setdefault(p["keep"], {"keep": p["keep"], "n_kept": p["n_kept"], "fixed_keep": p["fixed_keep"],
                                            "tau_warns": [], "grad": p["grad"], "recon": p["recon"],
                                            "same_as_fixed": p["keep"] == p["fixed_keep"]})
        lay["tau_warns"].append(p["tau_warn"])
    return list(groups.values())


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
