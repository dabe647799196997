"""Notebook 07's exercises: the reference answers and the checks their check cells call.

07.1 predicts which run wins on loss and which on time; `race_answer` puts each prediction of the model answer
beside this run's table and says whether it held (losses against the seed tie, speeds from the interleaved bench
only: the runs were timed apart, so a prediction about their seconds is not tested). 07.2
derives, from the max-batch probes, the memory a stored trunk needs per layer per sequence; 07.3 changes one
measured number and watches which finding of the report changes with it. The conventions are those of
`rev.chapters.shared.exercises`.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Callable

import pandas as pd

from ...core.reversible import RECON_LIMIT
from .writer import findings
from .headline import bench_speed
from ..shared.results import (BASE, BASE_MAX, COLUMNS, REV, REV_DEEP, REV_MAX, REV_MAX_STREAM, loss_and_time,
                              main_reversible_trunk, main_run, maxbatch_of, read_json_or_note,
                              stored_bytes_per_layer)
from ..shared.verdicts import FASTER, SLOWER, TIMED_APART, TOO_NOISY, seed_tie, side_of_tie, speed_verdict

MAX_BATCH_RUNS = (BASE_MAX, REV_MAX, REV_MAX_STREAM)


def check_stored_bytes_per_layer(fn: Callable[[list[dict], list[dict], int], float]) -> str:
    """Exercise 07.2: `fn(base_probes, rev_probes, n_layer)` on probes made from a known memory model."""
    fixed, per_seq, per_layer, n_layer = 40e6, 3e5, 7e5, 4       # weights+optimizer, embeddings+logits, one layer

    def probes(slope: float, batches: tuple[int, ...]) -> list[dict]:
        return [{"batch": b, "peak_bytes": int(fixed + slope * b), "fits": b < 40} for b in batches]
    base = probes(per_seq + n_layer * per_layer, (8, 16, 12, 14, 15, 64))
    rev = probes(per_seq, (8, 16, 32, 64, 48, 40))
    got = fn(base, rev, n_layer)
    assert got is not None and math.isfinite(float(got)), f"expected a number of bytes, got {got!r}"
    got = float(got)
    assert not math.isclose(got, n_layer * per_layer, rel_tol=1e-3), \
        f"{got:,.0f} bytes is what all {n_layer} layers store together: spread it over the layers"
    assert not math.isclose(got, (per_seq + n_layer * per_layer) / n_layer, rel_tol=1e-3), \
        ("the residual slope alone also counts what both trunks store (embeddings, logits): subtract the "
         "reversible trunk's slope first")
    assert not math.isclose(got, -per_layer, rel_tol=1e-3), "the sign is flipped: residual slope minus reversible"
    assert math.isclose(got, per_layer, rel_tol=1e-3), \
        (f"expected {per_layer:,.0f} bytes per layer per sequence from these probes, got {got:,.0f}: take the "
         f"slope of peak_bytes against batch (every probe with a peak), for each trunk")
    return f"{got:,.0f} bytes per layer per sequence, as the memory model behind the probes says."


def stored_trunk_markdown(df: pd.DataFrame, maxbatch: dict | None = None) -> str:
    """Markdown: exercise 07.2 on this profile's max-batch probes, with `results.stored_bytes_per_layer`, and what
    that is per token and per model dimension."""
    mb = maxbatch_of(df, maxbatch) or {}
    base, trunk = main_run(df, BASE), main_reversible_trunk(df, mb)
    searches = mb.get("residual"), mb.get(trunk) if trunk else None
    if base is None or not all(isinstance(s, dict) for s in searches):
        return "Needs run 1 and the max-batch searches of notebook 06 (maxbatch.json)."
    n_layer = int(base["n_layer"])
    per_layer = stored_bytes_per_layer(searches[0].get("probes"), searches[1].get("probes"), n_layer)
    if per_layer is None:
        return "The max-batch searches measured too few batches to take a slope."
    model = (read_json_or_note(Path(base["path"]) / "config.json", []) or {}).get("model", {})
    text = (f"From the probes of `residual` and `{trunk}` with {n_layer} layers: about **{per_layer:,.0f} bytes per "
            f"layer per sequence** that the residual trunk keeps for its backward and the reversible one does not.")
    if model.get("seq_len") and model.get("d_model"):
        per_token = per_layer / model["seq_len"]
        text += (f" Per token (sequence length {model['seq_len']}) that is {per_token:,.0f} bytes, or "
                 f"{per_token / model['d_model']:.1f} bytes per model dimension ({model['d_model']}): at 4 bytes a "
                 f"float32 value, about {per_token / model['d_model'] / 4:.0f} stored values per token per layer "
                 f"for every dimension of the model.")
    return text


def with_reconstruction_error(df: pd.DataFrame, err: float) -> pd.DataFrame:
    """A copy of the runs in which every trained reversible trunk rebuilt its input with relative error `err`."""
    out = df.copy()
    rev = pd.to_numeric(out["reconstruction_error"], errors="coerce").notna()
    out.loc[rev, "reconstruction_error"] = err
    return out


def changed_findings(df: pd.DataFrame, edit: Callable[[pd.DataFrame], pd.DataFrame]) -> tuple[list[str], list[str]]:
    """(findings that `edit` removed, findings it added): which sentences of the report depend on the edit."""
    before, after = findings(df), findings(edit(df))
    return [s for s in before if s not in after], [s for s in after if s not in before]


def _two_runs() -> pd.DataFrame:
    """A baseline and a reversible run at the same batch, with numbers of the smoke profile's size."""
    rows = [{"run": BASE, "label": "baseline", "trunk": "residual", "stream": "fp32", "batch_size": 8, "n_layer": 2,
             "peak_memory_bytes": 9e6, "tokens_per_s": 4e4},
            {"run": REV, "label": "reversible", "trunk": "reveuler_rev", "stream": "fp32", "batch_size": 8,
             "n_layer": 2, "peak_memory_bytes": 5e6, "tokens_per_s": 3.6e4, "reconstruction_error": 4e-6}]
    df = pd.DataFrame(rows, columns=COLUMNS).assign(screening=False, chosen=False, path="")
    df.attrs.update(profile="example", results_dir="", maxbatch=None, screening=None, missing=[])
    return df


def check_with_reconstruction_error(fn: Callable[[pd.DataFrame, float], pd.DataFrame]) -> str:
    """Exercise 07.3: `fn(df, err)` must return an edited copy that turns the reconstruction finding around."""
    df = _two_runs()
    broken = fn(df, 50 * RECON_LIMIT)
    assert isinstance(broken, pd.DataFrame), f"return the edited frame, not {type(broken).__name__}"
    assert broken is not df and df.loc[1, "reconstruction_error"] == 4e-6, \
        "the frame passed in was changed: edit a copy (`df.copy()`), the report reads the original again"
    assert pd.isna(broken.loc[0, "reconstruction_error"]), \
        "the residual baseline has no inverse, so no reconstruction error: set it only where one was measured"
    text = "\n".join(findings(broken))
    assert f"ABOVE the {RECON_LIMIT:g}" in text, \
        f"the findings still do not see an error of {50 * RECON_LIMIT:g}; set the `reconstruction_error` column"
    assert "well below" in "\n".join(findings(fn(df, RECON_LIMIT / 1e4))), "a tiny error should read 'well below'"
    return "The reconstruction finding turns from 'well below' to 'ABOVE' the limit, the input frame untouched."


# -------------------------------------------------------------------------------------------------------------
# Exercise 07.1: the predictions against this run's table
# -------------------------------------------------------------------------------------------------------------

def _held(ok: bool) -> str:
    return "**held**" if ok else "**did not hold**"


def _deep_lowest(race: pd.DataFrame, tie) -> str | None:
    """Prediction: the deep reversible model ends lowest per token (against `tie`, a `verdicts.Tie`)."""
    loss = race.dropna(subset=["val_loss"])
    if REV_DEEP not in set(loss["run"]) or not len(loss):
        return None
    low, deep = loss.iloc[0], loss.set_index("run").loc[REV_DEEP]
    if low["run"] == REV_DEEP:
        return f"The deep run ends lowest per token: {_held(True)} ({deep['val_loss']:.3f})."
    gap = deep["val_loss"] - low["val_loss"]
    said = (f", within the tie margin ({tie.text()}): a tie on one seed, not a clear loss"
            if side_of_tie(gap, tie) == 0 else ": more layers did not pay on this token budget")
    return (f"The deep run ends lowest per token: {_held(False)}. At {low['tokens']:,.0f} tokens the lowest is "
            f"{low['label']} ({low['val_loss']:.3f}); the deep run ended at {deep['val_loss']:.3f}, {gap:+.3f}{said}.")


def _max_batch_higher(race: pd.DataFrame) -> str | None:
    """Prediction: at a fixed token budget fewer, larger steps end higher, and more, smaller ones lower: each run at
    its max batch against the same trunk at the profile's batch, both read at the token count of `race`. A max batch
    can be the smaller of the two (a stored trunk under a tight budget), and then the prediction is "lower"."""
    at = race.set_index("run")
    pairs = [(at.loc[m], at.loc[s]) for m, s in ((BASE_MAX, BASE), (REV_MAX, REV)) if m in at.index and s in at.index]
    if not pairs:
        return None
    parts, held = [], []
    for m, s in pairs:
        if pd.isna(m["val_loss"]) or pd.isna(s["val_loss"]):
            parts.append(f"{m['label']}: no evaluation by then, not compared")
            continue
        larger = m["batch"] > s["batch"]
        higher = float(m["val_loss"]) > float(s["val_loss"])
        held.append(higher == larger)
        parts.append(f"{m['label']} at batch {m['batch']} ({'larger' if larger else 'smaller'} than {s['batch']}, so "
                     f"predicted {'higher' if larger else 'lower'}) {m['val_loss']:.3f} against {s['label']} "
                     f"{s['val_loss']:.3f}, {'higher' if higher else 'lower'}")
    verdict = _held(all(held)) if held else "**not measured**"
    return (f"At {int(race['tokens'].iloc[0]):,} tokens a run at its max batch is higher than the same trunk at the "
            f"profile's batch when its batch is larger, lower when it is smaller: {verdict} (" + "; ".join(parts) + ").")


def _max_batch_fastest(race: pd.DataFrame) -> str | None:
    """Prediction: a max-batch run spends the fewest seconds on its tokens. Its seconds come from runs timed one
    after another, so the prediction is not tested here: the table's seconds are shown, the verdict is
    `verdicts.TIMED_APART`."""
    time = race.dropna(subset=["train_seconds"]).sort_values("train_seconds")
    if len(time) < 2:
        return None
    fast, second = time.iloc[0], time.iloc[1]
    return (f"A max-batch run takes the fewest seconds for {int(fast['tokens']):,} tokens: **not tested**, the runs' "
            f"speeds are {TIMED_APART} (their table reads {fast['label']} {fast['train_seconds']:.1f} s, then "
            f"{second['label']} {second['train_seconds']:.1f} s, each at its own median step under whatever load "
            f"its minutes saw).")


def _reversible_slower(df: pd.DataFrame) -> str | None:
    """Prediction: at the same batch the reversible step is slower than the baseline's (recomputation), read from
    notebook 05's interleaved bench (`headline.bench_speed`), the only timing that compares trunks."""
    s = bench_speed(df.attrs.get("bench"), main_run(df, REV))
    if s is None:
        return (f"At the same batch the reversible run is slower than the baseline: **not tested**, no interleaved "
                f"bench at run 2's batch, and the runs are {TIMED_APART}.")
    verdict = speed_verdict(s)
    said = {TOO_NOISY: f"{TOO_NOISY} ({s.text()})", SLOWER: _held(True) + f" ({s.text()})",
            FASTER: _held(False) + f": it ran faster ({s.text()}) in rounds that shared their load, so something "
                    f"other than arithmetic set the step time on this machine"}[verdict]
    return f"At the same batch the reversible step is slower than the baseline's (notebook 05's bench): {said}."


def race_answer(df: pd.DataFrame) -> str:
    """Markdown for exercise 07.1: each prediction of the model answer beside this run's measurement, and whether
    it held; a prediction whose runs are missing is left out."""
    race = loss_and_time(df)
    lines = [s for s in (_deep_lowest(race, seed_tie(df.attrs.get("seeds"))), _max_batch_higher(race),
                         _max_batch_fastest(race), _reversible_slower(df)) if s]
    if not lines:
        return "Not enough finished main runs to check the predictions yet."
    return "**The predictions against this run's table:**\n\n" + "\n".join(f"- {s}" for s in lines)
