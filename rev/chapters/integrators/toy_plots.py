"""Figures for the integrator theory notebook (01): log axes that show exact zeros, the measured-vs-model band
panels, leapfrog's parasitic mode, and the (h, depth, stream) explorer.

The numbers come from `rev.chapters.integrators.toy`; this module only draws them.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from torch import Tensor

from ...core.streams import STREAMS
from ..shared import palette
from ..shared.figures import zero_aware_log_axis
from .toy import (DepthStudy, Field, ParasiticMode, StepStudy, depth_study, error_profile, initial_points,
                  leapfrog_roots, make_tanh_field, validate_walk)

STREAM_COLORS = palette.STREAMS   # the book's colours (`rev.chapters.shared.palette`)


def zero_note(stream: str, values: Sequence[float]) -> str:
    """A panel's note on a stream meant to be exact, read off the values drawn: "exactly 0" only when every one
    is 0, else the largest miss (so the label cannot claim what the dots contradict)."""
    vals = np.abs(np.asarray(values, dtype=float).ravel())
    if not vals.size:
        return f"{stream}: nothing measured"
    if not vals.any():
        return f"{stream}: exactly 0 everywhere\n(the dots on the floor)"
    return f"{stream}: NOT exactly 0\n(up to {vals.max():.1e})"


def band_legend(ax, colors: dict[str, str], **kwargs) -> None:
    """One legend entry per stream for "dots measured, shaded band = model" plots."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [(Patch(color=c, alpha=0.25), Line2D([], [], color=c, marker="o", ls="")) for c in colors.values()]
    labels = [f"{name}: measured (dots), model (band)" for name in colors]
    ax.legend(handles, labels, **kwargs)


def band_panels(studies: dict[tuple[str, str], DepthStudy | StepStudy],
                integrators: Sequence[str] = ("leapfrog", "reveuler")):
    """One panel per integrator: measured round-trip error (dots) and the model band, one colour per stream,
    against depth (`DepthStudy`) or step size (`StepStudy`). Returns the figure."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(integrators), figsize=(12, 4.3), sharey=True)
    shown = [v for st in studies.values() for v in list(st.measured) + list(st.upper)]
    for ax, name in zip(axes, integrators):
        for s in STREAMS:
            st = studies[name, s]
            if isinstance(st, DepthStudy):
                x_band, x_dots, what = np.arange(1, len(st.lower) + 1), st.depths, "depth L"
                title = f"{name}, h = {st.h:g}: round trip"
            else:
                x_band, x_dots, what = st.hs, st.hs, "step size h"
                title = f"{name}: depth L = {st.depth}"
            ax.fill_between(x_band, st.lower, st.upper, color=STREAM_COLORS[s], alpha=0.25)
            ax.plot(x_dots, st.measured, "o", color=STREAM_COLORS[s])
        ax.set_xscale("log")
        zero_aware_log_axis(ax, shown)
        ax.set(xlabel=what, title=title)
        ax.text(0.35, 0.45, zero_note("fixed", studies[name, "fixed"].measured),
                transform=ax.transAxes, color=STREAM_COLORS["fixed"])
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("RMS round-trip error")
    band_legend(axes[0], STREAM_COLORS, fontsize=8, loc="upper left")
    return fig


def parasitic_figure(decay: ParasiticMode, osc: ParasiticMode, root_runs: Sequence[ParasiticMode]):
    """Three panels: the decay run against the exact solution and the two-mode prediction; the parasitic
    amplitude alone (decay and oscillator); the two roots' sizes against h lambda, with measured growth."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    lam = decay.lam.real
    show = decay.n <= min(decay.crossover_predicted * 1.6, decay.n[-1])
    axes[0].plot(decay.n[show], decay.w.real[show], "o-", ms=3, color=palette.INTEGRATORS["leapfrog"],
                 label="leapfrog (measured)")
    axes[0].plot(decay.n[show], decay.exact.real[show], "k--", label=r"exact $e^{-\lambda t}$")
    axes[0].plot(decay.n[show], decay.predicted.real[show], ":", color=palette.MEASURES[1],
                 label=r"$A\mu_+^n + B\mu_-^n$")
    axes[0].axvline(decay.crossover_predicted, color="gray", lw=0.8,
                    label=f"predicted crossover, n = {decay.crossover_predicted:.0f}")
    axes[0].set(xlabel="step n", ylabel="x_n", title=f"decay, h lambda = {decay.h * lam:g}")
    for run, color, label in ((decay, palette.MEASURES[0], "decay"), (osc, palette.MEASURES[2], "oscillator")):
        nn = run.n[:-1]
        axes[1].semilogy(nn, run.parasitic, "o", ms=3, color=color, label=f"{label}: measured |p_n|/|mu- - mu+|")
        axes[1].semilogy(nn, run.parasitic_predicted, "-", color=color, alpha=0.6, label=rf"{label}: $|B||\mu_-|^n$")
    axes[1].set(xlabel="step n", ylabel="parasitic amplitude", title="parasitic mode alone")
    grid = np.linspace(0.01, 0.6, 100)
    roots = np.array([leapfrog_roots(h, lam) for h in grid])
    axes[2].plot(grid * lam, np.abs(roots[:, 1]), "-", color=palette.MEASURES[1], label=r"$|\mu_-|$ (parasitic)")
    axes[2].plot(grid * lam, np.abs(roots[:, 0]), "-", color=palette.MEASURES[3], label=r"$|\mu_+|$ (physical)")
    axes[2].plot(grid * lam, 1 + grid * lam, "k:", label=r"$1 + h\lambda$")
    axes[2].plot([r.h * lam for r in root_runs], [r.growth_fit for r in root_runs], "o", color=palette.MEASURES[1],
                 label="measured growth")
    axes[2].set(xlabel=r"h lambda", ylabel="|root|", title="roots of mu^2 + 2 h lambda mu - 1")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return fig


# --- the explorer -----------------------------------------------------------------------------------------

DEFAULT_EXPLORER = {"h": 0.1, "depth": 256, "stream": "fp32"}


def explorer_figure(h: float = 0.1, depth: int = 256, stream: str = "fp32", field: Field | None = None,
                    x0: Tensor | None = None, integrators: Sequence[str] = ("leapfrog", "reveuler")):
    """Two panels for one (h, depth, stream): input error against depth (measured dots, model band), and the
    error of every layer during one inverse walk from `depth`. Returns the matplotlib figure."""
    import matplotlib.pyplot as plt

    validate_walk(h, depth, stream)
    field = field if field is not None else make_tanh_field()
    x0 = x0 if x0 is not None else initial_points(128, getattr(field, "dim", 8))
    depths = np.unique(np.geomspace(1, depth, num=min(depth, 9)).round().astype(int))
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4))
    shown: list[float] = []
    for name in integrators:
        color = palette.integrator_colour(name)
        study = depth_study(name, field, x0, h, depths, stream)
        ax0.fill_between(np.arange(1, depth + 1), study.lower, study.upper, color=color, alpha=0.25,
                         label=f"{name} model band")
        ax0.plot(study.depths, study.measured, "o", color=color, label=f"{name} measured")
        prof = error_profile(name, field, x0, h, depth, stream)
        ax1.plot(np.arange(depth + 1), prof, color=color, label=name)
        shown += list(study.measured) + list(prof)
    for ax in (ax0, ax1):
        zero_aware_log_axis(ax, shown)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        if not any(shown):
            ax.text(0.5, 0.5, "all errors exactly 0", transform=ax.transAxes, ha="center")
    ax0.set_xscale("log")
    ax0.set(xlabel="depth L", ylabel="RMS round-trip error",
            title=f"round trip, {stream}, h={h:g}")
    ax1.set(xlabel="layer l", ylabel="layer's RMS error",
            title=f"walking back from {depth}")
    fig.tight_layout()
    return fig


def interactive_explorer(field: Field | None = None, x0: Tensor | None = None):
    """ipywidgets sliders for h, depth and stream, redrawing `explorer_figure`; returns the widget."""
    import ipywidgets as widgets
    import matplotlib.pyplot as plt

    def show(h: float, depth: int, stream: str) -> None:
        explorer_figure(h, depth, stream, field, x0)
        plt.show()

    return widgets.interact(
        show,
        h=widgets.FloatLogSlider(value=DEFAULT_EXPLORER["h"], base=10, min=-3, max=0, step=0.25),
        depth=widgets.SelectionSlider(options=[2 ** k for k in range(1, 11)], value=DEFAULT_EXPLORER["depth"]),
        stream=widgets.Dropdown(options=list(STREAMS), value=DEFAULT_EXPLORER["stream"]),
    )
