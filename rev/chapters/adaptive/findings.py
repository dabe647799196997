"""Notebook 09 (adaptive checkpointing): the figures that need more than a few lines.

`frontier_figure` draws fidelity against memory (every fixed spacing, the tightest uniform spacing per count,
the settled adaptive layouts); `training_figure` the four panels of the training comparison. The chapter's
takeaways are written in the notebook.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..shared.palette import ARMS, OTHER, STREAMS
from .placement import uniform_layout


def _frontier_panel(ax, rows: Sequence[dict], key: str, n_layer: int) -> None:
    # gradient error is drawn as 1 - cos (floored at 1e-9), reconstruction error as is (floored at 1e-12)
    value = (lambda r: max(1 - r[key], 1e-9)) if key == "grad_cos_min" else (lambda r: max(r[key], 1e-12))
    fixed = [r for r in rows if r["kind"] == "fixed"]
    ax.semilogy([r["n_kept"] for r in fixed], [value(r) for r in fixed], "s", color="0.7", label="any fixed spacing")
    equal = {r["keep"]: r for r in fixed}
    uni = [equal[uniform_layout(n_layer, k)] for k in sorted({r["n_kept"] for r in fixed})]
    ax.semilogy([r["n_kept"] for r in uni], [value(r) for r in uni], "s-", color=ARMS["control"],
                label="uniform spacing")
    rival = [r for r in rows if r["kind"] == "boundary 1"]
    if rival:   # the layout a defect at layer 0 calls for: the rival to beat there, in the control's colour, hollow
        ax.semilogy([r["n_kept"] for r in rival], [value(r) for r in rival], "D", mfc="none", color=ARMS["control"],
                    label="fixed, keeping boundary 1")
    groups: dict[tuple, list[dict]] = {}
    for r in (r for r in rows if r["kind"] == "adaptive"):
        groups.setdefault(r["keep"], []).append(r)   # several thresholds often settle on one layout: one marker
    for i, (keep, rs) in enumerate(groups.items()):
        taus = sorted(r["setting"] for r in rs)
        ax.semilogy(rs[0]["n_kept"], value(rs[0]), "o", ms=10, mfc="none", color=ARMS["policy"],
                    label="adaptive (tau_warn)" if i == 0 else None)
        tag = f"{taus[0]:.0e}" if len(taus) == 1 else f"{taus[0]:.0e}..{taus[-1]:.0e}"
        ax.annotate(f"{tag} {list(keep)}", (rs[0]["n_kept"], value(rs[0])), fontsize=7, xytext=(6, 4),
                    textcoords="offset points")


def frontier_figure(fronts: Mapping[str, Sequence[dict]], n_layer: int, target_cos: float) -> plt.Figure:
    """One row per trunk of `frontier` rows: gradient error (left) and worst rebuilt-state error (right)
    against the number of kept states."""
    fig, axes = plt.subplots(len(fronts), 2, figsize=(11, 3.6 * len(fronts)), squeeze=False)
    for row, (trunk, rows) in enumerate(fronts.items()):
        axes[row, 0].axhspan(1e-9, 1e-6, color="0.93", label="fp32 noise floor")
        _frontier_panel(axes[row, 0], rows, "grad_cos_min", n_layer)
        axes[row, 0].axhline(1 - target_cos, color="k", ls=":", lw=1, label="target")
        axes[row, 0].set(title=f"{trunk}: gradient error", xlabel="kept states", ylabel="1 - cos (worst parameter)")
        _frontier_panel(axes[row, 1], rows, "max_recon_error", n_layer)
        axes[row, 1].set(title=f"{trunk}: reconstruction", xlabel="kept states", ylabel="worst rebuilt-state error")
        for ax in axes[row]:
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def variant_colour(label: str) -> str:
    """A `compare_training` variant's colour: the adaptive policy, its fixed control, or the stream it runs on."""
    if "adaptive" in label:
        return ARMS["policy"]
    if label.startswith("fp32 fixed"):
        return ARMS["control"]
    return next((c for stream, c in (("fp64", STREAMS["fp64"]), ("fixed-point", STREAMS["fixed"])) if stream in label),
                OTHER)


def training_figure(run_logs: Mapping[str, Sequence[dict]], target_cos: float) -> plt.Figure:
    """Loss, largest probed defect, kept states and the fidelity checks of each variant of `compare_training`."""
    fig, axes = plt.subplots(2, 2, figsize=(11, 6.5))
    styles = ["-", "--", "-.", ":", (0, (5, 1))]   # identical runs overlap exactly: the styles keep both visible
    for (label, rows), ls in zip(run_logs.items(), styles):
        df, c = pd.DataFrame(rows), variant_colour(label)
        axes[0, 0].plot(df["step"], df["loss"].rolling(4, min_periods=1).mean(), ls=ls, color=c, label=label)
        probes = df.dropna(subset=["defect_max"]) if "defect_max" in df else df.iloc[:0]
        if len(probes):
            axes[0, 1].semilogy(probes["step"], np.maximum(probes["defect_max"].astype(float), 1e-18), marker="o",
                                ls=ls, color=c, label=label)
        axes[1, 0].step(df["step"], df["n_kept"], where="post", ls=ls, color=c, label=label)
        checks = df.dropna(subset=["grad_cos_min"]) if "grad_cos_min" in df else df.iloc[:0]
        if len(checks):
            axes[1, 1].semilogy(checks["step"], np.maximum(1 - checks["grad_cos_min"].astype(float), 1e-9),
                                marker="o", ls=ls, color=c, label=label)
    axes[1, 1].axhline(1 - target_cos, color="k", ls=":", lw=1)
    axes[0, 0].set(title="loss, 4-step mean", xlabel="step")
    axes[0, 1].set(title="largest span defect", xlabel="step")
    axes[1, 0].set(title="kept states", xlabel="step")
    axes[1, 1].set(title="1 - cos, worst parameter", xlabel="step")
    for ax in axes.flat:
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    return fig
