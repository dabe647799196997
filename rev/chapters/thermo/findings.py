"""Notebook 08 (training irreversibility): the figures, and the summary JSON the report reads.

The figures: the coupling g(k), the O(eta) error slopes, the balance drift, the learning-rate shock of one seed
and, paper-style, over seeds. The summary is built from one `ChapterFindings` that the notebook fills with its
tables. The chapter's takeaways are written in the notebook.
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
from .seeds import MEASURES, ShockRuns, measure_series
from .shock import fluctuation_verdict, windowed_variance
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
    ax.axhline(0.25, ls=":", color="k", lw=1, label="fixed point 1/4")
    ax.set_ylim(-4.2, 0.6)
    ax.set_xlabel("k  (step = eta 2^-k)")
    ax.set_ylabel("g(k)")
    ax.set_title("renormalised coupling g(k)")
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
    np.atleast_1d(axes)[0].set_ylabel("relative error")
    fig.suptitle("error vs (eta/4)|U|^2", y=1.02)
    fig.tight_layout()
    return fig


def plot_drift(runs: dict[float, dict[str, np.ndarray]]) -> plt.Figure:
    """log D(t)/D(0) under GD, the modified flow and gradient flow, for the `balance_drift` runs by eta."""
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    for (eta, r), c in zip(runs.items(), sweep_colours(len(runs))):
        ax.plot(r["time"], np.log(r["d_gd"] / r["d_gd"][0]), color=c, label=f"GD, eta={eta:g}")
        ax.plot(r["time"], np.log(r["d_pred"] / r["d_pred"][0]), ls="--", color="k", lw=0.8)
        ax.plot(r["time"], np.log(r["d_flow"] / r["d_flow"][0]), ls=":", color="0.5")
    ax.plot([], [], ls="--", color="k", lw=0.8, label="modified flow")
    ax.plot([], [], ls=":", color="0.5", label="gradient flow")
    ax.set_xlabel("time = steps x eta")
    ax.set_ylabel("log D(t)/D(0)")
    ax.set_title("D = |a|^2 - |b|^2")
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
    axes[1, 0].set_ylabel("windowed var(|dtheta|)")
    axes[2, 0].set_ylabel("var(|dtheta|/eta)")
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
        axes[0, j].set_title(f"{kind}: {len(runs[kind])} seeds, median")
        axes[-1, j].set_xlabel("step")
    axes[0, 0].legend(fontsize=8)
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------------------------------------
# summary
# ----------------------------------------------------------------------------------------------------------

@dataclass
class ChapterFindings:
    """The tables notebook 08 measured, in one place, for its summary JSON."""

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


def write_summary(path: str | Path, summary: dict) -> None:
    """Write the chapter's measured numbers as JSON (for the report)."""
    # default=float, not files.write_json's str: numpy scalars in the tables stay numbers
    write_text(path, json.dumps(summary, indent=2, default=float))
