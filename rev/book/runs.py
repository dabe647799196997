"""Notebooks 03-06 (screening, runs 1 to 4): training the workbook's runs and looking at them. The screening rule
lives in `screening`, the max-batch and depth searches in `searches`, the figures in `run_plots` and the computed
takeaways in `run_takeaways`; each run notebook is narration around a few calls into these.

Layout under `results/<profile>/`:
  screening/<trunk>_h<h>_<stream>/, screening.json
  one folder per main run (`rev.engine.profiles.MAIN_RUNS`: run1_baseline ... run4_reversible_deep), maxbatch.json
"""
from __future__ import annotations

import math
from pathlib import Path

from ..engine.files import read_json
from ..engine.profiles import EXTRA_RUNS, MAIN_RUNS, ProfileLike, get_profile
from ..engine.train import TrainConfig, train
from .results import read_log
from .run_plots import LiveLoss

RUN3B, RUNNER_UP = EXTRA_RUNS


def profile_dir(results: str | Path, profile: ProfileLike) -> Path:
    return Path(results) / get_profile(profile).name


def train_run(name: str, profile: ProfileLike, results: str | Path = "results", data_dir: str | Path = "data",
              live: bool = False, progress: bool = True, **overrides) -> dict:
    """Train the workbook run `name` (or any name, e.g. a screening run) into results/<profile>/<name>.

    Safe to run again (`resume="auto"`): a finished run with the same settings is reused, one interrupted by
    a disconnect continues from its checkpoint with the very numbers an uninterrupted run would have."""
    out = profile_dir(results, profile) / name
    cb = LiveLoss(f"{name} ({overrides.get('trunk', 'residual')})") if live else None
    overrides.setdefault("resume", "auto")
    return train(TrainConfig(profile=get_profile(profile), out_dir=out, data_dir=data_dir, callback=cb,
                             progress=progress, **overrides))


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
    """The key columns of run summaries, peak memory in MiB."""
    import pandas as pd

    df = pd.DataFrame([{k: s.get(k) for k in SUMMARY_COLUMNS} for s in summaries]).set_index("run")
    df["peak_MiB"] = df.pop("peak_memory_bytes") / 2**20
    return df


def sample(run_dir: str | Path, data_dir: str | Path, prompt: str = "Once upon a time", n_tokens: int = 80,
           seed: int = 0) -> str:
    """Text the run's trained model writes after `prompt` (top-k sampling, seeded)."""
    import torch

    from ..engine.corpus import profile_folder
    from ..engine.data import load
    from ..engine.train import load_model

    model = load_model(run_dir).eval()
    data = load(profile_folder(get_profile(model_profile(run_dir)), data_dir), model.cfg.vocab_size, verify=False)
    idx = torch.tensor([data.encode(prompt)], dtype=torch.long)
    out = model.generate(idx, n_tokens, temperature=0.8, top_k=50, generator=torch.Generator().manual_seed(seed))
    return data.decode(out[0].tolist())


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

def listing(obj) -> str:
    """`obj`'s source as a Markdown code block, for a notebook to show the code it is about to run."""
    import inspect

    return f"```python\n{inspect.getsource(obj).rstrip()}\n```"


def one_step(cfg, prof: ProfileLike, data_dir: str | Path = "data", seed: int = 0) -> dict:
    """One `train_step` by hand on a fresh model `cfg` (seeded, so two trunks start from the same weights) and the
    profile's first training batch, at the profile's peak learning rate: the loss before and after the update on
    that batch and the gradient norm before clipping."""
    import torch

    from ..core.model import GPT
    from ..engine.optim import adamw
    from ..engine.step import train_step
    from ..engine.train import ensure_data

    prof = get_profile(prof)
    data = ensure_data(prof, Path(data_dir), progress=False)
    x, y = data.get_batch("train", prof.batch_size, cfg.seq_len, torch.Generator().manual_seed(seed))
    torch.manual_seed(seed)
    model = GPT(cfg)
    opt = adamw(model, prof.lr, prof.weight_decay)
    loss, norm = train_step(model, opt, x, y, clip=prof.grad_clip)
    with torch.no_grad():
        after = model(x, y)
    return {"trunk": cfg.trunk, "loss before": float(loss), "loss after": float(after), "gradient norm": float(norm)}
