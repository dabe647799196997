"""Notebook 08 (training irreversibility): what the notebook shows, from what it measured.

The figures (the coupling g(k), the O(eta) error slopes, the balance drift, the learning-rate shock of one seed
and, paper-style, over seeds), the takeaways as Markdown, and the summary JSON, all built from one `ChapterFindings` that the notebook fills with
its tables.
"""
from __future__ import annotations

import dataclasses
import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from rev.base.files import write_text

from ..shared.palette import ARMS, MEASURES as MEASURE_COLOURS, sweep_colours
from .defect import coupling
from .seeds import MEASURES, UNDECIDED, ShockRuns, claim_status, measure_series
from .shock import CONVERGED_FACTOR, fluctuation_verdict, noise_floor, windowed_variance
from .sizes import FluctuationSizes


# ----------------------------------------------------------------------------------------------------------
# figures: each returns its figure; the notebook cell ends with plt.show()
# ----------------------------------------------------------------------------------------------------------

def plot_coupling(table: pd.DataFrame) -> plt.Figure:
    """g(k): the closed form, the step-halving measurement (`coupling_table`) and the fixed point 1/4."""
    kk = np.linspace(-4.2, 10.2, 300)
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    ax.plot(kk, [coupling(k) for k in kk], color="0.6", label=r"$g(k) = (1-2^{-k})/4$")
    ax.plot(table.k, table.g_measured, "o", color=MEASURE_COLOURS[1], label=r"measured by step-halving")
    ax.axhline(0.25, ls=":", color="k", lw=1, label="fixed point 1/4 (continuum limit)")
    ax.set_ylim(-4.2, 0.6)
    ax.set_xlabel("k  (step = eta 2^-k;  k < 0: coarse-graining)")
    ax.set_ylabel("g(k)")
    ax.set_title("The renormalised coupling flows to 1/4 when refining, away when coarsening")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig


def plot_error_slopes(sweep: pd.DataFrame, slopes: pd.DataFrame, problems: Sequence[str]) -> plt.Figure:
    """Relative error of every potential against eta, one panel per problem, with a slope-1 guide."""
    fig, axes = plt.subplots(1, len(problems), figsize=(13, 3.8), sharey=True)
    styles = dict(zip(("DE", "TA", "TR", "ST"), zip(MEASURE_COLOURS, ("o", "s", "^", "D"))))
    for ax, name in zip(np.atleast_1d(axes), problems):
        df = sweep[sweep.problem == name]
        for pot, (c, mk) in styles.items():
            d = df[df.potential == pot]
            row = slopes[(slopes.problem == name) & (slopes.potential == pot)].iloc[0]
            lab = f"{pot}: " + ("exact" if row.exact else f"slope {row.slope_tail:.2f}")
            ax.loglog(d.eta, d.error.clip(lower=1e-16), marker=mk, color=c, label=lab)
        e = df.eta.to_numpy()
        ax.loglog(e, 0.1 * e / e.max(), ls="--", color="0.5", lw=1, label="slope 1")
        ax.set_title(name)
        ax.xaxis.set_minor_formatter(plt.NullFormatter())
        ax.set_xlabel("eta")
        ax.legend(fontsize=7)
    np.atleast_1d(axes)[0].set_ylabel("relative error of measured potential vs (eta/4)|U|^2")
    fig.suptitle("Every measured potential approaches (eta/4)|U|^2 with an O(eta) error", y=1.02)
    fig.tight_layout()
    return fig


def plot_drift(runs: dict[float, dict[str, np.ndarray]]) -> plt.Figure:
    """log D(t)/D(0) under GD, the modified flow and gradient flow, for the `balance_drift` runs by eta."""
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    for (eta, r), c in zip(runs.items(), sweep_colours(len(runs))):
        ax.plot(r["time"], np.log(r["d_gd"] / r["d_gd"][0]), color=c, label=f"GD, eta={eta:g}")
        ax.plot(r["time"], np.log(r["d_pred"] / r["d_pred"][0]), ls="--", color="k", lw=0.8)
        ax.plot(r["time"], np.log(r["d_flow"] / r["d_flow"][0]), ls=":", color="0.5")
    ax.plot([], [], ls="--", color="k", lw=0.8, label="modified flow: dD/dt = -eta l'^2 D")
    ax.plot([], [], ls=":", color="0.5", label="gradient flow (conserves D)")
    ax.set_xlabel("time  (= steps x eta)")
    ax.set_ylabel("log D(t)/D(0),  D = a^2 - b^2")
    ax.set_title("Gradient descent drifts toward balance; gradient flow does not")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


# the shock arms by learning-rate factor: label and colour (`rev.chapters.shared.palette.ARMS`)
ARM_STYLE = {5.0: ("LR x5", ARMS["raised"]), 0.2: ("LR /5", ARMS["lowered"]), 1.0: ("control", ARMS["control"])}


def plot_shock(shock: dict[str, dict[float, pd.DataFrame]], sizes: FluctuationSizes) -> plt.Figure:
    """Loss, windowed variance of |dtheta| and of |dtheta|/eta per arm, one column per model."""
    labels = {f: label for f, (label, _) in ARM_STYLE.items()}
    colors = {f: colour for f, (_, colour) in ARM_STYLE.items()}
    brk = (sizes.change_step,)
    fig, axes = plt.subplots(3, len(shock), figsize=(12, 8.5), sharex=True, squeeze=False)
    for j, (kind, runs) in enumerate(shock.items()):
        for f, df in runs.items():
            u, lr = df.update_norm.to_numpy(), df.lr.to_numpy()
            axes[0, j].plot(df.step, df.loss.rolling(20).mean(), color=colors.get(f), lw=1, label=labels.get(f, f))
            axes[1, j].semilogy(df.step, windowed_variance(u, sizes.window, breaks=brk), color=colors.get(f), lw=1)
            axes[2, j].semilogy(df.step, windowed_variance(u / lr, sizes.window, breaks=brk), color=colors.get(f),
                                lw=1)
        for ax in axes[:, j]:
            ax.axvline(sizes.change_step, color="k", ls=":", lw=1)
        axes[0, j].set_title(kind)
        axes[2, j].set_xlabel("step")
        axes[0, j].legend(fontsize=8)
    axes[0, 0].set_ylabel("loss (20-step mean)")
    axes[1, 0].set_ylabel("windowed var |dtheta|")
    axes[2, 0].set_ylabel("windowed var |dtheta| / eta^2")
    fig.tight_layout()
    return fig


def plot_shock_seeds(runs: ShockRuns, sizes: FluctuationSizes, measures: Sequence[str] = tuple(MEASURES),
                     smooth: int = 20) -> plt.Figure:
    """The paper's Figure 2 style: each measure against steps, the three arms, median over seeds with the
    min..max band shaded; one column per model. Means are smoothed over `smooth` steps for readability."""
    kinds = list(runs)
    fig, axes = plt.subplots(len(measures), len(kinds), figsize=(6 * len(kinds), 2.6 * len(measures)),
                             sharex=True, squeeze=False)
    for j, kind in enumerate(kinds):
        for f, (label, color) in ARM_STYLE.items():
            per_seed = [measure_series(arms[f], sizes) for arms in runs[kind].values()]
            for i, m in enumerate(measures):
                ys = np.stack([ser[m] if m == "variance" else
                               pd.Series(ser[m]).rolling(smooth, min_periods=1).mean().to_numpy()
                               for ser in per_seed])
                x = np.arange(ys.shape[1])
                with warnings.catch_warnings():      # the variance is NaN until its window fills
                    warnings.simplefilter("ignore", RuntimeWarning)
                    lo, mid, hi = np.nanmin(ys, 0), np.nanmedian(ys, 0), np.nanmax(ys, 0)
                axes[i, j].plot(x, mid, color=color, lw=1, label=label)
                axes[i, j].fill_between(x, lo, hi, color=color, alpha=0.25, lw=0)
                axes[i, j].set_yscale("log")
        for i, m in enumerate(measures):
            axes[i, j].axvline(sizes.change_step, color="k", ls=":", lw=1)
            axes[i, 0].set_ylabel(MEASURES[m], fontsize=9)
        axes[0, j].set_title(f"{kind}: {len(runs[kind])} seeds (median, min..max)")
        axes[-1, j].set_xlabel("step")
    axes[0, 0].legend(fontsize=8)
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------------------------------------
# takeaways and summary
# ----------------------------------------------------------------------------------------------------------

@dataclass
class ChapterFindings:
    """The tables notebook 08 measured, in one place, for its takeaways and its summary JSON."""

    profile: str
    shock_sizes: FluctuationSizes
    round_trip: pd.DataFrame                     # round_trip_table on the quadratic
    slopes: pd.DataFrame                         # slope_table of the potential sweep
    couplings: pd.DataFrame                      # coupling_table, k ascending
    drift_slope: float                           # loglog_slope of drift_table's error
    symmetry: pd.DataFrame                       # symmetry_defects (rotation first)
    shock: dict[str, pd.DataFrame]               # model kind -> fluctuation_summary
    scans: dict[str, pd.DataFrame]               # model kind -> lr_scan
    seed_verdicts: pd.DataFrame | None = None    # seeds.verdict_table of the multi-seed shock
    shock_source: str = ""                       # where those runs came from (cache or a reduced run)
    sgd_slopes: pd.DataFrame | None = None       # slope_table of the potential sweep along SGD paths
    n_seeds: int = 1                             # seeds of the shock runs (`shock` above reads the first)

    def verdict(self, kind: str, column: str = "response_over_eta2") -> str:
        return fluctuation_verdict(self.shock[kind], column=column)

    def claim_holds(self, column: str = "response_over_eta2") -> bool:
        """The claim under test: linear ordinary, transformer anomalous."""
        return self.verdict("linear", column) == "ordinary" and self.verdict("transformer", column) == "anomalous"

    def summary(self) -> dict:
        """The chapter's measured numbers, for thermo_summary.json."""
        return dict(
            profile=self.profile,
            slopes={f"{r.problem}/{r.potential}": (None if r.exact else r.slope_tail)
                    for r in self.slopes.itertuples()},
            max_round_trip_miss_in_eps=float(self.round_trip.miss_in_eps.max()),
            drift_slope=self.drift_slope,
            shock_sizes=dataclasses.asdict(self.shock_sizes),
            shock={kind: s.to_dict(orient="records") for kind, s in self.shock.items()},
            verdicts={f"{k}/{c}": self.verdict(k, c) for k in self.shock
                      for c in ("response_raw", "response_over_eta2")},
            lr_scans={kind: sc.to_dict(orient="records") for kind, sc in self.scans.items()},
            over_seeds=(None if self.seed_verdicts is None
                        else dict(source=self.shock_source, verdicts=self.seed_verdicts.to_dict(orient="records"))),
            sgd_slopes=(None if self.sgd_slopes is None else
                        {f"{r.problem}/{r.potential}": r.slope_tail for r in self.sgd_slopes.itertuples()}),
        )


def takeaways(f: ChapterFindings) -> str:
    """The chapter's takeaways as Markdown, every number from `f`."""
    fitted = f.slopes.dropna(subset=["slope_tail"])
    n_exact = int(f.slopes.exact.sum())
    tr, li = (f.shock[k].set_index("factor") for k in ("transformer", "linear"))
    g = f.couplings.set_index("k").g_measured
    k_fine, k_coarse = int(f.couplings.k.max()), int(f.couplings.k.min())
    resp = "response_over_eta2"
    scan = f.scans["linear"]
    converged = sorted(set(scan[scan.converged].verdict_over_eta2))
    lines = [
        f"A step forward and a step back miss by $-\\eta^2 A^2\\theta$ on a quadratic, to within "
        f"{f.round_trip.miss_in_eps.max():.1f} $\\varepsilon|\\theta|$: the finite step is what breaks time reversal.",
        f"Four derivations (DE, TA, TR, ST), one potential $(\\eta/4)|U|^2$: measured on a quadratic, logistic "
        f"regression and an MLP, every error falls with slope {fitted.slope_tail.min():.2f}.."
        f"{fitted.slope_tail.max():.2f} in $\\eta$; {n_exact} of {len(f.slopes)} cases are exact to rounding.",
        f"The renormalised coupling: $g({k_fine})$ measured {g[k_fine]:.4f} vs $(1 - 2^{{-{k_fine}}})/4$ = "
        f"{coupling(k_fine):.4f}; $g({k_coarse})$ = {g[k_coarse]:.2f} (coarse-graining runs away).",
        f"Rescaling symmetry: GD drifts toward $|a| = |b|$ at the predicted rate (measured/predicted $\\to$ 1, "
        f"slope {f.drift_slope:.1f}); rotations leave $\\phi$ unchanged to {f.symmetry.phi_change.iloc[0]:.0e}.",
        f"LR shock ({f.profile} sizes, d_model={f.shock_sizes.d_model}): transformer normalised response "
        f"x5 {tr.loc[5.0, resp]:.2f} vs /5 {tr.loc[0.2, resp]:.2f} ({f.verdict('transformer')}); "
        f"linear x5 {li.loc[5.0, resp]:.2f} vs /5 {li.loc[0.2, resp]:.2f} ({f.verdict('linear')}). "
        f"{'On its one seed' if f.n_seeds == 1 else f'On the first of {f.n_seeds} seeds'} the claim "
        f"{'holds' if f.claim_holds() else 'does not hold'} at the default base LRs." + _unconverged_caveat(f),
        "The linear verdict across base LRs: "
        + ", ".join(f"{r.base_lr:.3g}: {r.verdict_over_eta2}{' (converged)' if r.converged else ''}"
                    for r in scan.itertuples())
        + (f". Once the perceptron sits at its noise floor too, its response is {' / '.join(converged)}."
           if converged else "; it never reached its noise floor before the change at this size."),
    ]
    if len(f.scans["transformer"]) > 1:
        lines.append("The transformer verdict across base LRs: " + ", ".join(
            f"{r.base_lr:.3g}: {r.verdict_over_eta2}" for r in f.scans["transformer"].itertuples()) + ".")
    else:
        lines.append(f"Whether the transformer's verdict survives other base LRs is not tested at the {f.profile} "
                     f"profile. {_single_run_caveat(f.n_seeds, f.seed_verdicts is not None)}")
    if f.seed_verdicts is not None:
        lines.append(_seeds_line(f.seed_verdicts, f.shock_source))
    if f.sgd_slopes is not None:
        sl = f.sgd_slopes.dropna(subset=["slope_tail"])
        lines.append(f"Along SGD paths (minibatch noise, the paper's Figure 1) the potentials of each step's field "
                     f"approach $(\\eta/4)|U_B|^2$ with slopes {sl.slope_tail.min():.2f}..{sl.slope_tail.max():.2f}.")
    return "\n".join(f"- {line}" for line in lines)


def _unconverged_caveat(f: ChapterFindings) -> str:
    """Where the perceptron's verdict decides the claim but it never reached its noise floor before the change:
    its "ordinary" is then the state of an unconverged model, not a property of a linear one."""
    before = {k: float(f.shock[k].set_index("factor").loc[1.0, "loss_before"]) for k in ("linear", "transformer")}
    floor = noise_floor(f.shock_sizes)
    if before["linear"] < CONVERGED_FACTOR * floor:
        return ""
    tr = before["transformer"]
    other = ("the transformer had (" if tr < CONVERGED_FACTOR * floor else "nor had the transformer (") + f"{tr:.3f})"
    return (f" But the perceptron had not converged when its LR changed (loss {before['linear']:.3f} against a "
            f"noise floor of {floor:.3f}); {other}: its verdict describes a model still learning, so it cannot "
            f"say that linear models are ordinary.")


def _single_run_caveat(n_seeds: int, over_seeds_shown: bool) -> str:
    """What the single-seed LR-shock line above may be read as, given how many seeds were run."""
    if n_seeds == 1:
        return "One seed, one base LR per model: treat the verdicts as a single measurement, not a law."
    where = " (next line)" if over_seeds_shown else ""
    return (f"The LR-shock line reads the first of {n_seeds} seeds at one base LR per model: a single "
            f"measurement, not a law; the verdict over all {n_seeds} seeds{where} is the one to read.")


def _seeds_line(verdicts: pd.DataFrame, source: str) -> str:
    """One takeaway: the verdict per measure over seeds, and the paper's claim on each."""
    v = verdicts.set_index(["kind", "measure"]).verdict
    parts = [f"{MEASURES[m]}: transformer {v['transformer', m]}, perceptron {v['linear', m]} "
             f"(claim {claim_status(verdicts, m)})" for m in verdicts.measure.unique()]
    n_undecided = int((verdicts.verdict == UNDECIDED).sum())
    n_seeds = max(len(str(s).split()) for s in verdicts.seeds) if "seeds" in verdicts else 0
    chance = (f" Unanimity is weak evidence at this count: were each seed's verdict a coin flip, all {n_seeds} "
              f"would agree with probability 2^(1-{n_seeds}) = 1 in {2 ** (n_seeds - 1)}." if n_seeds >= 2 else "")
    return (f"Over {n_seeds} seeds ({source}): " + "; ".join(parts) + f". {n_undecided} of {len(verdicts)} verdicts "
            f"are {UNDECIDED}: a verdict stands only when every seed agrees." + chance)


def write_summary(path: str | Path, summary: dict) -> None:
    """Write the chapter's measured numbers as JSON (for the report)."""
    # default=float, not files.write_json's str: numpy scalars in the tables stay numbers
    write_text(path, json.dumps(summary, indent=2, default=float))
