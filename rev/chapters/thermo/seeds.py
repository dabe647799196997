"""Notebook 08 (training irreversibility): the learning-rate shock over several seeds, four measures, verdicts.

One seed decides nothing: at the paper's size the single-seed verdict changed from one seed to the next. So the
shock (`shock.lr_shock_experiment`) runs once per seed, in parallel processes when asked, and every seed's arms
are read through four measures:

* `update`     the update magnitude |dtheta| (what the paper's Figure 2 plots);
* `direction`  the Adam direction |dtheta| / eta (the update with the trivial factor eta taken out);
* `grad_norm`  the minibatch gradient norm (the paper: fluctuation "both in the parameters and gradients");
* `variance`   the windowed variance of |dtheta| / eta (the chapter's first measure, `fluctuation_summary`).

Per seed, arm and measure: before (last window before the change), after (mean over the steps after it), their
ratio, and the response (the ratio over the control arm's). A seed's verdict is "ordinary" when the x5 arm
responds more than the /5 arm and "anomalous" when less; over seeds the verdict stands only when every seed
agrees, otherwise it is "not decided".
"""
from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from .shock import MODELS, fluctuation_summary, lr_shock_experiment, windowed_variance
from .sizes import FluctuationSizes

MEASURES: dict[str, str] = {
    "update": "|dtheta|",
    "direction": "|dtheta|/eta",
    "grad_norm": "|grad L|",
    "variance": "var(|dtheta|/eta)",
}
FACTORS = (5.0, 0.2, 1.0)
UNDECIDED = "not decided"

# kind -> seed -> factor -> per-step log (step, update_norm, grad_norm, loss, lr)
ShockRuns = dict[str, dict[int, dict[float, pd.DataFrame]]]


def _one_run(job: tuple[str, FluctuationSizes, int]) -> tuple[str, int, dict[float, pd.DataFrame]]:
    kind, sizes, seed = job
    return kind, seed, lr_shock_experiment(kind, sizes, FACTORS, seed=seed)


def shock_over_seeds(sizes: FluctuationSizes, seeds: Sequence[int] | None = None,
                     kinds: Sequence[str] = tuple(MODELS), jobs: int = 1,
                     progress: Callable | None = None) -> ShockRuns:
    """`lr_shock_experiment` for every model kind and seed (default seeds 0 .. sizes.seeds-1).

    With jobs > 1 the (kind, seed) runs go to that many processes; each run keeps `sizes.threads` threads, so
    on a small CPU `threads=1` and one process per core is the fast way. `progress` counts finished runs.
    """
    seeds = list(range(sizes.seeds)) if seeds is None else [int(s) for s in seeds]
    # the transformer runs first: it is the long one, so the processes finish together
    work = [(kind, sizes, seed) for kind in sorted(kinds, key=lambda k: k != "transformer") for seed in seeds]
    bar = progress(total=len(work), desc="shock runs") if progress is not None else None
    out: ShockRuns = {kind: {} for kind in kinds}
    if jobs > 1:
        # spawn, not fork: a forked child inherits the parent's torch thread pools, which can deadlock
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            for kind, seed, runs in pool.map(_one_run, work):
                out[kind][seed] = runs
                if bar is not None:
                    bar.update(1)
    else:
        for job in work:
            kind, seed, runs = _one_run(job)
            out[kind][seed] = runs
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    return {kind: dict(sorted(by_seed.items())) for kind, by_seed in out.items()}


def measure_series(df: pd.DataFrame, sizes: FluctuationSizes) -> dict[str, np.ndarray]:
    """The four measures of one arm, step by step (the variance is NaN until its window fills)."""
    u, lr = df["update_norm"].to_numpy(), df["lr"].to_numpy()
    return {"update": u, "direction": u / lr, "grad_norm": df["grad_norm"].to_numpy(),
            "variance": windowed_variance(u / lr, sizes.window, breaks=(sizes.change_step,))}


def seed_table(runs: ShockRuns, sizes: FluctuationSizes) -> pd.DataFrame:
    """One row per (kind, seed, measure, factor): before, after, ratio = after/before, response = ratio/control's.

    Means: before over the last `window` steps before the change, after over every step after it. The variance
    is `fluctuation_summary`'s: before is the last full window, after the mean over all full windows after.
    """
    c, w = sizes.change_step, sizes.window
    rows = []
    for kind, by_seed in runs.items():
        for seed, arms in by_seed.items():
            var = fluctuation_summary(arms, sizes).set_index("factor")
            for f, df in arms.items():
                series = measure_series(df, sizes)
                for m in MEASURES:
                    if m == "variance":
                        before, after = var.loc[f, "var_before_over_eta2"], var.loc[f, "var_after_over_eta2"]
                    else:
                        before, after = series[m][c - w:c].mean(), series[m][c:].mean()
                    rows.append(dict(kind=kind, seed=seed, measure=m, factor=f, before=float(before),
                                     after=float(after), ratio=float(after / before)))
    out = pd.DataFrame(rows)
    ctrl = out[out.factor == 1.0].set_index(["kind", "seed", "measure"]).ratio
    out["response"] = out.ratio / ctrl.reindex(pd.MultiIndex.from_frame(out[["kind", "seed", "measure"]])).to_numpy()
    return out


def seed_verdict(response_up: float, response_down: float) -> str:
    """One seed: 'ordinary' when the larger LR responds more than the smaller, 'anomalous' when less."""
    return "ordinary" if response_up > response_down else "anomalous"


def verdict_over_seeds(verdicts: Sequence[str]) -> str:
    """The verdict every seed agrees on, else "not decided" (one seed alone decides nothing either)."""
    verdicts = list(verdicts)
    if len(verdicts) < 2 or len(set(verdicts)) != 1:
        return UNDECIDED
    return verdicts[0]


def verdict_table(table: pd.DataFrame) -> pd.DataFrame:
    """Per (kind, measure): the x5 and /5 responses over seeds (median, min..max), each seed's verdict and the
    verdict over seeds."""
    rows = []
    for (kind, m), df in table.groupby(["kind", "measure"], sort=False):
        by = df.pivot(index="seed", columns="factor", values="response")
        up, down = by[5.0], by[0.2]
        per_seed = [seed_verdict(a, b) for a, b in zip(up, down)]
        rows.append(dict(kind=kind, measure=m, x5_median=float(up.median()), x5_min=float(up.min()),
                         x5_max=float(up.max()), div5_median=float(down.median()), div5_min=float(down.min()),
                         div5_max=float(down.max()),
                         seeds=" ".join(f"{s}:{v[0]}" for s, v in zip(by.index, per_seed)),
                         verdict=verdict_over_seeds(per_seed)))
    return pd.DataFrame(rows)


def per_seed_table(table: pd.DataFrame) -> pd.DataFrame:
    """The closing-note table: one row per (kind, measure, seed) with the x5 and /5 responses and the verdict."""
    by = table.pivot_table(index=["kind", "measure", "seed"], columns="factor", values="response", sort=False)
    out = pd.DataFrame({"response_x5": by[5.0], "response_div5": by[0.2]}).reset_index()
    out["verdict"] = [seed_verdict(a, b) for a, b in zip(out.response_x5, out.response_div5)]
    return out


def claim_status(verdicts: pd.DataFrame, measure: str) -> str:
    """The paper's claim (perceptron ordinary, transformer anomalous) on one measure: holds, fails or undecided."""
    v = verdicts[verdicts.measure == measure].set_index("kind").verdict
    if UNDECIDED in (v.get("linear"), v.get("transformer")):
        return UNDECIDED
    return "holds" if v.get("linear") == "ordinary" and v.get("transformer") == "anomalous" else "does not hold"
