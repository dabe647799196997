"""Notebook 07 (and 03-06, `rev.chapters.report.writer`, `rev.chapters.shared.figures`): reading what the runs of a profile left behind.

Reads ``results/<profile>/`` as the training notebooks leave it:

    screening/<trunk>_h<h>_<stream>/   short runs of the integrator screening
    screening.json                     the screening's rows, the chosen trunk and why
    run1_baseline/ run1b_baseline_maxbatch/ run2_reversible_same_batch/ run3_reversible_max_batch/
    run4_reversible_deep/              the main runs (`MAIN_RUNS`; each: config.json, log.csv, summary.json, ckpt.pt)
    run3b_reversible_max_batch_stream/ run2b_screening_runner_up/
                                       run 3b and the screening's runner-up (`EXTRA_RUNS`: shown when present)
    maxbatch.json                      the max-batch searches under one memory budget
    loss_heads.json                    the loss-head ablation: max batch per trunk and loss head

into one frame per profile (`load_runs`, `load_all`), and derives the numbers the report quotes from it: the
headline comparisons, validation loss at equal tokens, the max batches found. Any run may be missing: every
function uses what is there. The published reference figures (`published_reference`) are the only numbers
here that were not measured, and they are labelled as such wherever they appear.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...base.files import read_json
from ...core.reversible import RECON_LIMIT
from .main_runs import EXTRA_RUNS, MAIN_RUNS
from ...base.results_folder import MERGED_LOG
from .record import RunRecord, equal_tokens
from .run_log import number, read_log, speed_spread, val_loss_after_steps, val_loss_at
from ...base.units import MIB

BASE, BASE_MAX, REV, REV_MAX, REV_DEEP = MAIN_RUNS
REV_MAX_STREAM, RUNNER_UP = EXTRA_RUNS
SEEDS_FILE = "seeds.json"   # notebook 05's seed spread of runs 1 and 2 (`rev.chapters.assignment.seeds`)
BENCH_FILE = "same_batch_bench.json"   # notebook 05's interleaved bench at run 2's batch (`assignment.arms`)
LOSS_HEADS_FILE = "loss_heads.json"
HEAD_LIMIT = 1.1   # the head "limited the batch" when changing it moves the reversible batch this much more
SCREENING_DIR = "screening"
PUBLISHED_SOURCE = "published, RTX 5070 Ti, bf16"

COLUMNS = ["run", "role", "label", "screening", "chosen", "status", "device", "origin", "trunk", "h", "stream",
           "n_layer", "batch_size", "steps", "planned_steps", "tokens", "lr", "lr_scaling", "n_params",
           "final_train_loss", "final_val_loss", "unigram_val_loss", "tokens_per_s", "tokens_per_s_q1",
           "tokens_per_s_q3", "peak_memory_bytes",
           "peak_memory_mib", "reconstruction_error", "wall_s", "torch", "world_size", "stopped_early", "path",
           "data", "data_source", "seed"]


# -------------------------------------------------------------------------------------------------------------
# Reading run folders
# -------------------------------------------------------------------------------------------------------------

# What the report reads of a profile's files beyond their being JSON objects: the keys every writer of the file
# gives it, without which a reader fails deep inside a sentence (`rev.chapters.assignment.seeds.seed_spread`).
REQUIRED_KEYS = {SEEDS_FILE: ("seeds", "diff", "diff_mean")}


def read_json_or_note(path: Path, problems: list[str], kind: type = dict) -> Any:
    """A JSON file, None when it is absent; one that is unreadable, or not a `kind` (a JSON object unless said),
    or lacks the keys `REQUIRED_KEYS` names for it, is noted in `problems` (naming the file and why) and read as
    absent, so one damaged file does not keep the rest of a report from being written."""
    if not path.exists():
        return None
    try:
        value = read_json(path)
    except (OSError, ValueError):
        problems.append(f"{path.parent.name}/{path.name} (unreadable)")
        return None
    if not isinstance(value, kind):
        problems.append(f"{path.parent.name}/{path.name} (unreadable: a JSON {type(value).__name__}, not "
                        f"{'an object' if kind is dict else 'a ' + kind.__name__})")
        return None
    lacking = [k for k in REQUIRED_KEYS.get(path.name, ()) if k not in value]
    if lacking:
        problems.append(f"{path.parent.name}/{path.name} (unreadable: no {', '.join(lacking)})")
        return None
    return value


def _origin(profile_dir: Path) -> str:
    merged = read_json_or_note(profile_dir / MERGED_LOG, [], list)
    if merged:
        return f"merged from {merged[-1].get('archive', '?') if isinstance(merged[-1], dict) else '?'}"
    return "local"


def read_run(run_dir: str | Path, problems: list[str]) -> tuple[dict | None, dict | None, pd.DataFrame]:
    """The one reader of a run folder's files: (config.json, summary.json, log.csv), each None (or an empty log)
    when absent. A config or summary that is unreadable or not a JSON object is noted in `problems` (naming the
    run's folder and the file) and read as absent, the log then telling what it can; a log.csv that cannot be
    read raises a ValueError naming the run and the file, which `load_runs` turns into a broken run."""
    run_dir = Path(run_dir)
    return (read_json_or_note(run_dir / "config.json", problems), read_json_or_note(run_dir / "summary.json", problems),
            read_log(run_dir))


def _row_from_summary(summary: dict) -> dict:
    row = {k: summary.get(k) for k in COLUMNS if k in summary}
    row["status"] = "stopped early" if summary.get("stopped_early") else "complete"
    row["seed"] = (summary.get("config") or {}).get("seed") if isinstance(summary.get("config"), dict) else None
    return row


def _row_from_log(cfg: dict | None, log: pd.DataFrame) -> dict | None:
    """A run without summary.json (still running, or killed): what its config and log say so far."""
    if cfg is None and log.empty:
        return None
    cfg = cfg or {}
    model, train = cfg.get("model") or {}, cfg.get("train") or {}
    vals = log["val_loss"].dropna()
    tail = log["loss"].tail(max(1, len(log) // 10))
    tokens = log["tokens"].dropna()
    return {"trunk": model.get("trunk", train.get("trunk")), "h": model.get("h"), "stream": model.get("stream"),
            "n_layer": model.get("n_layer"), "batch_size": cfg.get("batch_size"), "steps": len(log),
            "planned_steps": cfg.get("steps"), "tokens": int(tokens.iloc[-1]) if len(tokens) else 0,
            "lr": cfg.get("lr"), "lr_scaling": train.get("lr_scaling"), "seed": train.get("seed"),
            "final_train_loss": float(tail.mean()) if len(tail) else None,
            "final_val_loss": float(vals.iloc[-1]) if len(vals) else None,
            "status": "incomplete (no summary.json)"}


def _run_row(run_dir: Path, problems: list[str]) -> dict | None:
    """The frame's row of one run folder (None: nothing in it yet); a ValueError naming the file when its log
    cannot be read (`read_run`)."""
    cfg, summary, log = read_run(run_dir, problems)
    row = _row_from_summary(summary) if summary is not None else _row_from_log(cfg, log)
    if row is None:
        return None
    row["run"] = run_dir.name
    row["path"] = str(run_dir)
    # tokens/s is the median timed step wherever the log has the steps: a mean over a run with a few slow steps
    # (a busy machine) can fall below its own lower quartile, and every table, bar and verdict reads this column
    spread = speed_spread(run_dir)
    if spread is not None:
        row["tokens_per_s_q1"], row["tokens_per_s"], row["tokens_per_s_q3"] = spread
    return row


def _screening_dirs(profile_dir: Path) -> list[Path]:
    folder = profile_dir / SCREENING_DIR
    return sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []


def _is_chosen(row: dict, chosen: dict | None) -> bool:
    if not chosen:
        return False
    same_h = row.get("h") is not None and chosen.get("h") is not None and \
        math.isclose(float(row["h"]), float(chosen["h"]))
    same_stream = row.get("stream", "fp32") == chosen.get("stream", "fp32")
    return row.get("trunk") == chosen.get("trunk") and same_h and same_stream


def load_runs(results_root: str | Path, profile: str) -> pd.DataFrame:
    """One row per run of `profile` found under `results_root` (main runs first, then screening runs, flagged).

    The frame's ``attrs`` carry what is not a run: ``maxbatch`` (maxbatch.json or None), ``screening``
    (screening.json or None), ``seeds`` (seeds.json, notebook 05's seed spread, or None), ``bench`` (notebook
    05's interleaved bench, or None), ``missing`` (main runs and files not found, or unreadable), ``broken``
    ({run: why} for runs whose files cannot be read: left out of the rows, so every reader of a row's files
    finds them readable), ``profile`` and ``results_dir``.
    """
    profile_dir = Path(results_root) / profile
    rows, missing, broken = [], [], {}
    screening = read_json_or_note(profile_dir / "screening.json", missing) if profile_dir.is_dir() else None
    chosen = screening.get("chosen") if isinstance(screening, dict) else None
    origin = _origin(profile_dir) if profile_dir.is_dir() else "local"

    def row_of(run_dir: Path) -> dict | None:
        try:
            return _run_row(run_dir, missing) if run_dir.is_dir() else None
        except ValueError as e:
            broken[run_dir.name] = str(e)
            return None

    for name, spec in MAIN_RUNS.items():
        row = row_of(profile_dir / name)
        if row is None:
            if name not in broken:
                missing.append(name)
            continue
        rows.append({**row, "role": spec.role, "label": spec.label, "screening": False, "chosen": False})
    for name, spec in EXTRA_RUNS.items():   # optional: never listed as missing
        row = row_of(profile_dir / name)
        if row is not None:
            rows.append({**row, "role": spec.role, "label": spec.label, "screening": False, "chosen": False})
    for d in _screening_dirs(profile_dir):
        row = row_of(d)
        if row is not None:
            rows.append({**row, "role": "screening", "label": d.name, "screening": True,
                         "chosen": _is_chosen(row, chosen)})
    maxbatch = read_json_or_note(profile_dir / "maxbatch.json", missing) if profile_dir.is_dir() else None
    missing += [f for f, v in (("screening.json", screening), ("maxbatch.json", maxbatch))
                if v is None and not any(m.startswith(f"{profile}/{f} (unreadable") for m in missing)]
    df = pd.DataFrame(rows, columns=COLUMNS)
    df["origin"] = origin
    df["peak_memory_mib"] = pd.to_numeric(df["peak_memory_bytes"], errors="coerce") / MIB
    for c in ("screening", "chosen"):
        df[c] = df[c].astype(bool)
    loss_heads = read_json_or_note(profile_dir / LOSS_HEADS_FILE, missing) if profile_dir.is_dir() else None
    # optional (a profile may train one seed): read when there, never listed as missing
    seeds = read_json_or_note(profile_dir / SEEDS_FILE, missing) if (profile_dir / SEEDS_FILE).is_file() else None
    bench = read_json_or_note(profile_dir / BENCH_FILE, missing) if (profile_dir / BENCH_FILE).is_file() else None
    df.attrs.update(profile=profile, results_dir=str(results_root), maxbatch=maxbatch, seeds=seeds, bench=bench,
                    screening=screening, missing=missing, broken=broken, loss_heads=loss_heads)
    return df


def load_all(results_root: str | Path) -> pd.DataFrame:
    """The main runs of every profile folder under `results_root`, with `profile` and `device` columns:
    CPU runs made here and GPU runs merged from Colab side by side."""
    root = Path(results_root)
    frames = []
    for d in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        df = load_runs(root, d.name)
        df = df[~df["screening"]]
        if len(df):
            frames.append(df.assign(profile=d.name))
    if not frames:
        return pd.DataFrame(columns=["profile", *COLUMNS])
    out = pd.concat([f.reset_index(drop=True) for f in frames], ignore_index=True)
    out.attrs = {}
    return out[["profile", *COLUMNS]]


def main_runs(df: pd.DataFrame) -> pd.DataFrame:
    """Only the main runs (no screening), in workbook order."""
    return df[~df["screening"].astype(bool)]


def main_run(df: pd.DataFrame, name: str) -> pd.Series | None:
    """The row of main run `name` (a `MAIN_RUNS` key), or None when it is missing."""
    hit = df[(df["run"] == name) & ~df["screening"].astype(bool)]
    return hit.iloc[0] if len(hit) else None


def whole_numbers(df: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """`df` with each of `columns` as integers where every value is a whole number: counts (batch, layers, steps,
    tokens) pass through `number` as floats and would print as 21.0. A column with a missing value stays float,
    so NaN still means missing."""
    for c in columns:
        col = df[c] if c in df else None
        if col is not None and len(col) and pd.api.types.is_float_dtype(col) and col.notna().all() \
                and (col % 1 == 0).all():
            df[c] = col.astype("int64")
    return df


def format_value(value: Any, spec: str = "{:.3g}") -> str:
    """`value` formatted with `spec`, or a dash when it is missing."""
    v = number(value)
    return "—" if v is None else spec.format(v)


# -------------------------------------------------------------------------------------------------------------
# The published reference (the only typed-in numbers in this package's report)
# -------------------------------------------------------------------------------------------------------------

def published_reference() -> pd.DataFrame:
    """The reference implementation's published GPU figures (RTX 5070 Ti, bf16), for comparison only.

    Nothing here was measured by this workbook; every table that shows these says so in its `source` column.
    """
    rows = [
        ("peak_memory", "peak memory at the same batch", 3.22, 1.16, "GiB"),
        ("max_batch", "max batch under one memory budget", 152, 432, "sequences"),
        ("tokens_per_s", "training throughput", 243_000, 157_000, "tokens/s"),
        ("val_loss", "validation loss at equal tokens", 1.849, 1.890, "nats/token"),
    ]
    df = pd.DataFrame(rows, columns=["key", "quantity", "baseline", "reversible", "unit"])
    df["ratio"] = df["reversible"] / df["baseline"]
    df["source"] = PUBLISHED_SOURCE
    return df[["key", "quantity", "baseline", "reversible", "ratio", "unit", "source"]]


def _published_ratio(key: str) -> float | None:
    ref = published_reference().set_index("key")
    return float(ref.loc[key, "ratio"]) if key in ref.index else None


# -------------------------------------------------------------------------------------------------------------
# Derived comparisons
# -------------------------------------------------------------------------------------------------------------

def view_gaps(views: pd.DataFrame, df: pd.DataFrame) -> pd.DataFrame:
    """`max_batch_views(df)` with a `note` column saying why a value is missing: no evaluation at or before the
    equal point (a run that evaluates only every `eval_every` steps, or only at its end, cannot be read earlier)."""
    notes = []
    for _, v in views.iterrows():
        r = main_run(df, v["run"])
        evals = read_log(r["path"]).dropna(subset=["val_loss"]) if r is not None else pd.DataFrame()
        per_step = v["tokens"] / v["steps"] if number(v["steps"]) else None
        why = []
        for what, col, unit in (("equal tokens", "val_loss_at_equal_tokens", "tokens"),
                                ("equal steps", "val_loss_at_equal_steps", "steps")):
            if number(v[col]) is not None:
                continue
            if not len(evals):
                why.append(f"no value at {what}: it logged no evaluation")
                continue
            first = float(evals["tokens"].iloc[0]) / (per_step if unit == "steps" and per_step else 1)
            why.append(f"no value at {what}: its first evaluation came after {first:,.0f} {unit}")
        notes.append("; ".join(why))
    return views.assign(note=notes)


def equal_tokens_val(a: pd.Series, b: pd.Series) -> tuple[int, float, float] | None:
    """(tokens, val loss of a, val loss of b) at the token count both runs reached (the smaller final count):
    `record.equal_tokens` on two rows, None where either loss cannot be read there."""
    eq = equal_tokens(RunRecord.of(a), RunRecord.of(b))
    return None if eq is None or eq[1] is None or eq[2] is None else eq


def main_reversible_trunk(df: pd.DataFrame, maxbatch: dict | None = None) -> str | None:
    """The name of the reversible trunk the main runs use: the screening's choice, else run2's trunk, else
    the first reversible search in maxbatch.json."""
    scr = df.attrs.get("screening") or {}
    if isinstance(scr.get("chosen"), dict) and scr["chosen"].get("trunk"):
        return scr["chosen"]["trunk"]
    for name in (REV, REV_MAX, REV_DEEP):
        r = main_run(df, name)
        if r is not None and r["trunk"]:
            return str(r["trunk"])
    others = [v.get("trunk", k) for k, v in batch_searches(maxbatch).items() if k != "residual"]
    return others[0] if others else None


def batch_searches(maxbatch: dict | None) -> dict[str, dict]:
    """The max-batch searches in maxbatch.json, by key (the depth search and the budget left out)."""
    return {k: v for k, v in (maxbatch or {}).items() if isinstance(v, dict) and "batch" in v and k != "deep"}


def max_batches_found(maxbatch: dict | None, rev_trunk: str | None) -> tuple[int, int, int] | None:
    """(baseline max batch, reversible max batch, budget bytes) as recorded in maxbatch.json, or None."""
    if not maxbatch or "residual" not in maxbatch:
        return None
    rev = maxbatch.get(rev_trunk) if rev_trunk else None
    if not isinstance(rev, dict):
        return None
    budget = maxbatch.get("budget_bytes") or maxbatch["residual"].get("budget_bytes")
    return int(maxbatch["residual"]["batch"]), int(rev["batch"]), int(budget or 0)


def maxbatch_of(df: pd.DataFrame, maxbatch: dict | None = None) -> dict | None:
    """`maxbatch` when given, else the maxbatch.json `load_runs` read."""
    return maxbatch if maxbatch is not None else df.attrs.get("maxbatch")


def deep_search(mb: dict | None) -> dict | None:
    """The depth search ('deep' in maxbatch.json), if one ran."""
    deep = (mb or {}).get("deep")
    return deep if isinstance(deep, dict) else None


def deep_capped(search: dict | None) -> bool:
    """True when the depth search stopped at its layer cap (`deep_max_layers`) rather than at the budget:
    the deepest model that fits is then deeper than the one trained."""
    return bool(search) and search.get("max_layers") is not None and search.get("n_layer") == search["max_layers"]


def unigram_loss(df: pd.DataFrame) -> float | None:
    """The context-free loss recorded by the main runs (they all read the same corpus)."""
    vals = pd.to_numeric(main_runs(df).get("unigram_val_loss", pd.Series(dtype=float)), errors="coerce").dropna()
    return float(vals.iloc[0]) if len(vals) else None


def _get(row: pd.Series | None, col: str) -> Any:
    return None if row is None else row.get(col)


def headline(df: pd.DataFrame, maxbatch: dict | None = None) -> pd.DataFrame:
    """The quotable table: one row per comparison, baseline vs reversible, their ratio, and the published ratio.

    Rows are always the same (values are NaN where a run is missing); `report.format_headline` renders it.
    """
    mb = maxbatch_of(df, maxbatch)
    base, rev = main_run(df, BASE), main_run(df, REV)
    base_max, rev_max, deep = main_run(df, BASE_MAX), main_run(df, REV_MAX), main_run(df, REV_DEEP)
    rows: list[tuple] = []

    def add(key: str, quantity: str, b: Any, r: Any, runs: str) -> None:
        b, r = number(b), number(r)
        ratio = r / b if b not in (None, 0) and r is not None else None
        rows.append((key, quantity, b, r, ratio, _published_ratio(key), runs))

    same = f"{BASE} vs {REV}"
    eq = equal_tokens_val(base, rev) if base is not None and rev is not None else None
    add("val_loss", f"validation loss at {eq[0]:,} tokens" if eq else "validation loss at equal tokens",
        eq[1] if eq else None, eq[2] if eq else None, same)
    batch = number(base["batch_size"]) if base is not None else None
    at = f"at batch {int(batch)}" if batch else "at the same batch"
    add("peak_memory", f"peak memory {at} (MiB)", _get(base, "peak_memory_mib"), _get(rev, "peak_memory_mib"), same)
    mbs = max_batches_found(mb, main_reversible_trunk(df, mb))
    budget = f"under {mbs[2] / MIB:,.0f} MiB" if mbs and mbs[2] else "under one budget"
    add("max_batch", f"max batch {budget}", mbs[0] if mbs else None, mbs[1] if mbs else None, "maxbatch.json")
    bench = _bench_rows(df.attrs.get("bench"), rev)   # throughput from the interleaved bench alone
    add("tokens_per_s", f"tokens/s {at}, interleaved bench", bench[0], bench[1], BENCH_FILE)
    add("reconstruction_error", "reconstruction error of the trained trunk (relative)", None,
        _get(rev, "reconstruction_error"), REV)
    eqm = equal_tokens_val(base_max, rev_max) if base_max is not None and rev_max is not None else None
    add("val_loss_max_batch", f"validation loss at max batch, {eqm[0]:,} tokens" if eqm else
        "validation loss at max batch", eqm[1] if eqm else None, eqm[2] if eqm else None, f"{BASE_MAX} vs {REV_MAX}")
    search = deep_search(mb)
    deep_layers = _get(deep, "n_layer")
    if deep_layers is None and search:
        deep_layers = search.get("n_layer")
    cap = f" (search capped at {search['max_layers']})" if deep_capped(search) else ""
    add("deep_layers", f"layers within the baseline's memory, {at}{cap}", _get(base, "n_layer"), deep_layers,
        f"{BASE} vs {REV_DEEP}")
    return pd.DataFrame(rows, columns=["key", "quantity", "baseline", "reversible", "ratio", "published_ratio",
                                       "runs"])


def _bench_rows(bench: dict | None, rev: pd.Series | None) -> tuple[float | None, float | None]:
    """(residual's, run 2's trunk's) median-step tokens/s in notebook 05's interleaved bench, when it timed them at
    run 2's batch; else (None, None). The training runs were timed apart: their tokens/s never make this row."""
    if not bench or rev is None or number(bench.get("batch")) != number(rev.get("batch_size")):
        return None, None
    rows = bench.get("runs") or []
    pick = lambda trunk: next((r for r in rows if r.get("trunk") == trunk and r.get("step_times")), None)  # noqa: E731
    base, run = pick("residual"), pick(rev.get("trunk"))
    seq_len = number(bench.get("seq_len"))
    if base is None or run is None or not seq_len:
        return None, None
    tokens = number(bench["batch"]) * seq_len
    return tuple(tokens / float(np.median(r["step_times"])) for r in (base, run))


def loss_and_time(df: pd.DataFrame) -> pd.DataFrame:
    """Per main run, at one token count: the fewest tokens any main run trained on (the profile's budget; the
    max-batch runs trained on more). `val_loss` is each run's validation loss there (its final one, or read from its
    log between evaluations, mid-way through a longer run's schedule) and `train_seconds` what those tokens took at
    its tokens/s (optimizer steps only, evaluation left out); `trained_tokens` is what the run trained on in all.
    Sorted by `val_loss`."""
    rows, runs = [], main_runs(df)
    counts = [number(t) for t in runs["tokens"]] if len(runs) else []
    at = min((c for c in counts if c), default=None)
    for _, r in runs.iterrows():
        tokens, tps = number(r["tokens"]), number(r["tokens_per_s"])
        if at is None or tokens is None:
            val = None
        elif tokens <= 1.02 * at:   # the same budget, up to the part of a step that does not divide it
            val = number(r["final_val_loss"])
        else:
            val = val_loss_at(r["path"], at) if r.get("path") else None
        rows.append({"run": r["run"], "label": r["label"], "batch": number(r["batch_size"]),
                     "layers": number(r["n_layer"]), "trained_tokens": tokens, "tokens": at, "val_loss": val,
                     "train_seconds": at / tps if at and tps else None})
    out = pd.DataFrame(rows, columns=["run", "label", "batch", "layers", "trained_tokens", "tokens", "val_loss",
                                      "train_seconds"])
    out = whole_numbers(out, ["batch", "layers", "trained_tokens", "tokens"])
    return out.sort_values("val_loss", na_position="last").reset_index(drop=True)


def per_sequence_bytes(probes: list[dict] | None) -> float | None:
    """What one more sequence in the batch adds to the peak: the least-squares slope of measured peak bytes
    against batch over a search's probes (None with fewer than two distinct batches measured)."""
    pts = [(p["batch"], p["peak_bytes"]) for p in probes or [] if p.get("peak_bytes")]
    if len({b for b, _ in pts}) < 2:
        return None
    b, peak = np.array(pts, dtype=float).T
    return float(np.polyfit(b, peak, 1)[0])


def stored_bytes_per_layer(base_probes: list[dict] | None, rev_probes: list[dict] | None,
                           n_layer: int) -> float | None:
    """Bytes per sequence per layer that the residual trunk keeps for its backward and the reversible one does
    not: the difference of the two searches' per-sequence slopes, spread over the `n_layer` layers."""
    sb, sr = per_sequence_bytes(base_probes), per_sequence_bytes(rev_probes)
    return None if sb is None or sr is None or not n_layer else (sb - sr) / n_layer


# -------------------------------------------------------------------------------------------------------------
# Run 3b, the two views of the max-batch runs, the loss-head ablation, the screening's runner-up
# -------------------------------------------------------------------------------------------------------------

def stream_reliability(stream: str | None, err: Any) -> tuple[bool | None, str]:
    """(reliable, why) for a trained reversible trunk's reconstruction error: above `RECON_LIMIT` its
    memory-free gradients came from activations rebuilt that far from the true ones, so its loss is not what
    exact backprop would have reached. None when no error was measured."""
    e = number(err)
    if e is None:
        return None, "no reconstruction error measured"
    if e > RECON_LIMIT:   # the backward rebuilt its inputs this far off: not exact backprop's gradients
        return False, f"unreliable: error {e:.1e} > {RECON_LIMIT:g}"
    return True, f"reliable: error {e:.1e} ≤ {RECON_LIMIT:g}"


def stream_runs(df: pd.DataFrame) -> pd.DataFrame:
    """Run 3 and run 3b side by side: the same reversible trunk at its own max batch on two streams, with
    batch, steps, loss, tokens/s, the trained trunk's reconstruction error and the reliability verdict."""
    rows = []
    for name in (REV_MAX, REV_MAX_STREAM):
        r = main_run(df, name)
        if r is None:
            continue
        ok, why = stream_reliability(r["stream"], r["reconstruction_error"])
        rows.append({"run": name, "trunk": r["trunk"], "h": number(r["h"]), "stream": r["stream"],
                     "batch": number(r["batch_size"]), "steps": number(r["steps"]), "tokens": number(r["tokens"]),
                     "final_val_loss": number(r["final_val_loss"]), "tokens_per_s": number(r["tokens_per_s"]),
                     "reconstruction_error": number(r["reconstruction_error"]), "reliable": ok, "why": why})
    return whole_numbers(pd.DataFrame(rows, columns=["run", "trunk", "h", "stream", "batch", "steps", "tokens",
                                                     "final_val_loss", "tokens_per_s", "reconstruction_error",
                                                     "reliable", "why"]), ["batch", "steps", "tokens"])


def max_batch_views(df: pd.DataFrame) -> pd.DataFrame:
    """The max-batch runs (1b, 3, 3b) two ways: validation loss at the token count all of them reached (equal
    tokens: what the data buys) and at the step count all of them reached (equal steps: what a step buys when a
    step costs about the same at any batch, as on a GPU with room to spare), against the context-free line."""
    runs = [main_run(df, n) for n in (BASE_MAX, REV_MAX, REV_MAX_STREAM)]
    runs = [r for r in runs if r is not None and number(r["tokens"]) and number(r["steps"])]
    cols = ["run", "batch", "steps", "tokens", "final_val_loss", "below_context_free", "equal_tokens",
            "val_loss_at_equal_tokens", "equal_steps", "val_loss_at_equal_steps"]
    if not runs:
        return pd.DataFrame(columns=cols)
    tokens = min(number(r["tokens"]) for r in runs)
    steps = min(number(r["steps"]) for r in runs)
    u = unigram_loss(df)
    return whole_numbers(pd.DataFrame([{
        "run": r["run"], "batch": number(r["batch_size"]), "steps": number(r["steps"]), "tokens": number(r["tokens"]),
        "final_val_loss": number(r["final_val_loss"]),
        "below_context_free": u - number(r["final_val_loss"]) if u is not None and number(r["final_val_loss"])
        else None,
        "equal_tokens": int(tokens), "val_loss_at_equal_tokens": val_loss_at(r["path"], tokens),
        "equal_steps": int(steps), "val_loss_at_equal_steps": val_loss_after_steps(r["path"], steps),
    } for r in runs], columns=cols), ["batch", "steps", "tokens"])


def loss_head_table(ablation: dict | None) -> pd.DataFrame:
    """The loss-head ablation (loss_heads.json) as one row per loss head: each trunk's max batch and the
    reversible / residual ratio (the first trunk other than residual)."""
    rows = (ablation or {}).get("rows") or []
    if not rows:
        return pd.DataFrame(columns=["loss_head"])
    t = pd.DataFrame(rows).pivot(index="loss_head", columns="trunk", values="batch")
    order = [h for h in ("plain", "chunked", "fused") if h in t.index] + [h for h in t.index
                                                                         if h not in ("plain", "chunked", "fused")]
    t = t.loc[order]
    rev = [c for c in t.columns if c != "residual"]
    if "residual" in t.columns and rev:
        t = t[["residual", *rev]]
        t["reversible / residual"] = t[rev[0]] / t["residual"]
    t.columns.name = None
    return t.reset_index()


def screening_check(df: pd.DataFrame) -> pd.DataFrame:
    """The screening's pick (run 2) and its runner-up (run 2b), both trained on the profile's batch and token
    budget: validation loss after the screening's tokens and at the full budget, and tokens/s."""
    scr = {r.get("name"): r for r in (df.attrs.get("screening") or {}).get("runs", [])}
    rows = []
    for name, role in ((REV, "screening's pick"), (RUNNER_UP, "runner-up")):
        r = main_run(df, name)
        if r is None:
            continue
        h = number(r["h"])
        short = scr.get(f"{r['trunk']}_h{h:g}_{r['stream']}", {}) if h is not None else {}
        rows.append({"run": name, "role": role, "trunk": r["trunk"], "h": h, "stream": r["stream"],
                     "screening_val_loss": number(short.get("val_loss")), "tokens": number(r["tokens"]),
                     "final_val_loss": number(r["final_val_loss"]), "tokens_per_s": number(r["tokens_per_s"])})
    return pd.DataFrame(rows, columns=["run", "role", "trunk", "h", "stream", "screening_val_loss", "tokens",
                                       "final_val_loss", "tokens_per_s"])
