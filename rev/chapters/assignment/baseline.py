"""Notebook 04 (run 1, the baseline): how steady this machine's clock is, what the run's curve and sample show, and
the notebook's takeaways, every sentence computed from the run.

* `compare_speeds`   -- exercise 04.2's answer (`rev.chapters.shared.verdicts.compare_speeds`): a verdict from
                        two sets of per-step timings of the same work that says "too noisy to tell" when a
                        bootstrap interval for the difference of their medians holds 0 (its check is in
                        `exercises`);
* `speed_halves`     -- the first and the second half of a run's timed steps: the same work twice, so any
                        difference between them is the machine's (`verdicts.machine_drift` reads the same
                        steps in eight windows);
* `curve_reading`    -- the loss curve's landmarks in words (exercise 04.1's answer, measured);
* `known_words`      -- how many of a sample's words occur in the training stories;
* `baseline_takeaways` -- the closing bullets; every timing with its spread.

Timings come from the run's own log (`rev.chapters.shared.runs.run_speed`: each step's tokens/s, the warm-up steps left out
as `train` leaves them out of the summary).
"""
from __future__ import annotations

import re
import statistics
from typing import Sequence

from ...measure.bench import quartiles
from ...data.tokens import TokenData
from ...measure.stats import median_difference_interval
from ..shared.palette import sweep_colours
from ..shared.run_log import read_log, step_speeds
from ..shared.runs import loss_levels, run_dir_of, run_speed
from ..shared.verdicts import FASTER, SLOWER, TOO_NOISY, Spread, compare_speeds, machine_drift
from ...base.units import MIB


# --- the run's own clock ------------------------------------------------------------------------------------

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


def halves_text(halves: tuple[list[float], list[float]]) -> str:
    """The two halves' medians and quartiles, the bootstrap interval for the difference of their medians, and
    `compare_speeds`'s verdict on them."""
    first, second = (_spread(h, "quartiles") for h in halves)
    verdict = compare_speeds(*halves)
    lo, hi = median_difference_interval(halves[1], halves[0])
    said = {FASTER: "the second half was slower", SLOWER: "the second half was faster",
            TOO_NOISY: f"{TOO_NOISY} on this machine which half was faster"}[verdict]
    return (f"first half {speed_text(first)}, second half {speed_text(second)}, over {first.n} and {second.n} "
            f"steps; the second half's median minus the first's, 95% bootstrap interval {lo:+,.0f} to {hi:+,.0f} "
            f"tokens/s: {said}")


def speed_text(speed: Spread) -> str:
    """`2,176 tokens/s (quartiles 1,371-3,365)`: a median speed with the quartiles it came with."""
    return f"{speed.value:,.0f} tokens/s (quartiles {speed.lo:,.0f}-{speed.hi:,.0f})"


def spread_share(speed: Spread) -> float:
    """Width of the quartile range as a fraction of the median: how far apart two steps of the same work land."""
    return (speed.hi - speed.lo) / speed.value if speed.value else float("nan")


# --- what the curve and the sample show ---------------------------------------------------------------------

def curve_reading(landmarks: dict, tokens: int, smooth: int = 10) -> str:
    """Exercise 04.1's questions answered from `rev.chapters.shared.runs.curve_landmarks`: where the curve started against
    ln V, when it reached the context-free line (its `smooth`-step mean, as `curve_landmarks` reads it), and on which
    side of it it ended."""
    first, uniform = landmarks["first training loss"], landmarks["uniform guess (ln V)"]
    line, final = landmarks["context-free (unigram)"], landmarks["final validation loss"]
    reached = landmarks["tokens to the context-free line"]
    start = ("close to" if abs(first - uniform) <= 0.1 else "far from") + f" ln V = {uniform:.3f}"
    crossed = (f"its {smooth}-step mean training loss went below the context-free line after {reached:,} tokens "
               f"({reached / tokens:.0%} of the run)" if reached is not None else
               "its training loss never went below the context-free line")
    end = (f"ended {line - final:.3f} nats below it: it uses context" if final < line else
           f"ended {final - line:.3f} nats above it: it has not learnt more than token counts")
    return f"**This run.** The first loss, {first:.3f}, is {start}; {crossed}; the validation loss ({final:.3f}) {end}."


def known_words(text: str, data: TokenData, n_tokens: int = 200_000) -> tuple[int, int]:
    """(words of `text` that occur in the first `n_tokens` of the training stories, words of `text`), words being
    runs of letters, case ignored."""
    train = data.array("train")
    vocabulary = set(re.findall(r"[a-z]+", data.decode(train[:n_tokens].tolist(), skip_special=True).lower()))
    words = re.findall(r"[a-z]+", text.lower())
    return sum(w in vocabulary for w in words), len(words)


# --- takeaways ------------------------------------------------------------------------------------------------

def baseline_takeaways(run1: dict, halves: tuple[list[float], list[float]] | None = None) -> str:
    """The notebook's closing bullets, from the run's summary and the two halves of its timed steps."""
    uniform, unigram = loss_levels(run1).values()
    below = unigram - run1["final_val_loss"]
    speed = run_speed(run1)
    if speed is None:
        timing = f"it trained at {run1['tokens_per_s']:,.0f} tokens/s (no step log here, so no spread to show)"
    else:
        timing = (f"its steps ran at a median {speed_text(speed)} over {speed.n} timed steps (the quartiles "
                  f"{spread_share(speed):.0%} of the median apart); all its timed tokens over all their seconds: "
                  f"{run1['tokens_per_s']:,.0f} tokens/s")
    lines = [
        f"The baseline reached validation loss {run1['final_val_loss']:.3f} after {run1['tokens']:,} tokens "
        f"({run1['steps']} steps of {run1['batch_size']} x {run1['model_config']['seq_len']} tokens).",
        f"An untrained model scores the uniform guess ln V = {uniform:.2f}; the baseline ended "
        + (f"{below:.3f} nats below the context-free line ({unigram:.3f}): it uses context." if below > 0 else
           f"{-below:.3f} nats above the context-free line ({unigram:.3f}): it has learnt no more than token counts."),
        f"One training step at batch {run1['batch_size']} peaked at {run1['peak_memory_bytes'] / MIB:.1f} MiB; "
        + timing + ".",
    ]
    if halves is not None:
        lines.append("The same work twice: " + halves_text(halves) + ". " + clock_lesson(timed_steps(run1)))
    return "\n".join(f"- {line}" for line in lines)


def clock_lesson(steps: Sequence[float]) -> str:
    """What one run's own clock says about comparing runs: whether the machine's speed changed during it (its
    halves, `compare_speeds`, and its windows, `machine_drift`), and why runs timed apart get no speed verdict
    either way."""
    drift = machine_drift(steps)
    mid = len(steps) // 2
    moved = compare_speeds(steps[:mid], steps[mid:]) != TOO_NOISY or (drift is not None and drift.changed)
    said = f" ({drift.text()})" if drift is not None else ""
    if moved:
        return (f"The machine's speed changed within this one run{said}: two runs timed one after the other can "
                f"differ as much from the machine alone, so no speed verdict is drawn between runs timed apart; "
                f"the trunks are compared interleaved, one step of each per round under the same load (notebook "
                f"05's bench, `python -m rev bench`).")
    return (f"No change this run's clock can see{said}. That still does not make two runs timed apart comparable: "
            f"a bootstrap over steps treats them as independent draws, while steps timed in a row share the "
            f"machine's slow drifts, and load that comes between two runs is in neither run's spread. Runs are "
            f"compared by speed only when interleaved (notebook 05's bench).")


# --- figure -----------------------------------------------------------------------------------------------

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
            ax.plot(span, [s.value, s.value], color=colour, label=f"{name}: median, quartiles (band)")
    ax.set(xlabel="step", ylabel="tokens / s (axis zoomed to the steps)", title="the same work, step by step")
    # zoomed to the bulk of the steps (a few slow outliers clipped at the bottom, said in the label): from 0 the
    # band a verdict is about is squeezed into a sliver
    lo, hi = np.percentile(steps, [1, 100])
    pad = 0.05 * (hi - lo) or 0.05 * abs(hi) or 1.0   # steps all alike: a band around them
    ax.set_ylim(lo - pad, hi + pad)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig
