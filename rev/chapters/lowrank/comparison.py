"""Notebook 09b (adaptive rank): the controller against fixed rank and fixed spacing at equal measured peak
memory, over paired seeds, with an exact paired test, the figure and the tables (the notebook writes the words).

* `calibrate` picks the thresholds on held-out seeds (`CALIB_OFFSET + i`, never a test seed): tau_rank is the
  median defect at the smallest rank whose gradient reaches cosine `cos_target` against the dense reference
  (where no allowed rank does: within COS_SLACK of the best cosine one reaches);
  the spacing rules react only to defects far from it (tau_warn = 4 tau_rank, tau_safe = tau_rank / 4); tau_grad
  is ten times the largest local reversal error seen (so a reload means a state worse than any healthy one).
* `compare`: per test seed both arms train from the same weights on the same minibatches (`training.train_arm`).
  The controller starts at (rank0, C), probes for `rounds` rounds, then keeps deciding as it trains. The fixed
  arm is *one* rank for every seed at spacing C: the one whose measured peak is closest to the controller's mean
  measured peak (equal memory on average, what adaptivity can exploit; ranks are whole numbers, so the ratio of
  the peaks is reported rather than assumed to be 1). Both are scored on the gradient through the reverse map
  against the dense reference (cosine, relative error, checked along training), the final loss, the loss
  variance and the held-out accuracy; paired differences under TIE decades count as ties, not wins.
"""
from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd

from ...measure.stats import mean_interval
from ..shared.palette import ARMS
from ..shared.verdicts import interval_side, side_of_tie
from .controller import RankController
from .experiment import gradient_fidelity, make_digits, new_model, step_peak_bytes
from .sizes import LowRankSizes
from .training import seed_data, train_arm

CALIB_OFFSET = 1000
TAU_SVD = 1e-3  # the idea's own value for the rho rule
COS_SLACK = 0.01  # calibration: a gradient cosine this close to the best reachable counts as reaching it
TIE = 0.01  # decades of gradient error (2%): closer than this, the two arms computed the same gradient
# The idea's own success criterion: a lower mean rank than fixed control at similar accuracy, gradient cosine above
# COS_GOOD. "Similar" read as non-inferiority: the 95% t interval of the paired accuracy difference (controller -
# fixed) lies above -ACC_MARGIN, i.e. the controller may be worse by less than two points of accuracy, not more.
COS_GOOD = 0.98
ACC_MARGIN = 0.02
PEAK_MATCH = 0.05   # two arms' mean peaks within 5% count as equal memory


def paired_sign_flip(diffs) -> float:
    """Exact two-sided p-value of the mean paired difference under random sign flips (no distribution assumed)."""
    d = np.asarray(diffs, dtype=float)
    obs = abs(d.mean())
    flips = [abs((d * np.array(s)).mean()) for s in itertools.product((1, -1), repeat=len(d))]
    return float(np.mean([f >= obs - 1e-15 for f in flips]))


def _ranks(sz: LowRankSizes) -> list[int]:
    return sorted(set(range(sz.rank0, sz.rank_cap + 1, sz.rank_step)) | {sz.rank_cap})


def calibrate(sz: LowRankSizes, spacing: int, cos_target: float = COS_GOOD) -> tuple[dict, pd.DataFrame]:
    """Thresholds from held-out seeds (see the module docstring), and the calibration table (seed, rank, delta,
    rho, gradient cosine, largest local reversal error)."""
    rows = []
    for seed in range(CALIB_OFFSET, CALIB_OFFSET + sz.calib_seeds):
        model = new_model(sz, seed)
        x, y = make_digits(sz.batch, seed, sz.side)
        for r in _ranks(sz):
            delta, rh = model.probe(x, r)
            fid = gradient_fidelity(model, x, y, r, spacing, math.inf)
            rows.append({"seed": seed, "rank": r, "delta": delta, "rho": rh, "grad_cos": fid["grad_cos"],
                         "local_defect": fid["local_defect"]})
    cal = pd.DataFrame(rows)
    # per seed: the smallest rank whose gradient is good enough -- reaching `cos_target`, or, where no allowed rank
    # does, within COS_SLACK of the best any reaches (a rank the controller can attain, not always the cap)
    target = cal.groupby("seed").grad_cos.transform(lambda c: min(cos_target, c.max() - COS_SLACK))
    good = cal[cal.grad_cos >= target].sort_values("rank").groupby("seed").first()
    tau_rank = float(good.delta.median())
    reached = int((cal.groupby("seed").grad_cos.max() >= cos_target).sum())
    cal.attrs.update(cos_target=cos_target, seeds_reaching_target=reached, seeds=int(cal.seed.nunique()))
    return dict(tau_warn=4 * tau_rank, tau_safe=tau_rank / 4, tau_rank=tau_rank, tau_svd=TAU_SVD,
                tau_grad=10 * float(cal.local_defect.max())), cal


def _controller(sz: LowRankSizes, th: dict, spacing0: int, T: int, rule: str) -> RankController:
    return RankController(**th, spacing=spacing0, rank=sz.rank0, max_rank=sz.rank_cap, rank_step=sz.rank_step,
                          max_spacing=T, rule=rule)


def compare(sz: LowRankSizes, spacing0: int, th: dict, rule: str = "corrected", progress: bool = False,
            cache: dict | None = None) -> pd.DataFrame:
    """Train both arms on every seed (`training.train_arm`); one row per (seed, arm) with the arm's summary, and
    for the controller the rank it had reached when training began (`rank_start`) beside the rank the idea's
    rule as specified reaches over the same probes (`rank_specified`). Per-step logs are in
    `table.attrs["logs"][seed, arm]`. `cache` keeps measured peaks and fixed-arm runs across calls (a peak runs a
    whole gradient under the profiler; a fixed arm does not depend on the controller's thresholds)."""
    cache = {} if cache is None else cache
    shape_model, (x0, y0) = new_model(sz, 0), make_digits(sz.batch, 0, sz.side)

    def peak(rank: int, spacing: int, tau_grad: float) -> int:  # shapes alone set the memory: measure once each
        key = ("peak", sz, rank, spacing, tau_grad)
        if key not in cache:
            cache[key] = step_peak_bytes(shape_model, x0, y0, rank, spacing, tau_grad)
        return cache[key]

    T = sz.side ** 2
    rows, logs, ctl_peaks = [], {}, []
    for seed in range(sz.seeds):
        ctl, spec = (_controller(sz, th, spacing0, T, r) for r in (rule, "specified"))
        start = new_model(sz, seed)
        x_first = seed_data(sz, seed)[0][0][0]  # the first minibatch train_arm probes on
        for _ in range(sz.rounds):  # what the specified rule would decide on the same weights and batch
            spec.decide(*start.probe(x_first, spec.rank))
        run = train_arm(sz, seed, sz.rank0, spacing0, th["tau_grad"], peak, ctl)
        rank_start = ctl.log[sz.rounds - 1]["rank"] if sz.rounds else sz.rank0
        rows.append({"seed": seed, "arm": "controller", **run["summary"], "rank_start": rank_start,
                     "rank_specified": spec.rank})
        logs[seed, "controller"] = run["log"]
        ctl_peaks.append(run["summary"]["peak_bytes"])
    budget = float(np.mean(ctl_peaks))
    lo, hi = 1, sz.rank_cap  # peak grows with the rank: bisect for the first rank past the budget, keep the closer
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if peak(mid, spacing0, math.inf) <= budget else (lo, mid)
    fixed_rank = min({max(1, lo - 1), lo}, key=lambda r: abs(math.log(peak(r, spacing0, math.inf) / budget)))
    for seed in range(sz.seeds):
        key = ("fixed", sz, seed, fixed_rank, spacing0)
        if key not in cache:
            cache[key] = train_arm(sz, seed, fixed_rank, spacing0, math.inf, peak)
        rows.append({"seed": seed, "arm": "fixed", **cache[key]["summary"], "rank_start": fixed_rank,
                     "rank_specified": np.nan})
        logs[seed, "fixed"] = cache[key]["log"]
        if progress:
            c = rows[seed]
            print(f"seed {seed}: controller rank {c['rank']:.1f}, accuracy {c['accuracy']:.3f}; "
                  f"fixed rank {fixed_rank}, {rows[-1]['accuracy']:.3f}")
    table = pd.DataFrame(rows)
    table.attrs["logs"] = logs
    table.attrs["rank_cap"] = sz.rank_cap   # the controller's own cap: a fixed arm there cannot be exceeded
    return table


def _paired(c: pd.DataFrame, f: pd.DataFrame, column: str, log: bool, higher_is_better: bool = False,
            tie: float = TIE) -> tuple[int, int, float]:
    """(controller wins, losses, exact sign-flip p) on one per-seed figure; differences within `tie` are ties."""
    a, b = c[column], f[column]
    diff = np.log10(a.clip(lower=1e-300)) - np.log10(b.clip(lower=1e-300)) if log else a - b
    diff = -diff if higher_is_better else diff  # from here on, negative means the controller did better
    sides = [side_of_tie(float(d), tie) for d in diff]
    return sides.count(-1), sides.count(1), paired_sign_flip(diff)


def verdict(table: pd.DataFrame) -> dict:
    """Paired wins, losses and the exact sign-flip p-value on log relative gradient error (the headline), and the
    same on held-out accuracy (acc_), the final loss (loss_) and the loss variance (var_), plus the arms' means."""
    c = table[table.arm == "controller"].set_index("seed")
    f = table[table.arm == "fixed"].set_index("seed")
    wins, losses, p = _paired(c, f, "grad_rel_err", log=True)
    out = {"seeds": len(c), "wins": wins, "losses": losses, "p": p,
           "mean_log10_ratio": float((np.log10(c.grad_rel_err.clip(lower=1e-300))
                                      - np.log10(f.grad_rel_err.clip(lower=1e-300))).mean()),
           "peak_ratio": float(c.peak_bytes.mean() / f.peak_bytes.mean()),
           "peak_ratio_max": float(c.peak_bytes.max() / f.peak_bytes.mean()),
           "rank_c": float(c["rank"].mean()), "rank_f": float(f["rank"].mean()),
           "rank_start": float(c.rank_start.mean()), "rank_spec": float(c.rank_specified.mean()),
           "kept_c": float(c.kept.mean()), "kept_f": float(f.kept.mean()), "reloads": int(c.reloads.sum()),
           "cos_c": float(c.grad_cos.mean()), "cos_f": float(f.grad_cos.mean()),
           "fixed_at_cap": bool(table.attrs.get("rank_cap") and f["rank"].max() >= table.attrs["rank_cap"])}
    for prefix, column, log, higher in (("acc", "accuracy", False, True), ("loss", "final_loss", True, False),
                                        ("var", "loss_var", True, False)):
        w, lo, pv = _paired(c, f, column, log, higher, tie=1e-9 if column == "accuracy" else TIE)
        out |= {f"{prefix}_wins": w, f"{prefix}_losses": lo, f"{prefix}_p": pv,
                f"{prefix}_c": float(c[column].mean()), f"{prefix}_f": float(f[column].mean())}
    return out


VERDICT_FILE = "lowrank/verdict.json"


def _plain(x):
    """A JSON-ready Python scalar (numpy's bools, ints and floats become Python's; bool before int, its parent)."""
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    return int(x) if isinstance(x, (np.integer, int)) else float(x) if isinstance(x, (np.floating, float)) else x


def save_verdict(profile_dir: str | Path, v: dict, success: dict | None = None) -> Path:
    """Write the headline verdict, and `success_criterion`'s reading of it when given, where REPORT.md's companion
    section reads them (``results/<profile>/`` + `VERDICT_FILE`)."""
    from ...base.files import write_json

    doc = {k: _plain(x) for k, x in v.items()}
    if success is not None:
        doc["success"] = {k: _plain(x) for k, x in success.items()}
    path = Path(profile_dir) / VERDICT_FILE
    write_json(path, doc)
    return path


def summary_table(table: pd.DataFrame) -> pd.DataFrame:
    cols = ["rank", "spacing", "kept", "reloads", "peak_bytes", "defect", "grad_cos", "grad_rel_err", "final_loss",
            "loss_var", "accuracy"]
    words = {"kept": "kept states", "peak_bytes": "peak bytes", "grad_cos": "gradient cosine",
             "grad_rel_err": "gradient relative error", "final_loss": "final loss", "loss_var": "loss variance"}
    out = table.groupby("arm")[cols].agg(["mean", "std"]).T.unstack()  # one row per figure
    return out.rename(index=words)


def comparison_figure(table: pd.DataFrame):
    """Per seed, paired: the gradient error and the held-out accuracy of both arms; the training loss of each
    arm (mean over seeds); and the peak memory against the rank."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(16, 3.6))
    c, f = (table[table.arm == a].set_index("seed") for a in ("controller", "fixed"))
    for s in c.index:
        axes[0].semilogy([0, 1], [f.grad_rel_err[s], c.grad_rel_err[s]], "o-", color="gray", alpha=0.6)
        axes[1].plot([0, 1], [f.accuracy[s], c.accuracy[s]], "o-", color="gray", alpha=0.6)
    axes[0].set(ylabel="|g - g_dense| / |g_dense|", title="gradient error")
    axes[1].set(ylabel="accuracy", title="held-out accuracy")
    for ax in axes[:2]:
        ax.set(xticks=[0, 1], xticklabels=["fixed", "controller"], xlim=(-0.3, 1.3))
    logs = table.attrs.get("logs", {})
    colour = {"controller": ARMS["policy"], "fixed": ARMS["control"]}
    for arm in ("controller", "fixed"):
        curves = np.array([[r["loss"] for r in logs[s, arm]] for s in c.index if (s, arm) in logs])
        if len(curves):
            axes[2].plot(curves.mean(0), color=colour[arm], label=arm)
            axes[2].fill_between(range(curves.shape[1]), curves.min(0), curves.max(0), color=colour[arm], alpha=0.15)
    axes[2].set(xlabel="step", ylabel="training loss", title="training loss")
    axes[2].legend(fontsize=8)
    axes[3].scatter(c["rank"], c.peak_bytes / 1e6, color=colour["controller"], label="controller (per seed)")
    axes[3].axhline(f.peak_bytes.mean() / 1e6, color=colour["fixed"], label=f"fixed, rank {int(f['rank'].iloc[0])}")
    axes[3].axhline(c.peak_bytes.mean() / 1e6, color=colour["controller"], ls="--", label="controller mean")
    axes[3].set(xlabel="mean rank", ylabel="measured peak (MB)", title="peak memory")
    axes[3].legend(fontsize=8)
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def success_criterion(table: pd.DataFrame) -> dict:
    """The idea's success criterion on one comparison: mean rank lower than fixed control's, accuracy non-inferior
    (the 95% t interval of the paired per-seed difference, controller - fixed, above -ACC_MARGIN), and the
    controller's gradient cosine above COS_GOOD on every seed; `met` when all three hold."""
    c, f = (table[table.arm == a].set_index("seed").sort_index() for a in ("controller", "fixed"))
    diff = (c.accuracy - f.accuracy).to_numpy()
    mean, lo, hi = mean_interval(diff) if len(diff) > 1 else (float(diff.mean()), -math.inf, math.inf)
    out = {"seeds": len(diff), "rank_c": float(c["rank"].mean()), "rank_f": float(f["rank"].mean()),
           "acc_diff": mean, "acc_lo": lo, "acc_hi": hi, "cos_min": float(c.grad_cos.min()),
           "cos_min_f": float(f.grad_cos.min())}  # the fixed arm's too: the bound may be out of reach for both
    out |= {"lower_rank": out["rank_c"] < out["rank_f"], "non_inferior": interval_side(lo, hi, -ACC_MARGIN) > 0,
            "cosine_ok": out["cos_min"] > COS_GOOD}
    return out | {"met": out["lower_rank"] and out["non_inferior"] and out["cosine_ok"]}
