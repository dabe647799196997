"""Notebook 10 (fine-tune trace and rollback): judging a kept trace. A reversibility score and three checks.

`reversibility_score` walks a copy of the model back through what the trace keeps and measures how much of
the fine-tuning displacement it undoes (1.0 only when the rebuilt start is bit-identical). Three checks read
the ledger: complete (every step kept exactly), lr recoverable (the lr of every step is what the schedule
gives for its step number), updates bounded. `assess` gathers them into a verdict and a recommendation.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np
from torch import Tensor, nn

from ...core.optim import Schedule
from .codec import bitwise_equal, ulp_distance
from .records import BF16DIFF, DROPPED, F32DIFF, Trace, check_model, weights_hash
from .walk import walk_steps


@dataclass
class Score:
    """How well the kept trace gets back to the pre-fine-tuning weights.

    score = 1 - ||theta_0_rebuilt - theta_0|| / ||theta_N - theta_0||: the fraction of the fine-tuning
    displacement the trace undoes. 1.0 exactly when the rebuilt weights are bit-identical to the start.
    """
    score: float
    exact: bool                # rebuilt start hashes to the recorded start hash
    method: str                # "hash" | "reference" | "ledger estimate"
    error_l2: float            # ||theta_0_rebuilt - theta_0|| (an estimate for method 'ledger estimate')
    displacement: float        # ||theta_N - theta_0||
    error_max: float = float("nan")    # largest elementwise error (reference only)
    n_wrong: int = -1                  # elements not bit-identical (reference only)
    max_ulps: int = -1                 # largest error in ulps (reference only)


def reversibility_score(model: nn.Module, trace: Trace, reference: nn.Module | Mapping[str, Tensor] | None = None,
                        from_step: int | None = None) -> Score:
    """Walk a copy of `model` (at the trace's last step) back to step 0 and score the result.

    With `reference` (the starting weights) the error is measured. Without it the rebuilt weights are
    compared with the recorded start hash: a match is exact (1.0); otherwise the error is estimated from the
    ledger as the sum of each lossy or dropped step's own error (unknown, so score 0, if records are missing).
    It is an estimate, not a bound: the walk carries an error on through the earlier steps, where it can
    grow or shrink.
    """
    work = copy.deepcopy(model)
    check_model(work, trace)
    start = trace.final_step if from_step is None else from_step
    if from_step is None and weights_hash(work) != trace.hash_at(start):
        raise ValueError("the model is not at the trace's last step: pass from_step=...")
    final = {n: p.detach().clone() for n, p in work.named_parameters()}
    walk_steps(work, trace, start, 0, None, strict=False, on_step=None)
    if reference is not None:
        ref = dict(reference.named_parameters()) if isinstance(reference, nn.Module) else dict(reference)
        return _measured_score(work, final, ref)
    last = trace.record(start)
    disp = float(last.meta["dist_from_start"]) if last is not None else 0.0
    if weights_hash(work) == trace.hash_at(0):
        return Score(1.0, True, "hash", 0.0, disp)
    if set(range(1, start + 1)) - set(trace.steps):
        return Score(0.0, False, "ledger estimate", math.inf, disp)
    estimate = sum(r.meta.get("err_norm", 0.0) for r in trace.records if r.step <= start)
    return Score(_fraction_undone(estimate, disp), False, "ledger estimate", estimate, disp)


def _fraction_undone(err: float, disp: float) -> float:
    if err == 0:
        return 1.0
    return max(0.0, 1.0 - err / disp) if disp > 0 else 0.0


def _measured_score(work: nn.Module, final: Mapping[str, Tensor], ref: Mapping[str, Tensor]) -> Score:
    err_sq = disp_sq = 0.0
    err_max, wrong, max_ulps = 0.0, 0, 0
    for n, p in work.named_parameters():
        r = ref[n].detach().to(p.device)
        d = p.detach().double() - r.double()
        err_sq += float(d.pow(2).sum())
        disp_sq += float((final[n].double() - r.double()).pow(2).sum())
        err_max = max(err_max, float(d.abs().max()) if d.numel() else 0.0)
        wrong += int((~bitwise_equal(p.detach(), r)).sum())
        if p.dtype.is_floating_point:
            max_ulps = max(max_ulps, int(np.abs(ulp_distance(r, p.detach())).max()))
    exact = wrong == 0
    err = math.sqrt(err_sq)
    # a state that is not bit-identical never scores 1.0, however small its error
    return Score(1.0 if exact else min(_fraction_undone(err, math.sqrt(disp_sq)), float(np.nextafter(1.0, 0.0))),
                 exact, "reference", err, math.sqrt(disp_sq), err_max, wrong, max_ulps)


@dataclass
class Check:
    name: str
    passed: bool
    finding: str
    steps: list[int] = field(default_factory=list)    # the offending steps


def check_complete(trace: Trace) -> Check:
    """Every step 1..N has a record that keeps its update exactly."""
    present = set(trace.steps)
    missing = sorted(set(range(1, trace.final_step + 1)) - present)
    dropped = [r.step for r in trace.records if r.kind == DROPPED]
    lossy = [r for r in trace.records if r.kind in (F32DIFF, BF16DIFF)]
    outside = [r.step for r in trace.records if r.meta.get("outside_change")]
    bad = sorted(set(missing) | set(dropped))
    if bad:
        return Check("complete", False,
                     f"{len(bad)} of {trace.final_step} steps have no kept update ({_fmt_steps(bad)})", bad)
    if lossy:
        return Check("complete", True, f"{len(lossy)} lossy ({lossy[0].kind})", [])
    note = f"; folded in at {_fmt_steps(outside)}" if outside else ""
    return Check("complete", True, f"{trace.final_step} exact{note}", [])


def check_lr_schedule(trace: Trace, lr_at: Callable[[int], float | Sequence[float]] | None = None,
                      rel_tol: float = 1e-12) -> Check:
    """The lr recorded at every step equals the schedule recomputed from the step number alone.

    `lr_at` counts steps from 0, as `rev.core.optim.Schedule.lr_at` does (default: the schedule in the
    trace's header), while trace steps count from 1: step n ran at `lr_at(n - 1)`.
    """
    if lr_at is None:
        spec = trace.header.get("schedule")
        if spec is None:
            return Check("lr recoverable", False, "no schedule: pass lr_at", [])
        lr_at = Schedule(**spec).lr_at
    bad, example = [], ""
    for r in trace.records:
        want = lr_at(r.step - 1)
        want = [float(want)] * len(r.lrs) if isinstance(want, (int, float)) else [float(w) for w in want]
        if any(not math.isclose(a, b, rel_tol=rel_tol, abs_tol=0.0) for a, b in zip(r.lrs, want)):
            if not bad:
                example = f"step {r.step}: lr {r.lrs[0]:.4g}, schedule {want[0]:.4g}"
            bad.append(r.step)
    if bad:
        return Check("lr recoverable", False,
                     f"lr changed by hand at {_fmt_steps(bad)} ({example})", bad)
    return Check("lr recoverable", True, f"{len(trace.records)} steps on schedule", [])


DEFAULT_UPDATE_THRESHOLD = 0.5


def check_bounded(trace: Trace, threshold: float = DEFAULT_UPDATE_THRESHOLD) -> Check:
    """The largest relative update per step, max over tensors of ||dp|| / ||p||, stays below `threshold`."""
    bad = [r for r in trace.records if not r.meta["rel_update_max"] < threshold]
    worst = max(trace.records, key=lambda r: r.meta["rel_update_max"], default=None)
    if bad:
        w = max(bad, key=lambda r: r.meta["rel_update_max"])
        return Check("updates bounded", False,
                     f"steps {_fmt_steps([r.step for r in bad])} above {threshold:g}, worst {w.meta['rel_update_max']:.3g}",
                     [r.step for r in bad])
    top = f"{worst.meta['rel_update_max']:.3g}" if worst is not None else "n/a"
    return Check("updates bounded", True, f"largest {top} < {threshold:g}", [])


def _fmt_steps(steps: Sequence[int], limit: int = 8) -> str:
    shown = ", ".join(str(s) for s in steps[:limit])
    return shown + (f", ... {len(steps) - limit} more" if len(steps) > limit else "")


DEFAULT_SCORE_THRESHOLD = 0.999


@dataclass
class Assessment:
    score: Score
    checks: list[Check]
    threshold: float
    irreversible: bool         # the flag: score below threshold
    verdict: str               # "exactly reversible" | "approximately reversible" | "irreversible"
    recommendation: str

    @property
    def passed(self) -> dict[str, bool]:
        return {c.name: c.passed for c in self.checks}

    def checks_in_words(self) -> str:
        """Which checks pass and which fail, by name (`passed` is a dict, which reads as code when printed)."""
        ok, failed = [c.name for c in self.checks if c.passed], [c.name for c in self.checks if not c.passed]
        return f"checks passed: {', '.join(ok) or 'none'}; failed: {', '.join(failed) or 'none'}"

    def findings(self) -> list[str]:
        return [f"[{'ok' if c.passed else 'FAIL'}] {c.name}: {c.finding}" for c in self.checks]

    def __str__(self) -> str:
        s = self.score
        off = "bit-identical" if s.exact else f"L2 error {s.error_l2:.3g}"
        head = f"reversibility score {s.score:.6f} ({s.method}; {off}): {self.verdict}"
        return "\n".join([head, *self.findings(), f"=> {self.recommendation}"])


def assess(model: nn.Module, trace: Trace, reference: nn.Module | Mapping[str, Tensor] | None = None,
           lr_at: Callable[[int], float] | None = None, score_threshold: float = DEFAULT_SCORE_THRESHOLD,
           update_threshold: float = DEFAULT_UPDATE_THRESHOLD) -> Assessment:
    """Score the trace and run the three checks; flag the run irreversible below `score_threshold`."""
    score = reversibility_score(model, trace, reference)
    checks = [check_complete(trace), check_lr_schedule(trace, lr_at), check_bounded(trace, update_threshold)]
    failed = [c.name for c in checks if not c.passed]
    irreversible = score.score < score_threshold
    if irreversible:
        verdict = "irreversible"
        rec = "revert to a checkpoint"
    elif score.exact:
        verdict = "exactly reversible"
        rec = "exact rollback"
    else:
        verdict = "approximately reversible"
        rec = "approximate rollback"
    if failed:
        rec += f"; fix: {', '.join(failed)}"
    return Assessment(score, checks, score_threshold, irreversible, verdict, rec)
