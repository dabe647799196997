"""Notebooks 03-06 (screening, runs 1 to 4): the integrator screening, the workbook's main runs, the max-batch
and depth searches, and what the notebooks show of them (a live loss plot, tables, figures, takeaways). Each
run notebook is narration around a few calls into this module.

Layout under `results/<profile>/`:
  screening/<trunk>_h<h>_<stream>/, screening.json
  one folder per main run (`rev.engine.profiles.MAIN_RUNS`: run1_baseline ... run4_reversible_deep), maxbatch.json
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

from ..core.reversible import RECON_LIMIT
from ..engine.device import pick_device
from ..engine.files import read_json, write_json
from ..engine.maxbatch import (MaxDepth, cuda_budget, find_max_batch, find_max_depth, measure_memory_line,
                               profile_model_config)
from ..core.loss import LOSS_HEADS
from ..engine.profiles import EXTRA_RUNS, MAIN_RUNS, get_profile, max_batch_tokens
from ..engine.train import TrainConfig, train
from .results import deep_capped, loss_head_finding, read_log, stream_reliability

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
    """Train the workbook run `name` (or any name, e.g. a screening run) into results/<profile>/<name>.

    Safe to run again (`resume="auto"`): a finished run with the same settings is reused, one interrupted by
    a disconnect continues from its checkpoint with the very numbers an uninterrupted run would have."""
    out = profile_dir(results, profile) / name
    cb = LiveLoss(f"{name} ({overrides.get('trunk', 'residual')})") if live else None
    overrides.setdefault("resume", "auto")
    return train(TrainConfig(profile=get_profile(profile).name, out_dir=out, data_dir=data_dir, callback=cb,
                             progress=progress, **overrides))


def main_run_dirs(results: str | Path, profile: str, names: list[str]) -> dict[str, Path]:
    """{legend label: folder} of main runs (`MAIN_RUNS`, `EXTRA_RUNS`), ready for `plot_runs`."""
    return {(MAIN_RUNS | EXTRA_RUNS)[n].label: profile_dir(results, profile) / n for n in names}


def load_or_train_baseline(profile: str, results: str | Path = "results", data_dir: str | Path = "data",
                           seed: int = 0) -> dict:
    """Run 1's summary: notebook 04's run reused, or trained (or finished) now when it is missing or was
    interrupted (a notebook opened on its own)."""
    return train_run("run1_baseline", profile, results, data_dir, trunk="residual", seed=seed)


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
    fp64 and fixed (`minimal` screening sets: one step size, fp32, plus one fixed-point run), and in both sets
    `ASSIGNMENT_FINAL`, the reference assignment's final configuration."""
    out = [Candidate("residual", 1.0, "fp32")]
    if get_profile(profile).screening_set == "minimal":
        return out + [Candidate("midpoint_rev", 0.5, "fp32"), Candidate("reveuler_rev", 1.0, "fp32"),
                      Candidate("reveuler_rev", 1.0, "fixed"), ASSIGNMENT_FINAL]
    for trunk, hs in (("midpoint_rev", (0.5, 0.25)), ("reveuler_rev", (1.0, 0.5))):
        out += [Candidate(trunk, h, "fp32") for h in hs]
        out += [Candidate(trunk, hs[0], s) for s in ("fp64", "fixed")]
    return out + [ASSIGNMENT_FINAL]


# the configuration the reference assignment trained its final reversible model with
ASSIGNMENT_FINAL = Candidate("reveuler_rev", 0.5, "fp64")


def screening_tokens(profile: str) -> int:
    """Tokens of one screening run: the profile's screening fraction of its budget, at least one batch."""
    prof = get_profile(profile)
    return max(prof.batch_size * prof.seq_len, int(prof.train_tokens * prof.screening_fraction))


def screen(profile: str, results: str | Path = "results", data_dir: str | Path = "data",
           candidates: list[Candidate] | None = None, progress: bool = True) -> dict:
    """Short runs of every candidate (`screening_tokens` each); picks the reversible candidate used by the
    assignment runs and says why. Writes screening.json."""
    prof = get_profile(profile)
    tokens = screening_tokens(profile)
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


def reconstructs(row: dict, recon_limit: float = RECON_LIMIT) -> bool:
    """A reversible candidate whose trained trunk rebuilt its input within `recon_limit`."""
    return row["trunk"].endswith("_rev") and row["reconstruction_error"] is not None \
        and row["reconstruction_error"] <= recon_limit


def _tied(ok: list[dict]) -> list[dict]:
    best = min(r["val_loss"] for r in ok)
    return [r for r in ok if r["val_loss"] <= best + LOSS_TIE]


def _pick(tied: list[dict]) -> dict:
    # an fp32 stream first (half the state memory of fp64, no integer conversions), then the faster one
    return max(tied, key=lambda r: (r["stream"] == "fp32", r["tokens_per_s"]))


def choose(rows: list[dict], recon_limit: float = RECON_LIMIT) -> tuple[dict, str]:
    """Lowest validation loss among reversible candidates that reconstruct well; within a tie, an fp32
    stream (half the state memory of fp64 and no integer conversions), then the faster one, so the choice
    never pays for precision it does not need."""
    rev = [r for r in rows if r["trunk"].endswith("_rev")]
    ok = [r for r in rev if reconstructs(r, recon_limit)]
    if not ok:
        raise ValueError("no reversible candidate reconstructed its input within "
                         f"{recon_limit}; use the fp64 or fixed stream or a smaller h")
    tied = _tied(ok)
    best = min(r["val_loss"] for r in ok)
    pick = _pick(tied)
    base = next((r for r in rows if r["trunk"] == "residual"), None)
    reason = (f"{pick['name']} reached validation loss {pick['val_loss']:.3f} "
              f"(best reversible {best:.3f}; {len(tied)} candidate(s) within {LOSS_TIE} nats), is the fastest "
              f"{'fp32-stream ' if pick['stream'] == 'fp32' else ''}one among those at {pick['tokens_per_s']:.0f} "
              f"tokens/s, and rebuilt its input with relative "
              f"error {pick['reconstruction_error']:.1e} (limit {recon_limit:g})")
    if base:
        reason += f"; the baseline reached {base['val_loss']:.3f}"
    excluded = [r["name"] for r in rev if r not in ok]
    if excluded:
        reason += f"; excluded for poor reconstruction: {', '.join(excluded)}"
    return {"trunk": pick["trunk"], "h": pick["h"], "stream": pick["stream"]}, reason


def screening_verdicts(rows: list[dict], recon_limit: float = RECON_LIMIT):
    """Each reversible candidate's fate under `choose`: within the reconstruction limit, in the loss tie,
    picked."""
    import pandas as pd

    rev = [r for r in rows if r["trunk"].endswith("_rev")]
    ok = [r for r in rev if reconstructs(r, recon_limit)]
    tied = _tied(ok) if ok else []
    pick = _pick(tied)["name"] if tied else None
    return pd.DataFrame([{"name": r["name"], "stream": r["stream"], "val_loss": r["val_loss"],
                          "reconstruction_error": r["reconstruction_error"],
                          "within_limit": r in ok, "in_tie": r in tied, "picked": r["name"] == pick}
                         for r in rev]).set_index("name")


def screening_rule(profile: str) -> str:
    """The screening's rule in words (Markdown), with the profile's numbers: what `choose` does."""
    prof = get_profile(profile)
    return (f"Each candidate trains on {screening_tokens(profile):,} tokens ({prof.screening_fraction:.0%} of the "
            f"{prof.train_tokens:,}-token budget). Among the reversible candidates whose trained trunk rebuilds its "
            f"input to a relative error of at most `RECON_LIMIT` = {RECON_LIMIT:g}, the lowest validation loss "
            f"wins; candidates within `LOSS_TIE` = {LOSS_TIE} nats of it count as tied, and among those an fp32 "
            f"stream goes first, then the faster one. The rule sees {prof.screening_fraction:.0%} of the budget: a "
            f"candidate that learns more slowly early but ends lower (or fits a larger batch) is invisible to it, "
            f"which notebook 07 checks against the runner-up trained on the full budget.")


def runner_up(rows: list[dict], recon_limit: float = RECON_LIMIT) -> dict | None:
    """The second reversible candidate under the rule: the lowest validation loss among those that reconstruct
    within `recon_limit`, other than `choose`'s pick (None when there is no other)."""
    ok = [r for r in rows if reconstructs(r, recon_limit)]
    if len(ok) < 2:
        return None
    pick = _pick(_tied(ok))
    return min((r for r in ok if r is not pick), key=lambda r: r["val_loss"])


def train_runner_up(profile: str, results: str | Path = "results", data_dir: str | Path = "data", seed: int = 0,
                    live: bool = False) -> dict | None:
    """The screening's runner-up trained like run 2 (the profile's batch and token budget), so the choice can
    be checked at the full budget; None when the screening has not run or had no runner-up."""
    path = profile_dir(results, profile) / "screening.json"
    second = runner_up(read_json(path)["runs"]) if path.exists() else None
    if second is None:
        return None
    return train_run(RUNNER_UP, profile, results, data_dir, live=live, seed=seed, trunk=second["trunk"],
                     h=second["h"], stream=second["stream"])


def chosen_reversible(profile: str, results: str | Path = "results") -> tuple[dict, str]:
    """The screened choice, or the default (reveuler_rev, h=1, fp32) when screening has not run."""
    path = profile_dir(results, profile) / "screening.json"
    if path.exists():
        s = read_json(path)
        return s["chosen"], s["reason"]
    return ({"trunk": "reveuler_rev", "h": 1.0, "stream": "fp32"},
            f"no screening results in {path}: using the default reveuler_rev, h=1.0, fp32")


# --- max batch and depth under one memory budget ---------------------------------------------------------

def _merge_maxbatch(profile: str, results: str | Path, entries: dict) -> dict:
    path = profile_dir(results, profile) / "maxbatch.json"
    out = (read_json(path) if path.exists() else {}) | entries
    write_json(path, out)
    return out


def memory_budget(profile: str, device: str = "auto") -> int:
    """The byte budget the max-batch searches use: the profile's CPU budget, or on CUDA 90% of what is free."""
    dev = pick_device(device)
    return cuda_budget(dev) if dev.type == "cuda" else get_profile(profile).cpu_mem_budget


def predict_max_batches(profile: str, trunks: list[dict], budget_bytes: int, device: str = "auto"):
    """Before any search: each trunk's step peak measured at two batches (a quarter of the profile's batch and
    the batch itself), the straight line through them, and the max batch that line predicts."""
    import pandas as pd

    prof = get_profile(profile)
    b1, b2 = max(1, prof.batch_size // 4), prof.batch_size
    rows = {}
    for t in trunks:
        cfg = profile_model_config(prof.name, t["trunk"], None, t.get("h"), t.get("stream", "fp32"))
        line = measure_memory_line(cfg, b1, b2, device)
        rows[t["trunk"]] = {"static_MiB": line.static_bytes / 2**20, "MiB_per_sequence": line.bytes_per_sequence / 2**20,
                            "predicted_max_batch": line.max_batch(budget_bytes)}
    return pd.DataFrame(rows).T


def max_batch_table(predicted, mb: dict):
    """The searches beside the lines' predictions: max batch predicted and found, and the memory per sequence
    from the two largest fitting probes of each search (where activations dominate most)."""
    import pandas as pd

    per_seq = lambda r: math.nan if r.get("bytes_per_sequence") is None else r["bytes_per_sequence"] / 2**20  # noqa: E731
    return pd.DataFrame({t: {"predicted_max_batch": predicted.loc[t, "predicted_max_batch"], "found": mb[t]["batch"],
                             "MiB_per_sequence (line)": predicted.loc[t, "MiB_per_sequence"],
                             "MiB_per_sequence (search)": per_seq(mb[t])} for t in predicted.index}).T


def search_max_batches(profile: str, trunks: list[dict], results: str | Path = "results", device: str = "auto",
                       budget_bytes: int | None = None, progress: bool = True) -> dict:
    """Search the max batch of each trunk under the same budget (default `memory_budget`). Merges into
    maxbatch.json, keyed by trunk (or by `search_key` for a trunk on its other stream), and returns its
    contents."""
    prof = get_profile(profile)
    budget_bytes = memory_budget(profile, device) if budget_bytes is None else budget_bytes
    found = {}
    for t in trunks:
        cfg = profile_model_config(prof.name, t["trunk"], None, t.get("h"), t.get("stream", "fp32"))
        res = find_max_batch(cfg, budget_bytes, device, start=prof.batch_size, progress=progress)
        found[t.get("key", t["trunk"])] = res.to_dict() | {"stream": cfg.stream}
        found["budget_bytes"] = res.budget_bytes
    return _merge_maxbatch(profile, results, found)


# --- run 3b: the same trunk on the other stream ------------------------------------------------------------

RUN3B, RUNNER_UP = EXTRA_RUNS


def other_stream(chosen: dict) -> dict:
    """The chosen trunk on the stream run 3b compares it with: fp64 when it runs on fp32, else fp32; `key`
    names its max-batch search (the chosen trunk's own search is keyed by the trunk alone)."""
    stream = "fp64" if chosen.get("stream", "fp32") == "fp32" else "fp32"
    return {"trunk": chosen["trunk"], "h": chosen["h"], "stream": stream, "key": search_key(chosen["trunk"], stream)}


def search_key(trunk: str, stream: str) -> str:
    return f"{trunk}_{stream}"


def train_kwargs(trunk: dict) -> dict:
    """A trunk dict (`chosen`, `other_stream(...)`) as `train_run` keyword arguments."""
    return {k: trunk[k] for k in ("trunk", "h", "stream") if k in trunk}


def max_batch_budget_tokens(profile: str, batches: list[int]) -> tuple[int, str]:
    """The token budget of the max-batch runs (`rev.engine.profiles.max_batch_tokens`) and a line saying how it
    was set: each run's optimizer steps at that budget."""
    prof = get_profile(profile)
    tokens = max_batch_tokens(profile, batches)
    steps = ", ".join(f"batch {b}: {tokens // (b * prof.seq_len)} steps" for b in sorted(set(batches)))
    why = (f"raised from {prof.train_tokens:,} so the largest batch still takes {prof.max_batch_min_steps} steps"
           if tokens > prof.train_tokens else "the profile's budget")
    return tokens, f"{tokens:,} tokens for every max-batch run ({why}); {steps}"


# --- the loss-head ablation -----------------------------------------------------------------------------------

LOSS_HEADS_FILE = "loss_heads.json"


def loss_head_ablation(profile: str, trunks: list[dict], results: str | Path = "results", device: str = "auto",
                       budget_bytes: int | None = None, progress: bool = True) -> dict:
    """Max batch of each trunk with each loss head (`rev.core.loss.LOSS_HEADS`) under one budget. The default
    (fused) head's searches are reused from maxbatch.json when they ran under the same budget. Writes
    loss_heads.json: {"budget_bytes", "rows": [{"trunk", "loss_head", "batch"}]}."""
    prof = get_profile(profile)
    budget_bytes = memory_budget(profile, device) if budget_bytes is None else budget_bytes
    path = profile_dir(results, profile) / "maxbatch.json"
    done = read_json(path) if path.exists() else {}
    rows = []
    for t in trunks:
        cfg = profile_model_config(prof.name, t["trunk"], None, t.get("h"), t.get("stream", "fp32"))
        for head in LOSS_HEADS:
            old = done.get(t["trunk"]) if head == cfg.loss_head else None
            if old and old.get("budget_bytes") == budget_bytes and old.get("stream", "fp32") == cfg.stream:
                batch = old["batch"]
            else:
                batch = find_max_batch(dataclasses.replace(cfg, loss_head=head), budget_bytes, device,
                                       start=prof.batch_size, progress=progress).batch
            rows.append({"trunk": t["trunk"], "loss_head": head, "batch": batch})
    out = {"budget_bytes": budget_bytes, "rows": rows}
    write_json(profile_dir(results, profile) / LOSS_HEADS_FILE, out)
    return out


def search_max_depth(profile: str, trunk: dict, batch: int, budget_bytes: int, max_layers: int,
                     device: str = "auto", results: str | Path = "results", progress: bool = True) -> MaxDepth:
    """Deepest `trunk` (up to `max_layers`) whose training step at `batch` fits `budget_bytes`, each probe a
    measured real step. Merged into maxbatch.json as 'deep'."""
    cfg = profile_model_config(get_profile(profile).name, trunk["trunk"], None, trunk.get("h"),
                               trunk.get("stream", "fp32"))
    res = find_max_depth(cfg, batch, budget_bytes, max_layers, device, progress=progress)
    _merge_maxbatch(profile, results, {"deep": res.to_dict()})
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


def plot_screening(rows: list[dict]):
    """Validation loss, speed and reconstruction error of each screening run, one bar each (the fixed stream's
    error of exactly 0 has no bar on the log axis)."""
    import matplotlib.pyplot as plt

    names = [r["name"] for r in rows]
    colors = ["tab:gray" if r["trunk"] == "residual" else ("tab:blue" if r["trunk"].startswith("midpoint")
                                                           else "tab:orange") for r in rows]
    val = [r["val_loss"] for r in rows]
    recon = [r["reconstruction_error"] if r["reconstruction_error"] else float("nan") for r in rows]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    axes[0].barh(names, val, color=colors)
    axes[0].set(xlabel="validation loss", xlim=(min(val) * 0.97, max(val) * 1.01))
    axes[1].barh(names, [r["tokens_per_s"] for r in rows], color=colors)
    axes[1].set(xlabel="tokens / s")
    axes[2].barh(names, recon, color=colors)
    axes[2].axvline(RECON_LIMIT, color="k", ls="--", lw=1, label=f"limit {RECON_LIMIT:g}")
    axes[2].set(xscale="log", xlabel="relative reconstruction error (log)")
    axes[2].legend(fontsize=8)
    for ax in axes[1:]:
        ax.set_yticklabels([])
    fig.tight_layout()
    return fig


def plot_memory_speed(summaries: dict[str, dict]):
    """Peak step memory and tokens/s of runs side by side ({label: summary})."""
    import matplotlib.pyplot as plt

    colors = ["tab:gray", "tab:orange", "tab:blue", "tab:green"][:len(summaries)]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    axes[0].bar(list(summaries), [s["peak_memory_bytes"] / 2**20 for s in summaries.values()], color=colors)
    axes[0].set(ylabel="peak MiB of a training step")
    axes[1].bar(list(summaries), [s["tokens_per_s"] for s in summaries.values()], color=colors)
    axes[1].set(ylabel="tokens / s")
    fig.tight_layout()
    return fig


# --- takeaways: Markdown computed from the results --------------------------------------------------------

def _bullets(lines: list[str]) -> str:
    return "\n".join(f"- {line}" for line in lines)


def screening_takeaways(result: dict) -> str:
    rows, chosen = result["runs"], result["chosen"]
    base = next(r for r in rows if r["trunk"] == "residual")
    rev = [r for r in rows if r["trunk"] != "residual"]
    best = min(rev, key=lambda r: r["val_loss"])
    fixed = [r for r in rev if r["stream"] == "fixed"]
    exact = sum(r["reconstruction_error"] == 0 for r in fixed)
    over = [r["name"] for r in rev if not reconstructs(r)]
    return _bullets([
        f"Best reversible candidate: `{best['name']}` at {best['val_loss']:.3f} vs the baseline's "
        f"{base['val_loss']:.3f} ({best['val_loss'] - base['val_loss']:+.3f} nats) after {result['tokens']:,} tokens.",
        f"Fixed-point streams rebuilt their input exactly in {exact} of {len(fixed)} runs; "
        + (f"over the {RECON_LIMIT:g} limit: {', '.join(over)}." if over else
           f"every candidate stayed within the {RECON_LIMIT:g} reconstruction limit."),
        f"The assignment runs use `{chosen['trunk']}` with h={chosen['h']:g} on an {chosen['stream']} stream.",
    ])


def baseline_takeaways(run1: dict) -> str:
    uniform, unigram = loss_levels(run1).values()
    return _bullets([
        f"The baseline reached validation loss {run1['final_val_loss']:.3f} after {run1['tokens']:,} tokens "
        f"({run1['steps']} steps of {run1['batch_size']} x {run1['model_config']['seq_len']} tokens).",
        f"An untrained model scores the uniform guess ln V = {uniform:.2f}; the baseline ended "
        f"{unigram - run1['final_val_loss']:+.3f} nats below the context-free line ({unigram:.3f}): positive "
        f"means it uses context.",
        f"One training step at batch {run1['batch_size']} peaked at {run1['peak_memory_bytes'] / 2**20:.1f} MiB; "
        f"it trained at {run1['tokens_per_s']:,.0f} tokens/s.",
    ])


def same_batch_takeaways(run1: dict, run2: dict) -> str:
    mem = run2["peak_memory_bytes"] / run1["peak_memory_bytes"]
    speed = run2["tokens_per_s"] / run1["tokens_per_s"]
    return _bullets([
        f"At batch {run2['batch_size']} the reversible trunk peaked at {mem:.2f}x the baseline's memory "
        f"({run2['peak_memory_bytes'] / 2**20:.1f} vs {run1['peak_memory_bytes'] / 2**20:.1f} MiB).",
        f"It trained at {speed:.2f}x the baseline's speed ({run2['tokens_per_s']:,.0f} vs "
        f"{run1['tokens_per_s']:,.0f} tokens/s).",
        f"Validation loss {run2['final_val_loss']:.3f} vs {run1['final_val_loss']:.3f} "
        f"({run2['final_val_loss'] - run1['final_val_loss']:+.3f} nats) at equal tokens.",
        f"The trained trunk rebuilds its input with relative error {run2['reconstruction_error']:.1e} "
        f"(limit {RECON_LIMIT:g}).",
    ])


def max_batch_takeaways(mb: dict, chosen: dict, runs: dict[str, dict], deep: MaxDepth,
                        ablation: dict | None = None) -> str:
    """`runs`: the summaries of run1_baseline, run1b_baseline_maxbatch, run3_reversible_max_batch and
    run4_reversible_deep (and run 3b, `RUN3B`, when it ran), by name; `ablation`: `loss_head_ablation`'s result."""
    b_base, b_rev = mb["residual"]["batch"], mb[chosen["trunk"]]["batch"]
    run1, run1b = runs["run1_baseline"], runs["run1b_baseline_maxbatch"]
    run3, run4 = runs["run3_reversible_max_batch"], runs["run4_reversible_deep"]
    unigram = f"; a context-free model scores {run3['unigram_val_loss']:.3f}" if run3.get("unigram_val_loss") else ""
    capped = " (the search's cap, not the memory limit)" if deep_capped(deep.to_dict()) else ""
    lines = [
        f"Under {mb['budget_bytes'] / 2**20:.0f} MiB the reversible trunk fits batch {b_rev} against the "
        f"baseline's {b_base}: {b_rev / b_base:.2f}x.",
        f"At their max batches: validation loss {run3['final_val_loss']:.3f} (reversible) vs "
        f"{run1b['final_val_loss']:.3f} (baseline); {run3['tokens_per_s']:,.0f} vs {run1b['tokens_per_s']:,.0f} "
        f"tokens/s. The same tokens took {run3['steps']} vs {run1b['steps']} optimizer steps{unigram}.",
    ]
    run3b = runs.get(RUN3B)
    if run3b:
        ok, why = stream_reliability(run3b["stream"], run3b["reconstruction_error"])
        ok3, why3 = stream_reliability(run3["stream"], run3["reconstruction_error"])
        lines.append(f"Run 3b, the same trunk on {run3b['stream']} at its own max batch {run3b['batch_size']}: "
                     f"validation loss {run3b['final_val_loss']:.3f}, {run3b['tokens_per_s']:,.0f} tokens/s "
                     f"({run3b['tokens_per_s'] / run3['tokens_per_s']:.2f}x run 3 on {run3['stream']}); run 3b is "
                     f"{why}; run 3 is {why3}.")
    lines.append(f"Spending the memory on depth: {deep.n_layer} reversible layers{capped} in the baseline's memory at "
                 f"batch {deep.batch} reached {run4['final_val_loss']:.3f} vs the baseline's "
                 f"{run1['final_val_loss']:.3f} at equal tokens.")
    if loss_head_finding(ablation):
        lines.append(loss_head_finding(ablation))
    return _bullets(lines)
