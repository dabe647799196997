"""The workbook's runs: names, folders, the integrator screening, max-batch and depth searches, and a live
loss plot. The run notebooks (03-06) call these, so each notebook is a few lines of narration and one call.

Layout under `results/<profile>/`:
  screening/<trunk>_h<h>_<stream>/, screening.json
  run1_baseline/, run1b_baseline_maxbatch/, run2_reversible_same_batch/, run3_reversible_max_batch/,
  run4_reversible_deep/, maxbatch.json
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..engine.maxbatch import MaxBatch, Probe, _fits, find_max_batch, largest_fitting, profile_model_config
from ..engine.device import amp_dtype, pick_device
from ..engine.profiles import get_profile
from .report import read_log
from ..engine.files import write_json
from ..engine.train import TrainConfig, train

RUNS = {
    "run1_baseline": "residual at the profile's batch",
    "run1b_baseline_maxbatch": "residual at its own max batch under the memory budget",
    "run2_reversible_same_batch": "the screened reversible trunk at the profile's batch",
    "run3_reversible_max_batch": "the screened reversible trunk at its max batch under the same budget",
    "run4_reversible_deep": "the deepest reversible model that fits the baseline's memory at the baseline's batch",
}
RECON_LIMIT = 1e-2        # a screened candidate must reconstruct its input at least this well
LOSS_TIE = 0.02           # validation losses closer than this (nats) count as a tie


def profile_dir(results: str | Path, profile: str) -> Path:
    return Path(results) / get_profile(profile).name


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


def train_run(name: str, profile: str, results: str | Path = "results", data_dir: str | Path = "data",
              live: bool = False, progress: bool = True, **overrides) -> dict:
    """Train the workbook run `name` (or any name, e.g. a screening run) into results/<profile>/<name>."""
    out = profile_dir(results, profile) / name
    cb = LiveLoss(f"{name} ({overrides.get('trunk', 'residual')})") if live else None
    return train(TrainConfig(profile=get_profile(profile).name, out_dir=out, data_dir=data_dir, callback=cb,
                             progress=progress, **overrides))


# --- screening -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Candidate:
    trunk: str
    h: float
    stream: str

    @property
    def name(self) -> str:
        return f"{self.trunk}_h{self.h:g}_{self.stream}"


def screening_candidates(profile: str = "cpu") -> list[Candidate]:
    """The baseline, then both reversible integrators at two step sizes on fp32 and at their default step on
    fp64 and fixed (`minimal` screening sets: one step size, fp32, plus one fixed-point run)."""
    out = [Candidate("residual", 1.0, "fp32")]
    if get_profile(profile).screening_set == "minimal":
        return out + [Candidate("midpoint_rev", 0.5, "fp32"), Candidate("reveuler_rev", 1.0, "fp32"),
                      Candidate("reveuler_rev", 1.0, "fixed")]
    for trunk, hs in (("midpoint_rev", (0.5, 0.25)), ("reveuler_rev", (1.0, 0.5))):
        out += [Candidate(trunk, h, "fp32") for h in hs]
        out += [Candidate(trunk, hs[0], s) for s in ("fp64", "fixed")]
    return out


def screen(profile: str, results: str | Path = "results", data_dir: str | Path = "data",
           candidates: list[Candidate] | None = None, progress: bool = True) -> dict:
    """Short runs of every candidate (the profile's screening fraction of its token budget); picks the
    reversible candidate used by the assignment runs and says why. Writes screening.json."""
    prof = get_profile(profile)
    tokens = max(prof.batch_size * prof.seq_len, int(prof.train_tokens * prof.screening_fraction))
    rows = []
    for c in candidates or screening_candidates(profile):
        s = train_run(f"screening/{c.name}", profile, results, data_dir, progress=progress,
                      trunk=c.trunk, h=c.h, stream=c.stream, train_tokens=tokens)
        rows.append({"name": c.name, "trunk": c.trunk, "h": c.h, "stream": c.stream,
                     "val_loss": s["final_val_loss"], "tokens_per_s": s["tokens_per_s"],
                     "reconstruction_error": s["reconstruction_error"], "tokens": s["tokens"]})
    chosen, reason = choose(rows)
    result = {"profile": prof.name, "tokens": tokens, "runs": rows, "chosen": chosen, "reason": reason}
    write_json(profile_dir(results, profile) / "screening.json", result)
    return result


def choose(rows: list[dict]) -> tuple[dict, str]:
    """Lowest validation loss among reversible candidates that reconstruct well; within a tie, an fp32
    stream (half the state memory of fp64 and no integer conversions), then the faster one, so the choice
    never pays for precision it does not need."""
    rev = [r for r in rows if r["trunk"].endswith("_rev")]
    ok = [r for r in rev if r["reconstruction_error"] is not None and r["reconstruction_error"] <= RECON_LIMIT]
    if not ok:
        raise ValueError("no reversible candidate reconstructed its input within "
                         f"{RECON_LIMIT}; use the fp64 or fixed stream or a smaller h")
    best = min(r["val_loss"] for r in ok)
    tied = [r for r in ok if r["val_loss"] <= best + LOSS_TIE]
    pick = max(tied, key=lambda r: (r["stream"] == "fp32", r["tokens_per_s"]))
    base = next((r for r in rows if r["trunk"] == "residual"), None)
    reason = (f"{pick['name']} reached validation loss {pick['val_loss']:.3f} "
              f"(best reversible {best:.3f}; {len(tied)} candidate(s) within {LOSS_TIE} nats), is the fastest "
              f"{'fp32-stream ' if pick['stream'] == 'fp32' else ''}one among those at {pick['tokens_per_s']:.0f} "
              f"tokens/s, and rebuilt its input with relative "
              f"error {pick['reconstruction_error']:.1e} (limit {RECON_LIMIT:g})")
    if base:
        reason += f"; the baseline reached {base['val_loss']:.3f}"
    excluded = [r["name"] for r in rev if r not in ok]
    if excluded:
        reason += f"; excluded for poor reconstruction: {', '.join(excluded)}"
    return {"trunk": pick["trunk"], "h": pick["h"], "stream": pick["stream"]}, reason


def chosen_reversible(profile: str, results: str | Path = "results") -> tuple[dict, str]:
    """The screened choice, or the default (reveuler_rev, h=1, fp32) when screening has not run."""
    path = profile_dir(results, profile) / "screening.json"
    if path.exists():
        s = json.loads(path.read_text())
        return s["chosen"], s["reason"]
    return ({"trunk": "reveuler_rev", "h": 1.0, "stream": "fp32"},
            f"no screening results in {path}: using the default reveuler_rev, h=1.0, fp32")


# --- max batch and depth under one memory budget ---------------------------------------------------------

def max_batches(profile: str, trunks: list[dict], results: str | Path = "results", device: str = "auto",
                budget_bytes: int | None = None, progress: bool = True) -> dict:
    """Max batch of each trunk under the same budget (the profile's CPU budget; on CUDA, free memory).
    Merges into maxbatch.json."""
    prof = get_profile(profile)
    dev = pick_device(device)
    if budget_bytes is None and dev.type != "cuda":
        budget_bytes = prof.cpu_mem_budget
    path = profile_dir(results, profile) / "maxbatch.json"
    out = json.loads(path.read_text()) if path.exists() else {}
    for t in trunks:
        cfg = profile_model_config(prof.name, t["trunk"], None, t.get("h"), t.get("stream", "fp32"))
        res = find_max_batch(cfg, budget_bytes, device, start=prof.batch_size, progress=progress)
        out[t["trunk"]] = res.to_dict()
        out["budget_bytes"] = res.budget_bytes
    write_json(path, out)
    return out


def deepest_fitting(profile: str, trunk: dict, batch: int, budget_bytes: int, max_layers: int,
                    device: str = "auto", results: str | Path = "results", progress: bool = True) -> MaxBatch:
    """Deepest `trunk` (up to `max_layers`) whose training step at `batch` fits `budget_bytes`, by doubling
    then bisection on the layer count, each probe a measured real step. Merged into maxbatch.json as 'deep'."""
    from tqdm.auto import tqdm

    prof = get_profile(profile)
    dev = pick_device(device)
    dtype = amp_dtype(dev, "auto")
    res = MaxBatch(trunk["trunk"], 0, budget_bytes)
    bar = tqdm(desc="deepest fitting model", disable=not progress, unit="probe")

    def fits(n_layer: int) -> bool:
        cfg = profile_model_config(prof.name, trunk["trunk"], n_layer, trunk.get("h"), trunk.get("stream", "fp32"))
        p = _fits(cfg, batch, dev, dtype, budget_bytes)
        res.probes.append(Probe(n_layer, p.peak_bytes, p.fits))  # Probe.batch holds the layer count here
        bar.update()
        return p.fits

    lo = largest_fitting(fits, prof.n_layer, max_layers)
    bar.close()
    res.batch = lo
    path = profile_dir(results, profile) / "maxbatch.json"
    out = json.loads(path.read_text()) if path.exists() else {}
    out["deep"] = {**res.to_dict(), "n_layer": lo, "batch": batch, "max_layers": max_layers}
    write_json(path, out)
    return res


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

    from ..engine.data import load
    from ..engine.train import load_model

    model = load_model(run_dir).eval()
    data = load(Path(data_dir) / get_profile(model_profile(run_dir)).data_name, model.cfg.vocab_size, verify=False)
    idx = torch.tensor([data.encode(prompt)], dtype=torch.long)
    out = model.generate(idx, n_tokens, temperature=0.8, top_k=50, generator=torch.Generator().manual_seed(seed))
    return data.decode(out[0].tolist())


def model_profile(run_dir: str | Path) -> str:
    return json.loads((Path(run_dir) / "config.json").read_text())["profile"]["name"]


def plot_runs(runs: dict[str, str | Path], title: str = "", smooth: int = 10):
    """Training loss (a `smooth`-step running mean) and validation loss against tokens, one colour per run."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    for (label, run_dir), color in zip(runs.items(), plt.rcParams["axes.prop_cycle"].by_key()["color"] * 4):
        log = read_log(run_dir)
        ax.plot(log["tokens"], log["loss"].rolling(smooth, min_periods=1).mean(), color=color, lw=1,
                label=f"{label} (train)")
        val = log.dropna(subset=["val_loss"])
        ax.plot(val["tokens"], val["val_loss"], "o--", color=color, ms=4, label=f"{label} (validation)")
    ax.set(xlabel="tokens", ylabel="loss", title=title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
