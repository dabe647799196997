"""Notebooks 03-06: the figures of runs -- loss curves side by side, the screening's bars, and peak memory beside
speed (the live curve while a run trains is `rev.chapters.shared.live_loss`, which training imports without these).
"""
from __future__ import annotations

from pathlib import Path

from .palette import run_colour
from .run_log import read_log


def plot_runs(runs: dict[str, str | Path], title: str = "", smooth: int = 10, levels: dict[str, float] | None = None,
              zoom: float | None = None):
    """Training loss (a `smooth`-step running mean) and validation loss against tokens, one colour per run;
    `levels` adds labelled horizontal reference lines (e.g. `loss_levels`). An inset zooms on the last `zoom` of
    the tokens (by default 0.4 for a pair of runs, whose curves end close together, and none otherwise)."""
    import matplotlib.pyplot as plt

    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter

    fig, ax = plt.subplots(figsize=(8, 4.4))
    zoom = (0.4 if len(runs) == 2 else 0.0) if zoom is None else zoom
    inset = ax.inset_axes([0.42, 0.38, 0.55, 0.55]) if len(runs) > 1 and zoom else None
    keys, window = [], []   # one legend entry per run (its colour) and one per line style: not two per run
    for label, run_dir in runs.items():
        color = run_colour(Path(run_dir).name)   # the run's colour in every figure of the book
        log = read_log(run_dir)
        train = log["loss"].rolling(smooth, min_periods=1).mean()
        val = log.dropna(subset=["val_loss"])
        for a in (ax, inset) if inset is not None else (ax,):
            a.plot(log["tokens"], train, color=color, lw=1)
            a.plot(val["tokens"], val["val_loss"], "o--", color=color, ms=4)
        window.append((log["tokens"], train, val))
        keys.append(Line2D([], [], color=color, lw=2, label=label))
    keys += [Line2D([], [], color="0.4", lw=1, label=f"training ({smooth}-step running mean)"),
             Line2D([], [], color="0.4", ls="--", marker="o", ms=4, label="validation")]
    for (label, y), ls in zip((levels or {}).items(), (":", "-.", "--")):
        keys.append(ax.axhline(y, color="k", lw=1, ls=ls, label=f"{label}: {y:.2f}"))
    ax.set(xlabel="tokens", ylabel="loss", title=title)
    for a in (ax, inset) if inset is not None else (ax,):   # 700,000, not 700000 or 1e6
        a.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    if inset is not None:
        _zoom(ax, inset, window, zoom)
    if len(runs) > 1:   # the key goes below the axes, where it hides neither curves nor the zoom
        ax.legend(handles=keys, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=3, frameon=False)
    else:
        ax.legend(handles=keys, fontsize=8)
    fig.tight_layout()
    return fig


def _zoom(ax, inset, window: list, share: float) -> None:
    """Limit `inset` to the last `share` of the tokens and to the losses drawn there, and mark it on `ax`."""
    end = max(float(t.max()) for t, _, _ in window)
    start = end * (1 - share)
    ys = [v for t, train, val in window for v in (*train[t >= start], *val["val_loss"][val["tokens"] >= start])]
    if not ys:
        return
    lo, hi = min(ys), max(ys)
    pad = 0.08 * (hi - lo or abs(hi) or 1.0)
    inset.set_xlim(start, end * 1.01)
    inset.set_ylim(lo - pad, hi + pad)
    inset.set_title(f"last {share:.0%} of the tokens", fontsize=8)
    inset.tick_params(labelsize=7)
    ax.indicate_inset_zoom(inset, edgecolor="0.5")

