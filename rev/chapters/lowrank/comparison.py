"""Notebook 09b (adaptive rank): the controller against fixed rank and fixed spacing at equal measured peak
memory, over paired seeds, with an exact paired test, the figure, the table and the computed takeaways.

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
from ..shared.tables import counted
from ..shared.verdicts import interval_side, side_of_tie, within_tie
from .controller import RankController
from .experiment import gradient_fidelity, make_digits, new_model, step_peak_bytes
from .sizes import LowRankSizes, chapter_sizes
from .training import seed_data, train_arm

PUBLISHED = ("the idea's own check: the controller used 97 checkpoints and mean rank 8.9 against 13 and rank 5 "
             "for fixed control, for a tiny reduction in defect; 6/8 paired wins, p = 0.17 (inconclusive)")
CALIB_OFFSET = 1000
TAU_SVD = 1e-3  # the idea's own value for the rho rule
COS_SLACK = 0.01  # calibration: a gradient cosine this close to the best reachable counts as reaching it
TIE = 0.01  # decades of gradient error (2%): closer than this, the two arms computed the same gradient
# The idea's own success criterion: a lower mean rank than fixed control at similar accuracy, gradient cosine above
# COS_GOOD. "Similar" read as non-inferiority: the 95% t interval of the paired accuracy difference (controller -
# fixed) lies above -ACC_MARGIN, i.e. the controller may be worse by less than two points of accuracy, not more.
COS_GOOD = 0.98
ACC_MARGIN = 0.02


def paired_sign_flip(diffs) -> float:
    """Exact two-sided p-value of the mean paired difference under random sign flips (no distribution assumed)."""
    d = np.asarray(diffs, dtype=float)
    obs = abs(d.mean())
    flips = [abs((d * np.array(s)).mean()) for s in itertools.product((1, -1), repeat=len(d))]
    return float(np.mean([f >= obs - 1e-15 for f in flips]))


def _ranks(sz: LowRankSizes) -> list[int]:
    return sorted(set(range(sz.rank0, sz.rank_cap + 1, sz.rank_step)) | {sz.rank_cap})


def calibrate(sz: LowRankSizes, spacing: int, cos_target: float = 0.99) -> tuple[dict, pd.DataFrame]:
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


def calibration_rule(cal: pd.DataFrame) -> str:
    """Which rule set tau_rank, from `calibrate`'s table: the note's (the smallest rank whose gradient cosine reaches
    the target), or, on the seeds where no allowed rank reached it, the fallback (within COS_SLACK of the best)."""
    n, seeds, target = cal.attrs["seeds_reaching_target"], cal.attrs["seeds"], cal.attrs["cos_target"]
    if n == seeds:
        return (f"tau_rank follows the note's rule on all {seeds} calibration seeds: the smallest rank whose "
                f"gradient cosine reaches {target:g}.")
    best = cal.groupby("seed").grad_cos.max()
    return (f"The note's rule (the smallest rank whose gradient cosine reaches {target:g}) applies on {n} of {seeds} "
            f"calibration seeds: on the others no allowed rank gets there (best cosines {best.min():.4f} to "
            f"{best.max():.4f}), so tau_rank comes from the fallback there: the smallest rank within "
            f"COS_SLACK = {COS_SLACK:g} of the best cosine that seed reaches.")


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
            print(f"seed {seed}: controller mean rank {c['rank']:.1f} (start {c['rank_start']}, specified rule "
                  f"{c['rank_specified']}), spacing {c['spacing']}, accuracy {c['accuracy']:.3f}; fixed rank "
                  f"{fixed_rank} spacing {spacing0}, accuracy {rows[-1]['accuracy']:.3f}")
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


# the verdict's rows in words (c: the controller's arm, f: the fixed arm; p: the exact sign-flip p-value)
VERDICT_ROWS = {"seeds": "paired seeds", "wins": "gradient error: controller wins", "losses": "gradient error: losses",
                "p": "gradient error: p", "acc_c": "accuracy, controller", "acc_f": "accuracy, fixed",
                "acc_p": "accuracy: p", "var_c": "loss variance, controller", "var_f": "loss variance, fixed",
                "var_p": "loss variance: p", "loss_c": "final loss, controller", "loss_f": "final loss, fixed",
                "loss_p": "final loss: p", "rank_c": "mean rank, controller", "rank_f": "mean rank, fixed",
                "kept_c": "kept states, controller", "kept_f": "kept states, fixed",
                "peak_ratio": "peak memory, controller / fixed", "cos_c": "gradient cosine, controller",
                "cos_f": "gradient cosine, fixed", "reloads": "reloads"}
VERDICT_FILE = "lowrank/verdict.json"


def verdict_table(tables: dict) -> pd.DataFrame:
    """The verdicts side by side, one column per comparison (e.g. per initial spacing C), the headline rows first,
    each row named in words (`VERDICT_ROWS`)."""
    return pd.DataFrame({name: verdict(t) for name, t in tables.items()}).loc[list(VERDICT_ROWS)].rename(
        index=VERDICT_ROWS)


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
    axes[0].set(ylabel="|g - g_dense| / |g_dense|", title="gradient error (mean of checks)")
    axes[1].set(ylabel="accuracy", title="held-out accuracy after training")
    for ax in axes[:2]:
        ax.set(xticks=[0, 1], xticklabels=["fixed", "controller"], xlim=(-0.3, 1.3))
    logs = table.attrs.get("logs", {})
    colour = {"controller": ARMS["policy"], "fixed": ARMS["control"]}
    for arm in ("controller", "fixed"):
        curves = np.array([[r["loss"] for r in logs[s, arm]] for s in c.index if (s, arm) in logs])
        if len(curves):
            axes[2].plot(curves.mean(0), color=colour[arm], label=arm)
            axes[2].fill_between(range(curves.shape[1]), curves.min(0), curves.max(0), color=colour[arm], alpha=0.15)
    axes[2].set(xlabel="step", ylabel="training loss", title="training (mean, range over seeds)")
    axes[2].legend(fontsize=8)
    axes[3].scatter(c["rank"], c.peak_bytes / 1e6, color=colour["controller"], label="controller (per seed)")
    axes[3].axhline(f.peak_bytes.mean() / 1e6, color=colour["fixed"], label=f"fixed, rank {int(f['rank'].iloc[0])}")
    axes[3].axhline(c.peak_bytes.mean() / 1e6, color=colour["controller"], ls="--", label="controller mean")
    axes[3].set(xlabel="mean rank", ylabel="measured peak (MB)", title="peak memory of one gradient")
    axes[3].legend(fontsize=8)
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def _word(wins: int, losses: int, p: float, what: str) -> str:
    if p < 0.05 and wins != losses:
        return f"{'the controller' if wins > losses else 'fixed control'} {what}, and the paired test says so"
    return "the paired test separates neither arm"


PEAK_MATCH = 0.05   # two arms' mean peaks within 5% count as equal memory


def _verdict_line(name: str, v: dict) -> str:
    ties = lambda w, lo: v["seeds"] - w - lo  # noqa: E731
    r = v["peak_ratio"]
    memory = ("equal mean measured peak" if within_tie(r - 1, PEAK_MATCH) else
              f"mean measured peak not matched: the {'fixed arm' if r < 1 else 'controller'} had "
              f"{abs(1 / r - 1) if r < 1 else r - 1:.0%} more")
    return (f"* {name}, {v['seeds']} paired seeds, {memory} (controller/fixed {v['peak_ratio']:.2f}; "
            f"its largest seed {v['peak_ratio_max']:.2f}): controller mean rank {v['rank_c']:.1f} and "
            f"{v['kept_c']:.1f} kept states, fixed rank {v['rank_f']:.1f} and {v['kept_f']:.1f}; gradient cosine "
            f"{v['cos_c']:.3f} vs {v['cos_f']:.3f}. On gradient error the controller wins {v['wins']}, loses "
            f"{v['losses']}, ties {ties(v['wins'], v['losses'])} (exact sign-flip p = {v['p']:.3f}): "
            f"{_word(v['wins'], v['losses'], v['p'], 'is closer to the dense gradient')}. After training, held-out "
            f"accuracy {v['acc_c']:.3f} vs {v['acc_f']:.3f} ({v['acc_wins']}/{v['acc_losses']}/"
            f"{ties(v['acc_wins'], v['acc_losses'])} wins/losses/ties, p = {v['acc_p']:.3f}: "
            f"{_word(v['acc_wins'], v['acc_losses'], v['acc_p'], 'classifies better')}); loss variance over the "
            f"second half {v['var_c']:.3g} vs {v['var_f']:.3g} (p = {v['var_p']:.3f}); final loss {v['loss_c']:.3f} "
            f"vs {v['loss_f']:.3f} (p = {v['loss_p']:.3f})." + _cap_caveat(v))


def _cap_caveat(v: dict) -> str:
    """When the fixed arm sits at the controller's own rank cap, the controller can only match or undercut its
    rank: it could tie or lose on gradient error, never win, so the comparison cannot say adaptivity helps."""
    if not v.get("fixed_at_cap"):
        return ""
    return (" The fixed arm sits at the controller's own rank cap: the controller could only match or undercut its "
            "rank, so it could tie or lose on gradient error but never win; these seeds cannot say whether "
            "adaptivity helps.")


def success_criterion(table: pd.DataFrame) -> dict:
    """The idea's success criterion on one comparison: mean rank lower than fixed control's, accuracy non-inferior
    (the 95% t interval of the paired per-seed difference, controller - fixed, above -ACC_MARGIN), and the
    controller's gradient cosine above COS_GOOD on every seed; `met` when all three hold."""
    c, f = (table[table.arm == a].set_index("seed").sort_index() for a in ("controller", "fixed"))
    diff = (c.accuracy - f.accuracy).to_numpy()
    mean, lo, hi = mean_interval(diff) if len(diff) > 1 else (float(diff.mean()), -math.inf, math.inf)
    out = {"seeds": len(diff), "rank_c": float(c["rank"].mean()), "rank_f": float(f["rank"].mean()),
           "acc_diff": mean, "acc_lo": lo, "acc_hi": hi, "cos_min": float(c.grad_cos.min())}
    out |= {"lower_rank": out["rank_c"] < out["rank_f"], "non_inferior": interval_side(lo, hi, -ACC_MARGIN) > 0,
            "cosine_ok": out["cos_min"] > COS_GOOD}
    return out | {"met": out["lower_rank"] and out["non_inferior"] and out["cosine_ok"]}


def success_line(s: dict) -> str:
    """`success_criterion` in one sentence, each part with its number."""
    parts = [f"mean rank {s['rank_c']:.1f} against {s['rank_f']:.1f} ({'lower' if s['lower_rank'] else 'not lower'})",
             f"accuracy {s['acc_diff']:+.3f} (95% t interval {s['acc_lo']:+.3f} to {s['acc_hi']:+.3f} over "
             f"{counted(s['seeds'], 'paired seed')}: "
             + ("non-inferior, the interval stays above" if s["non_inferior"] else "not shown non-inferior, the "
                "interval reaches below") + f" -{ACC_MARGIN:g})",
             f"lowest gradient cosine {s['cos_min']:.3f} ({'above' if s['cosine_ok'] else 'not above'} {COS_GOOD:g})"]
    return (f"* Against the idea's own success criterion (lower mean rank at similar accuracy, gradient cosine above "
            f"{COS_GOOD:g}): " + "; ".join(parts) + (": **met**." if s["met"] else ": **not met**."))


def outlier_seeds(table: pd.DataFrame, column: str = "final_loss", factor: float = 3.0) -> list[tuple[str, int, float, float]]:
    """(arm, seed, value, median of the arm's other seeds) for each seed whose `column` exceeds `factor` times the
    median of its arm's other seeds: the seeds an arm's mean +- spread is made of."""
    out = []
    for arm, t in table.groupby("arm"):
        for seed, x in t.set_index("seed")[column].items():
            rest = t[t.seed != seed][column]
            if len(rest) and x > factor * rest.median():
                out.append((arm, int(seed), float(x), float(rest.median())))
    return out


def outlier_line(table: pd.DataFrame) -> str | None:
    """The seeds that carry an arm's spread of final loss, in words; None when there are none."""
    found = outlier_seeds(table)
    if not found:
        return None
    said = "; ".join(f"the {arm} arm's seed {seed} ended at loss {x:.3f} against a median of {m:.3f} on its other "
                     f"seeds" for arm, seed, x, m in found)
    return (f"* Spread of the final loss: {said}. Such a seed makes that arm's mean and standard deviation of the loss "
            f"(summary table) a statement about one run, not the arm: read the medians and the paired tests.")


def _rank_rules_line(v: dict, v_rank: dict) -> str:
    """The rank-rules-alone comparison, or, when it measured exactly what the full controller did (its spacing
    rules never moved a checkpoint), one sentence saying so instead of the same result counted twice."""
    if v_rank == v:
        return ("* The rank rules alone (spacing left at C) gave the same runs, seed for seed: the spacing rules never "
                "moved a checkpoint here, so the line above is the rank rules' result too, not a second one.")
    return _verdict_line("The rank rules alone (spacing left at C)", v_rank)


def _local_check_line(th: dict, v: dict, checkpoints: dict | None) -> str:
    """The tau_grad takeaway: how often the local forward check fired, and (from exercise 09b.3's measurement)
    whether it sees the drift of the rebuilt early states."""
    head = (f"* Thresholds from held-out seeds: tau_rank = {th['tau_rank']:.2g}, tau_grad = {th['tau_grad']:.1e}. "
            f"The local forward check behind tau_grad fired {counted(v['reloads'], 'time')} in training.")
    if checkpoints is None:
        return head
    r = checkpoints["rows"][0]
    sees = r["local_check"] >= 0.1 * r["drift_at_step_1"]
    return (head + f" In exercise 09b.3 (rank {r['rank']}) it read {r['local_check']:.1e} while the state rebuilt at "
            f"step 1 was off by {r['drift_at_step_1']:.0e}: "
            + ("it saw the drift of the rebuilt early states." if sees else
               "a forward-consistency check does not see an ill-conditioned reverse, and delta, a rank signal, "
               "does not say where checkpoints are needed either."))


def _rank_room_line(v: dict, sz: LowRankSizes) -> str:
    """Whether the equal-memory comparison could go either way: a fixed arm at full rank computes the dense
    gradient, so it cannot lose on gradient error."""
    head = (f"* The fixed arm ran at rank {v['rank_f']:.0f} and the controller at {v['rank_c']:.1f} on average, of at "
            f"most {sz.rank_cap} on a {sz.m} x {sz.m} state: ")
    if v["rank_f"] >= sz.m:
        return head + ("the fixed arm was the dense model, so on gradient error the comparison was decided by "
                       "construction.")
    if v["rank_c"] == v["rank_f"] and v["kept_c"] == v["kept_f"]:
        return head + ("both arms ran the same rank and kept the same states, so they computed the same gradients: "
                       "a tie by construction, which says nothing about the rank signal.")
    return head + ("neither arm was the dense model and they ran different layouts, so either could win on gradient "
                   "error.")


def takeaways(slope: float, full_rank_defect: float, enrich_drop: float, th: dict, v: dict, v_rank: dict,
              seconds: float, sz: LowRankSizes | None = None, checkpoints: dict | None = None,
              table: pd.DataFrame | None = None) -> str:
    """The chapter's takeaways, every number computed by the notebook (`v`: the full controller's verdict,
    `v_rank`: the controller with its spacing rules switched off; `seconds`: what the comparisons took; `sz`: the
    sizes run; `checkpoints`: exercise 09b.3's `checkpoint_measurement`; `table`: the headline comparison's
    per-seed rows, for the idea's success criterion and the seeds that carry a spread)."""
    big = chapter_sizes("t4")
    lines = [
        "**Takeaways**", "",
        f"* The projector-splitting step with exact substep flows is inverted by its own reverse map at any rank, "
        f"so that round trip says nothing about the rank; against the dense reverse it is at roundoff only at "
        f"full rank ({full_rank_defect:.1e}).",
        f"* On a rank-deficient state that defect grows linearly in h (log-log slope {slope:.2f}): h times the "
        f"tangent-space residual, a rank signal rather than a reconstruction error. Enriching from a randomised "
        f"basis of the residual cut it {enrich_drop:.0f}x.",
        "* The rule 'enrich when rho < tau_svd' fights enrichment (a new direction starts at alpha, so rho is "
        "small right after) and a small rho means the rank is too high; the corrected rule waits for the new "
        f"direction to fill (here, before training, the two reached mean ranks {v['rank_start']:.1f} and "
        f"{v['rank_spec']:.1f}).",
        _local_check_line(th, v, checkpoints),
        _verdict_line("The controller as specified (spacing and rank rules)", v),
        _rank_rules_line(v, v_rank)]
    if sz is not None:
        lines.append(_rank_room_line(v, sz))
    if table is not None:
        lines.append(success_line(success_criterion(table)))
        lines += [line for line in (outlier_line(table),) if line]
    lines += [
        f"* Published: {PUBLISHED}.",
        f"* Training both comparisons, every arm and seed, took {seconds:.0f} s here. The t4 profile runs the same "
        f"code at rank up to {big.rank_cap} (of a {big.m} x {big.m} state) on {big.side ** 2}-step sequences, "
        f"spacings {', '.join(map(str, big.spacings))}."]
    return "\n".join(lines)
