"""Notebooks 03-07b (screening, runs 1 to 4, the report, the landscape): training the workbook's runs and looking
at them. The screening rule lives in `rev.chapters.screening`, the max-batch and depth searches and the computed
takeaways in `rev.chapters.assignment`, the figures in `run_plots`; each run notebook is narration around a few
calls into these.

Layout under `results/<profile>/`:
  screening/<trunk>_h<h>_<stream>/, screening.json
  one folder per main run (`main_runs.MAIN_RUNS`: run1_baseline ... run4_reversible_deep), maxbatch.json
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from ...measure.bench import quartiles, round_ratios
from ...base.files import read_json
from ...base.profiles import ProfileLike, get_profile
from .main_runs import EXTRA_RUNS, MAIN_RUNS
from ...measure.stats import median_interval
from ...training.loop import TrainConfig, train
from .run_log import read_log, step_speeds
from .live_loss import LiveLoss
from .palette import run_colour
from .tables import counted
from .verdicts import MIN_ROUNDS, Spread
from ...base.units import MIB

RUN3B, RUNNER_UP = EXTRA_RUNS


def profile_dir(results: str | Path, profile: ProfileLike) -> Path:
    return Path(results) / get_profile(profile).name


def train_run(name: str, profile: ProfileLike, results: str | Path = "results", data_dir: str | Path = "data",
              live: bool = False, progress: bool = True, **overrides) -> dict:
    """Train the workbook run `name` (or any name, e.g. a screening run) into results/<profile>/<name>.

    Safe to run again (`resume="auto"`): a finished run with the same settings is reused, one interrupted by
    a disconnect continues from its checkpoint with the very numbers an uninterrupted run would have."""
    out = profile_dir(results, profile) / name
    cb = LiveLoss(f"{name} ({overrides.get('trunk', 'residual')})", colour=run_colour(name)) if live else None
    overrides.setdefault("resume", "auto")
    return train(TrainConfig(profile=get_profile(profile), out_dir=out, data_dir=data_dir, callback=cb,
                             progress=progress, **overrides))


def finished_run(profile: ProfileLike, results: str | Path, name: str) -> dict | None:
    """The summary of run `name` when an earlier notebook finished it, else None (nothing is trained)."""
    path = profile_dir(results, profile) / name / "summary.json"
    return read_json(path) if path.is_file() else None


def main_run_dirs(results: str | Path, profile: ProfileLike, names: list[str]) -> dict[str, Path]:
    """{legend label: folder} of main runs (`MAIN_RUNS`, `EXTRA_RUNS`), ready for `plot_runs`."""
    return {(MAIN_RUNS | EXTRA_RUNS)[n].label: profile_dir(results, profile) / n for n in names}


def load_or_train_baseline(profile: ProfileLike, results: str | Path = "results", data_dir: str | Path = "data",
                           seed: int = 0) -> dict:
    """Run 1's summary: notebook 04's run reused, or trained (or finished) now when it is missing or was
    interrupted (a notebook opened on its own)."""
    return train_run("run1_baseline", profile, results, data_dir, trunk="residual", seed=seed)


# --- looking at runs -----------------------------------------------------------------------------------

SUMMARY_COLUMNS = ["run", "trunk", "h", "stream", "n_layer", "batch_size", "tokens", "final_train_loss",
                   "final_val_loss", "tokens_per_s", "peak_memory_bytes", "reconstruction_error", "wall_s"]


def summary_table(summaries: list[dict]):
    """The key columns of run summaries, peak memory in MiB, and beside each run's tokens/s (all its timed tokens
    over all their seconds) the median and quartiles of its steps' (`run_speed`): a timing with its spread."""
    import pandas as pd

    df = pd.DataFrame([{k: s.get(k) for k in SUMMARY_COLUMNS} for s in summaries]).set_index("run")
    df["peak_MiB"] = df.pop("peak_memory_bytes") / MIB
    df["wall_s"] = df["wall_s"].astype(float).round()   # whole seconds: the fraction is noise
    speeds = [run_speed(s) for s in summaries]
    # the summary's final train loss is a mean over the run's last tenth of steps, not its last step's loss
    df = df.rename(columns={"tokens_per_s": "tokens/s (overall)", "wall_s": "wall seconds",
                            "final_train_loss": "train loss (mean, last 10% of steps)"})
    df.insert(df.columns.get_loc("tokens/s (overall)") + 1, "tokens/s per step: median (quartiles)",
              [f"{sp.value:,.0f} ({sp.lo:,.0f}-{sp.hi:,.0f})" if sp else "no log" for sp in speeds])
    return df


def with_step_speeds(table, results_dir: str | Path):
    """`table` (one row per run, a `run` column naming its folder under `results_dir`) with the median and
    quartiles of each run's steps' tokens/s beside its overall figure: a timing shown with its spread."""
    speeds = [run_speed({"config": {"out_dir": str(Path(results_dir) / name)}}) for name in table["run"]]
    at = table.columns.get_loc("tokens_per_s") + 1 if "tokens_per_s" in table else len(table.columns)
    out = table.copy()
    out = out.rename(columns={"tokens_per_s": "tokens/s (median step)"}) if "tokens_per_s" in out else out
    out.insert(at, "tokens/s per step: median (quartiles)",
               [f"{sp.value:,.0f} ({sp.lo:,.0f}-{sp.hi:,.0f})" if sp else "no log" for sp in speeds])
    return out


# --- timings with their spread (`verdicts.Spread`; the verdicts drawn from them live in `verdicts`) -----------

def run_dir_of(summary: dict) -> Path | None:
    """The folder a run's summary came from (its config's out_dir), when it is still there."""
    out = (summary.get("config") or {}).get("out_dir")
    return Path(out) if out and Path(out).is_dir() else None


def run_speed(summary: dict) -> Spread | None:
    """Tokens/s of a run's timed steps as logged (warm-up steps left out, as `train` does): median and quartiles
    over its steps. None when the run's log is not there."""
    run_dir = run_dir_of(summary)
    timed = step_speeds(run_dir).tolist() if run_dir else []
    if not timed:
        return None
    lo, hi = quartiles(timed)
    return Spread(statistics.median(timed), lo, hi, len(timed), "quartiles over its steps")


def bench_ratio(bench: dict, trunk: str, against: str = "residual", whole: bool = False) -> Spread | None:
    """`trunk`'s speed over `against`'s in a `bench_trunks` result, round by round (both steps of a round ran
    under the same load): the median of the rounds' ratios and its bootstrap interval (`round_ratio`). `whole`
    takes `trunk`'s row timed on the whole batch (no slices), as the stored trunk it is set against runs."""
    rows = bench.get("runs", [])
    run = next((r for r in rows if r["trunk"] == trunk and not (whole and r.get("batch_slice"))), None)
    base = next((r for r in rows if r["trunk"] == against and run and r.get("head") == run.get("head")), None)
    if run is None or base is None or not run.get("step_times"):
        return None
    return round_ratio(run["step_times"], base["step_times"])


def round_ratio(times: list[float], other_times: list[float], spread: str = "interval") -> Spread:
    """One trunk's speed over another's from their interleaved step seconds: the median of the rounds' ratios with
    the 95% bootstrap interval of that median (`spread="interval"`, what a faster/slower verdict reads: each
    round is one paired draw), or with the rounds' quartiles (`spread="quartiles"`, a description only, for a
    handful of rounds too few to bootstrap: `verdicts.speed_verdict` reads fewer than `MIN_ROUNDS` as too noisy)."""
    ratios = round_ratios(times, other_times)
    if spread == "interval" and len(ratios) >= MIN_ROUNDS:
        lo, hi = median_interval(ratios)
        kind = f"95% bootstrap interval of the median over {counted(len(ratios), 'interleaved round')}"
    else:
        lo, hi = quartiles(ratios)
        kind = f"quartiles over {counted(len(ratios), 'interleaved round')}"
    return Spread(statistics.median(ratios), lo, hi, len(ratios), kind, interleaved=True)


# --- loss spikes ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Spike:
    """A jump of a run's training loss above its recent level: where it peaked, how high, the learning rate and
    gradient norm there, and when the loss came back (None: not before the run ended)."""
    step: int
    tokens: int
    loss: float
    level: float
    lr: float
    peak_lr: float
    grad_norm_ratio: float
    recovered_after: int | None


SPIKE_WINDOW, SPIKE_K, SPIKE_RISE = 20, 6.0, 0.1   # steps of recent past, robust deviations, nats
SPIKE_SMOOTH = 10   # steps in the running mean `plot_runs` draws: the curve a reader sees a spike in


def _step_outliers(loss, window: int, k: float, min_rise: float) -> dict[int, float]:
    """{step: level} for steps whose loss exceeds the median of the `window` before by `k` robust deviations."""
    import numpy as np

    out = {}
    for i in range(window, len(loss)):
        past = loss[i - window:i]
        level = float(np.median(past))
        noise = 1.4826 * float(np.median(np.abs(past - level)))
        if loss[i] - level > max(k * noise, min_rise):
            out[i] = level
    return out


def _step_noise(loss) -> float:
    """One step's loss noise: the robust spread of the steps' differences, over sqrt(2)."""
    import numpy as np

    d = np.diff(loss)
    return 1.4826 * float(np.median(np.abs(d - np.median(d)))) / math.sqrt(2) if len(d) else 0.0


def _early_rises(loss, window: int, k: float, min_rise: float) -> dict[int, float]:
    """{step: level} for the first `window` steps, which have no window of past to take a median of: a step whose
    loss exceeds the lowest loss so far by `k` step noises (and `min_rise`). Early training falls fast, so a
    healthy step lies at or below its running minimum; a large batch's early overshoot does not."""
    thr = max(k * _step_noise(loss), min_rise)
    out = {}
    for i in range(1, min(window, len(loss))):
        level = float(min(loss[:i]))
        if loss[i] - level > thr:
            out[i] = level
    return out


def _curve_rises(loss, window: int, k: float, min_rise: float, smooth: int) -> tuple[dict[int, float], object, float]:
    """{step: level} where the `smooth`-step running mean rose above its lowest value of the `window` steps before
    by `k` of its own noise (the per-step noise, from the steps' differences, over sqrt(smooth)); also the
    running mean and the threshold."""
    import numpy as np
    import pandas as pd

    sm = pd.Series(loss).rolling(smooth, min_periods=smooth).mean().to_numpy()
    thr = max(k * _step_noise(loss) / math.sqrt(smooth), min_rise)
    out = {}
    for i in range(window + smooth, len(loss)):
        level = float(np.nanmin(sm[i - window:i]))
        if sm[i] - level > thr:
            out[i] = level
    return out, sm, thr


def loss_spikes(run_dir: str | Path, window: int = SPIKE_WINDOW, k: float = SPIKE_K,
                min_rise: float = SPIKE_RISE, smooth: int = SPIKE_SMOOTH) -> list[Spike]:
    """Spikes in a run's logged training loss, of two kinds: one step far above the steps before it (its loss over
    the median of the `window` steps before by `k` robust standard deviations, 1.4826 x their median absolute
    deviation), and the plotted curve (the `smooth`-step running mean) rising above its lowest point of the
    `window` steps before by `k` of its own noise; both by at least `min_rise` nats. The first `window` steps, with
    no window before them, are read against the lowest loss so far (`_early_rises`): that is where a large batch's
    first steps overshoot. Flagged steps closer than `window` merge into one spike, reported at its highest loss,
    with the level before it began. A falling loss never trips any: the recent past lies above the present."""
    log = read_log(run_dir).dropna(subset=["loss"]).reset_index(drop=True)
    loss = log["loss"].to_numpy(float)
    rises, sm, thr = _curve_rises(loss, window, k, min_rise, smooth)
    flagged = _early_rises(loss, window, k, min_rise) | _step_outliers(loss, window, k, min_rise) | rises
    flagged = sorted(flagged.items())
    groups: list[list[tuple[int, float]]] = []
    for i, level in flagged:
        if groups and i - groups[-1][-1][0] < window:
            groups[-1].append((i, level))
        else:
            groups.append([(i, level)])
    norm = float(log["grad_norm"].median())
    spikes = []
    for g in groups:
        i = max((j for j, _ in g), key=lambda j: loss[j])
        level = g[0][1]   # the level before the spike began
        # back: the plotted curve within half the threshold of that level again (a raw step is too noisy to say)
        back = next((j for j in range(g[-1][0] + 1, len(loss)) if sm[j] - level <= thr / 2), None)
        spikes.append(Spike(step=int(log["step"][i]), tokens=int(log["tokens"][i]), loss=float(loss[i]),
                            level=level, lr=float(log["lr"][i]), peak_lr=float(log["lr"].max()),
                            grad_norm_ratio=float(log["grad_norm"][i]) / norm if norm else math.nan,
                            recovered_after=None if back is None else back - i))
    return spikes


def sample(run_dir: str | Path, data_dir: str | Path, prompt: str = "Once upon a time", n_tokens: int = 80,
           seed: int = 0) -> str:
    """Text the run's trained model writes after `prompt` (top-k sampling, seeded)."""
    import torch

    from ...data.corpus import profile_folder
    from ...data.tokens import load
    from ...training.checkpoint import load_model

    model = load_model(run_dir).eval()
    data = load(profile_folder(get_profile(model_profile(run_dir)), data_dir), model.cfg.vocab_size, verify=False)
    idx = torch.tensor([data.encode(prompt)], dtype=torch.long)
    out = model.generate(idx, n_tokens, temperature=0.8, top_k=50, generator=torch.Generator().manual_seed(seed))
    return data.decode(out[0].tolist())


def lr_table(summaries: dict[str, dict], profile: ProfileLike):
    """Each run's batch against the profile's, the learning-rate rule it trained with (`lr_scaling`) and the
    rate that gave, beside the rate each rule (`rev.core.optim.LR_SCALINGS`) would have given it."""
    import pandas as pd

    from ...core.optim import LR_SCALINGS, peak_lr

    prof = get_profile(profile)
    return pd.DataFrame({name: {"batch": s["batch_size"], "batch / profile's": s["batch_size"] / prof.batch_size,
                                "rule": s.get("lr_scaling"), "lr": s["lr"],
                                **{f"lr if {rule}": peak_lr(prof.lr, s["batch_size"], prof.batch_size, rule)
                                   for rule in LR_SCALINGS}}
                         for name, s in summaries.items()}).T


def model_profile(run_dir: str | Path) -> str:
    return read_json(Path(run_dir) / "config.json")["profile"]["name"]


def loss_levels(summary: dict) -> dict[str, float]:
    """Reference losses for a run's curve: a uniform guess over the vocabulary (ln V, where an untrained model
    starts) and the context-free (unigram) model (where learning token counts alone gets)."""
    return {"uniform guess (ln V)": math.log(summary["model_config"]["vocab_size"]),
            "context-free (unigram)": summary["unigram_val_loss"]}


def curve_landmarks(run_dir: str | Path, summary: dict, smooth: int = 10) -> dict:
    """Where a run's loss curve started and ended against `loss_levels`, and the tokens it took for the
    (`smooth`-step mean) training loss to first go below the context-free line (None: it never did)."""
    log = read_log(run_dir)
    levels = loss_levels(summary)
    below = log.loc[log["loss"].rolling(smooth, min_periods=1).mean() < levels["context-free (unigram)"], "tokens"]
    return {"first training loss": float(log["loss"].iloc[0]), **levels,
            "final validation loss": summary["final_val_loss"],
            "tokens to the context-free line": int(below.iloc[0]) if len(below) else None}


# --- the training step, shown where it is introduced (notebooks 04 and 05) ---------------------------------------

def listing(obj):
    """`obj`'s source, highlighted, for a notebook to show library code it is about to run (an
    `IPython.display.Code`: a cell's last expression shows it; `str()` gives the plain text)."""
    import inspect

    from IPython.display import Code

    return Code(inspect.getsource(obj).rstrip(), language="python")
