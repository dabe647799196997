"""Notebook 05: how far do runs 1 and 2 move with the seed? The spread that sets what one seed can decide.

A main-run verdict compares two runs of one seed each. Whether a gap of 0.05 nats is a win or noise depends on how
far a run's final loss moves when only the seed changes (its initial weights and its data order). So runs 1 and 2
are trained again at seeds 1 .. n-1 (`sizes.ChapterSizes.seeds`; seed 0 is the main runs themselves), under
``results/<profile>/seeds/``, and:

* the effect of run 2 against run 1 is the mean of the paired per-seed differences, with its 95% t interval (at
  3 seeds the interval is 2.48 standard deviations of the differences wide on each side, so only a gap steady
  across seeds is resolved);
* the *seed spread* sigma is the pooled standard deviation of one run's final loss within each arm, and the tie
  margin for two single-seed runs is the 95% half-width of their difference, t * sqrt(2) * sigma: a gap inside it
  could come from the seeds alone. The report uses it for its single-seed verdicts (runs 3 and 4).
"""
from __future__ import annotations

import contextlib
import io
import math
from pathlib import Path
from typing import Callable

import numpy as np

from ...base.files import read_json, write_json
from ...base.profiles import ProfileLike, get_profile
from ...measure.stats import LEVEL, mean_interval, t_quantile
from ..shared.results import SEEDS_FILE  # under results/<profile>/: the losses, the effect's interval, the seed tie
from .sizes import chapter_sizes
from ..shared.runs import finished_run, profile_dir, train_run
from ..shared.verdicts import HIGHER, LOWER, interval_side

SEEDS_DIR = "seeds"          # under results/<profile>/: the replicas, one folder per run and seed
ARMS = {"run1_baseline": "baseline", "run2_reversible_same_batch": "reversible"}
FINAL_ONLY = 10 ** 9         # a replica's eval_every: no step but the last is evaluated


def replica_name(run: str, seed: int) -> str:
    """The folder (under results/<profile>/) of `run` trained again at `seed`; seed 0 is the main run itself."""
    return run if seed == 0 else f"{SEEDS_DIR}/{run}_seed{seed}"


def train_replicas(profile: ProfileLike, results: str | Path, data_dir: str | Path, chosen: dict,
                   progress: bool = True, on_done: Callable[[str, int, dict], None] | None = None
                   ) -> dict[str, list[dict]]:
    """Runs 1 and 2 at every seed the profile asks for ({run: [summary per seed, seed 0 first]}): seed 0 is read
    from the main runs, the others are trained (or reused when an earlier execution finished them);
    `on_done(run, seed, summary)` is called as each replica finishes. What `train` prints for a replica (its
    batch slicing, a reused run's folder) is what it printed for the main run already, so it is not shown again."""
    prof = get_profile(profile)
    if chapter_sizes(prof).seeds < 1:
        raise ValueError(f"profile {prof.name!r} has seeds={chapter_sizes(prof).seeds}: it needs at least 1 (the main runs)")
    kwargs = {"run1_baseline": {"trunk": "residual"}, "run2_reversible_same_batch": dict(chosen)}
    out: dict[str, list[dict]] = {}
    for run, kw in kwargs.items():
        main = finished_run(prof, results, run)
        if main is None:
            raise FileNotFoundError(f"{run} has not finished under {profile_dir(results, prof)}: run notebooks 04 and "
                                    f"05 first (the replicas repeat it at other seeds)")
        # a replica is read only for its final validation loss: evaluated once, at its last step (5% of its time)
        out[run] = [main]
        for seed in range(1, chapter_sizes(prof).seeds):
            with contextlib.redirect_stdout(io.StringIO()):
                out[run].append(train_run(replica_name(run, seed), prof, results, data_dir, seed=seed,
                                          progress=progress, eval_every=FINAL_ONLY, **kw))
            if on_done is not None:
                on_done(run, seed, out[run][-1])
    return out


SELECTED_SEED = 0   # the seed the screening picked the trunk on: its gap is the selected draw, not a fresh one


def seed_spread(runs: dict[str, list[dict]], level: float = LEVEL, selected: int | None = SELECTED_SEED) -> dict:
    """From {run: [summary per seed]} (runs 1 and 2, seeds paired by position): each arm's final losses, the paired
    differences run 2 - run 1, the pooled seed spread of one run's loss and the tie margin it implies for two
    single-seed runs, and the effect's t interval over the seeds other than `selected` (the screening chose the
    trunk on that seed's short run, so its gap was picked for being good: counting it would flatter the effect).
    With fewer than 2 other seeds there is no interval; with one seed in all, no spread either."""
    base, rev = (np.array([r["final_val_loss"] for r in runs[k]], float) for k in ARMS)
    if len(base) != len(rev):
        raise ValueError(f"runs 1 and 2 have {len(base)} and {len(rev)} seeds: the differences pair them by seed")
    diff = rev - base
    fresh = np.array([d for i, d in enumerate(diff) if i != selected])
    out = {"seeds": len(base), "level": level, "baseline": base.tolist(), "reversible": rev.tolist(),
           "diff": diff.tolist(), "diff_mean": float(diff.mean()), "selected_seed": selected,
           "verdict_seeds": len(fresh)}
    if len(base) < 2:
        return out
    sd = math.sqrt((base.var(ddof=1) + rev.var(ddof=1)) / 2)   # pooled over both arms: 2(n-1) degrees of freedom
    tie = t_quantile(0.5 + level / 2, 2 * (len(base) - 1)) * math.sqrt(2) * sd
    out |= {"sd": sd, "tie": tie, "same_sign": bool((diff < 0).all() or (diff > 0).all())}
    if len(fresh) < 2:
        return out
    mean, lo, hi = mean_interval(fresh, level)
    return out | {"verdict_mean": mean, "diff_lo": lo, "diff_hi": hi}


def save_spread(profile: ProfileLike, results: str | Path, spread: dict) -> Path:
    """Write `seed_spread`'s result where notebook 07 and REPORT.md read it (``results/<profile>/seeds.json``)."""
    path = profile_dir(results, profile) / SEEDS_FILE
    write_json(path, spread)
    return path


def load_spread(profile_folder: str | Path) -> dict | None:
    """The saved seed spread of a profile's results folder, or None when notebook 05 did not measure it."""
    path = Path(profile_folder) / SEEDS_FILE
    return read_json(path) if path.is_file() else None


def seeds_side(spread: dict | None) -> int | None:
    """Run 2 against run 1 over the seeds: -1 lower, +1 higher when the mean paired difference's t interval (over
    the seeds the screening did not select) excludes 0, 0 when it holds 0; None without that interval."""
    if not isinstance(spread, dict) or "diff_lo" not in spread:
        return None
    return interval_side(spread["diff_lo"], spread["diff_hi"], 0.0)


def seeds_reading(spread: dict | None) -> str | None:
    """The gap of run 2 against run 1 over the seeds, in one clause, the same in notebook 05 and REPORT.md: the
    mean difference over the seeds the screening did not select, its t interval and whether those seeds separate
    the runs. None without an interval (fewer than 2 such seeds)."""
    side = seeds_side(spread)
    if side is None:
        return None
    held = ("the seeds do not separate the two runs (the interval holds 0)" if side == 0 else
            f"run 2 is {LOWER if side < 0 else HIGHER} beyond the seeds' spread")
    return (f"over the {spread['verdict_seeds']} seeds other than seed {spread['selected_seed']} (the screening's, "
            f"which picked the trunk) the mean difference is {spread['verdict_mean']:+.3f} nats "
            f"({spread['level']:.0%} t interval {spread['diff_lo']:+.3f} to {spread['diff_hi']:+.3f}): {held}")


def plot_seeds(spread: dict):
    """Each seed's final validation loss, run 1 and run 2 side by side and joined (a line per seed), with the
    mean difference's interval in the title: the picture of a paired comparison."""
    import matplotlib.pyplot as plt

    from ..shared.palette import run_colour

    fig, ax = plt.subplots(figsize=(4.8, 3.4))
    for s, (b, r) in enumerate(zip(spread["baseline"], spread["reversible"])):
        ax.plot([0, 1], [b, r], "-", color="0.6", lw=1, zorder=1)
        ax.annotate(f"seed {s}", (1, r), xytext=(6, 0), textcoords="offset points", va="center", fontsize=8)
    for x, arm, run in ((0, "baseline", "run1_baseline"), (1, "reversible", "run2_reversible_same_batch")):
        ax.scatter([x] * spread["seeds"], spread[arm], color=run_colour(run), zorder=2, s=30)
    title = f"{spread['seeds']} seeds"
    if "diff_lo" in spread:
        title += (f": run 2 - run 1 over seeds other than {spread['selected_seed']} {spread['verdict_mean']:+.3f} "
                  f"[{spread['diff_lo']:+.3f}, {spread['diff_hi']:+.3f}]")
    ax.set(xticks=[0, 1], xticklabels=["run 1\nresidual", "run 2\nreversible"], xlim=(-0.4, 1.6),
           ylabel="final validation loss (nats)", title=title)
    ax.title.set_fontsize(9)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    return fig
