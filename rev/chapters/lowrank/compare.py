"""Notebook 09b (adaptive rank): the controller against fixed rank and fixed spacing at equal measured peak
memory, over paired seeds, with an exact paired test, the figure, the table and the computed takeaways.

* `calibrate` picks the thresholds on held-out seeds (`CALIB_OFFSET + i`, never a test seed): tau_rank is the
  median defect at the smallest rank whose gradient reaches cosine `cos_target` against the dense reference;
  the spacing rules react only to defects far from it (tau_warn = 4 tau_rank, tau_safe = tau_rank / 4); tau_grad
  is ten times the largest local reversal error seen (so a reload means a state worse than any healthy one).
* `compare`: per test seed (a fresh model and batch shared by both arms) the controller starts at (rank0, C) and
  probes for `rounds` rounds. The fixed arm is *one* rank for every seed at spacing C: the one whose measured
  peak is closest to the controller's mean measured peak (equal memory on average, what adaptivity can exploit;
  ranks are whole numbers, so the ratio of the peaks is reported rather than assumed to be 1). Both are scored on
  the gradient through the reverse map against the dense reference (cosine, relative error); paired differences
  under TIE decades count as ties, not wins.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd

from .controller import RankController
from .experiment import LowRankSizes, MatrixODE, gradient_fidelity, make_digits, step_peak_bytes

PUBLISHED = ("the idea's own check: the controller used 97 checkpoints and mean rank 8.9 against 13 and rank 5 "
             "for fixed control, for a tiny reduction in defect; 6/8 paired wins, p = 0.17 (inconclusive)")
CALIB_OFFSET = 1000
TAU_SVD = 1e-3  # the idea's own value for the rho rule
TIE = 0.01  # decades of gradient error (2%): closer than this, the two arms computed the same gradient


def paired_sign_flip(diffs) -> float:
    """Exact two-sided p-value of the mean paired difference under random sign flips (no distribution assumed)."""
    d = np.asarray(diffs, dtype=float)
    obs = abs(d.mean())
    flips = [abs((d * np.array(s)).mean()) for s in itertools.product((1, -1), repeat=len(d))]
    return float(np.mean([f >= obs - 1e-15 for f in flips]))


def _ranks(sz: LowRankSizes) -> list[int]:
    return sorted(set(range(sz.rank0, sz.m + 1, sz.rank_step)) | {sz.m})


def calibrate(sz: LowRankSizes, spacing: int, cos_target: float = 0.99) -> tuple[dict, pd.DataFrame]:
    """Thresholds from held-out seeds (see the module docstring), and the calibration table (seed, rank, delta,
    rho, gradient cosine, largest local reversal error)."""
    rows = []
    for seed in range(CALIB_OFFSET, CALIB_OFFSET + sz.calib_seeds):
        model = MatrixODE(sz.m, seed)
        x, y = make_digits(sz.batch, seed, sz.side)
        for r in _ranks(sz):
            delta, rh = model.probe(x, r)
            fid = gradient_fidelity(model, x, y, r, spacing, math.inf)
            rows.append({"seed": seed, "rank": r, "delta": delta, "rho": rh, "grad_cos": fid["grad_cos"],
                         "local_defect": fid["local_defect"]})
    cal = pd.DataFrame(rows)
    good = cal[cal.grad_cos >= cos_target].sort_values("rank").groupby("seed").first()
    tau_rank = float(good.delta.median())
    return dict(tau_warn=4 * tau_rank, tau_safe=tau_rank / 4, tau_rank=tau_rank, tau_svd=TAU_SVD,
                tau_grad=10 * float(cal.local_defect.max())), cal


def _controller(sz: LowRankSizes, th: dict, spacing0: int, T: int, rule: str) -> RankController:
    return RankController(**th, spacing=spacing0, rank=sz.rank0, max_rank=sz.m, rank_step=sz.rank_step,
                          max_spacing=T, rule=rule)


def compare(sz: LowRankSizes, spacing0: int, th: dict, rule: str = "corrected", progress: bool = False,
            cache: dict | None = None) -> pd.DataFrame:
    """One row per (seed, arm): rank, spacing, kept states, reloads, peak bytes, defect, gradient cosine and error;
    the controller's rows also hold the rank the idea's rule as specified would have reached (`rank_specified`).
    `cache` keeps measured peaks and probes across calls (a peak runs a whole gradient under the profiler)."""
    cache = {} if cache is None else cache

    def peak(model, x, y, rank, spacing, tau_grad):  # shapes alone set the memory: measure each layout once
        key = ("peak", sz.m, sz.batch, sz.side, rank, spacing, tau_grad)
        if key not in cache:
            cache[key] = step_peak_bytes(model, x, y, rank, spacing, tau_grad)
        return cache[key]

    def probe(seed, model, x, rank):  # (delta, rho) depend on the seed and the rank only
        key = ("probe", sz.m, sz.batch, sz.side, seed, rank)
        if key not in cache:
            cache[key] = model.probe(x, rank)
        return cache[key]

    runs = []
    for seed in range(sz.seeds):
        model = MatrixODE(sz.m, seed)
        x, y = make_digits(sz.batch, seed, sz.side)
        ctl, spec = (_controller(sz, th, spacing0, x.shape[1], r) for r in (rule, "specified"))
        for _ in range(sz.rounds):
            ctl.decide(*probe(seed, model, x, ctl.rank))
            spec.decide(*probe(seed, model, x, spec.rank))
        runs.append((seed, model, x, y, ctl, spec.rank, peak(model, x, y, ctl.rank, ctl.spacing, th["tau_grad"])))
    budget = np.mean([r[-1] for r in runs])
    _, model, x, y, *_ = runs[0]
    lo, hi = 1, sz.m  # peak grows with the rank: bisect for the first rank past the budget, keep the closer
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if peak(model, x, y, mid, spacing0, math.inf) <= budget else (lo, mid)
    fixed_rank = min({max(1, lo - 1), lo},
                     key=lambda r: abs(math.log(peak(model, x, y, r, spacing0, math.inf) / budget)))
    rows = []
    for seed, model, x, y, ctl, spec_rank, _ in runs:
        for arm, rank, spacing, tau_grad in (("controller", ctl.rank, ctl.spacing, th["tau_grad"]),
                                             ("fixed", fixed_rank, spacing0, math.inf)):
            fid = gradient_fidelity(model, x, y, rank, spacing, tau_grad)
            rows.append({"seed": seed, "arm": arm, "rank": rank, "spacing": spacing, "kept": fid["kept"],
                         "reloads": fid["reloads"], "peak_bytes": peak(model, x, y, rank, spacing, tau_grad),
                         "defect": probe(seed, model, x, rank)[0], "grad_cos": fid["grad_cos"],
                         "grad_rel_err": fid["grad_rel_err"],
                         "rank_specified": spec_rank if arm == "controller" else np.nan})
        if progress:
            print(f"seed {seed}: controller rank {ctl.rank} spacing {ctl.spacing} (rule as specified: rank "
                  f"{spec_rank}); fixed rank {fixed_rank} spacing {spacing0}")
    return pd.DataFrame(rows)


def verdict(table: pd.DataFrame) -> dict:
    """Paired wins and the exact sign-flip p-value on log relative gradient error (lower is better)."""
    c = table[table.arm == "controller"].set_index("seed")
    f = table[table.arm == "fixed"].set_index("seed")
    diff = np.log10(c.grad_rel_err.clip(lower=1e-300)) - np.log10(f.grad_rel_err.clip(lower=1e-300))
    return {"seeds": len(diff), "wins": int((diff < -TIE).sum()), "losses": int((diff > TIE).sum()),
            "p": paired_sign_flip(diff),
            "mean_log10_ratio": float(diff.mean()), "peak_ratio": float(c.peak_bytes.mean() / f.peak_bytes.mean()),
            "peak_ratio_max": float(c.peak_bytes.max() / f.peak_bytes.mean()),
            "rank_c": float(c["rank"].mean()), "rank_f": float(f["rank"].mean()),
            "rank_spec": float(c.rank_specified.mean()), "kept_c": float(c.kept.mean()),
            "kept_f": float(f.kept.mean()), "reloads": int(c.reloads.sum()),
            "cos_c": float(c.grad_cos.mean()), "cos_f": float(f.grad_cos.mean())}


def summary_table(table: pd.DataFrame) -> pd.DataFrame:
    cols = ["rank", "spacing", "kept", "reloads", "peak_bytes", "defect", "grad_cos", "grad_rel_err"]
    return table.groupby("arm")[cols].agg(["mean", "std"])


def comparison_figure(table: pd.DataFrame):
    """Per-seed relative gradient error of both arms (paired lines) and their peak memory."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    c, f = (table[table.arm == a].set_index("seed") for a in ("controller", "fixed"))
    for s in c.index:
        axes[0].semilogy([0, 1], [f.grad_rel_err[s], c.grad_rel_err[s]], "o-", color="gray", alpha=0.6)
    axes[0].set(xticks=[0, 1], xticklabels=["fixed", "controller"], ylabel="|g - g_dense| / |g_dense|",
                title="gradient error, paired by seed")
    axes[1].scatter(c["rank"], c.peak_bytes / 1e6, label="controller (per seed)")
    axes[1].axhline(f.peak_bytes.mean() / 1e6, color="C1", label=f"fixed, rank {int(f['rank'].iloc[0])}")
    axes[1].axhline(c.peak_bytes.mean() / 1e6, color="C0", ls="--", label="controller mean")
    axes[1].set(xlabel="rank", ylabel="measured peak (MB)", title="peak memory of one gradient")
    axes[1].legend(fontsize=8)
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def _verdict_line(name: str, v: dict) -> str:
    better = v["wins"] > v["losses"] and v["p"] < 0.05
    worse = v["wins"] < v["losses"] and v["p"] < 0.05
    word = ("its gradients are closer to the dense reference, and the paired test says so" if better
            else "fixed control is closer to the dense reference, and the paired test says so" if worse
            else "the paired test separates neither arm: inconclusive")
    return (f"* {name}, {v['seeds']} paired seeds, equal mean measured peak (controller/fixed {v['peak_ratio']:.2f}; "
            f"its largest seed {v['peak_ratio_max']:.2f}): controller mean rank {v['rank_c']:.1f} and "
            f"{v['kept_c']:.1f} kept states, fixed rank {v['rank_f']:.1f} and {v['kept_f']:.1f}; gradient cosine "
            f"{v['cos_c']:.3f} vs {v['cos_f']:.3f}; the controller wins {v['wins']}, loses {v['losses']} and ties "
            f"{v['seeds'] - v['wins'] - v['losses']} on gradient error, exact sign-flip p = {v['p']:.3f}: {word}.")


def takeaways(slope: float, full_rank_defect: float, enrich_drop: float, th: dict, v: dict, v_rank: dict,
              grad_s: float, train_s: float) -> str:
    """The chapter's takeaways, every number computed by the notebook (`v`: the full controller's verdict,
    `v_rank`: the controller with its spacing rules switched off)."""
    return "\n".join([
        "**Takeaways**", "",
        f"* The projector-splitting step with exact substep flows is inverted by its own reverse map at any rank, "
        f"so that round trip says nothing about the rank; against the dense reverse it is at roundoff only at "
        f"full rank ({full_rank_defect:.1e}).",
        f"* On a rank-deficient state that defect grows linearly in h (log-log slope {slope:.2f}): h times the "
        f"tangent-space residual, a rank signal rather than a reconstruction error. Enriching from a randomised "
        f"basis of the residual cut it {enrich_drop:.0f}x.",
        "* The rule 'enrich when rho < tau_svd' fights enrichment (a new direction starts at alpha, so rho is "
        "small right after) and a small rho means the rank is too high; the corrected rule waits for the new "
        f"direction to fill (here the two reached the same mean rank: {v['rank_c']:.1f} and {v['rank_spec']:.1f}).",
        f"* Thresholds from held-out seeds: tau_rank = {th['tau_rank']:.2g}, tau_grad = {th['tau_grad']:.1e}. "
        f"The local forward check behind tau_grad never fired ({v['reloads']} reloads), yet in float32 the reverse "
        f"walk rebuilds small early states badly at low rank (exercise 09b.3): a forward-consistency check cannot "
        f"see an ill-conditioned reverse, and delta, a rank signal, does not say where checkpoints are needed.",
        _verdict_line("The controller as specified (spacing and rank rules)", v),
        _verdict_line("The rank rules alone (spacing left at C)", v_rank),
        f"* Published: {PUBLISHED}.",
        f"* Ours scores one gradient, not training: a gradient takes {grad_s:.1f} s here, so training both arms "
        f"over the seeds would take about {train_s / 60:.0f} min."])
