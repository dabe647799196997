"""Notebook 04 (run 1, the baseline): the run's own clock, read from its step log.

* `compare_speeds`   -- exercise 04.2's answer (`rev.chapters.shared.verdicts.compare_speeds`, re-exported here for
                        its check in `exercises`): "faster", "slower" or "too noisy to tell" from a bootstrap
                        interval for the difference of two sets of per-step timings' medians;
* `timed_steps`      -- a run's per-step tokens/s, its warm-up steps left out as `train` leaves them out;
* `speed_halves`     -- the first and the second half of those steps: the same work twice, so any difference
                        between them is the machine's (`verdicts.machine_drift` reads the same steps in windows);
* `spread_share`     -- how far apart a timing's quartiles lie, as a share of its median;
* `plot_step_speeds` -- each timed step against its step number, each half's median and quartiles as a band.

The notebook writes the training loop itself; what it concludes is in its markdown and its verdict tables.
"""
from __future__ import annotations

import statistics
from typing import Sequence

from ...measure.bench import quartiles
from ..shared.palette import sweep_colours
from ..shared.run_log import read_log, step_speeds
from ..shared.runs import run_dir_of
from ..shared.verdicts import FASTER, SLOWER, TOO_NOISY, Spread, compare_speeds

__all__ = ["FASTER", "SLOWER", "TOO_NOISY", "compare_speeds", "plot_step_speeds", "speed_halves", "spread_share",
           "timed_steps"]


def _spread(values: Sequence[float], kind: str) -> Spread:
    lo, hi = quartiles(list(values))
    return Spread(statistics.median(values), lo, hi, len(values), kind)


def timed_steps(summary: dict) -> list[float]:
    """The per-step tokens/s `train` timed for the summary's tokens/s (its warm-up steps left out)."""
    run_dir = run_dir_of(summary)
    return step_speeds(run_dir).tolist() if run_dir else []


def speed_halves(summary: dict) -> tuple[list[float], list[float]] | None:
    """The run's timed steps split into its first and second half (None with fewer than four timed steps)."""
    steps = timed_steps(summary)
    if len(steps) < 4:
        return None
    mid = len(steps) // 2
    return steps[:mid], steps[mid:]


def spread_share(speed: Spread) -> float:
    """Width of the quartile range as a fraction of the median: how far apart two steps of the same work land."""
    return (speed.hi - speed.lo) / speed.value if speed.value else float("nan")


def plot_step_speeds(summary: dict):
    """Each timed step's tokens/s against its step, with each half's median and quartiles as a band: how much the
    same work varies on this machine. Returns the figure (None without a step log)."""
    import matplotlib.pyplot as plt
    import numpy as np

    steps = timed_steps(summary)
    halves = speed_halves(summary)
    if not steps:
        return None
    first = len(read_log(run_dir_of(summary))) - len(steps)  # index of the first timed step
    x = np.arange(first, first + len(steps))
    fig, ax = plt.subplots(figsize=(8, 3.4))
    ax.plot(x, steps, ".", ms=4, color="0.4", label="one step")
    if halves:   # two halves in time: an ordered pair, not two runs
        first_c, second_c = sweep_colours(2)
        for part, start, colour, name in ((halves[0], x[0], first_c, "first half"),
                                          (halves[1], x[len(halves[0])], second_c, "second half")):
            s = _spread(part, "quartiles")
            span = [start, start + len(part) - 1]
            ax.fill_between(span, s.lo, s.hi, color=colour, alpha=0.25)
            ax.plot(span, [s.value, s.value], color=colour, label=f"{name}: median, quartiles")
    ax.set(xlabel="step", ylabel="tokens / s (zoomed to the steps)", title="the same work, step by step")
    # zoomed to the bulk of the steps (a few slow outliers clipped at the bottom, said in the label): from 0 the
    # band a verdict is about is squeezed into a sliver
    lo, hi = np.percentile(steps, [1, 100])
    pad = 0.05 * (hi - lo) or 0.05 * abs(hi) or 1.0   # steps all alike: a band around them
    ax.set_ylim(lo - pad, hi + pad)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig
