"""Notebook 06, before run 3: the large-batch recipe (`rev.core.optim`) checked by a small sweep at the max batch.

Run 3 trains at many times the profile's batch. Its recipe has two parts, each argued in `rev.core.optim`: the
peak rate follows the batch by its square root, and the warm-up lasts at least `WARMUP_FLOOR_STEPS` optimizer
steps however few steps the warm-up tokens make at that batch. The sweep checks each part by taking it back, one
at a time, on short runs at run 3's own batch: the recipe, the recipe at the profile's rate and at the linear
rule's higher rate (so the rates tried bracket the recipe's), and the recipe with a warm-up counted in tokens alone, each cell trained for `sweep_steps(profile)` steps and read by its validation loss at the end.
A cell whose loss sat on the context-free line (`rev.chapters.shared.run_log`'s stall rule) is marked stalled,
one whose loss went NaN or ended above the uniform guess ln V diverged. Runs live in ``results/<profile>/recipe_sweep/`` and are reused when finished.
"""
from __future__ import annotations

import contextlib
import io
import math
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ...core.optim import WARMUP_FLOOR_STEPS, peak_lr, warmup_steps
from ...base.profiles import ProfileLike, get_profile
from ...training.loop import TrainingDiverged
from ..shared.run_log import read_log, run_start
from ..shared.runs import profile_dir, train_run
from .searches import train_kwargs

SWEEP_DIR = "recipe_sweep"
# t4: 40 steps (twice the warm-up floor) at run 3's batch, ~3 minutes a cell on a T4 (`python -m rev plan`)
SWEEP_STEPS = {"smoke": 6, "cpu": 30, "t4": 40, "full": 60}


def sweep_steps(profile: ProfileLike) -> int:
    return SWEEP_STEPS.get(get_profile(profile).name, 60)


@dataclass(frozen=True)
class Cell:
    """One recipe: its peak-rate rule and whether the warm-up has the floor."""

    lr_rule: str        # "none" (the profile's rate) or "sqrt"
    floor: bool

    @property
    def name(self) -> str:
        return f"lr-{self.lr_rule}_warmup-{'floor' if self.floor else 'tokens'}"

    @property
    def label(self) -> str:
        return f"{RATE_LABELS[self.lr_rule]}, " + ("floor warm-up" if self.floor else "token-counted warm-up")


RATE_LABELS = {"none": "profile's rate", "sqrt": "square-root rule", "linear": "linear rule"}
RECIPE = Cell("sqrt", True)   # what every run uses: the square-root rate, the floor
# one factor at a time: the recipe, and the recipe with each of its two parts taken back. The fourth corner of the
# 2 x 2 (the profile's rate with a token-counted warm-up) would measure only how the two parts interact, for the
# price of one more run at the max batch. The linear rule's higher rate brackets the recipe's from above: without
# it, a recipe cell that ends lowest could sit at its own ceiling, a higher rate never tried.
CELLS = (RECIPE, Cell("none", True), Cell("linear", True), Cell("sqrt", False))


def recipe_sweep(profile: ProfileLike, trunk: dict, batch: int, results: str | Path = "results",
                 data_dir: str | Path = "data", seed: int = 0, noise_scale: float | None = None,
                 progress: bool = True) -> pd.DataFrame:
    """Train every cell of `CELLS` for `sweep_steps` steps at `batch` with the `trunk` settings; one row per cell:
    its peak rate, warm-up steps, loss at the end and its state (learnt, stalled, diverged). Given a measured
    `noise_scale`, the scaled cells saturate beyond it, as the runs do. One printed line per finished cell."""
    prof = get_profile(profile)
    steps = sweep_steps(prof)
    per_step = batch * prof.seq_len
    rows = []
    for cell in CELLS:
        lr = peak_lr(prof.lr, batch, prof.batch_size, cell.lr_rule, noise_scale)
        floor = WARMUP_FLOOR_STEPS if cell.floor else 1
        row = {"cell": cell.name, "peak lr": lr, "rate": cell.lr_rule, "warm-up": "floor" if cell.floor else "tokens",
               "warm-up steps": warmup_steps(prof.warmup_tokens, per_step, steps, floor),
               "recipe": "the recipe" if cell == RECIPE else ""}
        try:
            with contextlib.redirect_stdout(io.StringIO()):   # the run's own notes (slicing, reuse) once per cell
                s = train_run(f"{SWEEP_DIR}/{cell.name}", prof, results, data_dir, progress=progress, seed=seed,
                              batch_size=batch, train_tokens=steps * per_step, lr_scaling=cell.lr_rule,
                              noise_scale=noise_scale, warmup_floor=floor, **train_kwargs(trunk))
        except TrainingDiverged:
            rows.append(row | {"val loss": np.nan, "state": "diverged"})
            print(f"{cell.label}: diverged")
            continue
        run_dir = profile_dir(results, prof) / SWEEP_DIR / cell.name
        start = run_start(run_dir, s["unigram_val_loss"])
        # above the uniform guess ln V the model has unlearnt even token frequencies: its last steps blew it up
        state = ("diverged" if not s["final_val_loss"] <= math.log(prof.vocab_size) else
                 "stalled" if start is not None and start.stalled else "learnt")
        rows.append(row | {"val loss": s["final_val_loss"], "context-free": s["unigram_val_loss"],
                           "max grad norm": float(read_log(run_dir)["grad_norm"].max()), "state": state})
        print(f"{cell.label} (lr {lr:.4f}): val loss {s['final_val_loss']:.3f}, {state}")
    return pd.DataFrame(rows).set_index("cell")


def plot_sweep(sweep: pd.DataFrame):
    """The rate x warm-up grid: validation loss after the sweep's steps per cell, the recipe's cell outlined, stalled
    and diverged cells labelled as such, a corner the sweep did not run labelled so."""
    fig, ax = plt.subplots(figsize=(5.6, 4.4))
    rates, warmups = list(RATE_LABELS), ["tokens", "floor"]
    grid = np.full((len(rates), 2), np.nan)
    for _, r in sweep.iterrows():
        grid[rates.index(r["rate"]), warmups.index(r["warm-up"])] = r["val loss"]
    im = ax.imshow(grid, cmap="viridis_r", aspect="auto")
    for _, r in sweep.iterrows():
        i, j = rates.index(r["rate"]), warmups.index(r["warm-up"])
        text = "diverged" if r["state"] == "diverged" else f"{r['val loss']:.2f}" + (
            "\nstalled" if r["state"] == "stalled" else "")
        ax.text(j, i, text + f"\n(lr {r['peak lr']:.4f}, {r['warm-up steps']} warm-up)", ha="center", va="center",
                fontsize=8, color="white" if r["state"] != "learnt" else "black",
                bbox=dict(facecolor="none", edgecolor="red", linewidth=2.5) if r["recipe"] else None)
    for i, j in zip(*np.nonzero(np.isnan(grid))):
        if not any((rates.index(r["rate"]), warmups.index(r["warm-up"])) == (i, j) for _, r in sweep.iterrows()):
            ax.text(j, i, "not run", ha="center", va="center", fontsize=8, color="0.4")
    ax.set_xticks([0, 1], ["warm-up: tokens only", f"warm-up: >= {WARMUP_FLOOR_STEPS} steps"])
    ax.set_yticks(range(len(rates)), list(RATE_LABELS.values()))
    ax.set_title("validation loss after the sweep's steps (red: the recipe)", fontsize=10)
    fig.colorbar(im, ax=ax, label="validation loss (nats)")
    fig.tight_layout()
    return fig
