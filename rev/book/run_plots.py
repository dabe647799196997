"""Notebooks 03-06: the figures of runs -- the live loss curve while a run trains, loss curves side by side, the
screening's bars, and peak memory beside speed.
"""
from __future__ import annotations

from pathlib import Path

from .run_log import read_log


class LiveLoss:
    """Training callback that redraws the loss curve in a notebook every `every` steps (one figure,
    updated in place, so a headless run records just the final picture)."""

    def __init__(self, title: str, every: int = 20):
        self.title, self.every = title, every
        self.steps: list[int] = []
        self.loss: list[float] = []
        self.val: list[tuple[int, float]] = []
        self.handle = None

    def __call__(self, step: int, row: dict, model) -> None:
        self.steps.append(row["tokens"])
        self.loss.append(row["loss"])
        if row["val_loss"] != "":
            self.val.append((row["tokens"], row["val_loss"]))
        if step % self.every == 0 or row["val_loss"] != "":
            self.draw()

    def draw(self) -> None:
        import matplotlib.pyplot as plt
        from IPython.display import display

        fig, ax = plt.subplots(figsize=(6, 3.2))
        ax.plot(self.steps, self.loss, lw=0.8, label="train")
        if self.val:
            ax.plot(*zip(*self.val), "o-", label="validation")
        ax.set(xlabel="tokens", ylabel="loss", title=self.title)
        ax.legend()
        fig.tight_layout()
        if self.handle is None:
            self.handle = display(fig, display_id=True)
        else:
            self.handle.update(fig)
        plt.close(fig)


def plot_runs(runs: dict[str, str | Path], title: str = "", smooth: int = 10, levels: dict[str, float] | None = None):
    """Training loss (a `smooth`-step running mean) and validation loss against tokens, one colour per run;
    `levels` adds labelled horizontal reference lines (e.g. `loss_levels`)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    for (label, run_dir), color in zip(runs.items(), plt.rcParams["axes.prop_cycle"].by_key()["color"] * 4):
        log = read_log(run_dir)
        ax.plot(log["tokens"], log["loss"].rolling(smooth, min_periods=1).mean(), color=color, lw=1,
                label=f"{label} (train)")
        val = log.dropna(subset=["val_loss"])
        ax.plot(val["tokens"], val["val_loss"], "o--", color=color, ms=4, label=f"{label} (validation)")
    for (label, y), ls in zip((levels or {}).items(), (":", "-.", "--")):
        ax.axhline(y, color="k", lw=1, ls=ls, label=f"{label}: {y:.2f}")
    ax.set(xlabel="tokens", ylabel="loss", title=title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_memory_speed(summaries: dict[str, dict]):
    """Peak step memory and tokens/s of runs side by side ({label: summary}); the speed bars are each run's median
    step with its quartiles as error bars (`rev.book.runs.run_speed`), where its log is there."""
    import matplotlib.pyplot as plt

    from .runs import run_speed

    colors = ["tab:gray", "tab:orange", "tab:blue", "tab:green"][:len(summaries)]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    axes[0].bar(list(summaries), [s["peak_memory_bytes"] / 2**20 for s in summaries.values()], color=colors)
    axes[0].set(ylabel="peak MiB of a training step")
    speeds = [run_speed(s) for s in summaries.values()]
    mid = [sp.value if sp else s["tokens_per_s"] for sp, s in zip(speeds, summaries.values())]
    err = [[m - sp.lo if sp else 0 for m, sp in zip(mid, speeds)],
           [sp.hi - m if sp else 0 for m, sp in zip(mid, speeds)]]
    axes[1].bar(list(summaries), mid, yerr=err, capsize=4, color=colors)
    axes[1].set(ylabel="tokens / s (median step, quartiles)")
    fig.tight_layout()
    return fig
