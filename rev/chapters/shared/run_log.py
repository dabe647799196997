"""What one run's log.csv says: its rows, its validation loss at a point (by tokens or by optimizer steps), and
its timed steps with their spread. Read by the report (07), the run notebooks (03-06) and their figures.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...measure.stats import quartiles
from ...training.loop import LOG_FIELDS, untimed_steps


# the columns without which a log says nothing: every row has them (`rev.training.loop.LOG_FIELDS`)
LOG_NEEDS = ("step", "tokens", "loss")


def read_log(run_dir: str | Path) -> pd.DataFrame:
    """A run's log.csv as numbers (val_loss is NaN except on evaluation steps); empty if there is none. A file that
    is not a log (empty, cut inside its header, without the columns every row has) raises a ValueError that names
    the run and the file."""
    path = Path(run_dir) / "log.csv"
    if not path.exists():
        return pd.DataFrame(columns=LOG_FIELDS, dtype=float)
    try:
        log = pd.read_csv(path)
    except pd.errors.EmptyDataError:
        raise ValueError(f"run {path.parent.name}: {path} is empty (a run killed before it logged anything): "
                         f"train it again, or delete its folder") from None
    except (pd.errors.ParserError, UnicodeDecodeError, OSError) as e:
        raise ValueError(f"run {path.parent.name}: {path} is not a readable log ({str(e).strip()[:120]}): "
                         f"train it again, or delete its folder") from None
    lacking = [c for c in LOG_NEEDS if c not in log]
    if lacking:
        raise ValueError(f"run {path.parent.name}: {path} has no {', '.join(lacking)} column (it has "
                         f"{', '.join(map(str, log.columns)) or 'none'}): it is not a training log; train the run "
                         f"again, or delete its folder")
    for c in LOG_FIELDS:
        log[c] = pd.to_numeric(log[c], errors="coerce") if c in log else np.nan
    return log[LOG_FIELDS]


def first_evaluation_from(run_dir: str | Path, tokens: float) -> tuple[int, float] | None:
    """(tokens, validation loss) of the run's first evaluation at or after `tokens`, or None. Where a run with a
    large batch has no evaluation by a smaller run's last token, this is the nearest point it can stand at: on
    more tokens, so (as a loss that falls) a lower bound on its loss at `tokens`."""
    evals = read_log(run_dir).dropna(subset=["val_loss"])
    later = evals[evals["tokens"] >= tokens].sort_values("tokens")
    return (int(later["tokens"].iloc[0]), float(later["val_loss"].iloc[0])) if len(later) else None


def val_loss_at(run_dir: str | Path, tokens: float) -> float | None:
    """Validation loss after `tokens` training tokens, interpolated linearly between the run's evaluations
    (`val_loss_after_steps` reads it by optimizer steps).

    Two runs with different batches evaluate at different token counts; interpolating puts them on one
    x value instead of comparing one run's last evaluation with another run's much earlier one.
    None when the point lies outside the evaluated range.
    """
    evals = read_log(run_dir).dropna(subset=["val_loss"]).sort_values("tokens")
    if not len(evals):
        return None
    t, v = evals["tokens"].to_numpy(float), evals["val_loss"].to_numpy(float)
    if tokens < t[0] or tokens > t[-1]:
        return None
    return float(np.interp(tokens, t, v))


def val_loss_after_steps(run_dir: str | Path, steps: float) -> float | None:
    """Validation loss after `steps` optimizer steps, interpolated between the run's evaluations. Steps taken
    are counted as tokens seen over tokens per step, whatever the log's step column counts from (`train` logs
    the step index, 0 first, so its last evaluation is "after `steps` steps" at index steps - 1)."""
    log = read_log(run_dir)
    per_step = log["tokens"].diff().dropna()
    per_step = float(per_step.median()) if len(per_step) else (float(log["tokens"].iloc[0]) if len(log) else 0)
    evals = log.dropna(subset=["val_loss"]).sort_values("tokens")
    if not len(evals) or per_step <= 0:
        return None
    done, v = evals["tokens"].to_numpy(float) / per_step, evals["val_loss"].to_numpy(float)
    if steps < done[0] - 1e-9 or steps > done[-1] + 1e-9:
        return None
    return float(np.interp(steps, done, v))


def step_speeds(run_dir: str | Path) -> np.ndarray:
    """tokens/s of each timed step in a run's log.csv. The first steps are left out as `train` leaves them out of
    the summary's tokens/s (`rev.training.loop.untimed_steps`), so the spread describes the steps the summary
    averages."""
    v = read_log(run_dir)["tokens_per_s"].dropna().to_numpy(float)
    return v[untimed_steps(len(v)):] if len(v) else v


def speed_spread(run_dir: str | Path) -> tuple[float, float, float] | None:
    """(lower quartile, median, upper quartile) of a run's per-step tokens/s (`step_speeds`); None with fewer than
    two timed steps, where no spread was recorded."""
    v = step_speeds(run_dir)
    if len(v) < 2:
        return None
    lo, hi = quartiles(list(v))
    return float(lo), float(np.median(v)), float(hi)


PLATEAU_NATS = 0.15   # a running-mean training loss this close to the context-free line is "on" it


@dataclass(frozen=True)
class Start:
    """How a run began, read from its log: the steps of warm-up (the first step at the peak learning rate), the
    largest gradient norm in the first quarter of the run beside the run's median, and the longest stretch of
    consecutive steps in which the 10-step running mean of the training loss stayed within `PLATEAU_NATS` of the
    context-free line, with how far it fell across that stretch (a run passing through falls; a stalled one sits)."""
    warmup_steps: int
    peak_lr: float
    max_grad_norm: float
    max_grad_step: int
    median_grad_norm: float
    plateau_steps: int
    plateau_drop: float
    steps: int
    total_drop: float   # first step's loss minus the last running mean: what the whole run learnt

    @property
    def stalled(self) -> bool:
        """Sat on the line: at least a tenth of the run (and 10 steps) there, learning at under half its average
        pace (a run merely passing through the band keeps its pace)."""
        long = self.plateau_steps >= max(10, self.steps // 10)
        return long and self.plateau_drop / self.plateau_steps < 0.5 * self.total_drop / self.steps


def run_start(run_dir: str | Path, context_free: float, smooth: int = 10) -> Start | None:
    """`Start` of a run (None without a log of at least 8 steps)."""
    log = read_log(run_dir)
    if len(log) < 8:
        return None
    lr, norm = log["lr"].to_numpy(float), log["grad_norm"].to_numpy(float)
    early = norm[: max(2, len(norm) // 4)]
    mean = log["loss"].rolling(smooth, min_periods=1).mean().to_numpy(float)
    best, start, first = (0, 0), None, 0   # the longest stretch inside the band: (length, its first step)
    for i, inside in enumerate(np.abs(mean - context_free) <= PLATEAU_NATS):
        start = (i if start is None else start) if inside else None
        if start is not None and i - start + 1 > best[0]:
            best = (i - start + 1, start)
    length, first = best
    drop = float(mean[first] - mean[first + length - 1]) if length else 0.0
    return Start(warmup_steps=int(np.argmax(lr >= lr.max() * (1 - 1e-9))) + 1, peak_lr=float(lr.max()),
                 max_grad_norm=float(np.nanmax(early)), max_grad_step=int(np.nanargmax(early)),
                 median_grad_norm=float(np.nanmedian(norm)), plateau_steps=length, plateau_drop=drop,
                 steps=len(log), total_drop=float(log["loss"].iloc[0] - mean[-1]))


def number(x: Any) -> float | None:
    """A finite float, or None for a missing, unreadable or non-finite value (a log cell, a summary field)."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None
