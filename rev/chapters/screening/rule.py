"""Notebook 03 (screening): the candidates, their short runs, and the rule that picks the reversible trunk the
assignment runs use (`choose`), with its verdicts, its runner-up, its figures and the measurement of why an fp64
stream can rebuild its input exactly. Writes `results/<profile>/screening.json`.

Each row keeps the median and quartiles of its run's per-step tokens/s (`rev.chapters.shared.runs.run_speed`) for
the record, but the rule never ranks by them: the candidates' runs were timed one after another
(`verdicts.TIMED_APART`). Speeds that are comparable come from `streams` (a stream against its fp32 twin, interleaved).
"""
from __future__ import annotations

import math

from dataclasses import dataclass, replace
from pathlib import Path

from ...core.model import is_reversible
from ...core.reversible import RECON_LIMIT
from ...base.files import read_json, write_json
from ...base.profiles import ProfileLike, get_profile
from ..shared.results import number
from ..shared.run_log import step_speeds
from ..shared.runs import profile_dir, run_dir_of, run_speed, train_run
from ..shared.palette import integrator_colour
from ..shared.verdicts import FALLBACK_TIE, within_tie
from .streams import stream_row, with_stream
from .sizes import chapter_sizes

# validation losses this close (nats) count as a tie: one seed each, no seed spread yet, so the stated fallback
LOSS_TIE = FALLBACK_TIE.nats


# --- screening -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Candidate:
    trunk: str
    h: float
    stream: str

    @property
    def name(self) -> str:
        return f"{self.trunk}_h{self.h:g}_{self.stream}"


def screening_candidates(profile: ProfileLike = "cpu") -> list[Candidate]:
    """The baseline, then both reversible integrators at two step sizes on fp32 and at their default step on
    fp64 and fixed (`minimal` screening sets: one step size, fp32, plus one fixed-point run), and in both sets
    `ASSIGNMENT_FINAL`, the reference assignment's final configuration."""
    out = [Candidate("residual", 1.0, "fp32")]
    if chapter_sizes(profile).candidates == "minimal":
        return out + [Candidate("midpoint_rev", 0.5, "fp32"), Candidate("reveuler_rev", 1.0, "fp32"),
                      Candidate("reveuler_rev", 1.0, "fixed"), ASSIGNMENT_FINAL]
    for trunk, hs in (("midpoint_rev", (0.5, 0.25)), ("reveuler_rev", (1.0, 0.5))):
        out += [Candidate(trunk, h, "fp32") for h in hs]
        out += [Candidate(trunk, hs[0], s) for s in ("fp64", "fixed")]
    return out + [ASSIGNMENT_FINAL]


# the configuration the reference assignment trained its final reversible model with
ASSIGNMENT_FINAL = Candidate("reveuler_rev", 0.5, "fp64")


def screening_tokens(profile: ProfileLike) -> int:
    """Tokens of one screening run: the chapter's fraction of the profile's budget, at least one batch."""
    prof = get_profile(profile)
    return max(prof.batch_size * prof.seq_len, int(prof.train_tokens * chapter_sizes(prof).fraction))


def stream_twins(candidates: list[Candidate]) -> dict[str, str]:
    """Each candidate that differs from an fp32 candidate of the set only in its stream, with that fp32 twin's
    name: the screening measures it on the twin's trained weights instead of training it."""
    names = {c.name for c in candidates}
    twins = {c.name: replace(c, stream="fp32").name for c in candidates if c.stream != "fp32"}
    return {name: twin for name, twin in twins.items() if twin in names}


def trained_row(name: str, summary: dict) -> dict:
    """The screening row of a candidate that trained its own run (`summary`): its loss, reconstruction error,
    tokens trained and the quartiles of its steps' tokens/s (kept for the record; the rule does not rank by them)."""
    speed = run_speed(summary)
    # the median step, inside its quartiles; the whole run's mean is pulled down by a few slow steps (load on
    # a shared machine) and can fall below its own lower quartile
    return {"val_loss": summary["final_val_loss"], "tokens_per_s": speed.value if speed else summary["tokens_per_s"],
            "tokens_per_s_q1": speed.lo if speed else None, "tokens_per_s_q3": speed.hi if speed else None,
            "reconstruction_error": summary["reconstruction_error"], "tokens": summary["tokens"], "weights": name,
            "loss_vs_fp32": None,
            "step_speeds": step_speeds(run_dir_of(summary)).tolist() if run_dir_of(summary) else None}


def screen(profile: ProfileLike, results: str | Path = "results", data_dir: str | Path = "data",
           candidates: list[Candidate] | None = None, progress: bool = True) -> dict:
    """Short runs of every fp32 candidate (`screening_tokens` each), and of every other candidate without an fp32
    twin in the set; a candidate that differs from a trained one only in its stream is measured on that run's
    weights (`streams.stream_row`). Picks the reversible candidate used by the assignment runs and says why.
    Writes screening.json."""
    prof = get_profile(profile)
    tokens = screening_tokens(profile)
    cands = candidates or screening_candidates(profile)
    twin_of = stream_twins(cands)
    summaries, got = {}, {}
    for c in (c for c in cands if c.name not in twin_of):   # the runs first: every paired stream needs its weights
        summaries[c.name] = train_run(f"screening/{c.name}", profile, results, data_dir, progress=progress,
                                      trunk=c.trunk, h=c.h, stream=c.stream, train_tokens=tokens)
        got[c.name] = trained_row(c.name, summaries[c.name])
    for c in (c for c in cands if c.name in twin_of):
        got[c.name] = stream_row(profile, results, data_dir, c.name, c.stream, twin_of[c.name],
                                 summaries[twin_of[c.name]])
    rows = [{"name": c.name, "trunk": c.trunk, "h": c.h, "stream": c.stream, **got[c.name]} for c in cands]
    chosen, reason = choose(rows)
    result = {"profile": prof.name, "tokens": tokens, "runs": rows, "chosen": chosen, "reason": reason}
    write_json(profile_dir(results, profile) / "screening.json", result)
    return result


def reconstructs(row: dict, recon_limit: float = RECON_LIMIT) -> bool:
    """A reversible candidate whose trained trunk rebuilt its input within `recon_limit`."""
    return is_reversible(row["trunk"]) and row["reconstruction_error"] is not None \
        and row["reconstruction_error"] <= recon_limit


def tied_with_best(ok: list[dict]) -> list[dict]:
    """The candidates within `LOSS_TIE` of the lowest validation loss: one seed cannot order them."""
    best = min(r["val_loss"] for r in ok)
    return [r for r in ok if within_tie(r["val_loss"] - best, FALLBACK_TIE)]


# the streams from the cheapest: fp32 holds half the state memory of fp64, and fixed point adds integer conversions
STREAM_COST = ("fp32", "fp64", "fixed")


def pick_of_tie(tied: list[dict]) -> dict:
    """The rule's choice among tied candidates (also `distinct_runner_up`'s): the cheapest stream, then the lower
    loss. Speed does not decide: the candidates' runs were timed one after another (`verdicts.TIMED_APART`)."""
    return min(tied, key=lambda r: (STREAM_COST.index(r["stream"]), r["val_loss"]))


def choose(rows: list[dict], recon_limit: float = RECON_LIMIT) -> tuple[dict, str]:
    """Lowest validation loss among reversible candidates that reconstruct well; within a tie, the cheapest
    stream (`STREAM_COST`), then the lower loss, so the choice never pays for precision it does not need. The
    reason is one line of the pick's numbers."""
    rev = [r for r in rows if is_reversible(r["trunk"])]
    ok = [r for r in rev if reconstructs(r, recon_limit)]
    if not ok:
        raise ValueError(f"no reversible candidate reconstructed within {recon_limit:g}: try fp64 or fixed, or a smaller h")
    tied = tied_with_best(ok)
    pick = pick_of_tie(tied)
    reason = (f"{pick['name']}: val loss {pick['val_loss']:.3f}, reconstruction error "
              f"{pick['reconstruction_error']:.1e} (limit {recon_limit:g}), {len(tied)} candidates within {LOSS_TIE} nats of the lowest loss (the screening's tie)")
    return {"trunk": pick["trunk"], "h": pick["h"], "stream": pick["stream"]}, reason


def _why(r: dict, ok: list[dict], tied: list[dict], pick: dict | None) -> str:
    """One candidate's fate under the rule, as a short label."""
    if r not in ok:
        return "no error measured" if r["reconstruction_error"] is None else "over the limit"
    if r is pick:
        return "picked"
    if r not in tied:
        return "outside the tie"
    if r.get("loss_vs_fp32") == 0 and any(x["name"] == r.get("weights") for x in tied):
        return "equals fp32 twin"   # its tied twin's weights held on another stream, the same loss: not a rival
    return "tied, costlier stream" if r["stream"] != pick["stream"] else "tied, higher loss"


def screening_verdicts(rows: list[dict], recon_limit: float = RECON_LIMIT):
    """Each reversible candidate's fate under `choose`: within the reconstruction limit, in the loss tie, picked,
    and why (a short label)."""
    import pandas as pd

    rev = [r for r in rows if is_reversible(r["trunk"])]
    ok = [r for r in rev if reconstructs(r, recon_limit)]
    tied = tied_with_best(ok) if ok else []
    pick = pick_of_tie(tied) if tied else None
    return pd.DataFrame([{"name": r["name"], "stream": r["stream"], "val_loss": r["val_loss"],
                          "reconstruction_error": r["reconstruction_error"],
                          "within_limit": r in ok, "in_tie": r in tied, "picked": r is pick,
                          "why": _why(r, ok, tied, pick)}
                         for r in rev]).set_index("name")


def chosen_reversible(profile: ProfileLike, results: str | Path = "results") -> tuple[dict, str]:
    """The screened choice, or the default (reveuler_rev, h=1, fp32) when screening has not run."""
    path = profile_dir(results, profile) / "screening.json"
    if path.exists():
        s = read_json(path)
        return s["chosen"], s["reason"]
    return ({"trunk": "reveuler_rev", "h": 1.0, "stream": "fp32"},
            f"no screening results in {path}: using the default reveuler_rev, h=1.0, fp32")


# --- figures ----------------------------------------------------------------------------------------------

def _bar_colour(row: dict) -> str:
    return integrator_colour(row["trunk"])   # the trunk's integrator, as in every figure of the book


def plot_screening_bars(rows: list[dict], recon_limit: float = RECON_LIMIT, unigram: float | None = None):
    """Validation loss and reconstruction error of each screening run: one row per candidate, the same row in both
    panels (shared y axis), each value labelled, the baseline's loss and (when given) the `unigram` loss of a model
    that ignores context drawn as lines. No speed panel: the runs were timed one after another, so their speeds
    are not comparable (`verdicts.TIMED_APART`). Dots, not bars: a loss axis zoomed to the candidates' range and a
    log axis have no zero a bar's length could be measured from. An exact 0 cannot sit on the log axis, so it is a
    hollow dot on the floor, labelled; the residual baseline has no inverse and says so."""
    import matplotlib.pyplot as plt
    import numpy as np

    y = np.arange(len(rows))
    colours = [_bar_colour(r) for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(12, 0.5 * len(rows) + 1.8), sharey=True)
    val = [r["val_loss"] for r in rows]
    axes[0].scatter(val, y, color=colours, zorder=3)
    base = next((r["val_loss"] for r in rows if r["trunk"] == "residual"), None)
    if base is not None:
        axes[0].axvline(base, color=colours[0] if rows[0]["trunk"] == "residual" else "k", ls=":", lw=1,
                        label="baseline")
    if unigram is not None:
        axes[0].axvline(unigram, color="grey", ls="--", lw=1, label=f"unigram {unigram:.3f}")
    lo, hi = min(val + [unigram or min(val)]), max(val + [unigram or max(val)])
    axes[0].set(xlabel="validation loss (axis zoomed)", xlim=(lo - 0.1 * (hi - lo + 0.01), hi + 0.3 * (hi - lo + 0.01)))
    axes[0].grid(axis="x", alpha=0.3)
    if axes[0].get_legend_handles_labels()[0]:   # above the axes: inside, it would cover a candidate's dot
        axes[0].legend(fontsize=8, loc="lower left", bbox_to_anchor=(0, 1), ncol=2, frameon=False)
    errors = [r["reconstruction_error"] for r in rows]
    positive = [e for e in errors if e]
    floor = min(positive + [recon_limit]) / 30
    for i, e in enumerate(errors):
        if e:
            axes[1].plot([e], [i], "o", color=colours[i])
        elif e == 0:
            axes[1].plot([floor], [i], "o", mfc="white", color=colours[i], clip_on=False)
    axes[1].axvline(recon_limit, color="k", ls="--", lw=1, label=f"limit {recon_limit:g}")
    axes[1].grid(axis="x", alpha=0.3)
    axes[1].set(xscale="log", xlabel="reconstruction error (log; hollow: exactly 0)",
                xlim=(floor / 1.5, recon_limit * 30))
    for i, (v, e) in enumerate(zip(val, errors)):
        axes[0].text(v, i, f"  {v:.3f}", va="center", fontsize=8)
        label = "no inverse" if e is None else "exactly 0" if e == 0 else f"{e:.1e}"
        axes[1].text(e if e else floor, i, f"  {label}", va="center", fontsize=8)
    axes[0].xaxis.set_major_locator(plt.MaxNLocator(4))  # loss differences are small: few, readable ticks
    axes[0].set_yticks(y, [r["name"] for r in rows])
    axes[0].invert_yaxis()  # first candidate on top, as in the tables
    axes[1].legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


def plot_screening_curves(runs: dict[str, str | Path], title: str = "screening runs", smooth: int = 10):
    """Training loss (a `smooth`-step running mean) and validation loss (dots) against tokens: each run in its
    integrator's colour (the book's palette), the step sizes of one integrator told apart by line style and
    marker; the legend (one entry per run) beside the axes rather than over the curves."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    from ..shared.palette import integrator_colour
    from ..shared.run_log import read_log

    styles, markers = ("-", "--", ":", "-."), ("o", "s", "^", "D")
    seen: dict[str, int] = {}   # integrator -> how many of its runs are drawn so far
    fig, ax = plt.subplots(figsize=(11, 4.5))
    handles = []
    for label, run_dir in runs.items():
        summary = Path(run_dir) / "summary.json"
        info = read_json(summary) if summary.is_file() else {}
        trunk = info.get("trunk") or label.split("_h")[0]
        k = seen.get(trunk, 0) % len(styles)   # the integrator's first run solid, its next dashed, ...
        seen[trunk] = seen.get(trunk, 0) + 1
        colour = integrator_colour(trunk)
        log = read_log(run_dir)
        ax.plot(log["tokens"], log["loss"].rolling(smooth, min_periods=1).mean(), styles[k], color=colour, lw=1.2)
        val = log.dropna(subset=["val_loss"])
        ax.plot(val["tokens"], val["val_loss"], markers[k], color=colour, ms=5, mfc="white" if k else colour)
        handles.append(Line2D([], [], color=colour, ls=styles[k], marker=markers[k], ms=5,
                              mfc="white" if k else colour, lw=1.5, label=label))
    handles += [Line2D([], [], color="k", lw=1, label=f"line: training loss ({smooth}-step mean)"),
                Line2D([], [], color="k", ls="", marker="o", ms=4, label="dots: validation loss")]
    ax.set(xlabel="tokens", ylabel="loss", title=title)
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0)
    fig.tight_layout()
    return fig


# --- why an fp64 stream can rebuild exactly -----------------------------------------------------------------

def exactness_by_block_dtype(run_dir: str | Path, data_dir: str | Path, stream: str | None = None) -> dict:
    """A trained reversible run's reconstruction error (its weights on `stream`, default the run's own) measured
    as training measures it (the blocks in the model's own dtype), and again with the same weights in float64
    (the blocks' outputs then use all 53 bits): `{"stream", "model_dtype", "n_layer", "as_trained",
    "float64_blocks"}`.

    With float32 blocks every increment an fp64 stream adds is a float32 number (24 significant bits), and
    float64 (53 bits) holds the sum of such numbers exactly while their magnitudes span less than about 2^29:
    forward then rounds nothing, and the inverse subtracts back exactly what was added."""
    import torch

    from ...core.reversible import reconstruction_error
    from ...training.loop import ensure_data
    from ...training.checkpoint import load_model
    from ..shared.runs import model_profile

    run_dir = Path(run_dir)
    model = load_model(run_dir)
    model = (with_stream(model, stream) if stream else model).eval()
    data = ensure_data(get_profile(model_profile(run_dir)), Path(data_dir), progress=False)
    # the batch `train` measures on: the first validation windows, seeded
    x, _ = data.get_batch("val", 8, model.cfg.seq_len, torch.Generator().manual_seed(7))
    dtype = next(model.parameters()).dtype
    as_trained = reconstruction_error(model, x)
    return {"stream": model.cfg.stream, "model_dtype": str(dtype).removeprefix("torch."),
            "n_layer": model.cfg.n_layer, "as_trained": as_trained,
            "float64_blocks": reconstruction_error(model.double(), x)}


def distinct_runner_up(screening: dict | None, recon_limit: float = RECON_LIMIT) -> dict | None:
    """The screening row to train as the runner-up, picked by `choose`'s own rule (the lowest validation
    loss; within `LOSS_TIE` of it the cheapest stream, then the lower loss) among the reversible candidates that
    reconstruct within `recon_limit` and differ from the chosen one in trunk or step size h. A candidate that differs
    only in its stream trains the same blocks from the same start -- the stream changes how the trunk's state is held and inverted, not the function -- so its loss at the
    full budget is the pick's to rounding, and training it (minutes on a CPU) would check nothing."""
    chosen = (screening or {}).get("chosen") or {}
    def same(r: dict) -> bool:
        return r.get("trunk") == chosen.get("trunk") and number(r.get("h")) is not None \
            and number(chosen.get("h")) is not None and math.isclose(float(r["h"]), float(chosen["h"]))
    ok = [r for r in (screening or {}).get("runs") or [] if is_reversible(r.get("trunk", "residual"))
          and number(r.get("reconstruction_error")) is not None and r["reconstruction_error"] <= recon_limit
          and number(r.get("val_loss")) is not None and not same(r)]
    if not ok:
        return None
    return pick_of_tie(tied_with_best(ok))
